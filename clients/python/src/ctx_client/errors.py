"""Errors as the API reports them: one exception class per error kind.

Every error body of the API is ``{"error": {"kind", "message", "field"?},
"current"?}``. :class:`CtxError` carries all of it plus the HTTP status and
the ``Retry-After`` the server sent; the subclass says the kind, so callers
catch what they can act on (``except ConflictError as e: e.current``).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CtxError",
    "InvalidError",
    "UnauthenticatedError",
    "NotFoundError",
    "ConflictError",
    "GoneError",
    "TooLargeError",
    "RateLimitedError",
    "UnavailableError",
    "InternalError",
    "error_from_response",
]


class CtxError(Exception):
    """An error answered by ctx (or by a proxy in front of it)."""

    kind: str = "internal"

    def __init__(
        self,
        message: str,
        *,
        kind: str | None = None,
        status: int | None = None,
        field: str | None = None,
        current: str | None = None,
        retry_after: float | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message)
        if kind is not None:
            self.kind = kind
        self.message = message
        self.status = status
        self.field = field
        self.current = current
        self.retry_after = retry_after
        self.body = body

    def __str__(self) -> str:
        where = f" (field {self.field})" if self.field else ""
        status = f"{self.status} " if self.status is not None else ""
        return f"{status}{self.kind}{where}: {self.message}"


class InvalidError(CtxError):
    """400: the request was malformed; ``field`` names the culprit."""

    kind = "invalid"


class UnauthenticatedError(CtxError):
    """401: no bearer token, or one the server does not know."""

    kind = "unauthenticated"


class NotFoundError(CtxError):
    """404: no such thing (also for another tenant's data)."""

    kind = "not_found"


class ConflictError(CtxError):
    """409: a ref moved (``current`` is where it points now) or a branch ended."""

    kind = "conflict"

    def stale_move(self) -> int | None:
        """Which ref move of a batch was refused (its field is
        ``refs[i].expected``), ``None`` for another conflict."""
        import re

        m = re.fullmatch(r"refs\[(\d+)\]\.expected", self.field or "")
        return int(m.group(1)) if m else None


class GoneError(CtxError):
    """410: an evicted delta; the message names the compaction to materialize from."""

    kind = "gone"


class TooLargeError(CtxError):
    """413: a body or delta over its limit."""

    kind = "too_large"


class RateLimitedError(CtxError):
    """429: slow down; ``retry_after`` says for how long."""

    kind = "rate_limited"


class UnavailableError(CtxError):
    """503: a store is unavailable; retryable."""

    kind = "unavailable"


class InternalError(CtxError):
    """500: a bug in the server."""

    kind = "internal"


_BY_KIND: dict[str, type[CtxError]] = {
    c.kind: c
    for c in (
        InvalidError,
        UnauthenticatedError,
        NotFoundError,
        ConflictError,
        GoneError,
        TooLargeError,
        RateLimitedError,
        UnavailableError,
        InternalError,
    )
}


def _kind_of_status(status: int) -> str:
    """The kind a status stands for, for bodies that are not ctx's (a proxy's 502)."""
    if status in (400, 405, 415, 422):
        return "invalid"
    if status in (401, 403):
        return "unauthenticated"
    if status == 404:
        return "not_found"
    if status in (409, 412):
        return "conflict"
    if status == 410:
        return "gone"
    if status == 413:
        return "too_large"
    if status == 429:
        return "rate_limited"
    if 502 <= status <= 504:
        return "unavailable"
    return "internal"


def error_from_response(status: int, body: bytes, retry_after: float | None = None) -> CtxError:
    """The exception an error response stands for.

    The kind comes from the body when it is ctx's error body, else from the
    status.
    """
    import json

    parsed: Any = None
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = None
    detail = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(detail, dict) and isinstance(detail.get("kind"), str):
        kind = detail["kind"]
        message = str(detail.get("message", ""))
        field = detail.get("field") if isinstance(detail.get("field"), str) else None
        current = parsed.get("current") if isinstance(parsed.get("current"), str) else None
    else:
        kind = _kind_of_status(status)
        message = body.decode("utf-8", "replace")[:500] or f"HTTP {status}"
        field = None
        current = None
    cls = _BY_KIND.get(kind, CtxError)
    return cls(
        message,
        kind=kind,
        status=status,
        field=field,
        current=current,
        retry_after=retry_after,
        body=parsed,
    )
