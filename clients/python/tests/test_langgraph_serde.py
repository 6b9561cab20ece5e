"""The savers' serializer: plain data, LangChain's messages and LangGraph's
own types are read back; the user's types when allowed; any other type a
blob names is refused with an error that names it, before anything is
imported or called; a blob that cannot be decoded is an error too, never
None (ADR 0008, "Serialization")."""

from __future__ import annotations

import dataclasses
import enum
import operator
import shlex
import time
import typing
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, TypedDict

import ormsgpack
import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    ChatMessage,
    ChatMessageChunk,
    FunctionMessage,
    FunctionMessageChunk,
    HumanMessage,
    HumanMessageChunk,
    RemoveMessage,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
)
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Interrupt, Overwrite, Send, TimeoutPolicy, interrupt
from pydantic import BaseModel

from ctx_client import AsyncClient, Client
from ctx_client.langgraph import (
    AsyncCtxSaver,
    CheckpointDecodeError,
    CtxSaver,
    DisallowedTypeError,
    StrictSerializer,
)


class Note(BaseModel):
    text: str
    tags: list[str] = []


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Color(enum.Enum):
    RED = "red"


def _ext(code: int, tup: tuple[Any, ...], put: bytes | None = None) -> bytes:
    """A msgpack blob of one extension as LangGraph's serializer writes
    them: ``code`` and the packed ``(module, name, argument...)``; with
    ``put``, the string MARK in it is that blob instead."""
    data = ormsgpack.packb(tup)
    if put is not None:
        data = data.replace(ormsgpack.packb(MARK), put)
    return ormsgpack.packb(ormsgpack.Ext(code, data))


MARK = "ctx-test: the crafted blob goes here"


# Blobs that name a callable which, called with their argument, creates
# the file ``f``: what an attacker who can write checkpoint bytes would
# store (CVE-2026-28277).
CALLABLES: dict[str, Callable[[str], bytes]] = {
    "os.system": lambda f: _ext(0, ("os", "system", f"touch {shlex.quote(f)}")),
    "builtins.eval": lambda f: _ext(0, ("builtins", "eval", f"open({f!r}, 'w').close()")),
    "subprocess.Popen": lambda f: _ext(1, ("subprocess", "Popen", [["touch", f]])),
}


def _ran(f: Path, result: Any = None) -> bool:
    if hasattr(result, "wait"):
        result.wait()  # a Popen
    time.sleep(0.2)  # anything started in the background has finished
    return f.exists()


@pytest.mark.parametrize("name", sorted(CALLABLES))
def test_the_crafted_blobs_run_code_on_langgraphs_permissive_default(
    name: str, tmp_path: Path
) -> None:
    # The reference: what the tests below refuse really is live.
    f = tmp_path / "ran"
    stock = JsonPlusSerializer(allowed_msgpack_modules=True)
    assert _ran(f, stock.loads_typed(("msgpack", CALLABLES[name](str(f)))))


@pytest.mark.parametrize("name", sorted(CALLABLES))
def test_a_blob_naming_a_callable_is_refused_and_nothing_runs(name: str, tmp_path: Path) -> None:
    f = tmp_path / "ran"
    blob = CALLABLES[name](str(f))
    with pytest.raises(DisallowedTypeError, match=name.replace(".", r"\.")) as e:
        StrictSerializer().loads_typed(("msgpack", blob))
    assert f"{e.value.module}.{e.value.name}" == name
    # Nested in plain data and inside an allowed type, the same.
    nested = ormsgpack.packb({"a": [1, {"b": MARK}]}).replace(ormsgpack.packb(MARK), blob)
    with pytest.raises(DisallowedTypeError, match=name.replace(".", r"\.")):
        StrictSerializer().loads_typed(("msgpack", nested))
    message = ("langchain_core.messages.human", "HumanMessage", {"content": MARK}, "x")
    inside = _ext(5, message, put=blob)
    with pytest.raises(DisallowedTypeError, match=name.replace(".", r"\.")):
        StrictSerializer().loads_typed(("msgpack", inside))
    assert not _ran(f)


def _round_trip(serde: JsonPlusSerializer, value: Any) -> Any:
    return serde.loads_typed(serde.dumps_typed(value))


def test_plain_data_messages_and_langgraphs_own_types_round_trip() -> None:
    serde = StrictSerializer()
    plain = {"s": "x", "i": 1, "f": 1.5, "b": True, "n": None, "l": [1, [2, {"k": b"v"}]]}
    assert _round_trip(serde, plain) == plain
    assert _round_trip(serde, b"raw") == b"raw"
    assert _round_trip(serde, None) is None
    messages = [
        HumanMessage("h", id="1"),
        HumanMessageChunk(content="h"),
        AIMessage("a", tool_calls=[{"name": "t", "args": {"q": 1}, "id": "c1"}]),
        AIMessageChunk(content="a"),
        SystemMessage("s"),
        SystemMessageChunk(content="s"),
        ToolMessage("t", tool_call_id="c1"),
        ToolMessageChunk(content="t", tool_call_id="c1"),
        FunctionMessage(content="f", name="fn"),
        FunctionMessageChunk(content="f", name="fn"),
        ChatMessage(content="c", role="critic"),
        ChatMessageChunk(content="c", role="critic"),
        RemoveMessage(id="1"),
    ]
    back = _round_trip(serde, messages)
    assert back == messages
    assert [type(m) for m in back] == [type(m) for m in messages]
    langgraph = [
        Send("node", {"arg": 1}),
        Send("node", 2, timeout=TimeoutPolicy(run_timeout=5.0)),
        Overwrite(value=[1]),
        Interrupt(value="why?", id="i1"),
        Command(resume="yes", update={"k": 1}, goto="node"),
        _DeltaSnapshot([HumanMessage("h")]),
    ]
    back = _round_trip(serde, langgraph)
    assert back == langgraph
    assert [type(v) for v in back] == [type(v) for v in langgraph]


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (Note(text="n"), f"{Note.__module__}.Note"),
        (Point(1, 2), f"{Point.__module__}.Point"),
        (Color.RED, f"{Color.__module__}.Color"),
        ({"when": datetime(2026, 1, 2)}, "datetime.datetime"),
        ([{1, 2}], "builtins.set"),
        ([[uuid.UUID(int=1)]], "uuid.UUID"),
    ],
)
def test_other_types_are_refused_by_name(value: Any, named: str) -> None:
    blob = StrictSerializer().dumps_typed(value)
    with pytest.raises(DisallowedTypeError, match=named.replace(".", r"\.")):
        StrictSerializer().loads_typed(blob)


def test_allowed_types_round_trip() -> None:
    serde = StrictSerializer(allowed_types=[Note, Point, Color, datetime, set])
    value = {
        "note": Note(text="n", tags=["a"]),
        "point": Point(1, 2),
        "color": Color.RED,
        "when": datetime(2026, 1, 2, 3, 4),
        "seen": {1, 2},
    }
    assert _round_trip(serde, value) == value
    # As (module, name) too, as LangGraph's allowed_msgpack_modules takes them.
    serde = StrictSerializer(allowed_types=[(Point.__module__, "Point")])
    assert _round_trip(serde, Point(3, 4)) == Point(3, 4)


def test_langgraphs_own_allowlist_api_extends_it() -> None:
    # What LangGraph calls with a graph's schema types (BaseCheckpointSaver.
    # with_allowlist, under LANGGRAPH_STRICT_MSGPACK).
    serde = StrictSerializer()
    more = serde.with_msgpack_allowlist([(Note.__module__, "Note")])
    assert _round_trip(more, Note(text="n")) == Note(text="n")
    with pytest.raises(DisallowedTypeError):
        _round_trip(serde, Note(text="n"))


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (("msgpack", b"\xc1"), "cannot be decoded"),
        (("msgpack", b"\x92\x01"), "cannot be decoded"),
        (("msgpack", ormsgpack.packb([ormsgpack.Ext(42, b"")])), "extension 42"),
        (("msgpack", ormsgpack.packb(ormsgpack.Ext(0, b"\xc1"))), "cannot be decoded"),
        (("msgpack", _ext(0, ("os",))), "cannot be decoded"),
        # Allowed, but it cannot be rebuilt: an error, not None nor the raw data.
        (
            ("msgpack", _ext(1, ("langgraph.types", "Send", ["only the node"]))),
            "langgraph.types.Send",
        ),
        (("msgpack", _ext(2, ("langgraph.types", "Interrupt", {"nope": 1}))), "Interrupt"),
        (("msgpack", _ext(5, ("langgraph.types", "NoSuchType", {}, "x"))), "NoSuchType"),
        (("json", b'{"lc": 2, "type": "constructor", "id": ["os", "system"]}'), "'json'"),
        (("pickle", b"cos\nsystem\n."), "'pickle'"),
    ],
)
def test_a_blob_that_cannot_be_read_back_is_an_error(data: tuple[str, bytes], says: str) -> None:
    serde = StrictSerializer(allowed_types=[("langgraph.types", "NoSuchType")])
    with pytest.raises(CheckpointDecodeError, match=r"(?s).*" + says.replace(".", r"\.")):
        serde.loads_typed(data)


def test_a_list_value_reads_back_element_by_element() -> None:
    # How the savers read a list stored as a chain of elements: each its
    # own blob, read with the same checks as loads_typed.
    serde = StrictSerializer()
    values = [HumanMessage("h", id="1"), None, b"raw", {"k": [1, 2]}, AIMessage("a")]
    back = serde.loads_list([serde.dumps_typed(v) for v in values])
    assert back == values
    assert [type(v) for v in back] == [type(v) for v in values]
    assert serde.loads_list([]) == []


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (("msgpack", b"\x92\x01"), "cannot be decoded"),
        (("msgpack", b""), "cannot be decoded"),
        (("msgpack", _ext(1, ("langgraph.types", "Send", ["only the node"]))), "Send"),
        (("msgpack", StrictSerializer().dumps_typed(Note(text="n"))[1]), "Note"),
        (("pickle", b"cos\nsystem\n."), "'pickle'"),
    ],
)
def test_one_bad_element_makes_the_list_an_error(bad: tuple[str, bytes], says: str) -> None:
    # Never the list without it.
    serde = StrictSerializer()
    good = serde.dumps_typed(HumanMessage("h"))
    with pytest.raises(CheckpointDecodeError, match=r"(?s).*" + says):
        serde.loads_list([good, bad, good])
    # The serializer reads the next list as if nothing had failed.
    assert serde.loads_list([good, good]) == [HumanMessage("h"), HumanMessage("h")]


def test_a_truncated_element_does_not_swallow_the_next_one() -> None:
    # Joined into one msgpack array these two would decode as [[1, 2], 3]:
    # two values for two elements, both wrong. Each is read alone.
    serde = StrictSerializer()
    with pytest.raises(CheckpointDecodeError, match="cannot be decoded"):
        serde.loads_list([("msgpack", b"\x92\x01"), ("msgpack", b"\x02\x03")])


def _message_blob() -> bytes:
    return StrictSerializer().dumps_typed(HumanMessage("h", id="1"))[1]


def _payload_with(tail: bytes) -> bytes:
    """A message's blob whose extension payload has ``tail`` after it."""
    code, payload = ormsgpack.unpackb(_message_blob(), ext_hook=lambda c, p: (c, p))
    return ormsgpack.packb(ormsgpack.Ext(code, payload + tail))


@pytest.mark.parametrize(
    "blob",
    [
        b"\x02\x03",  # reads as 2 to a decoder that stops after one value
        b"\x02\xc1",  # a byte no msgpack value starts with
        _message_blob() + b"\x00",
        _message_blob() + _message_blob(),
        _payload_with(b"\x00"),
        _payload_with(ormsgpack.packb("more")),
        # What the reader itself appends to find the end (a bin of 16 bytes).
        b"\x02\xc4\x10" + bytes(16),
    ],
)
def test_bytes_after_a_value_are_an_error(blob: bytes) -> None:
    # Never the value with the rest dropped: one blob is one value.
    serde = StrictSerializer()
    with pytest.raises(CheckpointDecodeError, match="after its value"):
        serde.loads_typed(("msgpack", blob))
    with pytest.raises(CheckpointDecodeError, match="after its value"):
        serde.loads_list([serde.dumps_typed(1), ("msgpack", blob)])
    # The same value without them reads back.
    assert serde.loads_typed(("msgpack", _message_blob())) == HumanMessage("h", id="1")


@dataclasses.dataclass
class _Counted:
    made: typing.ClassVar[int] = 0
    n: int

    def __post_init__(self) -> None:
        type(self).made += 1


def test_a_value_with_bytes_after_it_is_not_rebuilt_twice() -> None:
    # Telling "bytes after the value" from a broken blob reads the blob's
    # structure, not its types: an allowed constructor runs once.
    serde = StrictSerializer(allowed_types=[_Counted])
    blob = serde.dumps_typed(_Counted(1))[1]
    _Counted.made = 0
    with pytest.raises(CheckpointDecodeError, match="after its value"):
        serde.loads_typed(("msgpack", blob + b"\xc1"))  # a byte no value starts with
    assert _Counted.made == 1


def test_a_method_other_than_langgraphs_is_refused() -> None:
    blob = _ext(3, ("datetime", "datetime", "x", "now"))
    with pytest.raises(DisallowedTypeError, match=r"datetime\.datetime\.now"):
        StrictSerializer(allowed_types=[datetime]).loads_typed(("msgpack", blob))


# -- on the savers ------------------------------------------------------------


class _Crafting(JsonPlusSerializer):
    """LangGraph's serializer, but every string MARK is written as ``blob``
    (a whole msgpack object): how a crafted checkpoint gets into the store."""

    def __init__(self, blob: bytes) -> None:
        super().__init__()
        self.blob = blob

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        typ, data = super().dumps_typed(obj)
        return typ, data.replace(ormsgpack.packb(MARK), self.blob)


def _crafted(saver: CtxSaver, where: str) -> dict[str, Any]:
    """Puts a checkpoint with MARK in ``where``; its config."""
    cp = empty_checkpoint()
    values: dict[str, Any] = {
        "value": {"small": MARK},
        "large value": {"big": "x" * 4096, "there": MARK},
        "list element": [HumanMessage("hi"), MARK],
    }
    cp["channel_values"] = {"v": values[where]} if where in values else {"v": 1}
    cp["channel_versions"] = {"v": 1}
    metadata: dict[str, Any] = {"source": "loop", "step": 0}
    if where == "metadata":
        metadata["note"] = MARK
    thread = {"configurable": {"thread_id": f"crafted {where}", "checkpoint_ns": ""}}
    conf = saver.put(thread, cp, metadata, {"v": 1})
    if where == "write":
        saver.put_writes(conf, [("v", MARK)], "task-1")
    return conf


WHERE = ["value", "large value", "list element", "write", "metadata"]


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("name", sorted(CALLABLES))
def test_a_crafted_checkpoint_naming_a_callable_is_refused_and_nothing_runs(
    client: Client, tmp_path: Path, name: str, where: str
) -> None:
    f = tmp_path / "ran"
    prefix = f"lgserde-{uuid.uuid4().hex[:8]}"
    conf = _crafted(
        CtxSaver(client, prefix=prefix, serde=_Crafting(CALLABLES[name](str(f)))), where
    )
    saver = CtxSaver(client, prefix=prefix)  # the default: a fresh saver loads it
    with pytest.raises(DisallowedTypeError, match=name.replace(".", r"\.")):
        if where == "metadata":
            list(saver.list(None, filter={"source": "loop"}))
        else:
            saver.get_tuple(conf)
    assert not _ran(f)


@pytest.mark.parametrize("where", WHERE)
async def test_the_async_saver_refuses_it_too(
    client: Client, aclient: AsyncClient, tmp_path: Path, where: str
) -> None:
    f = tmp_path / "ran"
    prefix = f"lgserde-{uuid.uuid4().hex[:8]}"
    conf = _crafted(
        CtxSaver(client, prefix=prefix, serde=_Crafting(CALLABLES["os.system"](str(f)))), where
    )
    saver = AsyncCtxSaver(aclient, prefix=prefix)
    with pytest.raises(DisallowedTypeError, match=r"os\.system"):
        if where == "metadata":
            [t async for t in saver.alist(None, filter={"source": "loop"})]
        else:
            await saver.aget_tuple(conf)
    assert not _ran(f)


def test_an_undecodable_checkpoint_is_an_error_not_none(client: Client) -> None:
    prefix = f"lgserde-{uuid.uuid4().hex[:8]}"
    conf = _crafted(CtxSaver(client, prefix=prefix, serde=_Crafting(b"\xc1")), "value")
    with pytest.raises(CheckpointDecodeError, match="cannot be decoded"):
        CtxSaver(client, prefix=prefix).get_tuple(conf)


def _put_value(saver: CtxSaver, value: Any) -> dict[str, Any]:
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": value}
    cp["channel_versions"] = {"v": 1}
    return saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp, {}, {"v": 1})


def test_a_saver_reads_the_types_it_is_given(client: Client) -> None:
    prefix = f"lgserde-{uuid.uuid4().hex[:8]}"
    value = {"note": Note(text="n"), "point": Point(1, 2)}
    conf = _put_value(CtxSaver(client, prefix=prefix), value)
    # The value is stored; a saver that does not allow its types refuses it...
    with pytest.raises(DisallowedTypeError, match=rf"{Note.__module__}\.Note"):
        CtxSaver(client, prefix=prefix).get_tuple(conf)
    # ... and one that does reads it back.
    tup = CtxSaver(client, prefix=prefix, allowed_types=[Note, Point]).get_tuple(conf)
    assert tup is not None and tup.checkpoint["channel_values"]["v"] == value
    # LangGraph's own API (BaseCheckpointSaver.with_allowlist) on the saver.
    more = CtxSaver(client, prefix=prefix).with_allowlist(
        [(Note.__module__, "Note"), (Point.__module__, "Point")]
    )
    tup = more.get_tuple(conf)
    assert tup is not None and tup.checkpoint["channel_values"]["v"] == value


async def test_an_async_saver_reads_the_types_it_is_given(
    client: Client, aclient: AsyncClient
) -> None:
    prefix = f"lgserde-{uuid.uuid4().hex[:8]}"
    conf = _put_value(CtxSaver(client, prefix=prefix), Note(text="n"))
    with pytest.raises(DisallowedTypeError, match=r"\.Note"):
        await AsyncCtxSaver(aclient, prefix=prefix).aget_tuple(conf)
    tup = await AsyncCtxSaver(aclient, prefix=prefix, allowed_types=[Note]).aget_tuple(conf)
    assert tup is not None and tup.checkpoint["channel_values"]["v"] == Note(text="n")


def test_allowed_types_are_for_the_savers_own_serializer(client: Client) -> None:
    with pytest.raises(ValueError, match="allowed_types"):
        CtxSaver(client, serde=JsonPlusSerializer(), allowed_types=[Note])
    # A serializer of one's own is used as given.
    serde = JsonPlusSerializer()
    assert CtxSaver(client, serde=serde).serde is serde
    assert isinstance(CtxSaver(client).serde, StrictSerializer)


class Fan(TypedDict):
    done: Annotated[list[Any], operator.add]
    messages: Annotated[list[AnyMessage], add_messages]


def _fan_scenario(first: BaseCheckpointSaver, resumed: BaseCheckpointSaver) -> dict[str, Any]:
    """A fan-out of three Sends, one of which asks a human; the thread is
    resumed on ``resumed`` (for ours a fresh saver: every pending Send,
    interrupt and message comes back from the store)."""

    def work(arg: dict[str, Any]) -> dict[str, Any]:
        answer = interrupt(f"item {arg['n']}?") if arg["n"] == 1 else "auto"
        return {"done": [[arg["n"], answer]], "messages": [AIMessage(f"did {arg['n']}")]}

    g = StateGraph(Fan)
    g.add_node("start", lambda s: {"messages": [HumanMessage("go")]})
    g.add_node("work", work)
    g.add_edge(START, "start")
    g.add_conditional_edges("start", lambda s: [Send("work", {"n": n}) for n in range(3)])
    g.add_edge("work", END)
    thread = {"configurable": {"thread_id": str(uuid.uuid4())}}
    paused = g.compile(checkpointer=first).invoke({"done": []}, thread)
    graph = g.compile(checkpointer=resumed)
    state = graph.get_state(thread)
    done = graph.invoke(Command(resume="yes"), thread)
    return {
        "interrupts": [i.value for i in paused["__interrupt__"]],
        "paused": (state.next, [i.value for t in state.tasks for i in t.interrupts]),
        "done": sorted(done["done"]),
        "messages": sorted(m.content for m in done["messages"]),
    }


def test_sends_interrupts_and_messages_come_back_by_default(client: Client) -> None:
    prefix = f"lgserde-{uuid.uuid4().hex[:8]}"
    ours = _fan_scenario(CtxSaver(client, prefix=prefix), CtxSaver(client, prefix=prefix))
    memory = InMemorySaver()
    assert ours == _fan_scenario(memory, memory)
    assert ours["done"] == [[0, "auto"], [1, "yes"], [2, "auto"]]
