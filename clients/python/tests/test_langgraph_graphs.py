"""Real LangGraph graphs on CtxSaver / AsyncCtxSaver: a chat StateGraph
with `add_messages`, the same with a `DeltaChannel` messages channel, time
travel from an old checkpoint, `update_state` forks and interrupts. Each
scenario also runs on LangGraph's InMemorySaver, the reference: both must
produce the same states and the same history shape."""

from __future__ import annotations

import functools
import operator
import uuid
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt

from ctx_client import AsyncClient, Client
from ctx_client.langgraph import AsyncCtxSaver, CtxSaver


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    turns: Annotated[int, operator.add]


def _add_batches(state: list[AnyMessage], batches: list[Any]) -> list[AnyMessage]:
    return functools.reduce(add_messages, batches, state)


class DeltaChat(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(_add_batches, snapshot_frequency=3)]
    turns: Annotated[int, operator.add]


def _bot(state: dict[str, Any]) -> dict[str, Any]:
    last = state["messages"][-1]
    return {"messages": [AIMessage(content=f"echo: {last.content}")], "turns": 1}


def _counter(state: dict[str, Any]) -> dict[str, Any]:
    return {"turns": 1}


def chat_graph(schema: type, saver: BaseCheckpointSaver):
    """Two parallel nodes after START (so one step has two tasks' writes)."""
    g = StateGraph(schema)
    g.add_node("bot", _bot)
    g.add_node("counter", _counter)
    g.add_edge(START, "bot")
    g.add_edge(START, "counter")
    g.add_edge("bot", END)
    g.add_edge("counter", END)
    return g.compile(checkpointer=saver)


def _texts(state: dict[str, Any]) -> list[str]:
    return [m.content for m in state["messages"]]


def _conf(thread: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"thread_id": thread}
    if checkpoint_id:
        c["checkpoint_id"] = checkpoint_id
    return {"configurable": c}


def chat_scenario(schema: type, saver: BaseCheckpointSaver) -> dict[str, Any]:
    """Five turns, then time travel from the state after turn 2, then an
    update_state fork; what a caller can observe, without ids."""
    graph = chat_graph(schema, saver)
    thread = str(uuid.uuid4())
    for i in range(5):
        graph.invoke({"messages": [HumanMessage(content=f"hi {i}")]}, _conf(thread))
    final = graph.get_state(_conf(thread))
    history = list(graph.get_state_history(_conf(thread)))
    # The checkpoint that ended turn 2: 4 messages, nothing left to run.
    after_two = next(s for s in history if len(s.values["messages"]) == 4 and not s.next)
    forked = graph.invoke({"messages": [HumanMessage(content="again")]}, after_two.config)
    head = graph.get_state(_conf(thread))
    old = graph.get_state(after_two.config)
    updated = graph.update_state(
        old.config, {"messages": [AIMessage(content="edited")]}, as_node="bot"
    )
    edited = graph.get_state(updated)
    return {
        "final": (_texts(final.values), final.values["turns"]),
        "history": [(len(s.values.get("messages", [])), s.next) for s in history],
        "forked": (_texts(forked), forked["turns"]),
        "head": _texts(head.values),
        "old": _texts(old.values),
        "edited": (_texts(edited.values), edited.metadata["source"]),
        "edited_parent": edited.parent_config["configurable"]["checkpoint_id"]
        == old.config["configurable"]["checkpoint_id"],
        "history_after": len(list(graph.get_state_history(_conf(thread)))),
    }


def interrupt_scenario(saver: BaseCheckpointSaver) -> dict[str, Any]:
    """A node that asks a human, resumed with Command(resume=...)."""

    def ask(state: Chat) -> dict[str, Any]:
        answer = interrupt({"question": "name?"})
        return {"messages": [AIMessage(content=f"hello {answer}")], "turns": 1}

    g = StateGraph(Chat)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    graph = g.compile(checkpointer=saver)
    thread = str(uuid.uuid4())
    first = graph.invoke({"messages": [HumanMessage(content="hi")]}, _conf(thread))
    paused = graph.get_state(_conf(thread))
    done = graph.invoke(Command(resume="ada"), _conf(thread))
    return {
        "interrupt": [i.value for i in first["__interrupt__"]],
        "paused_next": paused.next,
        "done": _texts(done),
    }


def _ctx_saver(client: Client) -> CtxSaver:
    return CtxSaver(client, prefix=f"lgtest-{uuid.uuid4().hex[:8]}")


@pytest.mark.parametrize("schema", [Chat, DeltaChat], ids=["add_messages", "DeltaChannel"])
def test_chat_with_time_travel_matches_the_reference(client: Client, schema: type) -> None:
    ours = chat_scenario(schema, _ctx_saver(client))
    reference = chat_scenario(schema, InMemorySaver())
    assert ours == reference
    # And what the reference says is what a person expects of it.
    assert ours["final"][0][-2:] == ["hi 4", "echo: hi 4"]
    assert ours["final"][1] == 10
    assert ours["forked"][0] == ["hi 0", "echo: hi 0", "hi 1", "echo: hi 1", "again", "echo: again"]
    assert ours["head"] == ours["forked"][0]
    assert ours["old"] == ["hi 0", "echo: hi 0", "hi 1", "echo: hi 1"]
    assert ours["edited"] == (ours["old"] + ["edited"], "update")
    assert ours["edited_parent"] is True


def test_interrupt_and_resume_match_the_reference(client: Client) -> None:
    assert interrupt_scenario(_ctx_saver(client)) == interrupt_scenario(InMemorySaver())


def test_a_thread_is_a_commit_tree(client: Client) -> None:
    """Time travel makes a sibling: the fork's first checkpoint commit has
    the old checkpoint's tip as its ctx parent, and unchanged channel
    values are the same artifact in parent and child."""
    saver = _ctx_saver(client)
    graph = chat_graph(Chat, saver)
    thread = str(uuid.uuid4())
    graph.invoke({"messages": [HumanMessage(content="a")]}, _conf(thread))
    graph.invoke({"messages": [HumanMessage(content="b")]}, _conf(thread))
    history = list(graph.get_state_history(_conf(thread)))
    old = next(s for s in history if len(s.values["messages"]) == 2 and not s.next)
    graph.invoke({"messages": [HumanMessage(content="c")]}, old.config)
    names = saver._core.names
    old_id = old.config["configurable"]["checkpoint_id"]
    old_tip = client.get_ref(names.checkpoint(thread, "", old_id))["target"]
    children = [
        s
        for s in graph.get_state_history(_conf(thread))
        if s.parent_config and s.parent_config["configurable"]["checkpoint_id"] == old_id
    ]
    assert len(children) == 2  # the original continuation and the fork
    for child in children:
        cid = child.config["configurable"]["checkpoint_id"]
        tip = client.get_ref(names.checkpoint(thread, "", cid))["target"]
        chain = client.history(tip, depth=50)["commits"]
        assert old_tip in [c["id"] for c in chain]
        assert all(c["thread_id"] == thread for c in chain)
    # The input checkpoint of the fork changed no channel but __start__:
    # its messages value is the same artifact as the old checkpoint's.
    fork_input = min(
        (s for s in children if s.metadata["source"] == "input"),
        key=lambda s: s.config["configurable"]["checkpoint_id"],
        default=None,
    )
    assert fork_input is not None
    docs = [
        saver._core.docs.get(
            client.get_ref(names.checkpoint(thread, "", s.config["configurable"]["checkpoint_id"]))[
                "target"
            ]
        )
        for s in (old, fork_input)
    ]
    assert docs[0]["values"]["messages"][1] == docs[1]["values"]["messages"][1]


@pytest.mark.asyncio
@pytest.mark.parametrize("schema", [Chat, DeltaChat], ids=["add_messages", "DeltaChannel"])
async def test_async_saver_runs_a_graph(server_url: str, token: str, schema: type) -> None:
    async with AsyncClient(server_url, token=token) as aclient:
        saver = AsyncCtxSaver(aclient, prefix=f"lgtest-{uuid.uuid4().hex[:8]}")
        graph = chat_graph(schema, saver)
        thread = str(uuid.uuid4())
        for i in range(3):
            out = await graph.ainvoke({"messages": [HumanMessage(content=f"q{i}")]}, _conf(thread))
        assert _texts(out)[-2:] == ["q2", "echo: q2"]
        history = [s async for s in graph.aget_state_history(_conf(thread))]
        old = next(s for s in history if len(s.values["messages"]) == 2 and not s.next)
        forked = await graph.ainvoke({"messages": [HumanMessage(content="x")]}, old.config)
        assert _texts(forked) == ["q0", "echo: q0", "x", "echo: x"]
        again = await graph.aget_state(old.config)
        assert _texts(again.values) == ["q0", "echo: q0"]
