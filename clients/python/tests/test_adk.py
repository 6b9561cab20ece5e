"""Google ADK's SessionService behaviour, run against both ADK's own
``DatabaseSessionService`` on SQLite (the reference: the suite is known to
be right when it passes there) and ``ctx_client.adk.CtxSessionService`` on a
live ctx.

ADK's own contract suite (adk-python's tests/unittests/sessions) is not
shipped in the google-adk package; tools/run_adk_suite.py runs it from a
checkout. These are the behaviours our code adds, written again: sessions
created, read, listed and deleted; real events (content parts, function
calls and responses, state deltas) coming back equal; the ``app:``,
``user:`` and ``temp:`` scopes; GetSessionConfig's filters; the stale
session a second writer leaves behind (ADK's StaleSessionError, nothing
lost); and a real ``Runner`` turn with a scripted model (no network). Then
what only ctx does: the chain layout and the requests each operation
costs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.genai import types
from request_counting import CountingTransport

from ctx_client import AsyncClient
from ctx_client.adk import EVENTS_FORMAT, STALE_SESSION_MESSAGE, CtxSessionService

APP = "shop"


@pytest.fixture(params=["database", "ctx"])
async def service(
    request: pytest.FixtureRequest, tmp_path: Path, aclient: AsyncClient, unique: str
) -> AsyncIterator[BaseSessionService]:
    """A session service of one implementation, empty: ADK's database
    service on a new SQLite file, or ctx under a ref namespace of its own."""
    if request.param == "database":
        db = DatabaseSessionService(f"sqlite+aiosqlite:///{tmp_path / 'adk.db'}")
        yield db
        await db.close()
    else:
        yield CtxSessionService(aclient, namespace=f"adk-test/{unique}")


def event(author: str = "user", **kw: Any) -> Event:
    return Event(invocation_id=kw.pop("invocation_id", "inv"), author=author, **kw)


def delta(**state: Any) -> EventActions:
    return EventActions(state_delta=state)


# --- create / get / list / delete ---------------------------------------------


async def test_create_get_delete(service: BaseSessionService) -> None:
    made = await service.create_session(
        app_name=APP, user_id="ada", session_id="s1", state={"cart": ["book"]}
    )
    assert (made.id, made.app_name, made.user_id) == ("s1", APP, "ada")
    assert made.state == {"cart": ["book"]} and made.events == []
    got = await service.get_session(app_name=APP, user_id="ada", session_id="s1")
    assert got == made
    # Another user's session of the same id is another session.
    assert await service.get_session(app_name=APP, user_id="bob", session_id="s1") is None
    assert await service.get_session(app_name="other", user_id="ada", session_id="s1") is None
    await service.delete_session(app_name=APP, user_id="ada", session_id="s1")
    assert await service.get_session(app_name=APP, user_id="ada", session_id="s1") is None
    # Deleting what is not there is no error.
    await service.delete_session(app_name=APP, user_id="ada", session_id="s1")


async def test_generated_ids_and_duplicates(service: BaseSessionService) -> None:
    a = await service.create_session(app_name=APP, user_id="ada")
    b = await service.create_session(app_name=APP, user_id="ada")
    assert a.id and b.id and a.id != b.id
    with pytest.raises(AlreadyExistsError, match=f"Session with id {a.id} already exists"):
        await service.create_session(app_name=APP, user_id="ada", session_id=a.id)
    # The failed create changed nothing.
    got = await service.get_session(app_name=APP, user_id="ada", session_id=a.id)
    assert got is not None and got.state == {}
    # A deleted session's id can be used again, and starts empty.
    await service.append_event(a, event(actions=delta(k=1)))
    await service.delete_session(app_name=APP, user_id="ada", session_id=a.id)
    again = await service.create_session(app_name=APP, user_id="ada", session_id=a.id)
    assert again.state == {} and again.events == []


async def test_list_sessions(service: BaseSessionService) -> None:
    for user, sid in [("ada", "a1"), ("ada", "a2"), ("bob", "b1")]:
        await service.create_session(app_name=APP, user_id=user, session_id=sid, state={"n": sid})
    await service.create_session(app_name="other", user_id="ada", session_id="x")
    a1 = await service.get_session(app_name=APP, user_id="ada", session_id="a1")
    assert a1 is not None
    await service.append_event(a1, event(actions=delta(**{"user:tier": "gold"})))

    mine = (await service.list_sessions(app_name=APP, user_id="ada")).sessions
    # Oldest update first: a1 was appended to last.
    assert [s.id for s in mine] == ["a2", "a1"]
    assert all(s.events == [] for s in mine)
    assert {s.id: s.state for s in mine} == {
        "a1": {"n": "a1", "user:tier": "gold"},
        "a2": {"n": "a2", "user:tier": "gold"},
    }
    everyone = (await service.list_sessions(app_name=APP)).sessions
    assert sorted((s.user_id, s.id) for s in everyone) == [
        ("ada", "a1"),
        ("ada", "a2"),
        ("bob", "b1"),
    ]
    assert {s.id: s.state for s in everyone}["b1"] == {"n": "b1"}
    assert (await service.list_sessions(app_name=APP, user_id="carol")).sessions == []
    assert (await service.list_sessions(app_name="nothing")).sessions == []


# --- events --------------------------------------------------------------------


def _conversation() -> list[Event]:
    """A user turn with text and an image, a model turn calling a tool, the
    tool's answer, and the model's reply: what a Runner appends."""
    call = types.FunctionCall(id="call-1", name="lookup", args={"sku": "B-12", "qty": 2})
    return [
        event(
            content=types.Content(
                role="user",
                parts=[
                    types.Part(text="Is the blue kettle in stock?\nAnd the red one?"),
                    types.Part.from_bytes(data=b"\x89PNG\x00\xff", mime_type="image/png"),
                ],
            ),
        ),
        event(
            "assistant",
            content=types.Content(role="model", parts=[types.Part(function_call=call)]),
            actions=delta(last_tool="lookup", **{"temp:scratch": "x"}),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=12, candidates_token_count=3, total_token_count=15
            ),
        ),
        event(
            "assistant",
            content=types.Content(
                role="user",
                parts=[
                    types.Part(
                        function_response=types.FunctionResponse(
                            id="call-1", name="lookup", response={"in_stock": True, "left": 4}
                        )
                    )
                ],
            ),
            actions=delta(**{"app:lookups": 1, "user:last_sku": "B-12"}),
        ),
        event(
            "assistant",
            content=types.Content(role="model", parts=[types.Part(text="Yes: 4 left. ✓")]),
            custom_metadata={"trace": {"span": 7}},
            turn_complete=True,
        ),
    ]


async def test_events_round_trip(service: BaseSessionService) -> None:
    session = await service.create_session(app_name=APP, user_id="ada", session_id="s")
    events = _conversation()
    for e in events:
        assert await service.append_event(session, e) is e
    # The temp: key reached the session in memory, and no further.
    assert session.state["temp:scratch"] == "x"
    assert "temp:scratch" not in (events[1].actions.state_delta or {})

    got = await service.get_session(app_name=APP, user_id="ada", session_id="s")
    assert got is not None
    assert got.events == events
    assert got.events[0].content is not None and got.events[0].content.parts is not None
    assert got.events[0].content.parts[1].inline_data is not None
    assert got.events[0].content.parts[1].inline_data.data == b"\x89PNG\x00\xff"
    assert got.state == {"last_tool": "lookup", "app:lookups": 1, "user:last_sku": "B-12"}
    # (the database keeps microseconds)
    assert got.last_update_time == pytest.approx(events[-1].timestamp, abs=1e-6)
    # The session as the service left it is the stored one but for temp: keys.
    assert {k: v for k, v in session.state.items() if not k.startswith("temp:")} == got.state


async def test_partial_events_are_not_stored(service: BaseSessionService) -> None:
    session = await service.create_session(app_name=APP, user_id="ada", session_id="s")
    await service.append_event(session, event(partial=True, actions=delta(k=1)))
    got = await service.get_session(app_name=APP, user_id="ada", session_id="s")
    assert got is not None and got.events == [] and got.state == {}


# --- state scopes ----------------------------------------------------------------


async def test_state_scopes(service: BaseSessionService) -> None:
    s1 = await service.create_session(
        app_name=APP,
        user_id="ada",
        session_id="s1",
        state={"step": 1, "app:motd": "hi", "user:lang": "fr", "temp:t": 0},
    )
    assert s1.state == {"step": 1, "app:motd": "hi", "user:lang": "fr"}
    await service.append_event(
        s1, event(actions=delta(step=2, **{"app:motd": "hello", "user:lang": "de", "temp:u": 1}))
    )
    # Another session of the same user sees app and user state, not s1's own.
    s2 = await service.create_session(app_name=APP, user_id="ada", session_id="s2")
    assert s2.state == {"app:motd": "hello", "user:lang": "de"}
    # Another user sees the app's state only.
    s3 = await service.create_session(app_name=APP, user_id="bob", session_id="s3")
    assert s3.state == {"app:motd": "hello"}
    # A write through s3 reaches s1 on its next read.
    await service.append_event(s3, event(actions=delta(**{"app:motd": "hey"})))
    got = await service.get_session(app_name=APP, user_id="ada", session_id="s1")
    assert got is not None
    assert got.state == {"step": 2, "app:motd": "hey", "user:lang": "de"}
    assert got.events[0].actions.state_delta == {
        "step": 2,
        "app:motd": "hello",
        "user:lang": "de",
    }
    assert await service.get_user_state(app_name=APP, user_id="ada") == {"lang": "de"}
    assert await service.get_user_state(app_name=APP, user_id="bob") == {}
    assert await service.get_user_state(app_name="other", user_id="ada") == {}


async def test_state_values_replace_and_null(service: BaseSessionService) -> None:
    s = await service.create_session(
        app_name=APP, user_id="ada", session_id="s", state={"p": {"a": 1, "b": 2}, "f": True}
    )
    await service.append_event(s, event(actions=delta(p={"a": 3}, f=None, **{"user:x": None})))
    got = await service.get_session(app_name=APP, user_id="ada", session_id="s")
    assert got is not None
    assert got.state == {"p": {"a": 3}, "f": None, "user:x": None}


async def test_values_json_cannot_hold(service: BaseSessionService) -> None:
    """A state value JSON cannot hold is stored as its string, as ADK's
    database service stores it, and the event with it is kept."""
    s = await service.create_session(app_name=APP, user_id="ada", session_id="s")
    await service.append_event(s, event(actions=delta(callback=len, ok=2)))
    got = await service.get_session(app_name=APP, user_id="ada", session_id="s")
    assert got is not None and len(got.events) == 1
    assert got.state["ok"] == 2 and got.state["callback"] == repr(len)


# --- GetSessionConfig ------------------------------------------------------------------


async def test_get_session_config(service: BaseSessionService) -> None:
    s = await service.create_session(app_name=APP, user_id="ada", session_id="s")
    base = 1_800_000_000.0
    for i in range(1, 6):
        await service.append_event(s, event(timestamp=base + i, invocation_id=f"i{i}"))

    async def ids(**config: Any) -> list[str]:
        got = await service.get_session(
            app_name=APP,
            user_id="ada",
            session_id="s",
            config=GetSessionConfig(**config) if config else None,
        )
        assert got is not None
        return [e.invocation_id for e in got.events]

    assert await ids() == ["i1", "i2", "i3", "i4", "i5"]
    assert await ids(num_recent_events=0) == []
    assert await ids(num_recent_events=2) == ["i4", "i5"]
    assert await ids(num_recent_events=50) == ["i1", "i2", "i3", "i4", "i5"]
    assert await ids(after_timestamp=base + 4) == ["i4", "i5"]
    assert await ids(after_timestamp=base + 99) == []
    assert await ids(after_timestamp=base + 2, num_recent_events=2) == ["i4", "i5"]
    assert await ids(after_timestamp=base + 4, num_recent_events=3) == ["i4", "i5"]
    # A filtered read still carries the whole state and can be appended to.
    got = await service.get_session(
        app_name=APP, user_id="ada", session_id="s", config=GetSessionConfig(num_recent_events=0)
    )
    assert got is not None
    await service.append_event(got, event(timestamp=base + 6, invocation_id="i6"))
    assert await ids(num_recent_events=1) == ["i6"]


# --- stale sessions ----------------------------------------------------------------------


async def test_a_stale_session_cannot_append(service: BaseSessionService) -> None:
    await service.create_session(app_name=APP, user_id="ada", session_id="s")
    first = await service.get_session(app_name=APP, user_id="ada", session_id="s")
    second = await service.get_session(app_name=APP, user_id="ada", session_id="s")
    assert first is not None and second is not None
    await service.append_event(first, event(invocation_id="a", actions=delta(k="first")))
    with pytest.raises(StaleSessionError) as raised:
        await service.append_event(second, event(invocation_id="b", actions=delta(k="second")))
    assert str(raised.value) == STALE_SESSION_MESSAGE
    assert isinstance(raised.value, ValueError)
    # Nothing of the refused append is stored; the winner's append is.
    got = await service.get_session(app_name=APP, user_id="ada", session_id="s")
    assert got is not None
    assert [e.invocation_id for e in got.events] == ["a"] and got.state == {"k": "first"}
    # Reloaded, the loser appends.
    await service.append_event(got, event(invocation_id="b", actions=delta(k="second")))
    final = await service.get_session(app_name=APP, user_id="ada", session_id="s")
    assert final is not None
    assert [e.invocation_id for e in final.events] == ["a", "b"] and final.state == {"k": "second"}


async def test_concurrent_appends_one_wins(service: BaseSessionService) -> None:
    await service.create_session(app_name=APP, user_id="ada", session_id="s")
    for i in range(5):
        a = await service.get_session(app_name=APP, user_id="ada", session_id="s")
        b = await service.get_session(app_name=APP, user_id="ada", session_id="s")
        assert a is not None and b is not None
        results = await asyncio.gather(
            service.append_event(a, event(invocation_id=f"{i}a", actions=delta(**{f"k{i}": "a"}))),
            service.append_event(b, event(invocation_id=f"{i}b", actions=delta(**{f"k{i}": "b"}))),
            return_exceptions=True,
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        assert len(errors) == 1 and isinstance(errors[0], StaleSessionError), results
    final = await service.get_session(app_name=APP, user_id="ada", session_id="s")
    assert final is not None
    assert len(final.events) == 5
    # Each round's state is the winner's event's.
    for i, e in enumerate(final.events):
        assert final.state[f"k{i}"] == e.invocation_id[-1]


async def test_one_session_object_appending_at_once(service: BaseSessionService) -> None:
    """Appends through one session object that overlap (parallel branches
    of an invocation share it) take turns: all land, in the order sent."""
    s = await service.create_session(app_name=APP, user_id="ada", session_id="s")
    await asyncio.gather(
        *(
            service.append_event(s, event(invocation_id=f"i{i}", actions=delta(n=i)))
            for i in range(6)
        )
    )
    got = await service.get_session(app_name=APP, user_id="ada", session_id="s")
    assert got is not None
    assert [e.invocation_id for e in got.events] == [f"i{i}" for i in range(6)]
    assert [e.invocation_id for e in s.events] == [f"i{i}" for i in range(6)]
    assert got.state == {"n": 5}


async def test_appending_to_a_deleted_session(service: BaseSessionService) -> None:
    s = await service.create_session(app_name=APP, user_id="ada", session_id="s")
    await service.delete_session(app_name=APP, user_id="ada", session_id="s")
    with pytest.raises(SessionNotFoundError, match="Session s not found"):
        await service.append_event(s, event())
    assert await service.get_session(app_name=APP, user_id="ada", session_id="s") is None


async def test_a_session_of_another_service_object(service: BaseSessionService) -> None:
    """A session object this service did not hand out (no storage marker):
    appended to while current, refused once storage moved past it."""
    s = await service.create_session(app_name=APP, user_id="ada", session_id="s")
    await service.append_event(s, event(invocation_id="a", timestamp=s.last_update_time + 1))
    copy = s.model_copy(deep=True)
    copy._storage_update_marker = None
    await service.append_event(copy, event(invocation_id="b", timestamp=s.last_update_time + 2))
    stale = s.model_copy(deep=True)
    stale._storage_update_marker = None
    with pytest.raises(StaleSessionError):
        await service.append_event(stale, event(invocation_id="c"))
    got = await service.get_session(app_name=APP, user_id="ada", session_id="s")
    assert got is not None and [e.invocation_id for e in got.events] == ["a", "b"]


# --- a Runner turn ------------------------------------------------------------------------


class ScriptedModel(BaseLlm):
    """A model that answers each call with the next canned response and
    records what it was asked (no network, no key)."""

    replies: list[LlmResponse] = []
    asked: list[LlmRequest] = []

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.asked.append(llm_request)
        yield self.replies.pop(0)


def _stock(sku: str) -> dict[str, Any]:
    """How many of an item are left."""
    return {"sku": sku, "left": 4}


def _model_says(*parts: types.Part) -> LlmResponse:
    return LlmResponse(content=types.Content(role="model", parts=list(parts)))


async def test_a_runner_turn_on_ctx(aclient: AsyncClient, unique: str) -> None:
    service = CtxSessionService(aclient, namespace=f"adk-test/{unique}")
    model = ScriptedModel(
        model="scripted",
        replies=[
            _model_says(
                types.Part(function_call=types.FunctionCall(name="_stock", args={"sku": "B-12"}))
            ),
            _model_says(types.Part(text="4 left.")),
            _model_says(types.Part(text="You asked about B-12.")),
        ],
    )
    agent = LlmAgent(name="clerk", model=model, tools=[_stock], output_key="answer")
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    await service.create_session(
        app_name=APP, user_id="ada", session_id="s", state={"user:name": "Ada"}
    )

    async def turn(text: str) -> list[Event]:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        return [
            e async for e in runner.run_async(user_id="ada", session_id="s", new_message=message)
        ]

    first = await turn("Is B-12 in stock?")
    assert first[-1].content is not None and first[-1].content.parts is not None
    assert first[-1].content.parts[0].text == "4 left."
    second = await turn("What did I ask?")
    # The second model call saw the first turn, read back from ctx.
    history = model.asked[-1].contents
    said = [p.text for c in history for p in c.parts or [] if p.text]
    assert said[:3] == ["Is B-12 in stock?", "4 left.", "What did I ask?"]
    assert any(p.function_response for c in history for p in c.parts or [])

    stored = await service.get_session(app_name=APP, user_id="ada", session_id="s")
    assert stored is not None
    assert all(e.id for e in stored.events)
    kinds = [
        "user"
        if e.author == "user"
        else "call"
        if e.get_function_calls()
        else "result"
        if e.get_function_responses()
        else "text"
        for e in stored.events
    ]
    assert kinds == ["user", "call", "result", "text", "user", "text"]
    assert stored.state == {"user:name": "Ada", "answer": "You asked about B-12."}
    assert second[-1].id == stored.events[-1].id


# --- what only ctx does ----------------------------------------------------------------------


async def test_the_chain_layout(aclient: AsyncClient, unique: str) -> None:
    service = CtxSessionService(aclient, namespace=f"adk-test/{unique}")
    s = await service.create_session(app_name="my app", user_id="ada@x", session_id="s/1")
    ref = service.session_ref("my app", "ada@x", "s/1")
    assert ref == f"adk-test/{unique}/my_20app/s/ada_40x/s_2F1"
    for e in _conversation():
        await service.append_event(s, e)
    tip = (await aclient.get_ref(ref))["target"]
    assert tip == s._storage_update_marker
    chain = (await aclient.history(tip))["commits"]
    assert len(chain) == 5 and chain[-1]["parent"] is None
    assert {c["format"] for c in chain} == {EVENTS_FORMAT}
    # The app and user state refs hold the shared keys, one line per write.
    _, app = await aclient.read_bytes(service.app_state_ref("my app"))
    assert app == b'{"lookups":1}\n'
    _, user = await aclient.read_bytes(service.user_state_ref("my app", "ada@x"))
    assert user == b'{"last_sku":"B-12"}\n'
    # Deleting the session removes its ref; its commits stay reachable by id.
    await service.delete_session(app_name="my app", user_id="ada@x", session_id="s/1")
    assert (await aclient.get_commit(tip))["id"] == tip


async def test_shared_state_writers_lose_nothing(aclient: AsyncClient, unique: str) -> None:
    """Two sessions of one user writing user: and app: keys at once both
    land: only a session's own history is guarded (StaleSessionError), shared
    keys are merged key by key, last writer wins, on refs moved by
    compare-and-swap. (ctx only: ADK's DatabaseSessionService on SQLite,
    which has no row locks, lost some of these writes when this test ran
    against it, the lost update of adk-python issue #1733.)"""
    service = CtxSessionService(aclient, namespace=f"adk-test/{unique}")
    a = await service.create_session(app_name=APP, user_id="ada", session_id="a")
    b = await service.create_session(app_name=APP, user_id="ada", session_id="b")
    for i in range(4):
        await asyncio.gather(
            service.append_event(a, event(actions=delta(**{f"user:a{i}": i, "app:n": i}))),
            service.append_event(b, event(actions=delta(**{f"user:b{i}": i, "app:n": i}))),
        )
    state = await service.get_user_state(app_name=APP, user_id="ada")
    assert state == {**{f"a{i}": i for i in range(4)}, **{f"b{i}": i for i in range(4)}}
    for sid in ("a", "b"):
        got = await service.get_session(app_name=APP, user_id="ada", session_id=sid)
        assert got is not None and len(got.events) == 4 and got.state["app:n"] == 3


async def test_close_ends_the_branches_of_the_sessions_it_wrote(
    aclient: AsyncClient, unique: str
) -> None:
    service = CtxSessionService(aclient, namespace=f"adk-test/{unique}")
    a = await service.create_session(app_name=APP, user_id="ada", session_id="a/1")
    b = await service.create_session(app_name=APP, user_id="bob", session_id="b")
    await service.append_event(a, Event(author="user", invocation_id="i1"))
    sid_a = service.ctx_session_id(APP, "ada", "a/1")
    sid_b = service.ctx_session_id(APP, "bob", "b")
    assert sid_a and sid_b and sid_a != sid_b
    branches = [
        (await aclient.branch_create(sid, "look it up"))["branch_id"] for sid in (sid_a, sid_b)
    ]
    elsewhere = (await aclient.branch_create(f"{unique}-elsewhere", "x"))["branch_id"]
    await service.close()
    for branch in branches:
        ended = await aclient.branch_status(branch)
        assert (ended["status"], ended.get("reason")) == ("completed", "session ended")
    assert (await aclient.branch_status(elsewhere))["status"] == "active"
    await aclient.session_end(f"{unique}-elsewhere")
    # The sessions stay and the service goes on.
    got = await service.get_session(app_name=APP, user_id="ada", session_id="a/1")
    assert got is not None and len(got.events) == 1
    assert b.id == "b"


async def test_padded_ids_are_trimmed(aclient: AsyncClient, unique: str) -> None:
    service = CtxSessionService(aclient, namespace=f"adk-test/{unique}")
    made = await service.create_session(app_name=APP, user_id="ada", session_id=" s\n")
    assert made.id == "s"
    assert await service.get_session(app_name=APP, user_id="ada", session_id="s ") == made
    blank = await service.create_session(app_name=APP, user_id="ada", session_id="  ")
    assert blank.id.strip() == blank.id and blank.id


async def test_a_name_too_long_for_a_ref(aclient: AsyncClient) -> None:
    service = CtxSessionService(aclient)
    with pytest.raises(ValueError, match="over ctx's 200"):
        await service.create_session(app_name=APP, user_id="ada", session_id="x" * 200)


@pytest.fixture
async def counted(server_url: str, token: str) -> AsyncIterator[tuple[AsyncClient, Any]]:
    transport = CountingTransport()
    async with AsyncClient(server_url, token=token, transport=transport) as c:
        yield c, transport


async def test_requests_per_operation(counted: tuple[AsyncClient, Any], unique: str) -> None:
    """append_event is one request (one batch, shared state in it too);
    get_session is one round trip of three reads sent at once (the session's
    chain, the app's and the user's state: the server reads one ref per
    request)."""
    client, transport = counted
    service = CtxSessionService(client, namespace=f"adk-test/{unique}")

    async def sent(op: Callable[[], Any]) -> list[str]:
        mark = transport.mark()
        await op()
        return sorted(transport.since(mark))

    s = await service.create_session(app_name=APP, user_id="ada", session_id="s")
    for e in _conversation():
        assert await sent(lambda e=e: service.append_event(s, e)) == ["batch"]
    got: list[Any] = []

    async def get() -> None:
        got.append(await service.get_session(app_name=APP, user_id="ada", session_id="s"))

    assert await sent(get) == ["read", "read", "read"]
    # Appending to what get_session answered, shared keys included: one request.
    assert await sent(
        lambda: service.append_event(got[0], event(actions=delta(**{"app:a": 1, "user:u": 2})))
    ) == ["batch"]
    assert await sent(
        lambda: service.create_session(app_name=APP, user_id="ada", session_id="t")
    ) == ["batch", "read", "read"]
    # With shared keys too: the new session's state is what was read plus them.
    made: list[Any] = []

    async def create() -> None:
        made.append(
            await service.create_session(
                app_name=APP, user_id="ada", session_id="u", state={"app:b": 2, "user:v": 3}
            )
        )

    assert await sent(create) == ["batch", "read", "read"]
    assert made[0].state == {
        "app:a": 1,
        "app:b": 2,
        "user:u": 2,
        "user:v": 3,
        "user:last_sku": "B-12",
        "app:lookups": 1,
    }


async def test_the_readme_lines(
    server_url: str, token: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unique: str
) -> None:
    from test_readme import block

    code = block("adk")
    assert len(code.strip().splitlines()) == 5
    (tmp_path / ".ctx").mkdir()
    (tmp_path / ".ctx" / "token").write_text(token + "\n")
    monkeypatch.chdir(tmp_path)
    assert '"http://127.0.0.1:7878"' in code
    model = ScriptedModel(model="scripted", replies=[_model_says(types.Part(text="Hello!"))])
    scope: dict[str, Any] = {"agent": LlmAgent(name="clerk", model=model)}
    exec(code.replace('"http://127.0.0.1:7878"', repr(server_url)), scope)  # noqa: S102
    sessions, runner = scope["sessions"], scope["runner"]
    assert runner.session_service is sessions
    s = await sessions.create_session(app_name="shop", user_id=f"readme-{unique}")
    message = types.Content(role="user", parts=[types.Part(text="Hi")])
    async for _ in runner.run_async(user_id=s.user_id, session_id=s.id, new_message=message):
        pass
    got = await sessions.get_session(app_name="shop", user_id=s.user_id, session_id=s.id)
    assert [e.author for e in got.events] == ["user", "clerk"]
    await sessions.client.aclose()


async def test_a_runner_turns_requests(counted: tuple[AsyncClient, Any], unique: str) -> None:
    """A Runner turn that calls a tool: one get_session (three reads at once),
    then one batch per event it appends (user, call, result, reply)."""
    client, transport = counted
    service = CtxSessionService(client, namespace=f"adk-test/{unique}")
    model = ScriptedModel(
        model="scripted",
        replies=[
            _model_says(
                types.Part(function_call=types.FunctionCall(name="_stock", args={"sku": "B-12"}))
            ),
            _model_says(types.Part(text="4 left.")),
        ],
    )
    runner = Runner(
        app_name=APP,
        agent=LlmAgent(name="clerk", model=model, tools=[_stock]),
        session_service=service,
    )
    s = await service.create_session(app_name=APP, user_id="ada")
    mark = transport.mark()
    message = types.Content(role="user", parts=[types.Part(text="Is B-12 in stock?")])
    events = [
        e async for e in runner.run_async(user_id="ada", session_id=s.id, new_message=message)
    ]
    assert len(events) == 3
    assert transport.since(mark) == ["read"] * 3 + ["batch"] * 4
