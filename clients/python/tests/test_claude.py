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
        "cwd": "/home/dev/demo",
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
        "cwd": "/home/dev/demo",
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
    from importlib.metadata import version

    from conftest import SUMMARY_LINES, TRANSPORT

    SUMMARY_LINES.append(
        f"claude-agent-sdk {version('claude-agent-sdk')} run_session_store_conformance"
        f" on CtxSessionStore ({TRANSPORT}): {len(made) - 1}/14 contracts passed, 0 skipped"
    )


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


async def test_entries_the_codec_reads_as_no_message_come_back_exactly(
    aclient: AsyncClient, namespace: str
) -> None:
    store = CtxSessionStore(aclient, namespace=namespace)
    key = {"project_key": "p", "session_id": "s"}
    # User entries without a message are no claude-code-v1 messages: the
    # codec keeps them as written (with a warning), so nothing is wrapped.
    ok = _user("s", "u-0", None, "hello", "2026-01-01T00:00:00.000Z")
    bad = [
        ok,
        {"type": "user", "uuid": "u-1", "note": "no message"},
        {"type": "x", "uuid": "u-2"},
        {"type": "user", "uuid": "u-3", "message": "not an object"},
    ]
    await store.append(key, bad)
    await store.append(key, [{"type": "x", "uuid": "u-4"}])
    assert await store.load(key) == bad + [{"type": "x", "uuid": "u-4"}]
    # The transcript is the entries as they are.
    tip = (await aclient.get_ref(store.ref_name(key)))["target"]
    _, raw = await aclient.materialize_bytes(tip, stop="root")
    lines = [json.loads(x) for x in raw.decode().splitlines()]
    assert lines == bad + [{"type": "x", "uuid": "u-4"}]


async def test_a_line_that_is_not_json_in_the_transcript_is_skipped_on_load(
    aclient: AsyncClient, namespace: str
) -> None:
    # The Claude Code hook stores a transcript's lines as written, a
    # damaged one too; the store loads the entries around it.
    store = CtxSessionStore(aclient, namespace=namespace)
    key = {"project_key": "p", "session_id": "damaged"}
    first = _user("damaged", "u-0", None, "hello", "2026-01-01T00:00:00.000Z")
    second = _user("damaged", "u-1", "u-0", "again", "2026-01-01T00:00:01.000Z")
    text = json.dumps(first) + "\nnot json at all\n\n" + json.dumps(second) + "\n"
    commit = await aclient.checkpoint(
        principal="hook",
        template="claude-code",
        format="claude-code-v1",
        delta=text,
        commit_type="delta",
        checkpoint="turn_boundary",
    )
    await aclient.set_ref(store.ref_name(key), commit["id"])
    assert await store.load(key) == [first, second]
    await store.append(key, [{"type": "x", "uuid": "u-2"}])
    assert await store.load(key) == [first, second, {"type": "x", "uuid": "u-2"}]


class LoseCommitResponses(httpx.AsyncBaseTransport):
    """Sends every request, but loses the response of the first ``n``
    checkpoints or batches (the commit is written; the caller sees a read
    error)."""

    def __init__(self, n: int) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.n = n

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        resp = await self.inner.handle_async_request(request)
        if (
            self.n > 0
            and request.method == "POST"
            and request.url.path in ("/v1/commits", "/v1/batch")
        ):
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
    # Each 409 a writer gets means another writer's append landed since it
    # last looked: with 15 appends by the others, no append meets more than
    # 15, under the store's 32 attempts, however the tasks interleave.
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
    append is one (of a main transcript, a batch of the folded summary and
    the checkpoint with its ref move); a load one (the ref's tip read
    whole)."""
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
        assert sent == ["POST batch"]
        sent.clear()
        await store.append(sub, [{"type": "x", "uuid": "1"}])
        assert sent == ["POST commits"]
        sent.clear()
        await store.load(key)
        assert sent == ["POST read"]


async def test_entries_another_writer_stored_are_not_appended_again(
    aclient: AsyncClient, namespace: str
) -> None:
    """As `ctx hook claude-code` does for the same session: lines written
    to the ref by another writer are dropped by uuid from a batch that
    holds them too; the summary is folded over the whole transcript."""
    sid = str(uuid.uuid4())
    key = {"project_key": "-work-demo", "session_id": sid}
    entries = _conversation(sid)
    store = CtxSessionStore(aclient, namespace=namespace)
    ref = store.ref_name(key)
    # The other writer: the first turn straight through the API, no tags.
    first = "".join(json.dumps(e) + "\n" for e in entries[1:3])
    await aclient.checkpoint(
        principal="hook",
        template="claude-code",
        format="claude-code-v1",
        delta=first,
        ref=ref,
        expected=None,
    )
    # The SDK's mirror sends both turns, the first one included. (Entries
    # without a uuid, as the summary line, could not be recognised.)
    await store.append(key, entries[1:])
    assert await store.load(key) == entries[1:]
    # A second store that knows nothing yet: the second turn again is a no-op.
    again = CtxSessionStore(aclient, namespace=namespace)
    await again.append(key, entries[4:6])
    assert await again.load(key) == entries[1:]
    [summary] = await store.list_session_summaries("-work-demo")
    assert summary["data"]["first_prompt"] == "What is 2+2?"
    assert summary["data"]["custom_title"] == "Arithmetic"


def test_long_project_keys_are_named_as_the_hooks_name_them(aclient: AsyncClient) -> None:
    from blake3 import blake3

    store = CtxSessionStore(aclient)
    sid = "0" * 8 + "-0000-4000-8000-" + "0" * 12
    project = "-" + "deep-" * 60
    name = store.ref_name({"project_key": project, "session_id": sid})
    # cli/src/hooks.rs session_ref: claude/{head}-{16 hex of BLAKE3}/{session},
    # head the first 200 - (7 + 1 + 36 + 1 + 16) characters of the key.
    head = project[: 200 - (7 + 1 + 36 + 1 + 16)]
    assert name == f"claude/{head}-{blake3(project.encode()).hexdigest()[:16]}/{sid}"
    assert len(name) == 200
    short = store.ref_name({"project_key": "-home-dev-p", "session_id": sid})
    assert short == f"claude/-home-dev-p/{sid}"


async def test_the_sdks_transcript_mirror_writes_through_the_store(
    server_url: str, token: str, aclient: AsyncClient, namespace: str, tmp_path: Path
) -> None:
    """The SDK's own mirror (what a ClaudeSDKClient with session_store
    runs): frames for the main and a subagent transcript, flushed per turn;
    the first append's response is lost, the SDK retries it, nothing is
    doubled and no error is reported."""
    from claude_agent_sdk._internal.transcript_mirror_batcher import TranscriptMirrorBatcher

    errors: list[tuple[Any, str]] = []

    async def on_error(key: Any, message: str) -> None:
        errors.append((key, message))

    sid = str(uuid.uuid4())
    projects = tmp_path / "projects"
    main_file = str(projects / "-work-demo" / f"{sid}.jsonl")
    sub_file = str(projects / "-work-demo" / sid / "subagents" / "agent-a1.jsonl")
    entries = _conversation(sid)
    sub = [_user(sid, str(uuid.uuid4()), None, "subtask", "2026-01-01T00:00:05.000Z")]
    lost = LoseCommitResponses(1)
    async with AsyncClient(server_url, token=token, transport=lost) as flaky:
        store = CtxSessionStore(flaky, namespace=namespace)
        mirror = TranscriptMirrorBatcher(store=store, projects_dir=str(projects), on_error=on_error)
        mirror.enqueue(main_file, entries[:2])
        mirror.enqueue(main_file, entries[2:4])
        mirror.enqueue(sub_file, sub)
        await mirror.flush()
        mirror.enqueue(main_file, entries[4:])
        await mirror.close()
    assert lost.n == 0 and errors == []
    reader = CtxSessionStore(aclient, namespace=namespace)
    key = {"project_key": "-work-demo", "session_id": sid}
    assert await reader.load(key) == entries
    assert await reader.load({**key, "subpath": "subagents/agent-a1"}) == sub


async def test_claude_code_hooks_and_the_store_write_one_session(
    aclient: AsyncClient, server_url: str, token: str, ctx_bin: str, tmp_path: Path, unique: str
) -> None:
    """`ctx hook claude-code` (Claude Code's Stop hook) and the SDK's store
    share the ref claude/{project_key}/{session_id}: each sees the other's
    entries and neither writes one twice."""
    import subprocess

    sid = str(uuid.uuid4())
    project_key = f"-tmp-{unique}"
    turns: list[dict[str, Any]] = []
    parent = None
    for i in range(3):
        u, a = str(uuid.uuid4()), str(uuid.uuid4())
        turns.append(_user(sid, u, parent, f"question {i}", f"2026-01-01T00:0{i}:00.000Z"))
        turns.append(_assistant(sid, a, u, f"answer {i}", f"2026-01-01T00:0{i}:01.000Z"))
        parent = a
    transcript = tmp_path / "projects" / project_key / f"{sid}.jsonl"
    transcript.parent.mkdir(parents=True)

    def claude_code_writes(upto: int) -> None:
        transcript.write_text("".join(json.dumps(e) + "\n" for e in turns[:upto]))

    def stop_hook() -> None:
        hook = {
            "session_id": sid,
            "transcript_path": str(transcript),
            "cwd": str(tmp_path),
            "hook_event_name": "Stop",
        }
        done = subprocess.run(
            [ctx_bin, "hook", "claude-code", "--server", server_url, "--data", str(tmp_path / "d")],
            input=json.dumps(hook).encode(),
            env={"CTX_TOKEN": token, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            timeout=60,
        )
        assert done.returncode == 0 and b"warning" not in done.stderr, done.stderr

    store = CtxSessionStore(aclient)  # namespace "claude", as the hooks
    key = {"project_key": project_key, "session_id": sid}
    claude_code_writes(2)
    stop_hook()
    assert await store.load(key) == turns[:2]
    # The SDK's mirror sends the first two turns (one of them the hook's).
    await store.append(key, turns[:4])
    assert await store.load(key) == turns[:4]
    # Claude Code's file now has all three turns; the hook adds only the last.
    claude_code_writes(6)
    stop_hook()
    assert await store.load(key) == turns
    ref = await aclient.get_ref(store.ref_name(key))
    principals = [c["principal"] for c in (await aclient.history(ref["target"]))["commits"]]
    assert set(principals) == {"claude-code", "claude-agent-sdk"}


async def test_the_sdks_other_store_helpers(
    aclient: AsyncClient, namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """import_session_to_store (twice: re-import is duplicate-safe),
    rename/tag via the store, subagent listing and messages, and
    delete_session_via_store cascading to the subagent."""
    from claude_agent_sdk import (
        delete_session_via_store,
        get_session_info_from_store,
        get_subagent_messages_from_store,
        import_session_to_store,
        list_subagents_from_store,
        rename_session_via_store,
        tag_session_via_store,
    )

    config = tmp_path / "claude-config"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    workdir = tmp_path / "proj"
    workdir.mkdir()
    project_key = project_key_for_directory(str(workdir))
    sid = str(uuid.uuid4())
    entries = _conversation(sid)
    project = config / "projects" / project_key
    (project / sid / "subagents").mkdir(parents=True)
    (project / f"{sid}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))
    sub = [_user(sid, str(uuid.uuid4()), None, "subtask", "2026-01-01T00:00:05.000Z")]
    sub[0]["isSidechain"] = True
    (project / sid / "subagents" / "agent-a1.jsonl").write_text(json.dumps(sub[0]) + "\n")

    store = CtxSessionStore(aclient, namespace=namespace)
    await import_session_to_store(sid, store, directory=str(workdir), batch_size=3)
    # Re-imports, into the same store and into a new one, change nothing
    # (each batch has an entry with a uuid).
    await import_session_to_store(sid, store, directory=str(workdir), batch_size=4)
    fresh = CtxSessionStore(aclient, namespace=namespace)
    await import_session_to_store(sid, fresh, directory=str(workdir))
    key = {"project_key": project_key, "session_id": sid}
    assert await store.load(key) == entries
    assert await store.load({**key, "subpath": "subagents/agent-a1"}) == sub

    assert await list_subagents_from_store(store, sid, directory=str(workdir)) == ["a1"]
    msgs = await get_subagent_messages_from_store(store, sid, "a1", directory=str(workdir))
    assert [m.uuid for m in msgs] == [sub[0]["uuid"]]

    await rename_session_via_store(store, sid, "Renamed", directory=str(workdir))
    await tag_session_via_store(store, sid, "important", directory=str(workdir))
    info = await get_session_info_from_store(store, sid, directory=str(workdir))
    assert info is not None and info.custom_title == "Renamed" and info.tag == "important"
    [listed] = await list_sessions_from_store(store, directory=str(workdir))
    assert listed.custom_title == "Renamed" and listed.tag == "important"

    await delete_session_via_store(store, sid, directory=str(workdir))
    assert await store.load(key) is None
    assert await store.list_subkeys(key) == []
    assert await list_sessions_from_store(store, directory=str(workdir)) == []
