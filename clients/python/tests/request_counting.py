"""Counts the HTTP requests a client sends, by API operation.

:class:`CountingTransport` is an ``httpx.AsyncHTTPTransport`` that records
each request it sends as the operationId of the route it matches
(``get_ref``, ``checkpoint``, ``materialize``, ...: the names of the
OpenAPI document, :data:`ctx_client._generated.OPERATIONS`), so a test or
a bench can see how many round trips an adapter operation costs without
changing the client: ``AsyncClient(url, token=..., transport=counting)``.
:class:`CountingEmbedded` records the same of the calls an
``AsyncEmbedded`` answers in the process. Both record the bytes of each
answer's body too.

Used by tests/test_request_counts.py and bench/session_stores.py.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import httpx

from ctx_client import AsyncEmbedded
from ctx_client._generated import OPERATIONS

# Path parameters that may hold '/' (ref names, workspace file paths).
_SLASHED = {"name", "path"}


def _pattern(template: str) -> re.Pattern[str]:
    out = ""
    for part in re.split(r"(\{[^}]+\})", template):
        if part.startswith("{"):
            out += ".+" if part[1:-1] in _SLASHED else "[^/]+"
        else:
            out += re.escape(part)
    return re.compile(out + "$")


# Most literal characters first, so `/v1/refs/{name}/evict` wins over
# `/v1/refs/{name}` for a path that matches both.
_ROUTES = sorted(
    (
        (method, _pattern(template), op, len(re.sub(r"\{[^}]+\}", "", template)))
        for op, (method, template) in OPERATIONS.items()
    ),
    key=lambda r: -r[3],
)


def operation_of(method: str, path: str) -> str:
    """The operationId a request is for; ``"METHOD path"`` when no route
    matches (a redirect to storage, say)."""
    for m, pattern, op, _ in _ROUTES:
        if m == method and pattern.match(path):
            return op
    return f"{method} {path}"


class _Record:
    """The operations sent, in order (:attr:`seen`), and the bytes of each
    answer's body (:attr:`sizes`, in the same order)."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.sizes: list[int] = []

    def mark(self) -> int:
        """Where the record is now: :meth:`since` takes it."""
        return len(self.seen)

    def since(self, mark: int) -> list[str]:
        """The operations sent since ``mark``."""
        return self.seen[mark:]

    def bytes_since(self, mark: int) -> int:
        """The bytes answered since ``mark`` (bodies only)."""
        return sum(self.sizes[mark:])

    def tally(self, mark: int = 0) -> Counter[str]:
        """How many requests of each operation were sent since ``mark``."""
        return Counter(self.seen[mark:])


class CountingTransport(httpx.AsyncHTTPTransport, _Record):
    """An async transport that records the operation of every request it
    sends, in order, in :attr:`seen` (the other origin's requests too: a
    redirect to storage is a round trip), and its answer's
    ``content-length`` in :attr:`sizes`."""

    def __init__(self) -> None:
        httpx.AsyncHTTPTransport.__init__(self)
        _Record.__init__(self)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(operation_of(request.method, request.url.path))
        self.sizes.append(0)
        at = len(self.sizes) - 1
        response = await super().handle_async_request(request)
        self.sizes[at] = int(response.headers.get("content-length", 0))
        return response


class CountingEmbedded(_Record):
    """Records the calls ``client`` (an ``AsyncEmbedded``) answers from now
    on, as :class:`CountingTransport` does a client's requests: it wraps
    the client's native handle, so the client is used as it is."""

    def __init__(self, client: AsyncEmbedded) -> None:
        super().__init__()
        native = client._native
        record = self

        class Counted:
            def __getattr__(self, name: str) -> Any:
                return getattr(native, name)

            def call_async(
                self,
                method: str,
                target: str,
                headers: Any,
                body: bytes,
                loop: Any,
                done: Any,
                future: Any,
            ) -> None:
                record.seen.append(operation_of(method, target.split("?", 1)[0]))
                record.sizes.append(0)
                at = len(record.sizes) - 1

                def answered(future: Any, status: int, headers: Any, data: bytes) -> None:
                    record.sizes[at] = len(data)
                    done(future, status, headers, data)

                native.call_async(method, target, headers, body, loop, answered, future)

        client._native = Counted()  # type: ignore[assignment]
