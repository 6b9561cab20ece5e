"""The OpenAI Agents SDK's ``Session`` on ctx: :class:`CtxSession`.

Needs the ``openai`` extra (``pip install 'ctx-client[openai]'``).

The mapping:

- One ref per session: ``openai-agents/{session_id}`` (the id escaped into
  ref-name characters). The session's items are Responses API input items,
  stored in the ``openai-responses-v1`` format, so a session can be
  materialized for another runtime (``format="anthropic-messages-v1"``, ...).
- ``add_items`` is one delta checkpoint holding the items as a JSON array,
  moving the ref by compare-and-swap; a 409 (another writer moved the ref)
  is rebased on the new tip and tried again. An item the server refuses
  (a function call whose arguments are not JSON, ...) is stored wrapped in
  ``{"type": "ctx-verbatim", "item": ...}`` and unwrapped on the way out, so
  the session keeps what the SDK gave it.
- ``get_items`` materializes the tip from its nearest snapshot (the default
  stop), deep-equal to what was added. With a ``limit`` it reads only the
  tail: the newest ``limit`` commits' own deltas joined (``delta``,
  ``depth``; each commit holds at least one item), back to the nearest
  snapshot at most, and materializes the whole only when that gave fewer
  items and the chain goes on (a snapshot after a clear or a pop).
- ``pop_item`` moves the ref back to the parent when the tip's delta holds
  only the popped item, commits the tip's delta minus its last item on the
  parent when it holds more, and otherwise commits a snapshot of the items
  minus the last on the tip.
- ``clear_session`` commits an empty snapshot on the tip: the session is
  empty, and everything before stays reachable with ``stop: root``.
- ``close`` (as the SDK's ``SQLiteSession`` has) ends the ctx session of the
  same id: the branches opened under it are force-returned.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any, cast

from agents.items import TResponseInputItem
from agents.memory.session_settings import (
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)

from ._core import CommitClock
from ._names import encode_segment
from .client import AsyncClient
from .errors import ConflictError, InvalidError, NotFoundError
from .models import Commit

__all__ = ["FORMAT", "CtxSession"]

log = logging.getLogger(__name__)

FORMAT = "openai-responses-v1"
# ctx's limit on a ref name.
MAX_REF = 200
# ctx's limit on the commits a delta read joins.
MAX_DEPTH = 1000
# An item the server refused is stored wrapped in this and unwrapped by
# get_items (an item whose own type is this one is always wrapped, so
# unwrapping is exact).
VERBATIM = "ctx-verbatim"

_AT_INDEX = re.compile(r"at index (\d+):")


def _wrap(item: Any) -> dict[str, Any]:
    return {"type": VERBATIM, "item": item}


def _unwrap(item: Any) -> Any:
    if isinstance(item, dict) and item.get("type") == VERBATIM and "item" in item:
        return item["item"]
    return item


def _must_wrap(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == VERBATIM


def _dumps(items: list[Any]) -> str:
    # ASCII escapes keep every string (lone surrogates too) exactly.
    return json.dumps(items, ensure_ascii=True, separators=(",", ":"), allow_nan=False)


class CtxSession:
    """A Session (``agents.memory.Session`` protocol) kept in ctx.

    ``CtxSession("user-42", AsyncClient(url, token=...))``; pass it as
    ``Runner.run(agent, input, session=...)``. ``namespace`` is the first
    part of the ref name; ``principal`` and ``template`` are recorded on
    each commit; ``session_settings`` (``limit``) as for ``SQLiteSession``.
    """

    session_id: str
    ctx_session_id: str
    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        client: AsyncClient,
        *,
        namespace: str = "openai-agents",
        principal: str = "openai-agents",
        template: str = "openai-agents",
        session_settings: SessionSettings | dict[str, Any] | None = None,
        max_attempts: int = 16,
    ) -> None:
        self.session_id = session_id
        self.client = client
        self.session_settings = (
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )
        self.ref = f"{namespace.strip('/')}/{encode_segment(session_id)}"
        # The session id its commits carry, and its branches' session.
        self.ctx_session_id = encode_segment(session_id)
        if len(self.ref) > MAX_REF:
            raise ValueError(
                f"the ref name for this session is {len(self.ref)} bytes, over ctx's {MAX_REF}"
            )
        self.principal = principal
        self.template = template
        self.max_attempts = max_attempts
        self._clock = CommitClock()
        # Where the ref pointed when this session last read or moved it:
        # add_items guesses it for its compare-and-swap (one request; a
        # wrong guess is a 409 that says where the ref is now).
        self._seen: str | None = None
        self._seen_known = False

    # --- helpers ------------------------------------------------------------

    async def _tip(self) -> str | None:
        try:
            tip: str | None = (await self.client.get_ref(self.ref))["target"]
        except NotFoundError:
            tip = None
        self._saw(tip)
        return tip

    def _saw(self, tip: str | None) -> None:
        self._seen, self._seen_known = tip, True

    async def _read(self) -> tuple[str | None, list[Any]]:
        """The ref's tip and its items, in one request (``POST /v1/read``)."""
        read, data = await self.client.read_bytes(self.ref, format=FORMAT)
        self._saw(read["commit"])
        if read["commit"] is None:  # no commit yet: the empty context
            return None, []
        return read["commit"], [_unwrap(i) for i in json.loads(data)]

    async def _commit(
        self, items: list[Any], *, parent: str | None, expected: str | None, kind: str
    ) -> Commit:
        """Checkpoints ``items`` on ``parent``, moving the ref from
        ``expected``; an item the server refuses is wrapped and the
        checkpoint tried again. Raises ConflictError when the ref moved."""
        stored = [_wrap(i) if _must_wrap(i) else i for i in items]
        for _ in range(len(stored) + 1):
            try:
                commit = await self.client.checkpoint(
                    principal=self.principal,
                    template=self.template,
                    format=FORMAT,
                    delta=_dumps(stored),
                    parent=parent,
                    commit_type=kind,
                    checkpoint="explicit" if kind == "snapshot" else "turn_boundary",
                    session_id=self.ctx_session_id,
                    created_at=self._clock.now(),
                    ref=self.ref,
                    expected=expected,
                )
                self._saw(commit["id"])
                return commit
            except ConflictError as e:
                # Where the ref is now, when the answer says (None: gone).
                if e.current is not None:
                    self._saw(e.current)
                else:
                    self._seen_known = False
                raise
            except InvalidError as e:
                m = _AT_INDEX.search(e.message or "")
                if e.field not in ("delta", "delta_base64") or m is None:
                    raise
                i = int(m.group(1))
                if i >= len(stored) or _must_wrap(stored[i]):
                    raise
                log.warning("ctx refused a session item (%s); storing it wrapped", e.message)
                stored[i] = _wrap(stored[i])
        raise AssertionError("every item is wrapped: the server cannot refuse them all")

    # --- the Session protocol -------------------------------------------------

    async def _read_tail(self, n: int) -> list[Any] | None:
        """At least the newest ``n`` items, in one request, from the newest
        ``n`` commits' deltas; ``None`` when those hold fewer and the chain
        goes on past them (the whole must be read)."""
        try:
            read, data = await self.client.read_bytes(
                self.ref, delta=True, stop="compaction", depth=min(n, MAX_DEPTH)
            )
        except NotFoundError as e:
            if e.field != "ref":
                raise
            self._saw(None)
            return []
        self._saw(read["commit"])
        items = [_unwrap(i) for i in json.loads(data)]
        if len(items) < n and read.get("parent") is not None:
            return None
        return items

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first: the newest ``limit`` of them
        (default ``session_settings.limit``; ``None`` or negative: all)."""
        n = resolve_session_limit(limit, self.session_settings)
        if n == 0:
            return []
        if n is not None and n > 0:
            tail = await self._read_tail(n)
            if tail is not None:
                return tail[-n:]
        _, items = await self._read()
        if n is None or n < 0:
            return items
        return items[-n:]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Appends ``items`` as one commit on the session's ref."""
        if not items:
            return
        items = list(items)
        for _ in range(self.max_attempts):
            # The tip this session last saw, read only when it saw none: in
            # the Runner's loop (get_items, then add_items) one request.
            tip = self._seen if self._seen_known else await self._tip()
            try:
                await self._commit(items, parent=tip, expected=tip, kind="delta")
                return
            except ConflictError:
                continue  # another writer moved the ref: append on its tip
        raise ConflictError(
            f"ref {self.ref} kept moving: gave up after {self.max_attempts} attempts",
            kind="conflict",
        )

    async def pop_item(self) -> TResponseInputItem | None:
        """Removes and returns the newest item (``None`` when there is none)."""
        for _ in range(self.max_attempts):
            tip, items = await self._read()
            if tip is None or not items:
                return None
            last = items[-1]
            commit = await self.client.get_commit(tip)
            try:
                delta: list[Any] | None = None
                if commit["commit_type"] == "delta" and commit["format"] == FORMAT:
                    delta = json.loads(await self.client.download_artifact(commit["artifact_ref"]))
                if delta and len(delta) == 1 and commit["parent"] is not None:
                    await self.client.set_ref(self.ref, commit["parent"], expected=tip)
                    self._saw(commit["parent"])
                elif delta and len(delta) > 1:
                    rest = [_unwrap(i) for i in delta[:-1]]
                    await self._commit(rest, parent=commit["parent"], expected=tip, kind="delta")
                else:
                    await self._commit(items[:-1], parent=tip, expected=tip, kind="snapshot")
            except ConflictError:
                continue
            return cast(TResponseInputItem, last)
        raise ConflictError(
            f"ref {self.ref} kept moving: gave up after {self.max_attempts} attempts",
            kind="conflict",
        )

    async def close(self) -> None:
        """Ends the session as the SDK's own sessions' ``close`` does, on
        ctx's side: the branches opened under its session id
        (:attr:`ctx_session_id`, the id its commits carry) are
        force-returned, reason ``session ended`` (``POST
        /v1/sessions/{id}/end``). Its items stay, the session can be used
        again, and the client stays open (it is the caller's). Without a
        close, the server's idle sweep (``CTX_SESSION_IDLE_SECS``) ends
        them."""
        await self.client.session_end(self.ctx_session_id)

    async def clear_session(self) -> None:
        """Empties the session with an empty snapshot commit on the tip; the
        history before it stays reachable (``stop: root``)."""
        for _ in range(self.max_attempts):
            tip = await self._tip()
            if tip is None:
                return
            try:
                await self._commit([], parent=tip, expected=tip, kind="snapshot")
                return
            except ConflictError:
                continue
        raise ConflictError(
            f"ref {self.ref} kept moving: gave up after {self.max_attempts} attempts",
            kind="conflict",
        )
