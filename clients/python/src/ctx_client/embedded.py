"""ctx inside this process: :class:`Embedded` (blocking) and
:class:`AsyncEmbedded` (asyncio) open a data directory (the one ``ctx
serve`` opens, ``.ctx`` by default) with no server. They are a
:class:`~ctx_client.Client` and an :class:`~ctx_client.AsyncClient`: the
same methods, named by operationId, the same answers and errors, so every
adapter takes either (``CtxSaver(Embedded(".ctx"))``).

Each call is the client's own generated call, answered by ctx's router in
memory (the native module ``ctx_native``, built on the facade crate
``ctx-embedded``): no socket, no HTTP parsing, no thread hand-off. The
interpreter's lock is released while ctx works; an async call runs on
ctx's own runtime and never blocks the event loop. Several processes may
open one directory at once (an API and a worker, and ``ctx serve`` for the
browser). A process that forks after opening keeps working in the child:
the child opens the directory again on its first call.

The native module (the package ``ctx-native``, built from
``clients/python/native`` with Rust) is imported when a directory is
opened; the HTTP clients never need it. Without it, from a ctx checkout:
``pip install ./clients/python/native``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, Self, TypeVar
from urllib.parse import quote, urlencode

import anyio

from ._core import Call, RetryPolicy, retry_after_seconds, retryable
from .client import AsyncClient, Client

if TYPE_CHECKING:
    from ctx_native import Native

T = TypeVar("T")

INSTALL = "pip install ./clients/python/native"
"""The one command that installs the native module (from a ctx checkout)."""

DEFAULT_DATA = ".ctx"

__all__ = ["AsyncEmbedded", "DEFAULT_DATA", "Embedded", "INSTALL"]


def _native() -> ModuleType:
    """The native module, imported on first use."""
    try:
        import ctx_native
    except ImportError as e:
        raise ImportError(
            f"ctx_client.Embedded runs ctx in this process and needs ctx's native module "
            f"(ctx_native), which is not installed: {INSTALL}"
        ) from e
    return ctx_native


def _request(call: Call[Any]) -> tuple[str, list[tuple[str, str]], bytes]:
    """The target (path and query), headers and body of ``call``, as HTTP
    would carry them."""
    kw = call.request_kwargs()
    target = call.path
    params = kw.get("params")
    if params:
        target += "?" + urlencode(params, quote_via=quote, safe="")
    headers = list(kw["headers"].items())
    return target, headers, kw.get("content") or b""


class _Answer:
    """ctx's answer as the clients' parsers read it (:class:`Answer`):
    its status, headers and body. Not an ``httpx.Response``, whose making
    costs more than a small call in the process (it parses its headers and
    wraps its body in a stream)."""

    __slots__ = ("status_code", "_headers", "content")

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status_code = status
        self._headers = headers
        self.content = body

    @property
    def headers(self) -> dict[str, str]:
        """By lower-case name; a repeated header's values joined by ", "
        (as ``httpx.Headers.get`` answers)."""
        out: dict[str, str] = {}
        for k, v in self._headers:
            k = k.lower()
            out[k] = f"{out[k]}, {v}" if k in out else v
        return out

    @property
    def text(self) -> str:
        """The body as text (ctx answers UTF-8)."""
        return self.content.decode("utf-8", errors="replace")

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    @property
    def is_error(self) -> bool:
        return self.status_code >= 400

    def json(self) -> Any:
        return json.loads(self.content)

    def __repr__(self) -> str:
        return f"<answer [{self.status_code}]>"


def _open(path: str | os.PathLike[str] | None, tenant: str | None) -> Native:
    native: Native = _native().Native(os.fspath(path if path is not None else DEFAULT_DATA), tenant)
    return native


class _Opened:
    """What both clients in the process have: the directory and tenant
    they opened, and the constructor from the environment."""

    _native: Native
    base_url: str
    token: str | None
    retry: RetryPolicy

    if TYPE_CHECKING:

        def __init__(self, path: str | os.PathLike[str] | None = None, **kwargs: Any) -> None: ...

    def _open(
        self,
        path: str | os.PathLike[str] | None,
        tenant: str | None,
        retry: RetryPolicy | None,
    ) -> None:
        self._native = _open(path, tenant)
        self.base_url = f"file:{self._native.data}"
        self.token = None
        self.retry = retry or RetryPolicy()

    @classmethod
    def from_env(cls, **kwargs: Any) -> Self:
        """The data directory the ``ctx`` CLI would use (``CTX_DATA``,
        default ``.ctx``)."""
        return cls(os.environ.get("CTX_DATA") or DEFAULT_DATA, **kwargs)

    @property
    def data(self) -> str:
        """The data directory."""
        return str(self._native.data)

    @property
    def tenant(self) -> str:
        """The tenant it acts as."""
        return str(self._native.tenant)


class Embedded(_Opened, Client):
    """A data directory opened in this process, with :class:`Client`'s
    methods. ``Embedded(".ctx")``; ``tenant`` is the directory's first
    tenant (``default``, whose token ``ctx serve`` writes) unless given.
    Settings (a summarizer, limits) come from the environment as ``ctx
    serve`` reads them."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        tenant: str | None = None,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._open(path, tenant, retry)
        self._sleep = sleep

    def __enter__(self) -> Embedded:
        return self

    def close(self) -> None:
        """Waits for cached results still being written."""
        self._native.flush()

    def send(self, call: Call[T]) -> T:
        """Answers one call in this process; 503 and 429 are retried as
        :class:`RetryPolicy` says (the database busy past its wait)."""
        target, headers, body = _request(call)
        attempt = 0
        while True:
            answer = _Answer(*self._native.call(call.method, target, headers, body))
            if retryable(answer, self.retry) and attempt < self.retry.max_retries:
                self._sleep(self.retry.delay(attempt, retry_after_seconds(answer)))
                attempt += 1
                continue
            return call.parse(answer)

    def __repr__(self) -> str:
        return f"Embedded({self.data!r}, tenant={self.tenant!r})"


def _done(
    future: asyncio.Future[tuple[int, list[tuple[str, str]], bytes]],
    status: int,
    headers: list[tuple[str, str]],
    body: bytes,
) -> None:
    """Run on the event loop when ctx answered."""
    if not future.done():
        future.set_result((status, headers, body))


class AsyncEmbedded(_Opened, AsyncClient):
    """A data directory opened in this process, with :class:`AsyncClient`'s
    methods, awaitable on asyncio: a call runs on ctx's own runtime, and
    its answer comes back to the event loop, which never waits."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        tenant: str | None = None,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        self._open(path, tenant, retry)
        self._sleep = sleep

    async def __aenter__(self) -> AsyncEmbedded:
        return self

    async def aclose(self) -> None:
        """Waits for cached results still being written."""
        await anyio.to_thread.run_sync(self._native.flush)

    async def send(self, call: Call[T]) -> T:
        """Answers one call on ctx's runtime; 503 and 429 are retried as
        :class:`RetryPolicy` says."""
        target, headers, body = _request(call)
        loop = asyncio.get_running_loop()
        attempt = 0
        while True:
            answer: asyncio.Future[tuple[int, list[tuple[str, str]], bytes]] = loop.create_future()
            self._native.call_async(call.method, target, headers, body, loop, _done, answer)
            got = _Answer(*await answer)
            if retryable(got, self.retry) and attempt < self.retry.max_retries:
                await self._sleep(self.retry.delay(attempt, retry_after_seconds(got)))
                attempt += 1
                continue
            return call.parse(got)

    def __repr__(self) -> str:
        return f"AsyncEmbedded({self.data!r}, tenant={self.tenant!r})"
