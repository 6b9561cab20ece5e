"""What the sync and async clients share: how a call is described, how a
response becomes a value or an exception, and when to retry.

A route is generated once from the OpenAPI document, in
:mod:`ctx_client._generated`, as a function that returns a :class:`Call`
(with the helpers below for its path, query and headers);
:mod:`ctx_client._routes` may give it the clients' arguments (the name
stays its operationId);
:class:`ctx_client.Client` sends it with ``httpx.Client`` and
:class:`ctx_client.AsyncClient` with ``httpx.AsyncClient``.
"""

from __future__ import annotations

import base64
import email.utils
import importlib.metadata
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import quote

from blake3 import blake3

from .errors import CtxError, error_from_response

T = TypeVar("T")
U = TypeVar("U")

DEFAULT_URL = "http://127.0.0.1:7878"
try:
    VERSION = importlib.metadata.version("ctx-client")
except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
    VERSION = "0+unknown"
USER_AGENT = f"ctx-client-python/{VERSION}"


class Answer(Protocol):
    """What a call's parser reads of an answer: an ``httpx.Response`` over
    HTTP, ctx's own answer in the process (:mod:`ctx_client.embedded`)."""

    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def content(self) -> bytes: ...
    @property
    def text(self) -> str: ...
    @property
    def is_success(self) -> bool: ...
    @property
    def is_error(self) -> bool: ...
    def json(self) -> Any: ...


@dataclass(frozen=True)
class Call(Generic[T]):
    """One HTTP request to the API and how to read its answer."""

    method: str
    path: str
    parse: Callable[[Answer], T]
    params: dict[str, str] | None = None
    json_body: Any = None
    has_json: bool = False
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def request_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``httpx.Client.request``."""
        kw: dict[str, Any] = {"headers": dict(self.headers)}
        if self.params:
            kw["params"] = self.params
        if self.has_json:
            kw["content"] = json.dumps(self.json_body, allow_nan=False).encode()
            kw["headers"]["content-type"] = "application/json"
        elif self.content is not None:
            kw["content"] = self.content
            kw["headers"].setdefault("content-type", "application/octet-stream")
        return kw

    def then(self, f: Callable[[T], U]) -> Call[U]:
        """The same request, its answer passed through ``f``."""
        parse = self.parse
        return Call(
            self.method,
            self.path,
            lambda resp: f(parse(resp)),
            self.params,
            self.json_body,
            self.has_json,
            self.content,
            self.headers,
        )


def seg(value: str) -> str:
    """One path segment, percent-encoded ('/' included)."""
    return quote(value, safe="")


def name_path(value: str) -> str:
    """A path parameter that may contain '/' (ref names, file paths)."""
    return quote(value, safe="/")


def query(params: dict[str, str | int | float | bool | None]) -> dict[str, str] | None:
    """Query parameters as sent: the ``None`` ones left out, booleans as
    ``true``/``false``; ``None`` when none is left."""
    out = {
        k: ("true" if v else "false") if isinstance(v, bool) else str(v)
        for k, v in params.items()
        if v is not None
    }
    return out or None


def present(headers: dict[str, str | None]) -> dict[str, str]:
    """The headers given a value."""
    return {k: v for k, v in headers.items() if v is not None}


@dataclass(frozen=True)
class RetryPolicy:
    """When and how long to wait before sending a request again.

    A 503 (unavailable) or 429 (rate limited) is retried up to
    ``max_retries`` times, waiting what ``Retry-After`` says (capped at
    ``max_delay``) or, without it, ``backoff * 2**attempt``. A connection
    that could not be opened is retried the same way (nothing was sent).
    """

    max_retries: int = 4
    backoff: float = 0.2
    max_delay: float = 30.0
    statuses: frozenset[int] = frozenset({429, 503})

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay)
        return min(self.backoff * 2.0**attempt, self.max_delay)


def retry_after_seconds(resp: Answer) -> float | None:
    """``Retry-After`` as seconds: delta-seconds or an HTTP date."""
    value = resp.headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def check(resp: Answer) -> Answer:
    """The response if it succeeded; the error it stands for otherwise."""
    if resp.is_success:
        return resp
    raise error_from_response(resp.status_code, resp.content, retry_after_seconds(resp))


def parse_json(resp: Answer) -> Any:
    """The JSON body of a successful response."""
    return check(resp).json()


def parse_bytes(resp: Answer) -> bytes:
    """The raw body of a successful response."""
    return check(resp).content


def parse_text(resp: Answer) -> str:
    """The text body of a successful response."""
    return check(resp).text


def parse_none(resp: Answer) -> None:
    """Nothing: only success matters."""
    check(resp)


def retryable(resp: Answer, policy: RetryPolicy) -> bool:
    """Whether ``resp`` says to try again later."""
    return resp.status_code in policy.statuses


def env_settings(environ: dict[str, str] | None = None) -> tuple[str, str | None]:
    """The server and token as the ``ctx`` CLI finds them: ``CTX_SERVER``
    (default ``http://127.0.0.1:7878``), ``CTX_TOKEN``, else the token file
    in ``CTX_DATA`` (default ``.ctx``) when there is one."""
    import os
    from pathlib import Path

    env = os.environ if environ is None else environ
    server = env.get("CTX_SERVER") or DEFAULT_URL
    token = env.get("CTX_TOKEN") or None
    if token is None:
        path = Path(env.get("CTX_DATA") or ".ctx") / "token"
        if path.is_file():
            token = path.read_text().strip() or None
    return server, token


class CommitClock:
    """Commit times, each strictly later than the one before it from this
    clock, to the microsecond: a commit id derives from (parent, delta,
    time, template), so two equal deltas written in one microsecond would
    otherwise be one commit."""

    def __init__(self) -> None:
        self._last_us = 0

    def now(self) -> datetime:
        """Now, or a microsecond past the previous time when that is later."""
        self._last_us = max(time.time_ns() // 1000, self._last_us + 1)
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=self._last_us)


def build_headers(token: str | None) -> dict[str, str]:
    """Headers every request carries."""
    headers = {"user-agent": USER_AGENT, "accept": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    return headers


__all__ = [
    "Call",
    "CommitClock",
    "CtxError",
    "DEFAULT_URL",
    "RetryPolicy",
    "check",
    "name_path",
    "parse_bytes",
    "parse_json",
    "parse_none",
    "parse_text",
    "present",
    "query",
    "retry_after_seconds",
    "retryable",
    "seg",
]


# Above this many bytes a checkpoint's delta leaves its JSON: it is PUT
# straight to storage first (a presigned URL from ``POST /v1/uploads``) and
# the checkpoint names it. On AWS a request passes API Gateway and Lambda,
# which carry at most 6 MB, the JSON's base64 of bytes in base64 again.
DIRECT_UPLOAD_BYTES = 3 * 1024 * 1024


def large_delta(call: Call[Any]) -> bytes | None:
    """The delta of a checkpoint ``call`` when it is over
    :data:`DIRECT_UPLOAD_BYTES`, as bytes; ``None`` otherwise."""
    if call.method != "POST" or call.path != "/v1/commits" or not call.has_json:
        return None
    body = call.json_body
    if not isinstance(body, dict):
        return None
    text, b64 = body.get("delta"), body.get("delta_base64")
    # Cheap bounds first: base64 is 4/3 of its bytes, UTF-8 at most 4x.
    if isinstance(b64, str) and len(b64) * 3 // 4 > DIRECT_UPLOAD_BYTES:
        return base64.b64decode(b64)
    if isinstance(text, str) and len(text) * 4 > DIRECT_UPLOAD_BYTES:
        data = text.encode("utf-8")
        return data if len(data) > DIRECT_UPLOAD_BYTES else None
    return None


def naming_artifact(call: Call[T], artifact_ref: str) -> Call[T]:
    """The checkpoint ``call`` with its delta replaced by ``artifact_ref``."""
    body = {k: v for k, v in call.json_body.items() if k not in ("delta", "delta_base64")}
    body["artifact_ref"] = artifact_ref
    return Call(call.method, call.path, call.parse, call.params, body, True, None, call.headers)


def artifact_ref_of(data: bytes) -> str:
    """``art-`` and the BLAKE3 hash of ``data``: its artifact reference."""
    return "art-" + blake3(data).hexdigest()


def takes_no_direct_uploads(e: CtxError) -> bool:
    """Whether ``POST /v1/uploads`` failed because the server's storage
    hands out no URLs (embedded mode: the bytes go in the request)."""
    return e.status == 400 and e.field == "body"


def verified(artifact_ref: str, data: bytes) -> bytes:
    """``data`` when it hashes to ``artifact_ref``: a large download comes
    straight from storage (303 to a presigned URL), not through the server
    that checks it."""
    got = artifact_ref_of(data)
    if got != artifact_ref:
        raise CtxError(
            f"the bytes downloaded for {artifact_ref} hash to {got}",
            kind="internal",
            field="art",
        )
    return data
