"""The HTTP requests each adapter operation sends, counted against
the live server, and pinned exactly: the regression guard issue 25 asks
for ("The requests per operation for each adapter, counted by a test, so
a regression to several round trips fails").

One request each: ``CtxSession.add_items`` (once the session has seen
its tip) and ``get_items`` (with or without ``limit``);
``CtxSessionStore.append`` (once the store has seen its key: the folded
summary and the commit in one batch) and ``load``; the LangGraph saver's
``put_writes`` and a warm ``get_tuple``, and its ``put`` after a commit per
list value that grew past the first. Any extra round trip fails here.
bench/session_stores.py prints the same counts beside the rates.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from request_counting import CountingTransport, operation_of

from ctx_client import AsyncClient
from ctx_client.claude import CtxSessionStore
from ctx_client.langgraph import AsyncCtxSaver
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
    # get_items: the tip and its items, with or without a limit, in one
    # request.
    read = ["read"]
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


async def test_ctx_session_limit_reads_only_the_tail(
    counted: tuple[AsyncClient, CountingTransport], unique: str
) -> None:
    client, t = counted
    s = CtxSession(f"{unique}-tail", client)
    for i in range(20):
        await s.add_items([_user(i), _assistant(i)])
    got: list[Any] = []

    async def get(limit: int | None) -> None:
        got[:] = await s.get_items(limit=limit)

    mark = t.mark()
    await get(None)
    whole = t.bytes_since(mark)
    # get_items(limit=n): the newest n commits' deltas, one request, a
    # tenth of the session's bytes here (2 of 20 commits).
    mark = t.mark()
    assert await sent(t, lambda: get(3)) == ["read"]
    assert got == [_assistant(18), _user(19), _assistant(19)]
    assert 0 < t.bytes_since(mark) < whole / 5
    # After a clear, fewer items than the limit since the snapshot: the
    # tail cannot tell the snapshot from a cut, so the whole is read too.
    await s.clear_session()
    await s.add_items([_user(20)])
    assert await sent(t, lambda: get(3)) == ["read", "read"]
    assert got == [_user(20)]


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

    # append, a key this store has not seen: the read of the ref (404),
    # then the folded session summary and the checkpoint in one batch.
    assert await sent(t, lambda: store.append(key, entries(0))) == ["read", "batch"]
    # append, steady state on a main transcript: one request.
    assert await sent(t, lambda: store.append(key, entries(1))) == ["batch"]
    # A subagent transcript has no summary: one request once its tip is known.
    assert await sent(t, lambda: store.append(sub, entries(2))) == ["read", "checkpoint"]
    assert await sent(t, lambda: store.append(sub, entries(3))) == ["checkpoint"]
    # load: the ref's tip and its entries, one request.
    loaded: list[Any] = []

    async def load() -> None:
        loaded[:] = await store.load(key) or []

    assert await sent(t, load) == ["read"]
    assert loaded == entries(0) + entries(1)
    # A store in a new process resuming the session appends after reading
    # the whole transcript (one request) and the tip's folded summary (its
    # commit and artifact).
    resumed = CtxSessionStore(client, namespace=namespace)
    assert await sent(t, lambda: resumed.append(key, entries(4))) == [
        "read",
        "get_commit",
        "download_artifact",
        "batch",
    ]
    # A key never written: the read's 404 is the answer.
    missing: Any = {"project_key": "p", "session_id": str(uuid.uuid4())}
    assert await sent(t, lambda: store.load(missing)) == ["read"]


def _checkpoint(messages: list[str], step: int) -> Any:
    """A LangGraph checkpoint of a growing ``messages`` list and a ``step``."""
    c: Any = empty_checkpoint()
    c["id"] = str(uuid6(clock_seq=step))
    c["channel_values"] = {"messages": messages, "step": step}
    c["channel_versions"] = {"messages": step, "step": step}
    return c


async def _put(saver: AsyncCtxSaver, config: Any, c: Any) -> Any:
    return await saver.aput(
        config,
        c,
        {"source": "loop", "step": c["channel_values"]["step"], "run_id": "r-1"},
        {"messages": c["channel_versions"]["messages"], "step": c["channel_versions"]["step"]},
    )


async def test_langgraph_saver_requests_per_operation(
    counted: tuple[AsyncClient, CountingTransport], unique: str
) -> None:
    client, t = counted
    saver = AsyncCtxSaver(client, prefix=f"lg-{unique}")
    thread: Any = {"configurable": {"thread_id": "t-1", "checkpoint_ns": ""}}

    async def put(config: Any, c: Any) -> Any:
        return await _put(saver, config, c)

    # put: one batch holds the growing messages list's link commit (a ctx
    # delta of its new elements on the parent's link), the document's
    # commit on it, the other values, the checkpoint's ref, the head and
    # the run's index entry.
    first = _checkpoint(["hi"], 1)
    got: list[Any] = []

    async def keep(op: Awaitable[Any]) -> None:
        got[:] = [await op]

    assert await sent(t, lambda: keep(put(thread, first))) == ["batch"]
    c1 = got[0]
    # put_writes: the merged document and its ref and head moves, one batch.
    writes = [("messages", ["there"]), ("step", 2)]
    assert await sent(t, lambda: saver.aput_writes(c1, writes, "task-1")) == ["batch"]
    # A repeat of the same writes changes nothing: no request.
    assert await sent(t, lambda: saver.aput_writes(c1, writes, "task-1")) == []
    second = _checkpoint(["hi", "there"], 2)
    assert await sent(t, lambda: keep(put(c1, second))) == ["batch"]
    c2 = got[0]
    # Without the list (no new messages, or a DeltaChannel's sentinel):
    # one batch.
    third = _checkpoint(["hi", "there"], 3)
    third["channel_versions"]["messages"] = 2
    assert await sent(
        t,
        lambda: keep(
            saver.aput(c2, third, {"source": "loop", "step": 3, "run_id": "r-1"}, {"step": 3})
        ),
    ) == ["batch"]
    # Two lists that grew: the second's link is committed first, on its own.
    two = _checkpoint(["hi", "there"], 4)
    two["channel_values"]["other"] = ["x"]
    two["channel_versions"]["other"] = 4
    other_thread: Any = {"configurable": {"thread_id": "t-2", "checkpoint_ns": ""}}
    assert await sent(
        t,
        lambda: keep(
            saver.aput(
                other_thread, two, {"source": "loop", "step": 4}, {"messages": 4, "other": 4}
            )
        ),
    ) == ["checkpoint", "batch"]
    back = await saver.aget_tuple(got[0])
    assert back is not None
    assert back.checkpoint["channel_values"] == {
        "messages": ["hi", "there"],
        "step": 4,
        "other": ["x"],
    }
    # get_tuple of the latest, warm: the head's tip and its document, one
    # request (the values are cached).
    assert await sent(t, lambda: keep(saver.aget_tuple(thread))) == ["read"]
    assert got[0].checkpoint["channel_values"] == {"messages": ["hi", "there"], "step": 3}

    # list, warm: one listing a page.
    async def listed() -> None:
        got[:] = [c async for c in saver.alist(thread)]

    assert await sent(t, listed) == ["list_refs"]
    assert [c.checkpoint["channel_values"]["step"] for c in got] == [3, 2, 1]
    assert got[2].pending_writes == [("task-1", "messages", ["there"]), ("task-1", "step", 2)]

    # DeltaChannel's walk: the start's ref, one history request, the
    # nearest ancestors' refs; walked again, the commits come from the
    # saver's cache (they are immutable): no history request.
    async def walk() -> None:
        got[:] = [await saver.aget_delta_channel_history(config=thread, channels=["step"])]

    first_walk = await sent(t, walk)
    assert first_walk.count("history") == 1, first_walk
    again = await sent(t, walk)
    assert "history" not in again and len(again) == len(first_walk) - 1, again
    # A saver in a new process, cold: the head's tip and its document
    # (which holds the small step value), then the messages' chain read
    # whole: two requests.
    cold = AsyncCtxSaver(client, prefix=f"lg-{unique}")
    assert await sent(t, lambda: keep(cold.aget_tuple(thread))) == ["read", "read"]
    assert got[0].checkpoint["channel_values"] == {"messages": ["hi", "there"], "step": 3}


async def test_langgraph_cold_delta_walk_is_one_server_walk(
    counted: tuple[AsyncClient, CountingTransport], unique: str
) -> None:
    # A DeltaChannel thread (its messages in the writes, no list values),
    # walked by a saver that has not seen it: the server joins the chain
    # (one read a page of 256 commits), then the nearest ancestors' states
    # are read by ref, concurrently (at most 4).
    client, t = counted
    saver = AsyncCtxSaver(client, prefix=f"lg-{unique}")
    at: Any = {"configurable": {"thread_id": "t-3", "checkpoint_ns": ""}}
    for step in range(8):
        c = _checkpoint([], step)
        c["channel_values"] = {"step": step}
        c["channel_versions"] = {"step": step}
        at = await saver.aput(at, c, {"source": "loop", "step": step}, {"step": step})
        await saver.aput_writes(at, [("messages", [f"m{step}"])], "task-1")
    cold = AsyncCtxSaver(client, prefix=f"lg-{unique}")
    got: list[Any] = []

    async def walk() -> None:
        got[:] = [await cold.aget_delta_channel_history(config=at, channels=["messages"])]

    assert await sent(t, walk) == ["read"] * 5
    assert [w[2] for w in got[0]["messages"]["writes"]] == [[f"m{s}"] for s in range(7)]


class _Gate(CountingTransport):
    """Counts requests with their statuses, and holds the first batch sent
    after :attr:`gating` is set until :attr:`hold` is."""

    def __init__(self) -> None:
        super().__init__()
        self.gating = False
        self.held = asyncio.Event()
        self.hold = asyncio.Event()
        self.answered: list[tuple[str, int]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        op = operation_of(request.method, request.url.path)
        if self.gating and op == "batch" and not self.held.is_set():
            self.held.set()
            await self.hold.wait()
        resp = await super().handle_async_request(request)
        self.answered.append((op, resp.status_code))
        return resp


@contextlib.asynccontextmanager
async def _gated(server_url: str, token: str, unique: str) -> AsyncIterator[Any]:
    """A saver over a :class:`_Gate`d client, a thread, a checkpoint of it
    and its config: ``(gate, saver, thread, checkpoint, at)``."""
    t = _Gate()
    async with AsyncClient(server_url, token=token, transport=t) as client:
        saver = AsyncCtxSaver(client, prefix=f"lg-{unique}")
        thread: Any = {"configurable": {"thread_id": "t-1", "checkpoint_ns": ""}}
        c = _checkpoint(["hi"], 1)
        at = {"configurable": {**thread["configurable"], "checkpoint_id": c["id"]}}
        yield t, saver, thread, c, at


async def test_langgraph_writes_sent_during_their_put_wait_for_it(
    server_url: str, token: str, unique: str
) -> None:
    # LangGraph sends a checkpoint's put and its tasks' writes from
    # background threads, so writes can reach the saver while their
    # checkpoint's put is on its way. They wait for it, then go on its tip:
    # no placeholder, no 409, one batch each.
    async with _gated(server_url, token, unique) as (t, saver, thread, c, at):
        t.gating = True
        put = asyncio.create_task(_put(saver, thread, c))
        await t.held.wait()
        mark = len(t.answered)
        writes = asyncio.create_task(saver.aput_writes(at, [("step", 2)], "task-1"))
        await asyncio.sleep(0.2)
        assert not writes.done()
        assert t.answered[mark:] == []
        t.hold.set()
        await asyncio.gather(put, writes)
        assert t.answered == [("batch", 201), ("batch", 201)]
        got = await saver.aget_tuple(at)
        assert got is not None and got.pending_writes == [("task-1", "step", 2)]


async def test_langgraph_writes_before_their_put_are_taken_over_without_a_conflict(
    server_url: str, token: str, unique: str
) -> None:
    # Writes that land before their checkpoint's put wait in a placeholder
    # (one batch, no read: a checkpoint this saver never saw is taken not
    # to exist); the put knows it and takes the writes over in its batch.
    async with _gated(server_url, token, unique) as (t, saver, thread, c, at):
        await saver.aput_writes(at, [("step", 2)], "task-1")
        assert t.answered == [("batch", 201)]
        assert await saver.aget_tuple(at) is None  # a placeholder reads as no checkpoint
        mark = len(t.answered)
        await _put(saver, thread, c)
        assert t.answered[mark:] == [("batch", 201)]
        got = await saver.aget_tuple(at)
        assert got is not None and got.pending_writes == [("task-1", "step", 2)]
