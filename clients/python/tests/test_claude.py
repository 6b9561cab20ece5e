"""ctx_client.claude.CtxSessionStore against a live ctx serve: the Claude
Agent SDK's own conformance suite (all 14 contracts, none skipped), the
SDK's store-backed helpers (fork, resume materialization, listing), and
what the SDK's suite does not check: a re-sent batch, a 409 from another
writer, concurrent writers, entries the codec refuses, key escaping."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    fork_session_via_store,
    get_session_messages_from_store,
    list_sessions_from_store,
    project_key_for_directory,
)
from claude_agent_sdk._internal.session_resume import materialize_resume_session
from claude_agent_sdk.testing import run_session_store_conformance

from ctx_client import AsyncClient
from ctx_client.claude import CtxSessionStore, decode_segment, encode_segment


@pytest.fixture
def namespace(unique: str) -> str:
    """A ref namespace of this test alone."""
    return f"t-{unique}/claude"


def _user(sid: str, u: str, parent: str | None, text: str, ts: str) -> dict[str, Any]:
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/work/demo",
        "sessionId": sid,
        "version": "2.1.0",
        "gitBranch": "main",
        "type": "user",
        "message": {"role": "user", "content": text},
        "uuid": u,
        "timestamp": ts,
    }


def _assistant(sid: str, u: str, parent: str, text: str, ts: str) -> dict[str, Any]:
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/work/demo",
        "sessionId": sid,
        "version": "2.1.0",
        "gitBranch": "main",
        "message": {
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        },
        "requestId": "req_01",
        "type": "assistant",
        "uuid": u,
        "timestamp": ts,
    }


def _conversation(sid: str) -> list[dict[str, Any]]:
    u1, a1, u2, a2 = (str(uuid.uuid4()) for _ in range(4))
    return [
        {"type": "summary", "summary": "Earlier work", "leafUuid": str(uuid.uuid4())},
        _user(sid, u1, None, "What is 2+2?", "2026-01-01T00:00:00.000Z"),
        _assistant(sid, a1, u1, "4", "2026-01-01T00:00:01.000Z"),
        {"type": "file-history-snapshot", "messageId": a1, "snapshot": {"x": [1, 2.5, None]}},
        _user(sid, u2, a1, "And 3+3?", "2026-01-01T00:00:02.000Z"),
        _assistant(sid, a2, u2, "6", "2026-01-01T00:00:03.000Z"),
        {"type": "custom-title", "customTitle": "Arithmetic", "sessionId": sid},
    ]


async def test_the_sdk_conformance_suite_all_14_contracts(
    aclient: AsyncClient, unique: str
) -> None:
    made: list[str] = []

    def make_store() -> CtxSessionStore:
        ns = f"t-{unique}-{len(made)}/claude"
        made.append(ns)
        return CtxSessionStore(aclient, namespace=ns)

    # No optional method skipped: every contract runs.
    await run_session_store_conformance(make_store, skip_optional=frozenset())
    # The probe, then one fresh store per contract: all 14 ran.
    assert len(made) == 1 + 14


async def test_the_suite_sees_every_optional_method(aclient: AsyncClient) -> None:
    from claude_agent_sdk.testing.session_store_conformance import _has_optional

    store = CtxSessionStore(aclient)
    for method in ("list_sessions", "list_session_summaries", "delete", "list_subkeys"):
        assert _has_optional(store, method, frozenset()), method


async def test_entries_round_trip_deep_equal_and_unknown_types_intact(
    aclient: AsyncClient, namespace: str
) -> None:
    store = CtxSessionStore(aclient, namespace=namespace)
    sid = str(uuid.uuid4())
    key = {"project_key": "-work-demo", "session_id": sid}
    entries = _conversation(sid)
    odd = [
        {"type": "x-future-kind", "nested": {"deep": [{"a": 'ü\u2028\n\t"q"'}]}, "n": 10**30},
        {"type": "ctx-verbatim", "entry": {"looks": "like our wrapper"}},
        {"type": "mode", "mode": "plan"},
    ]
    await store.append(key, entries[:3])
    await store.append(key, entries[3:] + odd)
    assert await store.load(key) == entries + odd
    # The ref holds a claude-code-v1 chain a transcript reader sees as such.
    ref = await aclient.get_ref(store.ref_name(key))
    tip = await aclient.get_commit(ref["target"])
    assert tip["format"] == "claude-code-v1" and tip["parent"] is not None


async def test_entries_the_codec_refuses_come_back_exactly(
    aclient: AsyncClient, namespace: str
) -> None:
    store = CtxSessionStore(aclient, namespace=namespace)
    key = {"project_key": "p", "session_id": "s"}
    # A user entry without a message: not a valid claude-code-v1 line.
    bad = [{"type": "user", "uuid": "u-1", "note": "no message"}, {"type": "x", "uuid": "u-2"}]
    await store.append(key, bad)
    await store.append(key, [{"type": "x", "uuid": "u-3"}])
    assert await store.load(key) == bad + [{"type": "x", "uuid": "u-3"}]


class LoseCommitResponses(httpx.AsyncBaseTransport):
    """Sends every request, but loses the response of the first ``n``
    checkpoints (the commit is written; the caller sees a read error)."""

    def __init__(self, n: int) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.n = n

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        resp = await self.inner.handle_async_request(request)
        if self.n > 0 and request.method == "POST" and request.url.path == "/v1/commits":
            self.n -= 1
            await resp.aread()
            await resp.aclose()
            raise httpx.ReadError("connection reset after the request was sent", request=request)
        return resp

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_batch_resent_after_a_lost_response_is_not_appended_twice(
    server_url: str, token: str, aclient: AsyncClient, namespace: str
) -> None:
    key = {"project_key": "p", "session_id": str(uuid.uuid4())}
    batch = [{"type": "x", "uuid": "e-1"}, {"type": "x", "uuid": "e-2"}]
    await CtxSessionStore(aclient, namespace=namespace).append(key, [{"type": "x", "uuid": "e-0"}])
    lost = LoseCommitResponses(1)
    async with AsyncClient(server_url, token=token, transport=lost) as flaky:
        store = CtxSessionStore(flaky, namespace=namespace)
        with pytest.raises(httpx.ReadError):
            await store.append(key, batch)
        assert lost.n == 0
        # The SDK retries the batch, as it does after an exception.
        await store.append(key, batch)
    reader = CtxSessionStore(aclient, namespace=namespace)
    assert await reader.load(key) == [{"type": "x", "uuid": "e-0"}, *batch]
    # Entries without uuids cannot be recognised: appended as sent.
    await reader.append(key, [{"type": "tag", "tag": "t"}])
    await reader.append(key, [{"type": "tag", "tag": "t"}])
    loaded = await reader.load(key)
    assert loaded is not None and loaded[-2:] == [{"type": "tag", "tag": "t"}] * 2


async def test_another_writer_moving_the_ref_is_rebased_on(
    aclient: AsyncClient, namespace: str
) -> None:
    key = {"project_key": "p", "session_id": "shared"}
    a = CtxSessionStore(aclient, namespace=namespace)
    b = CtxSessionStore(aclient, namespace=namespace)
    await a.append(key, [{"type": "x", "uuid": "1"}])
    await b.append(key, [{"type": "x", "uuid": "2"}])
    # a still believes the tip is its own commit: its CAS gets a 409 and
    # it rebases onto b's commit.
    await a.append(key, [{"type": "x", "uuid": "3"}])
    assert [e["uuid"] for e in await b.load(key) or []] == ["1", "2", "3"]


async def test_concurrent_writers_lose_nothing_and_double_nothing(
    aclient: AsyncClient, namespace: str
) -> None:
    key = {"project_key": "p", "session_id": "race"}
    writers = [CtxSessionStore(aclient, namespace=namespace) for _ in range(4)]

    async def write(i: int, store: CtxSessionStore) -> None:
        for j in range(5):
            await store.append(key, [{"type": "x", "uuid": f"w{i}-{j}"}])

    async with anyio.create_task_group() as tg:
        for i, w in enumerate(writers):
            tg.start_soon(write, i, w)
    loaded = await writers[0].load(key) or []
    got = [e["uuid"] for e in loaded]
    assert sorted(got) == sorted(f"w{i}-{j}" for i in range(4) for j in range(5))
    for i in range(4):  # each writer's own order is kept
        mine = [u for u in got if u.startswith(f"w{i}-")]
        assert mine == [f"w{i}-{j}" for j in range(5)]


async def test_keys_with_any_characters(aclient: AsyncClient, namespace: str) -> None:
    for value in ["", "a.b", "..", "x/y", "über_ß", "-Users-me-proj", "a_2E"]:
        seg = encode_segment(value)
        assert decode_segment(seg) == value
        assert "/" not in seg and ".." not in seg
    store = CtxSessionStore(aclient, namespace=namespace)
    key = {"project_key": "/home/me/my proj", "session_id": "s.1"}
    sub = {**key, "subpath": "subagents/agent_ü.1"}
    await store.append(key, [{"type": "x", "n": 1}])
    await store.append(sub, [{"type": "x", "n": 2}])
    assert await store.list_subkeys(key) == ["subagents/agent_ü.1"]
    assert [s["session_id"] for s in await store.list_sessions(key["project_key"])] == ["s.1"]
    assert await store.load(sub) == [{"type": "x", "n": 2}]
    long_key = {"project_key": "-" + "deep-" * 60, "session_id": "s"}
    await store.append(long_key, [{"type": "x"}])
    assert await store.load(long_key) == [{"type": "x"}]
    assert [s["session_id"] for s in await store.list_sessions(long_key["project_key"])] == ["s"]


async def test_fork_session_via_store(aclient: AsyncClient, namespace: str, tmp_path: Path) -> None:
    store = CtxSessionStore(aclient, namespace=namespace)
    sid = str(uuid.uuid4())
    key = {"project_key": project_key_for_directory(str(tmp_path)), "session_id": sid}
    entries = _conversation(sid)
    await store.append(key, entries)

    # The whole session, then only up to the first answer.
    whole = await fork_session_via_store(store, sid, directory=str(tmp_path))
    up_to = entries[2]["uuid"]
    part = await fork_session_via_store(
        store, sid, directory=str(tmp_path), up_to_message_id=up_to, title="Just 2+2"
    )
    source = [e for e in entries if e["type"] in ("user", "assistant")]
    for result, expect, title in (
        (whole, source, "Arithmetic (fork)"),
        (part, source[:2], "Just 2+2"),
    ):
        fork_key = {**key, "session_id": result.session_id}
        forked = await store.load(fork_key)
        assert forked is not None
        turns = [e for e in forked if e["type"] in ("user", "assistant")]
        assert [t["message"] for t in turns] == [e["message"] for e in expect]
        assert all(t["sessionId"] == result.session_id for t in turns)
        assert [t["forkedFrom"]["messageUuid"] for t in turns] == [e["uuid"] for e in expect]
        assert {t["uuid"] for t in turns}.isdisjoint(e["uuid"] for e in expect)
        assert forked[-1]["type"] == "custom-title" and forked[-1]["customTitle"] == title
    # The source is untouched; the SDK's reading helpers see all three.
    assert await store.load(key) == entries
    msgs = await get_session_messages_from_store(store, sid, directory=str(tmp_path))
    assert [m.uuid for m in msgs] == [e["uuid"] for e in source]
    listed = await list_sessions_from_store(store, directory=str(tmp_path))
    assert {s.session_id for s in listed} == {sid, whole.session_id, part.session_id}
    titles = {s.session_id: s.custom_title for s in listed}
    assert titles[sid] == "Arithmetic" and titles[part.session_id] == "Just 2+2"


async def test_materialize_resume_session(
    aclient: AsyncClient, namespace: str, tmp_path: Path
) -> None:
    store = CtxSessionStore(aclient, namespace=namespace)
    sid = str(uuid.uuid4())
    project_key = project_key_for_directory(str(tmp_path))
    key = {"project_key": project_key, "session_id": sid}
    entries = _conversation(sid)
    await store.append(key, entries[:4])
    await store.append(key, entries[4:])
    sub_entries = [
        _user(sid, str(uuid.uuid4()), None, "subtask", "2026-01-01T00:00:05.000Z"),
    ]
    sub_entries[0]["isSidechain"] = True
    await store.append({**key, "subpath": "subagents/agent-a1"}, sub_entries)

    for options in (
        ClaudeAgentOptions(session_store=store, resume=sid, cwd=str(tmp_path)),
        ClaudeAgentOptions(session_store=store, continue_conversation=True, cwd=str(tmp_path)),
    ):
        resumed = await materialize_resume_session(options)
        assert resumed is not None
        try:
            assert resumed.resume_session_id == sid
            project = resumed.config_dir / "projects" / project_key
            lines = (project / f"{sid}.jsonl").read_text().splitlines()
            assert [json.loads(x) for x in lines] == entries
            sub = project / sid / "subagents" / "agent-a1.jsonl"
            assert [json.loads(x) for x in sub.read_text().splitlines()] == sub_entries
        finally:
            await resumed.cleanup()
    # A session the store never saw: nothing to materialize.
    none = ClaudeAgentOptions(session_store=store, resume=str(uuid.uuid4()), cwd=str(tmp_path))
    assert await materialize_resume_session(none) is None


async def test_load_spans_a_compaction(aclient: AsyncClient, namespace: str) -> None:
    """load materializes with stop=root: a compaction commit on the ref
    (`ctx compact`, or Claude Code hooks importing a compacted transcript)
    does not cut the resumed transcript; its boundary and summary lines
    are in it where Claude Code itself writes them."""
    store = CtxSessionStore(aclient, namespace=namespace)
    sid = str(uuid.uuid4())
    key = {"project_key": "p", "session_id": sid}
    entries = _conversation(sid)
    await store.append(key, entries)
    ref = store.ref_name(key)
    tip = (await aclient.get_ref(ref))["target"]
    await aclient.compact(tip, summarizer="extractive", ref=ref, expected=tip)
    later = [_user(sid, str(uuid.uuid4()), None, "more", "2026-01-01T00:01:00.000Z")]
    await store.append(key, later)
    loaded = await store.load(key)
    assert loaded is not None
    assert loaded[: len(entries)] == entries and loaded[-1:] == later
    boundary, summary = loaded[len(entries) : -1]
    assert boundary["type"] == "system" and boundary["subtype"] == "compact_boundary"
    assert summary["type"] == "user" and summary["isCompactSummary"] is True
    # The default materialization (from the nearest compaction) would start
    # at the boundary: the transcript before it would be lost on resume.
    _, cut = await aclient.materialize_bytes((await aclient.get_ref(ref))["target"])
    assert len(cut.decode().strip().split("\n")) == 3


async def test_requests_per_call(server_url: str, token: str, namespace: str) -> None:
    """What each call costs in requests once the store knows the key: an
    append of a main transcript is two (the folded summary, the
    checkpoint with its ref move), of a subagent transcript one; a load
    three (ref, materialize, artifact)."""
    sent: list[str] = []

    async def count(request: httpx.Request) -> None:
        sent.append(f"{request.method} {request.url.path.split('/')[2]}")

    async with AsyncClient(server_url, token=token) as c:
        c._http.event_hooks["request"] = [count]
        store = CtxSessionStore(c, namespace=namespace)
        key = {"project_key": "p", "session_id": "costs"}
        sub = {**key, "subpath": "subagents/a"}
        await store.append(key, [{"type": "x", "uuid": "0"}])
        await store.append(sub, [{"type": "x", "uuid": "0"}])
        sent.clear()
        await store.append(key, [{"type": "x", "uuid": "1"}])
        assert sent == ["POST artifacts", "POST commits"]
        sent.clear()
        await store.append(sub, [{"type": "x", "uuid": "1"}])
        assert sent == ["POST commits"]
        sent.clear()
        await store.load(key)
        assert sent == ["GET refs", "POST commits", "GET artifacts"]
