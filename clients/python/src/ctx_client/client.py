"""The clients: :class:`Client` (blocking) and :class:`AsyncClient`
(asyncio), both on httpx, with one method per operation of the API, named
by its operationId.

Each such method sends the function of :mod:`ctx_client._routes` of that
name, or, for an operation ``_routes`` does not shape, the generated one of
:mod:`ctx_client._generated` as it is: every operation of the document is
a method of both clients by construction (:func:`every_operation`). The
arguments and return types are the same in both clients (the async ones
return awaitables). A few conveniences over an operation (``branch_fail``,
``read_bytes``) are methods too, under names of their own. Errors raise the
:class:`~ctx_client.errors.CtxError` subclass of the API's error kind; 503
and 429 are retried as :class:`~ctx_client._core.RetryPolicy` says,
honouring ``Retry-After``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

import anyio
import httpx

from . import _generated as api
from . import _routes
from ._core import (
    DEFAULT_URL,
    Answer,
    Call,
    RetryPolicy,
    artifact_ref_of,
    build_headers,
    env_settings,
    large_delta,
    naming_artifact,
    retry_after_seconds,
    takes_no_direct_uploads,
)
from .errors import CtxError
from .models import MaterializeResponse, PresignedUpload, ReadResponse

P = ParamSpec("P")
T = TypeVar("T")

__all__ = ["AsyncClient", "Client", "RetryPolicy"]


def _sync(route: Callable[P, Call[T]]) -> Callable[Concatenate[Client, P], T]:
    @functools.wraps(route)
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.send(route(*args, **kwargs))

    return method


def _async(route: Callable[P, Call[T]]) -> Callable[Concatenate[AsyncClient, P], Awaitable[T]]:
    @functools.wraps(route)
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.send(route(*args, **kwargs))

    return method


def route_of(op: str) -> Callable[..., Call[Any]]:
    """The function that builds operation ``op``'s call: the one
    :mod:`ctx_client._routes` writes when it shapes ``op`` (the clients'
    arguments and defaults), else the generated one."""
    route: Callable[..., Call[Any]] = getattr(_routes, op, None) or getattr(api, op)
    return route


C = TypeVar("C", bound=type)


def every_operation(
    wrap: Callable[[Callable[..., Call[Any]]], Callable[..., Any]],
) -> Callable[[C], C]:
    """A class decorator: each operation of
    :data:`ctx_client._generated.OPERATIONS` that the class body does not
    define becomes a method named by its operationId, ``wrap`` of
    :func:`route_of`. An operation added to the server is then a method of
    both clients once ``_generated`` is regenerated, with no hand-written
    Python; the class bodies define the operations ``_routes`` shapes, so
    that type checkers see them."""

    def add(cls: C) -> C:
        for op in api.OPERATIONS:
            if op not in vars(cls):
                setattr(cls, op, wrap(route_of(op)))
        return cls

    return add


def storage_request(
    http: httpx.Client | httpx.AsyncClient, up: PresignedUpload, data: bytes
) -> httpx.Request:
    """The direct upload of ``data`` to the presigned ``up``: the URL
    carries its own signature, so the client's bearer token is left out."""
    req = http.build_request(up["method"], up["url"], content=data, headers=up["headers"])
    req.headers.pop("authorization", None)
    return req


def direct_upload_failed(resp: Answer) -> None:
    """Raises when storage refused a direct upload."""
    if resp.is_error:
        raise CtxError(
            f"storage refused the direct upload: {resp.status_code} {resp.text[:300]}",
            kind="unavailable" if resp.status_code >= 500 else "internal",
            status=resp.status_code,
        )


class _Base:
    base_url: str
    token: str | None
    retry: RetryPolicy

    def _setup(
        self,
        base_url: str | None,
        token: str | None,
        retry: RetryPolicy | None,
    ) -> dict[str, Any]:
        self.base_url = (base_url or DEFAULT_URL).rstrip("/")
        self.token = token
        self.retry = retry or RetryPolicy()
        self._urls: dict[str, httpx.URL] = {}
        return {"base_url": self.base_url, "headers": build_headers(token)}

    def _url(self, path: str) -> httpx.URL:
        """The absolute URL of ``path`` (an API path, its query apart),
        parsed once: given the path, httpx parses it and joins it to the
        base URL on every request, ~40 µs of a ~300 µs request
        (docs/bench.md, "Lookups in place"). At most 1,024 are kept."""
        url = self._urls.get(path)
        if url is None:
            if len(self._urls) >= 1024:
                self._urls.clear()
            url = self._urls[path] = httpx.URL(self.base_url + path)
        return url


@every_operation(_sync)
class Client(_Base):
    """A blocking client.

    ``Client("http://127.0.0.1:7878", token="tok-…")``; use as a context
    manager or call :meth:`close`. ``sleep`` is how it waits between
    retries (``time.sleep``).
    """

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        kw = self._setup(base_url, token, retry)
        # A large download answers 303 to storage: followed, and httpx
        # drops the Authorization header on the way to another origin.
        self._http = httpx.Client(timeout=timeout, transport=transport, follow_redirects=True, **kw)
        self._sleep = sleep

    @classmethod
    def from_env(cls, **kwargs: Any) -> Client:
        """A client of the server the ``ctx`` CLI would talk to
        (``CTX_SERVER``, ``CTX_TOKEN`` or the token file in ``CTX_DATA``)."""
        server, token = env_settings()
        return cls(server, token, **kwargs)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connections."""
        self._http.close()

    def send(self, call: Call[T]) -> T:
        """Sends one call, retrying 503/429 and refused connections. A
        checkpoint's delta over ``DIRECT_UPLOAD_BYTES`` is PUT straight to
        storage first where the server hands out URLs."""
        big = large_delta(call)
        if big is not None:
            ref = self._upload_directly(big)
            if ref is not None:
                call = naming_artifact(call, ref)
        return self._send(call)

    def _upload_directly(self, data: bytes) -> str | None:
        """PUTs ``data`` to a presigned URL (``POST /v1/uploads``): its
        artifact ref, or ``None`` where the server hands out no URLs."""
        ref = artifact_ref_of(data)
        try:
            up = self._send(_routes.upload_url(ref, len(data)))
        except CtxError as e:
            if takes_no_direct_uploads(e):
                return None
            raise
        direct_upload_failed(self._http.send(storage_request(self._http, up, data)))
        return ref

    def _send(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            try:
                resp = self._http.request(
                    call.method, self._url(call.path), **call.request_kwargs()
                )
            except httpx.ConnectError:
                if attempt >= self.retry.max_retries:
                    raise
                self._sleep(self.retry.delay(attempt, None))
                attempt += 1
                continue
            if resp.status_code in self.retry.statuses and attempt < self.retry.max_retries:
                self._sleep(self.retry.delay(attempt, retry_after_seconds(resp)))
                attempt += 1
                continue
            return call.parse(resp)

    # The operations _routes shapes (the others: every_operation), and
    # branch_fail, a failed branch_return.
    healthz = _sync(_routes.healthz)
    openapi_json = _sync(_routes.openapi_json)
    upload_artifact = _sync(_routes.upload_artifact)
    download_artifact = _sync(_routes.download_artifact)
    upload_url = _sync(_routes.upload_url)
    checkpoint = _sync(_routes.checkpoint)
    batch = _sync(_routes.batch)
    get_commit = _sync(_routes.get_commit)
    update_metadata = _sync(_routes.update_metadata)
    history = _sync(_routes.history)
    missing_summaries = _sync(_routes.missing_summaries)
    gc = _sync(_routes.gc)
    erase_session = _sync(_routes.erase_session)
    erase_principal = _sync(_routes.erase_principal)
    list_pins = _sync(_routes.list_pins)
    set_pin = _sync(_routes.set_pin)
    delete_pin = _sync(_routes.delete_pin)
    get_agent = _sync(_routes.get_agent)
    patch_agent = _sync(_routes.patch_agent)
    clear_context = _sync(_routes.clear_context)
    context_window = _sync(_routes.context_window)
    assemble_context = _sync(_routes.assemble_context)
    list_processes = _sync(_routes.list_processes)
    put_process = _sync(_routes.put_process)
    delete_process = _sync(_routes.delete_process)
    save_context = _sync(_routes.save_context)
    list_saves = _sync(_routes.list_saves)
    get_save = _sync(_routes.get_save)
    restore_save = _sync(_routes.restore_save)
    put_working_context = _sync(_routes.put_working_context)
    restore_working_context = _sync(_routes.restore_working_context)
    summarize = _sync(_routes.summarize)
    compact = _sync(_routes.compact)
    materialize = _sync(_routes.materialize)
    read = _sync(_routes.read)
    resolve = _sync(_routes.resolve)
    list_refs = _sync(_routes.list_refs)
    get_ref = _sync(_routes.get_ref)
    set_ref = _sync(_routes.set_ref)
    delete_ref = _sync(_routes.delete_ref)
    evict_ref = _sync(_routes.evict_ref)
    branch_create = _sync(_routes.branch_create)
    branch_status = _sync(_routes.branch_status)
    branch_status_of_session = _sync(_routes.branch_status_of_session)
    branch_return = _sync(_routes.branch_return)
    branch_fail = _sync(_routes.branch_fail)
    memory_search = _sync(_routes.memory_search)
    session_end = _sync(_routes.session_end)
    list_files = _sync(_routes.list_files)
    get_file = _sync(_routes.get_file)
    put_file = _sync(_routes.put_file)
    delete_file = _sync(_routes.delete_file)
    append_file = _sync(_routes.append_file)
    read_context = _sync(_routes.read_context)

    def read_bytes(
        self,
        ref: str | None = None,
        *,
        commit: str | None = None,
        stop: str | None = None,
        format: str | None = None,
        delta: bool = False,
        depth: int | None = None,
    ) -> tuple[ReadResponse, bytes]:
        """The context at ``ref``'s tip (or ``commit``) and its bytes: one
        request, and a download when it is too large to come inline.
        ``delta`` and ``depth`` as for :meth:`read`."""
        r = self.read(ref, commit=commit, stop=stop, format=format, delta=delta, depth=depth)
        data = _routes.content_of(r)
        return r, data if data is not None else self.download_artifact(r["artifact_ref"])

    def materialize_bytes(
        self, ctx_id: str | None, *, stop: str | None = None, format: str | None = None
    ) -> tuple[MaterializeResponse, bytes]:
        """Materializes and reads the result: (the response, the bytes), in
        one request (:meth:`read_bytes`); ``ctx_id`` ``None``: a fresh
        start, the empty context in ``format``."""
        return self.read_bytes(commit=ctx_id, stop=stop, format=format)


@every_operation(_async)
class AsyncClient(_Base):
    """An asyncio client with the same methods as :class:`Client`, awaitable.

    ``async with AsyncClient(url, token=...) as c: await c.get_commit(id)``.
    """

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        kw = self._setup(base_url, token, retry)
        self._http = httpx.AsyncClient(
            timeout=timeout, transport=transport, follow_redirects=True, **kw
        )
        self._sleep = sleep

    @classmethod
    def from_env(cls, **kwargs: Any) -> AsyncClient:
        """A client of the server the ``ctx`` CLI would talk to
        (``CTX_SERVER``, ``CTX_TOKEN`` or the token file in ``CTX_DATA``)."""
        server, token = env_settings()
        return cls(server, token, **kwargs)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Closes the connections."""
        await self._http.aclose()

    async def send(self, call: Call[T]) -> T:
        """Sends one call, retrying 503/429 and refused connections. A
        checkpoint's delta over ``DIRECT_UPLOAD_BYTES`` is PUT straight to
        storage first where the server hands out URLs."""
        big = large_delta(call)
        if big is not None:
            ref = await self._upload_directly(big)
            if ref is not None:
                call = naming_artifact(call, ref)
        return await self._send(call)

    async def _upload_directly(self, data: bytes) -> str | None:
        """As :meth:`Client._upload_directly`."""
        ref = artifact_ref_of(data)
        try:
            up = await self._send(_routes.upload_url(ref, len(data)))
        except CtxError as e:
            if takes_no_direct_uploads(e):
                return None
            raise
        direct_upload_failed(await self._http.send(storage_request(self._http, up, data)))
        return ref

    async def _send(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            try:
                resp = await self._http.request(
                    call.method, self._url(call.path), **call.request_kwargs()
                )
            except httpx.ConnectError:
                if attempt >= self.retry.max_retries:
                    raise
                await self._sleep(self.retry.delay(attempt, None))
                attempt += 1
                continue
            if resp.status_code in self.retry.statuses and attempt < self.retry.max_retries:
                await self._sleep(self.retry.delay(attempt, retry_after_seconds(resp)))
                attempt += 1
                continue
            return call.parse(resp)

    # The operations _routes shapes (the others: every_operation), and
    # branch_fail, a failed branch_return.
    healthz = _async(_routes.healthz)
    openapi_json = _async(_routes.openapi_json)
    upload_artifact = _async(_routes.upload_artifact)
    download_artifact = _async(_routes.download_artifact)
    upload_url = _async(_routes.upload_url)
    checkpoint = _async(_routes.checkpoint)
    batch = _async(_routes.batch)
    get_commit = _async(_routes.get_commit)
    update_metadata = _async(_routes.update_metadata)
    history = _async(_routes.history)
    missing_summaries = _async(_routes.missing_summaries)
    gc = _async(_routes.gc)
    erase_session = _async(_routes.erase_session)
    erase_principal = _async(_routes.erase_principal)
    list_pins = _async(_routes.list_pins)
    set_pin = _async(_routes.set_pin)
    delete_pin = _async(_routes.delete_pin)
    get_agent = _async(_routes.get_agent)
    patch_agent = _async(_routes.patch_agent)
    clear_context = _async(_routes.clear_context)
    context_window = _async(_routes.context_window)
    assemble_context = _async(_routes.assemble_context)
    list_processes = _async(_routes.list_processes)
    put_process = _async(_routes.put_process)
    delete_process = _async(_routes.delete_process)
    save_context = _async(_routes.save_context)
    list_saves = _async(_routes.list_saves)
    get_save = _async(_routes.get_save)
    restore_save = _async(_routes.restore_save)
    put_working_context = _async(_routes.put_working_context)
    restore_working_context = _async(_routes.restore_working_context)
    summarize = _async(_routes.summarize)
    compact = _async(_routes.compact)
    materialize = _async(_routes.materialize)
    read = _async(_routes.read)
    resolve = _async(_routes.resolve)
    list_refs = _async(_routes.list_refs)
    get_ref = _async(_routes.get_ref)
    set_ref = _async(_routes.set_ref)
    delete_ref = _async(_routes.delete_ref)
    evict_ref = _async(_routes.evict_ref)
    branch_create = _async(_routes.branch_create)
    branch_status = _async(_routes.branch_status)
    branch_status_of_session = _async(_routes.branch_status_of_session)
    branch_return = _async(_routes.branch_return)
    branch_fail = _async(_routes.branch_fail)
    memory_search = _async(_routes.memory_search)
    session_end = _async(_routes.session_end)
    list_files = _async(_routes.list_files)
    get_file = _async(_routes.get_file)
    put_file = _async(_routes.put_file)
    delete_file = _async(_routes.delete_file)
    append_file = _async(_routes.append_file)
    read_context = _async(_routes.read_context)

    async def read_bytes(
        self,
        ref: str | None = None,
        *,
        commit: str | None = None,
        stop: str | None = None,
        format: str | None = None,
        delta: bool = False,
        depth: int | None = None,
    ) -> tuple[ReadResponse, bytes]:
        """The context at ``ref``'s tip (or ``commit``) and its bytes: one
        request, and a download when it is too large to come inline.
        ``delta`` and ``depth`` as for :meth:`read`."""
        r = await self.read(ref, commit=commit, stop=stop, format=format, delta=delta, depth=depth)
        data = _routes.content_of(r)
        return r, data if data is not None else await self.download_artifact(r["artifact_ref"])

    async def materialize_bytes(
        self, ctx_id: str | None, *, stop: str | None = None, format: str | None = None
    ) -> tuple[MaterializeResponse, bytes]:
        """Materializes and reads the result: (the response, the bytes), in
        one request (:meth:`read_bytes`); ``ctx_id`` ``None``: a fresh
        start, the empty context in ``format``."""
        return await self.read_bytes(commit=ctx_id, stop=stop, format=format)
