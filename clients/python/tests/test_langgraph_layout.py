"""CtxSaver's own promises beyond LangGraph's suite: ref names for any
thread id, writes that arrive before their checkpoint, copies that share
commits, values stored once, and listing across threads."""

from __future__ import annotations

import base64
import json
import threading
import uuid
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

from ctx_client import Client
from ctx_client.langgraph import MAX_SEGMENT, CtxSaver, encode_segment
from ctx_client.langgraph._names import _escape, _unescape
from ctx_client.langgraph._serde import StrictSerializer
from ctx_client.langgraph._values import _Seen, _unchanged


@pytest.mark.parametrize(
    "text",
    ["", "t1", "child:abc", "a|b:c", "with space/and slash", "ünïcödé", "..", "x" * 40],
)
def test_segments_are_ref_names_and_round_trip(text: str) -> None:
    seg = encode_segment(text)
    assert len(seg) <= MAX_SEGMENT
    assert all(c.isalnum() or c in "._-" for c in seg), seg
    assert ".." not in seg
    assert _unescape(seg) == text


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("x_y-Z9", "x_y-Z9"),
        ("child:abc", "child.3aabc"),
        ("with space/and slash", "with.20space.2fand.20slash"),
        ("ünï", ".c3.bcn.c3.af"),
        ("a.b", "a.2eb"),
    ],
)
def test_escaping_is_the_layout_the_typescript_saver_shares(text: str, escaped: str) -> None:
    assert _escape(text) == escaped


def test_long_segments_are_hashed_and_distinct() -> None:
    a, b = "y" * 100, "y" * 99 + "z"
    assert encode_segment(a).startswith("h") and _unescape(encode_segment(a)) is None
    assert encode_segment(a) != encode_segment(b)


def _saver(client: Client) -> CtxSaver:
    return CtxSaver(client, prefix=f"lglayout-{uuid.uuid4().hex[:8]}")


def _put(saver: CtxSaver, thread: str, values: dict, parent: str | None = None, ns: str = ""):
    cp = empty_checkpoint()
    cp["channel_values"] = values
    cp["channel_versions"] = {k: 1 for k in values}
    conf = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
    if parent:
        conf["configurable"]["checkpoint_id"] = parent
    stored = saver.put(conf, cp, {"source": "loop", "step": 0}, dict(cp["channel_versions"]))
    return stored, cp["id"]


def test_writes_before_their_checkpoint_are_kept(client: Client) -> None:
    saver = _saver(client)
    thread = "early writes"
    cp = empty_checkpoint()
    conf = {"configurable": {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": cp["id"]}}
    saver.put_writes(conf, [("ch", "early")], "task-1")
    # Not a checkpoint yet: nothing to read.
    assert saver.get_tuple(conf) is None
    assert list(saver.list({"configurable": {"thread_id": thread}})) == []
    saver.put({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}, cp, {}, {})
    tup = saver.get_tuple(conf)
    assert tup is not None
    assert tup.pending_writes == [("task-1", "ch", "early")]


def test_unchanged_values_are_one_artifact_and_copies_share_commits(client: Client) -> None:
    saver = _saver(client)
    big = "x" * 10_000
    first, first_id = _put(saver, "src", {"big": big, "n": 1})
    cp = empty_checkpoint()
    cp["channel_values"] = {"big": big, "n": 2}
    cp["channel_versions"] = {"big": 1, "n": 2}
    second = saver.put(first, cp, {"source": "loop", "step": 1}, {"n": 2})
    names = saver._core.names

    def doc(thread: str, checkpoint_id: str) -> dict:
        tip = client.get_ref(names.checkpoint(thread, "", checkpoint_id))["target"]
        commit = client.get_commit(tip)
        return json.loads(client.download_artifact(commit["artifact_ref"]))

    d1, d2 = doc("src", first_id), doc("src", cp["id"])
    assert d1["values"]["big"][1] == d2["values"]["big"][1]
    assert d1["values"]["n"][1] != d2["values"]["n"][1]

    saver.copy_thread("src", "dst")
    for cid in (first_id, cp["id"]):
        assert (
            client.get_ref(names.checkpoint("dst", "", cid))["target"]
            == client.get_ref(names.checkpoint("src", "", cid))["target"]
        )
    assert saver.get_tuple({"configurable": {"thread_id": "dst"}}).checkpoint["id"] == cp["id"]
    assert second["configurable"]["checkpoint_id"] == cp["id"]


def test_list_without_a_thread_lists_every_thread(client: Client) -> None:
    saver = _saver(client)
    _put(saver, "one", {"a": 1})
    _put(saver, "two:with colon", {"a": 2}, ns="child:1")
    found = {
        (t.config["configurable"]["thread_id"], t.config["configurable"]["checkpoint_ns"])
        for t in saver.list(None)
    }
    assert found == {("one", ""), ("two:with colon", "child:1")}
    only = list(saver.list(None, filter={"step": 0}, limit=1))
    assert len(only) == 1


def test_an_appended_list_is_a_delta_on_its_parents_chain(client: Client) -> None:
    saver = _saver(client)
    names = saver._core.names
    first, first_id = _put(saver, "lists", {"msgs": ["a", "b"]})
    steps = [(first, first_id)]
    for i, value in enumerate((["a", "b", "c"], ["a", "b", "c"], ["z"])):
        cp = empty_checkpoint()
        cp["channel_values"] = {"msgs": value}
        cp["channel_versions"] = {"msgs": i + 2}
        stored = saver.put(steps[-1][0], cp, {"step": i + 1}, {"msgs": i + 2})
        steps.append((stored, cp["id"]))

    def stored(checkpoint_id: str) -> tuple[dict, dict]:
        tip = client.get_ref(names.checkpoint("lists", "", checkpoint_id))["target"]
        commit = client.get_commit(tip)
        return commit, json.loads(client.download_artifact(commit["artifact_ref"]))

    docs = [stored(cid) for _, cid in steps]
    slots = [doc["values"]["msgs"][1] for _, doc in docs]
    # A list that grew is committed in the put's batch, as the parent of
    # the document's commit ("^"); the same list again names its link.
    assert slots[0] == slots[1] == slots[3] == "^" and slots[2].startswith("ctx-")
    links = [c["parent"] if slot == "^" else slot for (c, _), slot in zip(docs, slots, strict=True)]
    # Such a document names where its LangGraph parent was ("pt").
    assert docs[1][1]["pt"] == client.get_ref(names.checkpoint("lists", "", first_id))["target"]
    assert "pt" not in docs[2][1]
    commits = [client.get_commit(link) for link in links]
    assert [d["values"]["msgs"][0] for _, d in docs] == ["ctx-list"] * 4
    # ["a","b"] a snapshot; + "c" a delta of one element on it; the same list
    # again is the same link; ["z"] is not an append: a snapshot on it.
    assert [c["commit_type"] for c in commits] == ["snapshot", "delta", "delta", "snapshot"]
    assert [c["message_count"] for c in commits] == [2, 1, 1, 1]
    assert links[2] == links[1]
    assert commits[1]["parent"] == links[0] and commits[3]["parent"] == links[1]
    fresh = CtxSaver(client, prefix=names.prefix)  # nothing cached: read through materialize
    got = [
        fresh.get_tuple({"configurable": {"thread_id": "lists", "checkpoint_id": cid}})
        for _, cid in steps
    ]
    assert [t.checkpoint["channel_values"]["msgs"] for t in got] == [
        ["a", "b"],
        ["a", "b", "c"],
        ["a", "b", "c"],
        ["z"],
    ]


class _Counting(StrictSerializer):
    """Counts what it serializes, by value."""

    def __init__(self) -> None:
        super().__init__()
        self.dumped: list[Any] = []

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        self.dumped.append(obj)
        return super().dumps_typed(obj)


def _grow(saver: CtxSaver, parent: Any, msgs: list[Any], version: int) -> Any:
    cp = empty_checkpoint()
    cp["channel_values"] = {"msgs": msgs}
    cp["channel_versions"] = {"msgs": version}
    return saver.put(parent, cp, {"step": version}, {"msgs": version})


def test_a_grown_list_serializes_only_what_is_new_or_changed(client: Client) -> None:
    serde = _Counting()
    saver = CtxSaver(client, prefix=f"lglayout-{uuid.uuid4().hex[:8]}", serde=serde)
    a, b = HumanMessage("a", id="1"), AIMessage("b", id="2")
    first, _ = _put(saver, "grow", {"msgs": [a, b]})
    # The same objects, one more: only it is serialized.
    serde.dumped.clear()
    c = HumanMessage("c", id="3")
    second = _grow(saver, first, [a, b, c], 2)
    assert [m for m in serde.dumped if isinstance(m, HumanMessage | AIMessage)] == [c]
    # Objects read back (a new graph run's state) are known as well.
    state = saver.get_tuple(second)
    assert state is not None
    read = state.checkpoint["channel_values"]["msgs"]
    serde.dumped.clear()
    d = AIMessage("d", id="4")
    third = _grow(saver, second, [*read, d], 3)
    assert [m for m in serde.dumped if isinstance(m, HumanMessage | AIMessage)] == [d]
    # An element given a new attribute value is serialized again, and
    # stored as it is now; so is a plain container, which may have changed
    # inside.
    read[0].content = "a, edited"
    serde.dumped.clear()
    fourth = _grow(saver, third, [*read, d], 4)
    assert read[0] in serde.dumped and read[1] not in serde.dumped
    fresh = CtxSaver(client, prefix=saver._core.names.prefix)
    got = fresh.get_tuple(fourth)
    assert got is not None
    assert [m.content for m in got.checkpoint["channel_values"]["msgs"]] == [
        "a, edited",
        "b",
        "c",
        "d",
    ]
    rows = [{"n": 1}]
    fifth = _grow(saver, fourth, rows, 5)
    rows[0]["n"] = 2
    sixth = _grow(saver, fifth, [*rows, {"n": 3}], 6)
    got = fresh.get_tuple(sixth)
    assert got is not None and got.checkpoint["channel_values"]["msgs"] == [{"n": 2}, {"n": 3}]


def test_objects_kept_for_the_next_put_do_not_pile_up(client: Client) -> None:
    # Each turn reads the list back as new objects; only the newest link's
    # are kept, not every turn's (they would stay alive with the cache).
    saver = _saver(client)
    config, _ = _put(saver, "turns", {"msgs": [HumanMessage("q0", id="q0")]})
    for i in range(1, 8):
        state = saver.get_tuple(config)
        assert state is not None
        msgs = state.checkpoint["channel_values"]["msgs"]
        assert [m.id for m in msgs] == [f"q{j}" for j in range(i)]
        config = _grow(saver, config, [*msgs, HumanMessage(f"q{i}", id=f"q{i}")], i + 1)
    assert len(saver._core.link_seen.items) == 1


def test_what_counts_as_unchanged() -> None:
    class Bare:
        pass

    bare, msg, text, rows = Bare(), HumanMessage("a", id="1"), "hi", [1]
    seen = {id(o): _Seen(o) for o in (bare, msg, text, rows)}
    assert all(_unchanged(o, seen[id(o)]) for o in (bare, msg, text))
    assert not _unchanged(rows, seen[id(rows)])  # a container may change inside
    assert not _unchanged(HumanMessage("a", id="1"), seen[id(msg)])  # another object
    bare.note = "added"  # type: ignore[attr-defined]
    msg.content = "b"
    assert not _unchanged(bare, seen[id(bare)]) and not _unchanged(msg, seen[id(msg)])


@pytest.mark.parametrize("cold", [False, True])
def test_the_delta_walk_crosses_documents_that_sit_on_their_links(
    client: Client, cold: bool
) -> None:
    # A graph with a DeltaChannel and a growing list: each put commits the
    # list's link and the document on it in one batch, so the document's
    # commit is not on its parent's tip. The walk follows "pt" across them
    # and gives the writes a saver without list links gives.
    def history(list_deltas: bool) -> dict:
        saver = CtxSaver(client, prefix=f"lgwalk-{uuid.uuid4().hex[:8]}", list_deltas=list_deltas)
        conf = {"configurable": {"thread_id": "walk", "checkpoint_ns": ""}}
        msgs: list[str] = []
        for step in range(4):
            msgs = [*msgs, f"m{step}"]
            cp = empty_checkpoint()
            cp["channel_values"] = {"msgs": msgs}
            cp["channel_versions"] = {"msgs": step + 1}
            conf = saver.put(conf, cp, {"source": "loop", "step": step}, {"msgs": step + 1})
            saver.put_writes(conf, [("d", f"w{step}"), ("d", f"x{step}")], f"task-{step}")
        if cold:
            saver = CtxSaver(client, prefix=saver._core.names.prefix, list_deltas=list_deltas)
        got = saver.get_delta_channel_history(config=conf, channels=["d"])
        return {ch: [w[1:] for w in h["writes"]] for ch, h in got.items()}

    linked = history(True)
    assert linked == history(False)
    assert linked == {"d": [("d", f"{p}{s}") for s in range(3) for p in "wx"]}


def test_writes_are_deltas_of_their_own_lines(client: Client) -> None:
    # A put_writes commits its writes alone, as a delta on the checkpoint's
    # tip: the document and the earlier writes are not copied. A saver
    # with nothing cached reads the document and every write back.
    saver = _saver(client)
    names = saver._core.names
    stored, cid = _put(saver, "deltas", {"n": 1})
    for k in range(3):
        saver.put_writes(stored, [("ch", f"v{k}")], f"task-{k}")
    tip = client.get_ref(names.checkpoint("deltas", "", cid))["target"]
    chain = client.history(tip, depth=10)["commits"]
    assert [c["commit_type"] for c in chain] == ["delta", "delta", "delta", "snapshot"]
    assert [c["checkpoint"] for c in chain] == ["tool_call"] * 3 + ["turn_boundary"]
    last = client.download_artifact(chain[0]["artifact_ref"])
    assert last.count(b"\n") == 1 and json.loads(last)[0] == "task-2"
    fresh = CtxSaver(client, prefix=names.prefix)
    got = fresh.get_tuple(stored)
    assert got is not None
    assert got.pending_writes == [(f"task-{k}", "ch", f"v{k}") for k in range(3)]


def test_a_put_does_not_wait_for_its_parents_writes_and_keeps_the_head(client: Client) -> None:
    # ADR 0008 v4: LangGraph sends a checkpoint's writes and the next put
    # from background threads. The put goes at once, the writes still on
    # their way; they land on the parent's ref and leave the head where the
    # put moved it (their head move is `skip`, the put's `overwrite`).
    saver = _saver(client)
    names = saver._core.names
    stored, c1 = _put(saver, "no wait", {"n": 1})
    held, release = threading.Event(), threading.Event()
    send = client.send

    def held_send(call: Any) -> Any:
        if threading.current_thread().name == "writes" and call.path == "/v1/batch":
            held.set()
            assert release.wait(60)
        return send(call)

    client.send = held_send  # type: ignore[method-assign]
    writes = threading.Thread(
        name="writes", target=saver.put_writes, args=(stored, [("ch", "late")], "task-1")
    )
    writes.start()
    assert held.wait(30), "the writes reached the client"
    put: dict[str, Any] = {}
    child = threading.Thread(
        target=lambda: put.update(done=_put(saver, "no wait", {"n": 2}, parent=c1))
    )
    child.start()
    child.join(10)
    ended = not child.is_alive()
    release.set()
    writes.join(30)
    child.join(30)
    assert ended, "the put waited for its parent's writes"
    _, c2 = put["done"]
    head = client.get_ref(names.head("no wait", ""))["target"]
    assert head == client.get_ref(names.checkpoint("no wait", "", c2))["target"]
    fresh = CtxSaver(client, prefix=names.prefix)
    latest = fresh.get_tuple({"configurable": {"thread_id": "no wait", "checkpoint_ns": ""}})
    assert latest is not None and latest.config["configurable"]["checkpoint_id"] == c2
    assert latest.checkpoint["channel_values"] == {"n": 2}
    parent = fresh.get_tuple(stored)
    assert parent is not None and parent.pending_writes == [("task-1", "ch", "late")]


def test_documents_of_version_2_still_read(client: Client) -> None:
    # Before writes were deltas, every commit of a checkpoint held its
    # whole document (no trailing newline) with the writes merged in.
    saver = _saver(client)
    names = saver._core.names
    stored, cid = _put(saver, "old", {"n": 1})
    tip = client.get_ref(names.checkpoint("old", "", cid))["target"]
    doc = json.loads(client.download_artifact(client.get_commit(tip)["artifact_ref"]))
    typ, data = saver.serde.dumps_typed("old write")
    doc["v"] = 2
    doc["writes"] = [["task-1", 0, "ch", typ, base64.b64encode(data).decode(), ""]]
    old = client.checkpoint(
        principal="someone",
        template="langgraph",
        format="raw",
        delta=json.dumps(doc, separators=(",", ":"), sort_keys=True),
        parent=tip,
        commit_type="snapshot",
        checkpoint="tool_call",
    )
    client.set_ref(names.checkpoint("old", "", cid), old["id"], tip)
    got = CtxSaver(client, prefix=names.prefix).get_tuple(stored)
    assert got is not None and got.pending_writes == [("task-1", "ch", "old write")]


@pytest.mark.parametrize("page", [256, 5, 2, 1])
def test_a_cold_delta_walk_is_walked_by_the_server_and_equals_the_warm_one(
    client: Client, page: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A DeltaChannel-like thread (no list values: the messages live in the
    # writes). A saver that has not seen it asks the server for the chain
    # joined, a page of commits a request; pages that cut a checkpoint's
    # writes from its document are put back together.
    from ctx_client.langgraph import _delta

    monkeypatch.setattr(_delta, "JOIN_PAGE", page)
    warm = _saver(client)
    conf = {"configurable": {"thread_id": "joined", "checkpoint_ns": ""}}
    for step in range(7):
        cp = empty_checkpoint()
        cp["channel_values"] = {"n": step}
        if step == 2:
            cp["channel_values"]["d"] = "seed"  # a seed: the walk stops here
        cp["channel_versions"] = {"n": step + 1}
        conf = warm.put(conf, cp, {"source": "loop", "step": step}, {"n": step + 1})
        for task in range(2):
            warm.put_writes(conf, [("d", f"{step}.{task}"), ("e", step)], f"t{task}")
    want = warm.get_delta_channel_history(config=conf, channels=["d", "e"])
    assert [w[2] for w in want["d"]["writes"]] == [f"{s}.{t}" for s in range(2, 6) for t in (0, 1)]
    assert "seed" in want["d"] and "seed" not in want["e"]

    cold = CtxSaver(client, prefix=warm._core.names.prefix)
    joined: list[int] = []
    real = cold._core.walk_joined

    def spy(*args):  # type: ignore[no-untyped-def]
        got = yield from real(*args)
        joined.append(got is not None)
        return got

    monkeypatch.setattr(cold._core, "walk_joined", spy)
    assert cold.get_delta_channel_history(config=conf, channels=["d", "e"]) == want
    assert joined == [True]
    # An old checkpoint's walk, cold.
    old = {"configurable": {**conf["configurable"], "checkpoint_id": want_id(warm, 4)}}
    again = CtxSaver(client, prefix=warm._core.names.prefix)
    assert again.get_delta_channel_history(config=old, channels=["d"]) == (
        warm.get_delta_channel_history(config=old, channels=["d"])
    )


def want_id(saver: CtxSaver, step: int) -> str:
    """The id of the checkpoint of ``step`` in the thread "joined"."""
    for t in saver.list({"configurable": {"thread_id": "joined"}}):
        if t.metadata["step"] == step:
            return t.config["configurable"]["checkpoint_id"]
    raise AssertionError(step)
