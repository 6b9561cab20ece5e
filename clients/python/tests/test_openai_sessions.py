"""The OpenAI Agents SDK's Session behaviour, run against both the SDK's own
``SQLiteSession`` (the reference: the suite is known to be right when it
passes there) and ``ctx_client.openai_agents.CtxSession`` on a live ctx.

No upstream suite exists for third-party sessions; these are the
behaviours the SDK's SQLiteSession tests check (tests/memory/test_session.py
and test_session_limit.py in openai-agents-python), written again as one
parametrised suite: items come back deep-equal and in order, pop and clear,
sessions kept apart, limits (explicit, from session_settings, from
RunConfig), concurrent writers, and Runner turns with the SDK's
ScriptedModel (no network). Then what only ctx does: the history a clear
or a pop leaves reachable, the format's translation, refused items.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    RunConfig,
    Runner,
    Session,
    SessionSettings,
    SQLiteSession,
    function_tool,
    set_tracing_disabled,
)
from agents.testing import ScriptedModel, assistant_message, function_call

from ctx_client import AsyncClient, InvalidError, NotFoundError
from ctx_client.openai_agents import FORMAT, CtxSession

set_tracing_disabled(True)

Make = Callable[..., Any]

RUNNERS = ["run", "run_streamed"]


@pytest.fixture(params=["sqlite", "ctx"])
async def make(
    request: pytest.FixtureRequest, tmp_path: Path, aclient: AsyncClient, unique: str
) -> AsyncIterator[Make]:
    """Makes sessions of one implementation: ``make(session_id, **kw)``;
    every session of a test shares one store (one SQLite file, one ctx)."""
    made: list[Any] = []

    def _make(session_id: str, **kw: Any) -> Any:
        if request.param == "sqlite":
            s: Any = SQLiteSession(session_id, tmp_path / "sessions.db", **kw)
        else:
            s = CtxSession(f"{unique}-{session_id}", aclient, **kw)
        made.append(s)
        return s

    yield _make
    for s in made:
        if isinstance(s, SQLiteSession):
            s.close()


async def run(method: str, agent: Agent[Any], input: Any, **kw: Any) -> Any:
    """One Runner turn, awaited or streamed to the end."""
    if method == "run":
        return await Runner.run(agent, input, **kw)
    result = Runner.run_streamed(agent, input, **kw)
    async for _ in result.stream_events():
        pass
    return result


def contents(items: list[Any]) -> list[Any]:
    return [i.get("content") for i in items]


# A turn of a tool-using agent as the SDK stores it.
TOOL_TURN: list[Any] = [
    {"role": "user", "content": "What is the weather?"},
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Ask the tool."}],
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "It is sunny.", "annotations": []}],
    },
]


# --- items in, items out ----------------------------------------------------


async def test_added_items_come_back_in_order_and_deep_equal(make: Make) -> None:
    s = make("direct")
    assert await s.get_items() == []
    first = [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi there!"}]
    await s.add_items(first)
    assert await s.get_items() == first
    await s.add_items(TOOL_TURN)
    assert await s.get_items() == first + TOOL_TURN


async def test_adding_nothing_changes_nothing(make: Make) -> None:
    s = make("empty-add")
    await s.add_items([])
    assert await s.get_items() == []
    await s.add_items([{"role": "user", "content": "x"}])
    await s.add_items([])
    assert contents(await s.get_items()) == ["x"]


async def test_unicode_and_special_characters_survive(make: Make) -> None:
    s = make("unicode")
    texts = [
        "こんにちは",
        "😊👍",
        "Привет",
        "O'Reilly",
        "Robert'); DROP TABLE students;--",
        '"SELECT * FROM users WHERE name = "admin";"',
        "tab\tnewline\nbackslash\\ nul\u0000 bidi\u202e",
    ]
    items = [{"role": "user", "content": t} for t in texts]
    await s.add_items(items)
    assert contents(await s.get_items()) == texts


async def test_clear_empties_the_session_and_it_can_be_used_again(make: Make) -> None:
    s = make("clear")
    await s.clear_session()  # clearing nothing is fine
    await s.add_items([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])
    await s.clear_session()
    assert await s.get_items() == []
    assert await s.pop_item() is None
    await s.add_items([{"role": "user", "content": "c"}])
    assert contents(await s.get_items()) == ["c"]


# --- pop --------------------------------------------------------------------


async def test_pop_returns_the_newest_item_until_none_are_left(make: Make) -> None:
    s = make("pop")
    assert await s.pop_item() is None
    items = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there!"},
        {"role": "user", "content": "How are you?"},
    ]
    await s.add_items(items)
    assert await s.pop_item() == items[2]
    assert await s.get_items() == items[:2]
    assert await s.pop_item() == items[1]
    assert await s.pop_item() == items[0]
    assert await s.pop_item() is None
    assert await s.get_items() == []


async def test_pop_across_batches_and_then_add(make: Make) -> None:
    s = make("pop-batches")
    await s.add_items([{"role": "user", "content": "1"}])
    await s.add_items([{"role": "user", "content": "2"}, {"role": "user", "content": "3"}])
    await s.add_items([{"role": "user", "content": "4"}])
    assert (await s.pop_item())["content"] == "4"
    assert (await s.pop_item())["content"] == "3"
    await s.add_items([{"role": "user", "content": "5"}])
    assert contents(await s.get_items()) == ["1", "2", "5"]
    assert (await s.pop_item())["content"] == "5"
    assert (await s.pop_item())["content"] == "2"
    assert contents(await s.get_items()) == ["1"]


async def test_pop_after_clear_sees_only_new_items(make: Make) -> None:
    s = make("pop-clear")
    await s.add_items([{"role": "user", "content": "old"}])
    await s.clear_session()
    await s.add_items([{"role": "user", "content": "new"}])
    assert (await s.pop_item())["content"] == "new"
    assert await s.pop_item() is None


async def test_pop_only_touches_its_own_session(make: Make) -> None:
    one, two = make("pop-1"), make("pop-2")
    await one.add_items([{"role": "user", "content": "Session 1 message"}])
    await two.add_items(
        [
            {"role": "user", "content": "Session 2 message 1"},
            {"role": "user", "content": "Session 2 message 2"},
        ]
    )
    assert (await two.pop_item())["content"] == "Session 2 message 2"
    assert contents(await one.get_items()) == ["Session 1 message"]
    assert contents(await two.get_items()) == ["Session 2 message 1"]


# --- limits -------------------------------------------------------------------


async def test_get_items_limit_returns_the_newest_in_order(make: Make) -> None:
    s = make("limit")
    items = [{"role": "user", "content": f"Message {i}"} for i in range(5)]
    await s.add_items(items[:2])
    await s.add_items(items[2:])
    assert await s.get_items(limit=2) == items[3:]
    assert await s.get_items(limit=1) == items[4:]
    assert await s.get_items(limit=0) == []
    assert await s.get_items(limit=10) == items
    assert await s.get_items(limit=None) == items


async def test_get_items_limit_after_a_clear_and_a_pop(make: Make) -> None:
    s = make("limit-clear")
    items = [{"role": "user", "content": f"Message {i}"} for i in range(9)]
    for i in range(0, 6, 2):
        await s.add_items(items[i : i + 2])
    await s.clear_session()
    assert await s.get_items(limit=3) == []
    await s.add_items(items[6:7])
    await s.add_items(items[7:9])
    assert await s.get_items(limit=1) == items[8:]
    assert await s.get_items(limit=2) == items[7:]
    assert await s.get_items(limit=5) == items[6:]
    assert (await s.pop_item()) == items[8]
    assert await s.get_items(limit=5) == items[6:8]
    assert (await s.pop_item()) == items[7]
    assert (await s.pop_item()) == items[6]
    assert await s.get_items(limit=5) == []
    await s.add_items(items[:1])
    assert await s.get_items(limit=5) == items[:1]


async def test_session_settings_limit_is_the_default_and_an_explicit_limit_wins(
    make: Make,
) -> None:
    s = make("settings", session_settings=SessionSettings(limit=3))
    assert s.session_settings.limit == 3
    items = [{"role": "user", "content": f"Message {i}"} for i in range(10)]
    await s.add_items(items)
    assert contents(await s.get_items()) == ["Message 7", "Message 8", "Message 9"]
    assert contents(await s.get_items(limit=2)) == ["Message 8", "Message 9"]
    d = make("settings-dict", session_settings={"limit": 1})
    assert isinstance(d.session_settings, SessionSettings)
    assert make("settings-default").session_settings.limit is None


async def test_a_limit_may_cut_a_tool_call_from_its_output(make: Make) -> None:
    s = make("limit-pair")
    await s.add_items(TOOL_TURN)
    assert await s.get_items(limit=2) == TOOL_TURN[-2:]


# --- sessions apart, writers together -----------------------------------------


async def test_sessions_are_kept_apart(make: Make) -> None:
    cats, dogs = make("cats"), make("dogs")
    await cats.add_items([{"role": "user", "content": "I like cats"}])
    await dogs.add_items([{"role": "user", "content": "I like dogs"}])
    assert contents(await cats.get_items()) == ["I like cats"]
    assert contents(await dogs.get_items()) == ["I like dogs"]
    await cats.clear_session()
    assert contents(await dogs.get_items()) == ["I like dogs"]


async def test_two_instances_of_one_session_see_each_others_writes(make: Make) -> None:
    a, b = make("shared"), make("shared")
    await a.add_items([{"role": "user", "content": "from a"}])
    await b.add_items([{"role": "user", "content": "from b"}])
    assert contents(await a.get_items()) == ["from a", "from b"]
    assert (await a.pop_item())["content"] == "from b"
    assert contents(await b.get_items()) == ["from a"]


async def test_concurrent_writers_lose_nothing(make: Make) -> None:
    writers = [make("concurrent") for _ in range(4)]
    items = [{"role": "user", "content": f"Message {i}"} for i in range(12)]
    await asyncio.gather(
        *(writers[i % len(writers)].add_items([item]) for i, item in enumerate(items))
    )
    got = await writers[0].get_items()
    assert sorted(contents(got)) == sorted(contents(items))
    assert len(got) == len(items)


# --- Runner turns with the SDK's ScriptedModel ---------------------------------


@pytest.mark.parametrize("method", RUNNERS)
async def test_runner_turns_see_the_history(make: Make, method: str) -> None:
    s = make(f"runner-{method}")
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    model.enqueue([assistant_message("San Francisco")])
    r1 = await run(method, agent, "What city is the Golden Gate Bridge in?", session=s)
    assert r1.final_output == "San Francisco"
    model.enqueue([assistant_message("California")])
    r2 = await run(method, agent, "What state is it in?", session=s)
    assert r2.final_output == "California"
    sent = model.calls[-1].input
    assert [i.get("role") for i in sent] == ["user", "assistant", "user"]
    assert sent[0]["content"] == "What city is the Golden Gate Bridge in?"
    assert sent[1]["content"][0]["text"] == "San Francisco"
    stored = await s.get_items()
    assert len(stored) == 4
    assert stored[:3] == sent


@pytest.mark.parametrize("method", RUNNERS)
async def test_runner_without_a_session_sends_only_the_input(method: str) -> None:
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    model.enqueue([assistant_message("Hello")])
    await run(method, agent, "Hi there")
    model.enqueue([assistant_message("I don't remember")])
    await run(method, agent, "Do you remember what I said?")
    assert len(model.calls[-1].input) == 1


@pytest.mark.parametrize("method", RUNNERS)
async def test_runner_keeps_sessions_apart(make: Make, method: str) -> None:
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    one, two = make(f"apart-1-{method}"), make(f"apart-2-{method}")
    model.enqueue([assistant_message("Noted: cats")])
    await run(method, agent, "I like cats", session=one)
    model.enqueue([assistant_message("Noted: dogs")])
    await run(method, agent, "I like dogs", session=two)
    model.enqueue([assistant_message("You like cats")])
    r = await run(method, agent, "What do I like?", session=one)
    assert r.final_output == "You like cats"
    sent = [i.get("content") for i in model.calls[-1].input if i.get("role") == "user"]
    assert sent == ["I like cats", "What do I like?"]


@pytest.mark.parametrize("method", RUNNERS)
async def test_runner_appends_list_input_to_the_history(make: Make, method: str) -> None:
    s = make(f"list-input-{method}")
    history = [
        {"role": "user", "content": "Earlier message"},
        {"role": "assistant", "content": "Saved reply"},
    ]
    await s.add_items(history)
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    model.enqueue([assistant_message("ok")])
    new = [{"role": "user", "content": "Test message"}]
    await run(method, agent, new, session=s)
    assert model.calls[-1].input == history + new


@pytest.mark.parametrize("method", RUNNERS)
async def test_runner_session_input_callback_shapes_the_input(make: Make, method: str) -> None:
    s = make(f"callback-{method}")
    history = [
        {"role": "user", "content": "Hello there."},
        {"role": "assistant", "content": "Hi, I'm here to assist you."},
    ]
    await s.add_items(history)
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    model.enqueue([assistant_message("I'm a model")])

    def users_only(old: list[Any], new: list[Any]) -> list[Any]:
        return [i for i in old if i.get("role") == "user"] + new

    new = [{"role": "user", "content": "What your name?"}]
    await run(
        method, agent, new, session=s, run_config=RunConfig(session_input_callback=users_only)
    )
    assert model.calls[-1].input == [history[0], new[0]]


@pytest.mark.parametrize("method", RUNNERS)
async def test_run_config_session_settings_limit_the_history(make: Make, method: str) -> None:
    s = make(f"run-limit-{method}", session_settings=SessionSettings(limit=100))
    await s.add_items([{"role": "user", "content": f"Turn {i}"} for i in range(10)])
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    model.enqueue([assistant_message("Got it")])
    await run(
        method,
        agent,
        "New question",
        session=s,
        run_config=RunConfig(session_settings=SessionSettings(limit=2)),
    )
    assert contents(model.calls[-1].input) == ["Turn 8", "Turn 9", "New question"]


@pytest.mark.parametrize("method", RUNNERS)
async def test_run_limit_drops_an_output_whose_call_was_cut(make: Make, method: str) -> None:
    s = make(f"run-limit-pair-{method}")
    await s.add_items(TOOL_TURN)
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    model.enqueue([assistant_message("Tomorrow is sunny too.")])
    await run(
        method,
        agent,
        "What about tomorrow?",
        session=s,
        run_config=RunConfig(session_settings=SessionSettings(limit=2)),
    )
    assert model.calls[-1].input == [
        TOOL_TURN[-1],
        {"role": "user", "content": "What about tomorrow?"},
    ]


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@pytest.mark.parametrize("method", RUNNERS)
async def test_runner_tool_turn_is_stored_call_and_output(make: Make, method: str) -> None:
    s = make(f"tool-{method}")
    model = ScriptedModel()
    agent = Agent(name="test", model=model, tools=[get_weather])
    model.enqueue([function_call("get_weather", {"city": "Paris"}, call_id="call_w")])
    model.enqueue([assistant_message("It is sunny in Paris.")])
    r = await run(method, agent, "Weather in Paris?", session=s)
    assert r.final_output == "It is sunny in Paris."
    stored = await s.get_items()
    kinds = [i.get("type", "message") for i in stored]
    assert kinds == ["message", "function_call", "function_call_output", "message"]
    assert stored[2]["call_id"] == "call_w" and stored[2]["output"] == "sunny in Paris"
    # The next turn is sent the whole tool exchange.
    model.enqueue([assistant_message("Still sunny.")])
    await run(method, agent, "And now?", session=s)
    assert model.calls[-1].input[: len(stored)] == stored


# --- only ctx -------------------------------------------------------------------


@pytest.fixture
def ctx_session(aclient: AsyncClient, unique: str) -> CtxSession:
    return CtxSession(f"{unique}-only", aclient)


async def _tip(c: AsyncClient, s: CtxSession) -> str:
    return (await c.get_ref(s.ref))["target"]


def test_it_is_a_session_by_the_sdks_protocol(ctx_session: CtxSession) -> None:
    assert isinstance(ctx_session, Session)


async def test_clear_keeps_the_history_reachable_from_the_root(
    aclient: AsyncClient, ctx_session: CtxSession
) -> None:
    s = ctx_session
    await s.add_items([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])
    await s.clear_session()
    tip = await aclient.get_commit(await _tip(aclient, s))
    assert (tip["commit_type"], tip["message_count"]) == ("snapshot", 0)
    await s.add_items([{"role": "user", "content": "c"}])
    assert contents(await s.get_items()) == ["c"]
    _, root = await aclient.materialize_bytes(await _tip(aclient, s), stop="root")
    assert contents(json.loads(root)) == ["a", "b", "c"]


async def test_pop_moves_the_ref_back_or_commits_on_the_parent(
    aclient: AsyncClient, ctx_session: CtxSession
) -> None:
    s = ctx_session
    await s.add_items([{"role": "user", "content": "1"}])
    first = await _tip(aclient, s)
    await s.add_items([{"role": "user", "content": "2"}])
    assert (await s.pop_item())["content"] == "2"
    assert await _tip(aclient, s) == first  # the ref moved back
    await s.add_items([{"role": "user", "content": "3"}, {"role": "user", "content": "4"}])
    assert (await s.pop_item())["content"] == "4"
    tip = await aclient.get_commit(await _tip(aclient, s))
    assert (tip["parent"], tip["message_count"]) == (first, 1)  # "3" on the parent


async def test_a_session_translates_into_other_formats(
    aclient: AsyncClient, ctx_session: CtxSession
) -> None:
    s = ctx_session
    model = ScriptedModel()
    agent = Agent(name="test", model=model, tools=[get_weather])
    model.enqueue([function_call("get_weather", {"city": "Oslo"}, call_id="call_o")])
    model.enqueue([assistant_message("Sunny in Oslo.")])
    await Runner.run(agent, "Weather in Oslo?", session=s)
    tip = await _tip(aclient, s)
    assert (await aclient.get_commit(tip))["format"] == FORMAT
    m, data = await aclient.materialize_bytes(tip, stop="root", format="anthropic-messages-v1")
    assert m["tier"] == "cross-runtime"
    blocks = [b for msg in json.loads(data) for b in msg["content"] if isinstance(b, dict)]
    use = next(b for b in blocks if b["type"] == "tool_use")
    result = next(b for b in blocks if b["type"] == "tool_result")
    assert (use["id"], use["name"], use["input"]) == ("call_o", "get_weather", {"city": "Oslo"})
    assert result["tool_use_id"] == "call_o"
    m, data = await aclient.materialize_bytes(tip, stop="root", format="openai-chat-v1")
    assert m["tier"] == "cross-runtime"
    assert [x["role"] for x in json.loads(data)] == ["user", "assistant", "tool", "assistant"]


async def test_the_server_refuses_a_malformed_item_naming_it(
    aclient: AsyncClient, unique: str
) -> None:
    with pytest.raises(InvalidError) as e:
        await aclient.checkpoint(
            principal="p",
            template="t",
            format=FORMAT,
            delta=json.dumps([{"role": "user", "content": "ok"}, {"type": "function_call"}]),
            ref=f"openai-agents/{unique}-bad",
        )
    assert e.value.field == "delta"
    assert "openai-responses-v1 delta: at index 1" in e.value.message
    assert "call_id" in e.value.message
    with pytest.raises(NotFoundError):  # nothing was written
        await aclient.get_ref(f"openai-agents/{unique}-bad")


async def test_items_the_server_refuses_are_kept_wrapped(
    aclient: AsyncClient, ctx_session: CtxSession
) -> None:
    s = ctx_session
    odd = [
        {"role": "user", "content": "call it"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{not json"},
        {"type": "ctx-verbatim", "item": "a user item that looks like the wrapper"},
    ]
    await s.add_items(odd)
    assert await s.get_items() == odd
    _, raw = await aclient.materialize_bytes(await _tip(aclient, s))
    assert [i.get("type") for i in json.loads(raw)] == [None, "ctx-verbatim", "ctx-verbatim"]
    assert await s.pop_item() == odd[2]
    assert await s.get_items() == odd[:2]


async def test_close_ends_the_branches_of_its_session(
    aclient: AsyncClient, ctx_session: CtxSession
) -> None:
    s = ctx_session
    await s.add_items([{"role": "user", "content": "find the bug"}])
    branch = await aclient.branch_create(s.ctx_session_id, "read the lexer")
    other = await aclient.branch_create(s.ctx_session_id + "-other", "elsewhere")
    assert (await aclient.branch_status(branch["branch_id"]))["status"] == "active"
    await s.close()
    ended = await aclient.branch_status(branch["branch_id"])
    assert (ended["status"], ended.get("reason")) == ("completed", "session ended")
    assert (await aclient.branch_status(other["branch_id"]))["status"] == "active"
    # Its items stay, and it goes on; a second close has nothing to end.
    await s.add_items([{"role": "user", "content": "again"}])
    assert contents(await s.get_items()) == ["find the bug", "again"]
    await s.close()
    await aclient.session_end(s.ctx_session_id + "-other")


async def test_the_readme_lines(
    server_url: str, token: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unique: str
) -> None:
    from test_readme import block

    code = block("openai-agents")
    assert len(code.strip().splitlines()) == 5
    (tmp_path / ".ctx").mkdir()
    (tmp_path / ".ctx" / "token").write_text(token + "\n")
    monkeypatch.chdir(tmp_path)
    code = code.replace('"http://127.0.0.1:7878"', repr(server_url))
    scope: dict[str, Any] = {}
    exec(code.replace('"user-42"', repr(f"readme-{unique}")), scope)  # noqa: S102
    session, agent = scope["session"], scope["agent"]
    agent.model = ScriptedModel([[assistant_message("Hello!")]])
    await scope["Runner"].run(agent, "Hi", session=session)
    assert [i.get("role") for i in await session.get_items()] == ["user", "assistant"]
    await session.client.aclose()
