"""The HTTP requests each session-adapter operation sends, counted against
the live server, and pinned exactly: the regression guard issue 25 asks
for ("The requests per operation for each adapter, counted by a test, so
a regression to several round trips fails").

The numbers are today's. ``CtxSession.add_items`` is one request once the
session has seen its tip, and ``CtxSessionStore.append`` once the store
has seen its key (the folded summary and the commit in one batch). Issue
25 brings ``CtxSession.get_items`` (with or without ``limit``) and
``CtxSessionStore.load`` to one request each; the change that does it
updates the lists below, and from then on any extra round trip fails
here. bench/session_stores.py prints the same
counts beside the rates.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from request_counting import CountingTransport, operation_of

from ctx_client import AsyncClient
from ctx_client.claude import CtxSessionStore
from ctx_client.openai_agents import CtxSession


@pytest.fixture
async def counted(server_url: str, token: str) -> AsyncIterator[tuple[AsyncClient, Any]]:
    """An async client of the live server and the transport counting its requests."""
    transport = CountingTransport()
    async with AsyncClient(server_url, token=token, transport=transport) as c:
        yield c, transport


async def sent(transport: CountingTransport, op: Callable[[], Awaitable[Any]]) -> list[str]:
    """The operations ``op`` sent, in order."""
    mark = transport.mark()
    await op()
    return transport.since(mark)


def _user(i: int) -> Any:
    return {"role": "user", "content": f"question {i}: what does the file say?"}


def _assistant(i: int) -> Any:
    return {
        "id": f"msg_{i}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": f"answer {i}: it says", "annotations": []}],
    }


def test_requests_are_named_by_operation() -> None:
    assert operation_of("GET", "/v1/refs/openai-agents/s-1") == "get_ref"
    assert operation_of("POST", "/v1/refs/a/b/evict") == "evict_ref"
    assert operation_of("POST", "/v1/commits") == "checkpoint"
    assert operation_of("POST", "/v1/commits/ctx-1/materialize") == "materialize"
    assert operation_of("GET", "/v1/artifacts/art-1") == "download_artifact"
    assert operation_of("GET", "/cas/t/ab/cd") == "GET /cas/t/ab/cd"


async def test_ctx_session_requests_per_operation(
    counted: tuple[AsyncClient, CountingTransport], unique: str
) -> None:
    client, t = counted
    s = CtxSession(f"{unique}-counted", client)
    # add_items: the first reads the ref's tip (this session has seen
    # none), then checkpoints on it moving the ref; from then on the
    # session guesses the tip it last saw: one request.
    assert await sent(t, lambda: s.add_items([_user(0), _assistant(0)])) == [
        "get_ref",
        "checkpoint",
    ]
    assert await sent(t, lambda: s.add_items([_user(1), _assistant(1)])) == ["checkpoint"]
    # get_items: the tip, its materialization, the materialized bytes.
    # Issue 25: one request, with or without a limit.
    read = ["get_ref", "materialize", "download_artifact"]
    got: list[Any] = []

    async def get(limit: int | None) -> None:
        got[:] = await s.get_items(limit=limit)

    assert await sent(t, lambda: get(None)) == read
    assert len(got) == 4
    assert await sent(t, lambda: get(2)) == read
    assert got == [_user(1), _assistant(1)]
    # Another writer of the session moves the ref: this session's guess is
    # refused (409, which says where the ref is) and the append lands on
    # the other's tip, nothing lost.
    other = CtxSession(f"{unique}-counted", client)
    await other.add_items([_user(2), _assistant(2)])
    assert await sent(t, lambda: s.add_items([_user(3), _assistant(3)])) == [
        "checkpoint",
        "checkpoint",
    ]
    await get(None)
    assert got == [m(i) for i in range(4) for m in (_user, _assistant)]


async def test_ctx_session_store_requests_per_operation(
    counted: tuple[AsyncClient, CountingTransport], unique: str
) -> None:
    client, t = counted
    namespace = f"t-{unique}/claude"
    store = CtxSessionStore(client, namespace=namespace)
    key: Any = {"project_key": "p", "session_id": str(uuid.uuid4())}
    sub: Any = {**key, "subpath": "subagents/agent-1"}

    def entries(i: int) -> list[Any]:
        return [
            {"type": "user", "uuid": f"u-{i}", "message": {"role": "user", "content": f"q {i}"}},
            {"type": "x", "uuid": f"a-{i}", "text": f"a {i}"},
        ]

    # append, a key this store has not seen: the ref (404), then the
    # folded session summary and the checkpoint in one batch.
    assert await sent(t, lambda: store.append(key, entries(0))) == ["get_ref", "batch"]
    # append, steady state on a main transcript: one request.
    assert await sent(t, lambda: store.append(key, entries(1))) == ["batch"]
    # A subagent transcript has no summary: one request once its tip is known.
    assert await sent(t, lambda: store.append(sub, entries(2))) == ["get_ref", "checkpoint"]
    assert await sent(t, lambda: store.append(sub, entries(3))) == ["checkpoint"]
    # load: the ref, the materialization, its bytes. Issue 25: one request.
    loaded: list[Any] = []

    async def load() -> None:
        loaded[:] = await store.load(key) or []

    assert await sent(t, load) == ["get_ref", "materialize", "download_artifact"]
    assert loaded == entries(0) + entries(1)
    # A store in a new process resuming the session appends after reading
    # the whole chain and the tip's summary. Issue 25: one request.
    resumed = CtxSessionStore(client, namespace=namespace)
    assert await sent(t, lambda: resumed.append(key, entries(4))) == [
        "get_ref",
        "materialize",
        "download_artifact",
        "show",
        "download_artifact",
        "batch",
    ]
    # A key never written: the ref's 404 is the answer.
    missing: Any = {"project_key": "p", "session_id": str(uuid.uuid4())}
    assert await sent(t, lambda: store.load(missing)) == ["get_ref"]
