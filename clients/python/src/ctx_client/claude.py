"""The Claude Agent SDK's ``SessionStore`` on ctx: :class:`CtxSessionStore`.

Needs the ``claude`` extra (``pip install 'ctx-client[claude]'``).

The mapping:

- One ref per key: ``claude/{project_key}/{session_id}`` for a main
  transcript, ``claude/{project_key}/{session_id}/{subpath}`` for a subagent
  transcript (each part escaped into ref-name characters, see
  :func:`encode_segment`). Claude Code hooks (``ctx hook claude-code``)
  write to the same refs, so both see one session.
- ``append`` is one ``claude-code-v1`` delta checkpoint whose delta is the
  batch as JSONL (one ``json.dumps`` per entry), moving the ref by
  compare-and-swap. A 409 (another writer moved the ref) is rebased on the
  new tip and tried again. The commit is tagged with a digest of the
  batch's entry uuids, so a batch sent again after its response was lost
  is recognised on the chain and not appended twice.
- ``load`` materializes the tip with ``stop: root`` (a compaction never
  cuts a resumed transcript) and parses the JSONL back: entries come back
  deep-equal, unknown types intact. ``None`` for a key without a ref.
- The session summary the SDK folds (``fold_session_summary``) is kept as
  an artifact named by the tip commit's tag ``claude.summary``; its
  ``mtime``, like ``list_sessions``', is the ref's last move.
- ``delete`` removes the ref (and, for a main key, its subkeys' refs); the
  commits stay reachable by id until erased by the lifecycle operations.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from claude_agent_sdk import fold_session_summary
from claude_agent_sdk.types import (
    SessionKey,
    SessionListSubkeysKey,
    SessionStore,
    SessionStoreEntry,
    SessionStoreListEntry,
    SessionSummaryEntry,
)

from ._names import decode_segment, encode_segment
from .client import AsyncClient
from .errors import ConflictError, InvalidError, NotFoundError
from .models import Commit

__all__ = ["CtxSessionStore", "decode_segment", "encode_segment"]

log = logging.getLogger(__name__)

FORMAT = "claude-code-v1"
TAG_BATCH = "claude.batch"
TAG_SUMMARY = "claude.summary"
# An entry the claude-code-v1 codec refused is stored wrapped in this, and
# unwrapped by load (an entry whose own type is this one is always wrapped,
# so unwrapping is exact).
VERBATIM = "ctx-verbatim"
# How many commits back a re-sent batch is looked for.
DEDUP_DEPTH = 32
# Ref-name limits (ctx: 200 bytes); a longer project key is shortened with
# a hash, which needs no inverse: project keys are only ever given.
MAX_PROJECT_SEGMENT = 80
MAX_REF = 200
MAX_REFS = 1000


def _project_segment(project_key: str) -> str:
    seg = encode_segment(project_key)
    if len(seg) <= MAX_PROJECT_SEGMENT:
        return seg
    digest = hashlib.blake2b(project_key.encode("utf-8"), digest_size=8).hexdigest()
    return f"{seg[: MAX_PROJECT_SEGMENT - 18]}-h{digest}"


def _ms(rfc3339: str) -> int:
    return int(datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp() * 1000)


def _line(entry: Any) -> str:
    try:
        text = json.dumps(entry, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate: JSON escapes keep it.
        text = json.dumps(entry, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text + "\n"


def _wrap(entry: Any) -> Any:
    return {"type": VERBATIM, "entry": entry}


def _must_wrap(entry: Any) -> bool:
    return isinstance(entry, dict) and entry.get("type") == VERBATIM


def _batch_digest(entries: list[SessionStoreEntry]) -> str | None:
    """What identifies a batch: its entries' uuids, in order (``None`` when
    none has one: such a batch is appended without dedup)."""
    uuids = [e.get("uuid") for e in entries if isinstance(e, dict)]
    ids = [u for u in uuids if isinstance(u, str)]
    if not ids:
        return None
    return hashlib.sha256("\n".join(ids).encode("utf-8")).hexdigest()


class _Tip:
    """What this process last knew of a key's ref: its tip, the commits
    before it (newest first) and, once read or written, the tip's summary."""

    def __init__(
        self,
        commit: Commit | None,
        recent: list[Commit],
        summary: SessionSummaryEntry | None = None,
    ) -> None:
        self.commit = commit
        self.recent = recent
        self.summary = summary


class CtxSessionStore(SessionStore):
    """A ``SessionStore`` that keeps Claude Agent SDK transcripts in ctx.

    ``CtxSessionStore(AsyncClient(url, token=...))``; pass it as
    ``ClaudeAgentOptions(session_store=...)``. ``namespace`` is the first
    part of every ref name (``claude``); ``principal`` and ``template``
    are recorded on each commit.
    """

    def __init__(
        self,
        client: AsyncClient,
        *,
        namespace: str = "claude",
        principal: str = "claude-agent-sdk",
        template: str = "claude-agent-sdk",
        max_attempts: int = 16,
    ) -> None:
        self.client = client
        self.namespace = namespace.strip("/")
        self.principal = principal
        self.template = template
        self.max_attempts = max_attempts
        self._tips: dict[str, _Tip] = {}
        self._last_us = 0

    # --- keys ---------------------------------------------------------------

    def _session_prefix(self, project_key: str) -> str:
        return f"{self.namespace}/{_project_segment(project_key)}/"

    def ref_name(self, key: SessionKey) -> str:
        """The ref that holds ``key``'s transcript."""
        name = self._session_prefix(key["project_key"]) + encode_segment(key["session_id"])
        subpath = key.get("subpath")
        if subpath:
            name += "/" + "/".join(encode_segment(p) for p in subpath.split("/"))
        if len(name) > MAX_REF:
            raise ValueError(
                f"the ref name for this key is {len(name)} bytes, over ctx's {MAX_REF}: {name}"
            )
        return name

    # --- append -------------------------------------------------------------

    def _created_at(self) -> datetime:
        """Now, strictly later than this store's previous checkpoint: a
        commit id derives from (parent, delta, time, template), so two
        equal batches appended to two new keys in one microsecond would
        otherwise be one commit."""
        self._last_us = max(time.time_ns() // 1000, self._last_us + 1)
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=self._last_us)

    async def _refresh(self, ref: str) -> _Tip:
        try:
            record = await self.client.get_ref(ref)
        except NotFoundError:
            tip = _Tip(None, [])
        else:
            hist = await self.client.history(record["target"], depth=DEDUP_DEPTH)
            tip = _Tip(hist["commits"][0], hist["commits"])
        self._tips[ref] = tip
        return tip

    async def _summary_of(self, commit: Commit | None) -> SessionSummaryEntry | None:
        art = (commit or {}).get("tags", {}).get(TAG_SUMMARY) if commit else None
        if not art:
            return None
        stored = json.loads(await self.client.get_artifact(art))
        return {"session_id": stored["session_id"], "mtime": 0, "data": stored["data"]}

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """Appends ``entries`` as one commit on the key's ref (see the module doc)."""
        if not entries:
            return
        ref = self.ref_name(key)
        digest = _batch_digest(entries)
        wrap_all = False
        tip = self._tips.get(ref)
        if tip is None:
            tip = await self._refresh(ref)
        for _attempt in range(self.max_attempts):
            if digest is not None and any(
                c.get("tags", {}).get(TAG_BATCH) == digest for c in tip.recent
            ):
                return  # this batch is on the chain already: a re-send
            tags: dict[str, str] = {}
            if digest is not None:
                tags[TAG_BATCH] = digest
            if not key.get("subpath"):
                if tip.summary is None:
                    tip.summary = await self._summary_of(tip.commit)
                folded = fold_session_summary(tip.summary, key, entries)
                stored = {"session_id": folded["session_id"], "data": folded["data"]}
                put = await self.client.put_artifact(
                    json.dumps(stored, sort_keys=True, separators=(",", ":")).encode()
                )
                tags[TAG_SUMMARY] = put["ref"]
            delta = "".join(_line(_wrap(e) if wrap_all or _must_wrap(e) else e) for e in entries)
            parent = tip.commit["id"] if tip.commit else None
            try:
                commit = await self.client.checkpoint(
                    principal=self.principal,
                    template=self.template,
                    format=FORMAT,
                    delta=delta,
                    parent=parent,
                    session_id=encode_segment(key["session_id"]),
                    created_at=self._created_at(),
                    tags=tags,
                    ref=ref,
                    expected=parent,
                )
            except ConflictError:
                # Another writer moved the ref (or removed it): rebase on
                # where it is now, which may already hold this batch.
                tip = await self._refresh(ref)
                continue
            except InvalidError as e:
                if e.field in ("delta", "format") and not wrap_all:
                    log.warning(
                        "ctx refused a batch as claude-code-v1 (%s); storing its entries wrapped",
                        e.message,
                    )
                    wrap_all = True
                    continue
                raise
            summary: SessionSummaryEntry | None = None
            if not key.get("subpath"):
                summary = {"session_id": folded["session_id"], "mtime": 0, "data": folded["data"]}
            self._tips[ref] = _Tip(commit, [commit, *tip.recent][:DEDUP_DEPTH], summary)
            return
        raise ConflictError(
            f"ref {ref} kept moving: gave up after {self.max_attempts} attempts",
            kind="conflict",
        )

    # --- load ---------------------------------------------------------------

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        """The key's entries, oldest first, or ``None`` if it has no ref."""
        ref = self.ref_name(key)
        try:
            record = await self.client.get_ref(ref)
        except NotFoundError:
            return None
        _, data = await self.client.materialize_bytes(record["target"], stop="root")
        out: list[SessionStoreEntry] = []
        for line in data.decode("utf-8").split("\n"):
            if not line:
                continue
            entry = json.loads(line)
            if isinstance(entry, dict) and entry.get("type") == VERBATIM and "entry" in entry:
                entry = entry["entry"]
            out.append(entry)
        return out

    # --- listing ------------------------------------------------------------

    async def _refs_under(self, prefix: str) -> list[dict[str, Any]]:
        refs = await self.client.list_refs(prefix=prefix, limit=MAX_REFS)
        if len(refs) >= MAX_REFS:
            log.warning("more than %d refs under %s: the listing is cut", MAX_REFS, prefix)
        return [dict(r) for r in refs]

    async def _main_refs(self, project_key: str) -> list[dict[str, Any]]:
        prefix = self._session_prefix(project_key)
        return [r for r in await self._refs_under(prefix) if "/" not in r["name"][len(prefix) :]]

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        """The project's sessions (main transcripts only), with the time
        their ref last moved in epoch milliseconds."""
        prefix = self._session_prefix(project_key)
        return [
            {
                "session_id": decode_segment(r["name"][len(prefix) :]),
                "mtime": _ms(r["updated_at"]),
            }
            for r in await self._main_refs(project_key)
        ]

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        """The summaries ``append`` folded, one per session, ``mtime`` as in
        :meth:`list_sessions`."""
        out: list[SessionSummaryEntry] = []
        for r in await self._main_refs(project_key):
            try:
                commit = await self.client.get_commit(r["target"])
            except NotFoundError:
                continue
            summary = await self._summary_of(commit)
            if summary is None:
                continue
            summary["mtime"] = _ms(r["updated_at"])
            out.append(summary)
        return out

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        """The subpaths stored under a session."""
        prefix = self.ref_name({**key}) + "/"  # type: ignore[typeddict-item]
        return [
            "/".join(decode_segment(p) for p in r["name"][len(prefix) :].split("/"))
            for r in await self._refs_under(prefix)
        ]

    # --- delete -------------------------------------------------------------

    async def _delete_ref(self, ref: str) -> None:
        self._tips.pop(ref, None)
        try:
            await self.client.delete_ref(ref)
        except NotFoundError:
            pass

    async def delete(self, key: SessionKey) -> None:
        """Removes the key's ref; for a main key its subkeys' refs too."""
        ref = self.ref_name(key)
        if not key.get("subpath"):
            for r in await self._refs_under(ref + "/"):
                await self._delete_ref(r["name"])
        await self._delete_ref(ref)
