"""The rest of the API through the client: summaries, compaction, branches
(context folding), workspaces, direct uploads. One method per operation,
named by its operationId; each is exercised here or in test_client.py."""

from __future__ import annotations

import inspect
import json
from typing import Any

import anyio
import httpx
import pytest

from ctx_client import (
    AsyncClient,
    Client,
    ConflictError,
    CtxError,
    GoneError,
    InvalidError,
    NotFoundError,
    _generated,
    _routes,
)
from ctx_client._core import Call, parse_json, query
from ctx_client.client import _async, _sync, every_operation, route_of

TURN = (
    '{"type":"user","message":{"role":"user","content":"Fix the flaky test"}}\n'
    '{"type":"assistant","message":{"role":"assistant","content":'
    '[{"type":"text","text":"Done: the clock is now injected."}]}}\n'
)


def test_every_route_function_is_a_method_of_both_clients() -> None:
    routes = {
        name
        for name, f in inspect.getmembers(_routes, inspect.isfunction)
        if f.__module__ == _routes.__name__
        and inspect.signature(f).return_annotation.startswith("Call[")
    }
    assert len(routes) >= 29
    for name in routes:
        assert callable(getattr(Client, name)), name
        assert inspect.iscoroutinefunction(getattr(AsyncClient, name)), name


# The methods made from a route that are not an operation: each is a
# convenience over the operation named, not a second name for it.
CONVENIENCES = {"branch_fail": "branch_return"}


def test_every_operation_of_the_document_is_a_method_of_both_clients(client: Client) -> None:
    served = {
        op["operationId"]
        for item in client.openapi_json(all=True)["paths"].values()
        for op in item.values()
        if isinstance(op, dict) and "operationId" in op
    }
    assert len(served) >= 50
    for op in served:
        for cls in (Client, AsyncClient):
            method = vars(cls).get(op)
            assert method is not None, f"{cls.__name__} has no method {op}"
            assert method.__wrapped__ is route_of(op), f"{cls.__name__}.{op} sends another route"
        assert inspect.iscoroutinefunction(vars(AsyncClient)[op]), op
        shaped = getattr(_routes, op, None)
        if shaped is not None:
            assert f"api.{op}(" in inspect.getsource(shaped), (
                f"_routes.{op} sends another operation"
            )
    for cls in (Client, AsyncClient):
        made = {
            name
            for name, m in vars(cls).items()
            if inspect.isfunction(m) and hasattr(m, "__wrapped__")
        }
        assert made - served == set(CONVENIENCES), f"{cls.__name__}: methods named by no operation"
    for name, op in CONVENIENCES.items():
        assert f"api.{op}(" in inspect.getsource(getattr(_routes, name)), name


def test_an_operation_routes_does_not_shape_is_a_method_sent_as_generated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def probe_things(name: str, *, limit: int | None = None) -> Call[Any]:
        return Call("GET", f"/v1/probe/{name}", parse_json, params=query({"limit": limit}))

    monkeypatch.setitem(_generated.OPERATIONS, "probe_things", ("GET", "/v1/probe/{name}"))
    monkeypatch.setattr(_generated, "probe_things", probe_things, raising=False)
    seen: list[tuple[str, str, str]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path, request.url.query.decode()))
        return httpx.Response(200, json={"things": []})

    sync = every_operation(_sync)(type("Probed", (Client,), {}))
    with sync("http://ctx.test", transport=httpx.MockTransport(answer)) as c:
        assert c.probe_things("a", limit=2) == {"things": []}

    async def via_async() -> None:
        aclient = every_operation(_async)(type("AsyncProbed", (AsyncClient,), {}))
        async with aclient("http://ctx.test", transport=httpx.MockTransport(answer)) as c:
            assert await c.probe_things("b") == {"things": []}

    anyio.run(via_async)
    assert seen == [("GET", "/v1/probe/a", "limit=2"), ("GET", "/v1/probe/b", "")]


def test_summaries_and_compaction(client: Client, unique: str) -> None:
    ref = f"sessions/{unique}"
    c = client.checkpoint(
        principal=f"py-{unique}",
        template="t",
        format="claude-code-v1",
        delta=TURN,
        ref=ref,
        expected=None,
    )
    page = client.missing_summaries(limit=1000)
    assert "commits" in page
    done = client.summarize(c["id"])
    assert done["summary"]
    with pytest.raises(ConflictError):
        client.summarize(c["id"])
    assert client.summarize(c["id"], force=True)["id"] == c["id"]
    compacted = client.compact(c["id"], summarizer="extractive", ref=ref, expected=c["id"])
    assert compacted["commit"]["parent"] == c["id"]
    assert compacted["commit"]["commit_type"] == "compaction"
    assert client.get_ref(ref)["target"] == compacted["commit"]["id"]
    # Evicting before the compaction drops c's delta, keeps its metadata.
    with pytest.raises(InvalidError) as bad:
        client.evict_ref(ref, c["id"])
    assert bad.value.field == "before"
    evicted = client.evict_ref(ref, compacted["commit"]["id"])
    assert (evicted["before"], evicted["commits"]) == (compacted["commit"]["id"], 1)
    with pytest.raises(GoneError) as e:
        client.materialize(compacted["commit"]["id"], stop="root")
    assert e.value.status == 410 and c["id"] in e.value.message
    assert client.materialize(compacted["commit"]["id"])["artifact_ref"]
    log = client.history(compacted["commit"]["id"])["commits"]
    assert log[1]["id"] == c["id"] and log[1]["summary"]
    # Behind a compaction written by hand, which covers nothing it did not
    # say: a 409 naming force, until force.
    hand = client.checkpoint(
        parent=compacted["commit"]["id"],
        principal="alice",
        template="t",
        format="raw",
        delta="user: more\n",
        ref=ref,
        expected=compacted["commit"]["id"],
    )
    top = client.checkpoint(
        parent=hand["id"],
        principal="alice",
        template="t",
        format="raw",
        delta="summary: written by hand\n",
        commit_type="compaction",
        ref=ref,
        expected=hand["id"],
    )
    with pytest.raises(ConflictError) as refused:
        client.evict_ref(ref, top["id"])
    assert refused.value.field == "force"
    assert client.evict_ref(ref, top["id"], force=True)["commits"] >= 1
    compacted = {"commit": top}
    gone = client.delete_ref(ref, expected=compacted["commit"]["id"])
    assert gone["target"] == compacted["commit"]["id"]
    with pytest.raises(NotFoundError):
        client.get_ref(ref)
    # The commits stay.
    assert client.get_commit(c["id"])["id"] == c["id"]


def test_branches(client: Client, unique: str) -> None:
    session = f"s-{unique}"
    b = client.branch_create(session, "look something up", budget=1000, timeout_seconds=600)
    assert b["branch_id"].startswith("br-") and b["depth"] == 1
    assert client.branch_status(b["branch_id"])["status"] in ("created", "active")
    assert client.branch_status_of_session(session)
    r = client.branch_return(b["branch_id"], "found it")
    assert r["success"] and r["message"] == "found it"
    with pytest.raises(ConflictError):
        client.branch_return(b["branch_id"], "again")
    b2 = client.branch_create(session, "another")
    ended = client.session_end(session)
    assert b2["branch_id"] in ended["returned"] + ended["failed"]
    # A session name with '/' is one path segment of the end route.
    nested = f"team/{session}"
    b3 = client.branch_create(nested, "nested")
    assert client.session_end(nested)["returned"] == [b3["branch_id"]]


def test_memories(client: Client, unique: str) -> None:
    session = f"m-{unique}"
    first = client.branch_create(session, f"render the {unique} charts")
    client.branch_fail(first["branch_id"], "matplotlib ran out of memory on 2M points")
    found = client.memory_search(f"{unique} charts", kind="anti_pattern")["memories"]
    assert [m["provenance"]["branch_id"] for m in found] == [first["branch_id"]]
    assert found[0]["confidence"] == 0.8 and found[0]["score"] > 0
    assert "ran out of memory" in found[0]["content"]
    again = client.branch_create(session, f"render the {unique} charts", inject_memories=True)
    assert [m["id"] for m in again["memories"]] == [found[0]["id"]]
    with pytest.raises(InvalidError) as bad:
        client.memory_search(" ")
    assert bad.value.field == "q"


def test_workspaces(client: Client, unique: str) -> None:
    ws = f"ws-{unique}"
    v1 = client.put_file(ws, "notes/a.md", b"first\n")
    assert v1["size"] == 6
    v2 = client.put_file(ws, "notes/a.md", b"second\n", if_match=v1["version"])
    with pytest.raises(CtxError) as stale:
        client.put_file(ws, "notes/a.md", b"third\n", if_match=v1["version"])
    assert stale.value.status == 412 and stale.value.kind == "conflict"
    assert client.get_file(ws, "notes/a.md") == b"second\n"
    files = client.list_files(ws, prefix="notes/")["files"]
    assert [(f["path"], f["version"]) for f in files] == [("notes/a.md", v2["version"])]
    client.append_file(ws, "log.jsonl", '{"event":"one"}\n')
    with pytest.raises(InvalidError):
        client.append_file(ws, "log.jsonl", "not json\n")
    assert isinstance(client.read_context(ws), dict)
    client.delete_file(ws, "notes/a.md", if_match=v2["version"])
    with pytest.raises(NotFoundError):
        client.get_file(ws, "notes/a.md")


def test_direct_uploads_are_refused_in_embedded_mode_with_the_field(client: Client) -> None:
    art = client.upload_artifact(b"x")["ref"]
    try:
        up = client.upload_url(art, 1)
    except InvalidError as e:  # embedded storage takes no direct uploads
        assert e.status == 400
    else:  # aws mode: a presigned URL
        assert up["url"].startswith("http")


def test_gc_pages_report_and_keep_what_is_young(client: Client) -> None:
    client.upload_artifact(b"an orphan, but a young one")
    report = client.gc(dry_run=True, limit=1000)
    assert report["dry_run"] is True
    assert report["removed"] == [], "nothing younger than the grace period goes"
    while report.get("next"):
        report = client.gc(cursor=report["next"])
        assert report["removed"] == []


def test_erase_and_pins(client: Client) -> None:
    tip = client.checkpoint(
        delta="doomed turn\n", principal="py", template="t", format="raw", session_id="py-doomed"
    )["id"]
    client.set_pin("session", "py-doomed")
    assert {"kind": "session", "name": "py-doomed"} in client.list_pins()["pins"]
    client.delete_pin("session", "py-doomed")
    erased = client.erase_session("py-doomed")
    assert erased["commits"] == 1
    with pytest.raises(NotFoundError):
        client.get_commit(tip)
    with pytest.raises(NotFoundError):
        client.erase_session("py-doomed")


def test_a_principal_erase(client: Client) -> None:
    tip = client.checkpoint(
        delta="to be forgotten\n", principal="py/leaver", template="t", format="raw"
    )["id"]
    erased = client.erase_principal("py/leaver")
    assert erased["commits"] == 1
    with pytest.raises(NotFoundError):
        client.get_commit(tip)
    with pytest.raises(NotFoundError):
        client.erase_principal("py/leaver")


def test_an_agents_live_context(client: Client) -> None:
    agent = "py-agent"
    assert client.context_window(agent)["message_count"] == 0, "a fresh agent: empty"
    client.patch_agent(agent, window_seconds=3600)
    assert client.get_agent(agent)["window_seconds"] == 3600
    client.checkpoint(
        delta='[{"role":"user","content":"hello"}]',
        principal=agent,
        template="t",
        format="openai-chat-v1",
        thread_id="t1",
    )
    window = client.context_window(agent, thread_id="t1")
    assert window["message_count"] == 1 and window["reason"] == "window"
    save = client.save_context(agent, description="before clear")
    assert [s["save_id"] for s in client.list_saves(agent)["saves"]][0] == save["save_id"]
    assert client.get_save(agent, save["save_id"])["message_count"] == 1
    client.clear_context(agent)
    assert client.context_window(agent)["message_count"] == 0
    client.restore_save(agent, save["save_id"])
    assert client.context_window(agent)["message_count"] == 1
    restored = client.restore_working_context(agent, raw_tail_turns=2)
    assert restored["source"] == "rebuilt"


def test_an_agents_assembled_context(client: Client) -> None:
    agent = "py-assembler"
    client.put_file("py-docs", "guide.md", b"Read the guide.")
    settings = client.patch_agent(agent, system_prompt="You are tested.", docs_workspace="py-docs")
    assert settings["system_prompt"] == "You are tested."
    assert settings["docs_workspace"] == "py-docs"
    for thread, text in [("t1", "hello"), ("t2", "elsewhere")]:
        client.checkpoint(
            delta=json.dumps([{"role": "user", "content": text}]),
            principal=agent,
            template="t",
            format="openai-chat-v1",
            thread_id=thread,
        )
    running = client.put_process(agent, "job-1", "indexing the repo", thread_id="t1")
    assert running["process_id"] == "job-1"
    assert [p["process_id"] for p in client.list_processes(agent)["processes"]] == ["job-1"]
    ctx = client.assemble_context(agent, "t1")
    assert ctx["system_prompt"] == "You are tested."
    assert [f["path"] for f in ctx["docs"]["files"]] == ["guide.md"]
    assert [t["thread_id"] for t in ctx["status"]["threads"]] == ["t2"]
    assert ctx["status"]["processes"][0]["description"] == "indexing the repo"
    conv = ctx["conversation"]
    assert conv["format"] == "openai-chat-v1" and conv["text"] is not None
    messages = json.loads(conv["text"])
    assert [m["role"] for m in messages] == ["system", "system", "system", "user"]
    assert messages[0]["content"] == "You are tested."
    assert "Read the guide." in messages[1]["content"]
    assert "indexing the repo" in messages[2]["content"]
    assert messages[3]["content"] == "hello"
    client.delete_process(agent, "job-1")
    assert client.list_processes(agent)["processes"] == []
    with pytest.raises(NotFoundError):
        client.delete_process(agent, "job-1")
    with pytest.raises(InvalidError) as bad:
        client.put_process(agent, "job-2", "")
    assert bad.value.field == "description"
