"""Google ADK's ``SessionService`` on ctx: :class:`CtxSessionService`.

Needs the ``adk`` extra (``pip install 'ctx-client[adk]'``).

The mapping (docs/adr/0009-adk-sessions.md):

- One ref per session: ``adk/{app}/s/{user}/{session}``, each part escaped
  into ref-name characters (:func:`encode_segment`). Its chain is a log of
  JSON lines in the format ``adk-events-v1`` (stored as ctx stores any
  format it does not interpret: bytes, joined by byte append): the root
  commit holds the session's header (ids, initial session state, creation
  time), and each ``append_event`` adds one delta commit holding one line,
  the event as ADK's ``DatabaseSessionService`` stores it
  (``model_dump(mode="json", exclude_none=True)``). The session's own state
  is the header's state with every event's session-scoped delta applied in
  order, so it is never stored twice.
- App state on ``adk/{app}/a`` and user state on ``adk/{app}/u/{user}``:
  chains of ``adk-state-v1`` lines, each a JSON object of the keys an
  event (or ``create_session``) set, merged in order. ``temp:`` keys are
  never written (ADK's base class trims them before this service sees the
  event, and keeps them on the in-memory session only).
- ``append_event`` is one ``POST /v1/batch``: the event's commit on the
  session's tip and, when the event sets ``app:`` or ``user:`` keys, a
  commit on each of those refs, every ref moved by compare-and-swap in one
  atomic write. The session's expected tip is the commit the session object
  was read or last written at (ADK's ``_storage_update_marker``): when the
  session ref has moved since (another writer appended), the batch answers
  409 and the append raises ADK's ``StaleSessionError`` with
  ``DatabaseSessionService``'s message, writing nothing. A 409 on a state
  ref only means another session set shared keys meanwhile: the append is
  sent again on that ref's new tip (state keys are last-writer-wins, as in
  ADK's own services).
- Appends to one session in one process take turns (a lock per session, as
  ``DatabaseSessionService`` has), so overlapping appends through one
  session object all land, each on the tip the one before left.
- ``get_session`` reads the session's chain, its app state and its user
  state: three ``POST /v1/read`` sent at once (one round trip; the server
  has no read of several refs in one request).
- ``close`` (as ADK's database services have) ends the ctx sessions of the
  sessions it wrote to: the branches opened under them are force-returned.
- ``delete_session`` removes the session's ref; its commits stay reachable
  by id until the lifecycle operations erase them (``ctx erase`` with the
  session id the commits carry).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.platform import time as platform_time
from google.adk.platform import uuid as platform_uuid
from google.adk.sessions import _session_util
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session
from google.adk.sessions.state import State

from ._core import CommitClock
from ._listing import all_refs
from ._names import encode_segment
from .client import AsyncClient
from .errors import ConflictError, NotFoundError
from .models import Commit

__all__ = ["EVENTS_FORMAT", "STATE_FORMAT", "STALE_SESSION_MESSAGE", "CtxSessionService"]


EVENTS_FORMAT = "adk-events-v1"
STATE_FORMAT = "adk-state-v1"
# ctx's limits: a ref name, the session id a commit carries.
MAX_REF = 200
MAX_SESSION_ID = 191
# The message ADK's DatabaseSessionService raises StaleSessionError with.
STALE_SESSION_MESSAGE = (
    "The session has been modified in storage since it was loaded. "
    "Please reload the session before appending more events."
)

T = TypeVar("T")


def _line(value: Any) -> str:
    # ASCII escapes keep every string (lone surrogates too) exactly.
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False) + "\n"


def _lines(data: bytes) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n, text in enumerate(data.decode("utf-8").split("\n"), start=1):
        if not text:
            continue
        try:
            value = json.loads(text)
        except ValueError as e:
            raise ValueError(f"line {n} of an ADK chain is not JSON ({e}): {text[:80]!r}") from e
        if not isinstance(value, dict):
            raise ValueError(f"line {n} of an ADK chain is not a JSON object: {text[:80]!r}")
        out.append(value)
    return out


def _merge(app: dict[str, Any], user: dict[str, Any], session: dict[str, Any]) -> dict[str, Any]:
    """The state a Session shows: its own keys, then ``app:`` and ``user:`` ones."""
    # Deep copies, as ADK's own services merge: sessions listed together
    # share no mutable value.
    merged = copy.deepcopy(session)
    for k, v in app.items():
        merged[State.APP_PREFIX + k] = copy.deepcopy(v)
    for k, v in user.items():
        merged[State.USER_PREFIX + k] = copy.deepcopy(v)
    return merged


class _Stored:
    """A session as its chain holds it: header, session state, events."""

    def __init__(self, tip: str, lines: list[dict[str, Any]]) -> None:
        if not lines or "session" not in lines[0]:
            raise ValueError(f"the chain at {tip} does not start with an ADK session header")
        head = lines[0]["session"]
        self.tip = tip
        self.id: str = head["id"]
        self.app_name: str = head["app_name"]
        self.user_id: str = head["user_id"]
        self.state: dict[str, Any] = dict(head["state"])
        self.last_update_time: float = head["time"]
        self.events: list[dict[str, Any]] = []
        for line in lines[1:]:
            event = line["event"]
            self.events.append(event)
            delta = (event.get("actions") or {}).get("state_delta") or {}
            if delta:
                self.state.update(_session_util.extract_json_safe_state_delta(delta)["session"])
            self.last_update_time = event["timestamp"]

    def session(
        self, app: dict[str, Any], user: dict[str, Any], events: list[dict[str, Any]]
    ) -> Session:
        s = Session(
            id=self.id,
            app_name=self.app_name,
            user_id=self.user_id,
            state=_merge(app, user, self.state),
            events=[Event.model_validate(e) for e in events],
            last_update_time=self.last_update_time,
        )
        s._storage_update_marker = self.tip
        return s


class CtxSessionService(BaseSessionService):
    """A ``BaseSessionService`` that keeps ADK sessions, events and state in ctx.

    ``CtxSessionService(AsyncClient(url, token=...))``; pass it as
    ``Runner(agent=..., app_name=..., session_service=...)``. ``namespace``
    is the first part of every ref name; ``principal`` and ``template`` are
    recorded on each commit. An append whose shared-state refs keep moving
    gives up after ``max_attempts``; ``read_concurrency`` bounds the reads
    ``list_sessions`` sends at once.
    """

    def __init__(
        self,
        client: AsyncClient,
        *,
        namespace: str = "adk",
        principal: str = "google-adk",
        template: str = "google-adk",
        max_attempts: int = 16,
        read_concurrency: int = 16,
    ) -> None:
        self.client = client
        self.namespace = namespace.strip("/")
        self.principal = principal
        self.template = template
        self.max_attempts = max_attempts
        self.read_concurrency = read_concurrency
        # Where each state ref pointed when this service last read or moved
        # it: an append's compare-and-swap guesses it (a wrong guess is a 409
        # that says where the ref is now).
        self._tips: dict[str, str | None] = {}
        self._clock = CommitClock()
        # One lock per session ref while appends to it are under way: two
        # appends through one session object in this process take turns,
        # the second on the tip the first left (DatabaseSessionService
        # serializes a process's appends the same way).
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        # The ctx session ids of the sessions this service wrote to since
        # it was made or last closed: what close ends.
        self._written: set[str] = set()

    # --- names --------------------------------------------------------------

    def _checked(self, name: str) -> str:
        if len(name) > MAX_REF:
            raise ValueError(
                f"the ref name {name[:60]}... is {len(name)} bytes, over ctx's {MAX_REF}"
            )
        return name

    def _app_prefix(self, app_name: str) -> str:
        return f"{self.namespace}/{encode_segment(app_name)}/"

    def sessions_prefix(self, app_name: str, user_id: str | None = None) -> str:
        """The prefix of the refs of an app's sessions (of one user's, with ``user_id``)."""
        prefix = self._app_prefix(app_name) + "s/"
        return prefix if user_id is None else prefix + encode_segment(user_id) + "/"

    def session_ref(self, app_name: str, user_id: str, session_id: str) -> str:
        """The ref that holds a session's chain."""
        return self._checked(self.sessions_prefix(app_name, user_id) + encode_segment(session_id))

    def app_state_ref(self, app_name: str) -> str:
        """The ref that holds an app's state."""
        return self._checked(self._app_prefix(app_name) + "a")

    def user_state_ref(self, app_name: str, user_id: str) -> str:
        """The ref that holds a user's state in an app."""
        return self._checked(self._app_prefix(app_name) + "u/" + encode_segment(user_id))

    def ctx_session_id(self, app_name: str, user_id: str, session_id: str) -> str | None:
        """The ctx session of an ADK session: the id its commits carry and
        its branches' session (``None`` when the name is too long for one)."""
        return self._commit_session_id(self.session_ref(app_name, user_id, session_id))

    def _commit_session_id(self, ref: str) -> str | None:
        """The session id the commits of a session's chain carry (for
        ``ctx erase``): its ref without the namespace, when short enough."""
        sid = ref[len(self.namespace) + 1 :]
        return sid if len(sid) <= MAX_SESSION_ID else None

    # --- reading ------------------------------------------------------------

    async def _read(self, ref: str) -> tuple[str | None, list[dict[str, Any]]]:
        """A ref's tip and its chain's lines, in one request (``POST /v1/read``);
        ``(None, [])`` when the ref does not exist. Read from the root: a
        compaction someone committed on the chain is not an ADK line."""
        read, data = await self.client.read_bytes(ref, stop="root")
        if read["commit"] is None:  # no commit yet: the empty context
            return None, []
        return read["commit"], _lines(data)

    async def _state(self, ref: str) -> dict[str, Any]:
        """A state ref's keys, its tip remembered for the next append."""
        tip, lines = await self._read(ref)
        self._tips[ref] = tip
        state: dict[str, Any] = {}
        for line in lines:
            state.update(line)
        return state

    async def _stored(self, ref: str) -> _Stored | None:
        tip, lines = await self._read(ref)
        return None if tip is None else _Stored(tip, lines)

    async def _each(self, read: Callable[[str], Awaitable[T]], refs: list[str]) -> list[T]:
        """``read`` of every ref, at most ``read_concurrency`` at once."""
        gate = asyncio.Semaphore(self.read_concurrency)

        async def one(ref: str) -> T:
            async with gate:
                return await read(ref)

        return list(await asyncio.gather(*(one(r) for r in refs)))

    # --- writing ------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _appending(self, ref: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(ref, (asyncio.Lock(), 0))
        self._locks[ref] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[ref]
            if users == 1:
                del self._locks[ref]
            else:
                self._locks[ref] = (lock, users - 1)

    def _commit(self, fmt: str, line: str, parent: str | None, ref: str) -> dict[str, Any]:
        return {
            "principal": self.principal,
            "template": self.template,
            "format": fmt,
            "delta": line,
            "parent": parent,
            "commit_type": "delta",
            "checkpoint": "explicit",
            "session_id": self._commit_session_id(ref),
            "created_at": self._clock.now(),
        }

    async def _write(
        self,
        session_ref: str,
        session_line: str,
        expected: str | None,
        app_name: str,
        user_id: str,
        deltas: dict[str, dict[str, Any]],
    ) -> tuple[Commit, bool]:
        """Commits ``session_line`` on the session's ref (compare-and-swap from
        ``expected``) and the app and user state deltas on theirs, in one
        batch. Answers the session's new commit, and whether the state
        deltas went on the tips this service knew (``False`` when another
        writer had moved a state ref: the batch was sent again on its new
        tip). A 409 on the session's ref raises (its ConflictError names
        ``refs[0]`` and the ref's ``current``)."""
        shared = [
            (self.app_state_ref(app_name), deltas["app"]),
            (self.user_state_ref(app_name, user_id), deltas["user"]),
        ]
        shared = [(ref, d) for ref, d in shared if d]
        for attempt in range(self.max_attempts):
            commits = [self._commit(EVENTS_FORMAT, session_line, expected, session_ref)]
            refs: list[Any] = [{"name": session_ref, "expected": expected, "target_in_batch": 0}]
            for ref, delta in shared:
                tip = self._tips.get(ref)
                refs.append({"name": ref, "expected": tip, "target_in_batch": len(commits)})
                commits.append(self._commit(STATE_FORMAT, _line(delta), tip, ref))
            try:
                done = await self.client.batch(commits=commits, refs=refs)
            except ConflictError as e:
                i = e.stale_move()
                if i is None or i == 0:
                    raise
                # Another session set shared keys: append on where the ref is now.
                self._tips[refs[i]["name"]] = e.current
                continue
            for i, (ref, _) in enumerate(shared, start=1):
                self._tips[ref] = done["commits"][i]["id"]
            if (sid := self._commit_session_id(session_ref)) is not None:
                self._written.add(sid)
            return done["commits"][0], attempt == 0
        raise ConflictError(
            f"the state refs of app {app_name!r} kept moving: gave up after "
            f"{self.max_attempts} attempts",
            kind="conflict",
        )

    # --- BaseSessionService -------------------------------------------------

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Creates a session (its id given, or generated); ``app:`` and
        ``user:`` keys of ``state`` go to the shared state. Raises ADK's
        ``AlreadyExistsError`` when a session with that id exists."""
        sid = (session_id.strip() if session_id else None) or platform_uuid.new_uuid()
        ref = self.session_ref(app_name, user_id, sid)
        app_ref, user_ref = self.app_state_ref(app_name), self.user_state_ref(app_name, user_id)
        deltas = _session_util.extract_json_safe_state_delta(state or {})
        now = platform_time.get_time()
        header = {
            "session": {
                "id": sid,
                "app_name": app_name,
                "user_id": user_id,
                "state": deltas["session"],
                "time": now,
            }
        }
        # The shared state the new session shows (and the tips its deltas go on).
        app, user = await asyncio.gather(self._state(app_ref), self._state(user_ref))
        try:
            commit, on_known = await self._write(
                ref, _line(header), None, app_name, user_id, deltas
            )
        except ConflictError as e:
            if e.stale_move() == 0:
                raise AlreadyExistsError(f"Session with id {sid} already exists.") from e
            raise
        if on_known:
            app.update(deltas["app"])
            user.update(deltas["user"])
        else:
            # Another writer set shared keys since they were read.
            app, user = await asyncio.gather(self._state(app_ref), self._state(user_ref))
        session = Session(
            id=sid,
            app_name=app_name,
            user_id=user_id,
            state=_merge(app, user, deltas["session"]),
            events=[],
            last_update_time=now,
        )
        session._storage_update_marker = commit["id"]
        return session

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """The session with its events (the newest ``num_recent_events`` of
        those at or after ``after_timestamp``), or ``None``."""
        sid = session_id.strip() if session_id else session_id
        found: tuple[_Stored | None, dict[str, Any], dict[str, Any]] = await asyncio.gather(
            self._stored(self.session_ref(app_name, user_id, sid)),
            self._state(self.app_state_ref(app_name)),
            self._state(self.user_state_ref(app_name, user_id)),
        )
        stored, app, user = found
        if stored is None:
            return None
        events = stored.events
        if config is not None:
            if config.after_timestamp is not None:
                after = config.after_timestamp
                events = [e for e in events if e["timestamp"] >= after]
            if config.num_recent_events is not None:
                n = config.num_recent_events
                events = events[-n:] if n > 0 else []
        return stored.session(app, user, events)

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """The app's sessions (one user's, with ``user_id``), without events,
        their state merged, oldest update first."""
        prefix = self.sessions_prefix(app_name, user_id)
        refs = await all_refs(self.client, prefix)
        found = await self._each(self._stored, [r["name"] for r in refs])
        stored = [s for s in found if s is not None]
        users = sorted({s.user_id for s in stored})
        states = await self._each(
            self._state,
            [self.app_state_ref(app_name)] + [self.user_state_ref(app_name, u) for u in users],
        )
        app, by_user = states[0], dict(zip(users, states[1:], strict=True))
        sessions = [s.session(app, by_user[s.user_id], []) for s in stored]
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=sessions)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Removes the session's ref (nothing when there is none)."""
        sid = session_id.strip() if session_id else session_id
        try:
            await self.client.delete_ref(self.session_ref(app_name, user_id, sid))
        except NotFoundError:
            pass

    async def close(self) -> None:
        """Ends, on ctx's side, the sessions this service created or
        appended to (ADK's own database services close theirs here): the
        branches opened under each one's :meth:`ctx_session_id` are
        force-returned, reason ``session ended``, at most
        ``read_concurrency`` requests at once. The sessions' events stay,
        the service can be used again, and the client stays open (it is
        the caller's). Without a close, the server's idle sweep
        (``CTX_SESSION_IDLE_SECS``) ends them."""
        written, self._written = sorted(self._written), set()
        try:
            await self._each(self.client.session_end, written)
        except BaseException:
            self._written.update(written)
            raise

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's state in the app, keys without the ``user:`` prefix."""
        return await self._state(self.user_state_ref(app_name, user_id))

    async def append_event(self, session: Session, event: Event) -> Event:
        """Appends ``event`` to the session: one batch (see the module doc).
        Raises ADK's ``StaleSessionError`` when the session has been appended
        to since ``session`` was read, and ``SessionNotFoundError`` when it
        no longer exists; either way nothing is written."""
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        ref = self.session_ref(session.app_name, session.user_id, session.id)
        delta = event.actions.state_delta if event.actions and event.actions.state_delta else {}
        deltas = _session_util.extract_json_safe_state_delta(delta)
        line = _line({"event": event.model_dump(mode="json", exclude_none=True)})
        async with self._appending(ref):
            expected = session._storage_update_marker
            if expected is None:
                expected = await self._revision_of(ref, session)
            try:
                commit, _ = await self._write(
                    ref, line, expected, session.app_name, session.user_id, deltas
                )
            except ConflictError as e:
                if e.stale_move() != 0:
                    raise
                if e.current is None:
                    raise SessionNotFoundError(f"Session {session.id} not found.") from e
                raise StaleSessionError(STALE_SESSION_MESSAGE) from e
            session._storage_update_marker = commit["id"]
            session.last_update_time = event.timestamp
            return self._commit_event_to_session(session, event)

    async def _revision_of(self, ref: str, session: Session) -> str:
        """The tip to append on for a session object this service did not
        read (no marker), checked as DatabaseSessionService checks one: it
        is stale when storage moved past its ``last_update_time`` and its
        last event is not the stored last event."""
        stored = await self._stored(ref)
        if stored is None:
            raise SessionNotFoundError(f"Session {session.id} not found.")
        if stored.last_update_time > session.last_update_time:
            if session.events:
                fresh = bool(stored.events) and stored.events[-1]["id"] == session.events[-1].id
            else:
                fresh = not stored.events
            if not fresh:
                raise StaleSessionError(STALE_SESSION_MESSAGE)
        return stored.tip
