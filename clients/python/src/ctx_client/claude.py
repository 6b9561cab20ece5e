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
  compare-and-swap on the tip this store last wrote. When the ref is not
  where it left it (a 409: another writer, ``ctx hook claude-code``, or an
  earlier call of ours whose response was lost), it reads the chain and
  tries again on the new tip. A batch the chain holds whole (each entry by
  its ``uuid``, those without one by content) is a re-send and done;
  otherwise the entries whose ``uuid`` the chain holds are dropped and the
  rest appended, those without a ``uuid`` as sent. The store remembers
  what it wrote, so a re-import into the same store is a no-op too.
- ``load`` materializes the tip with ``stop: root`` (a compaction never
  cuts a resumed transcript) and parses the JSONL back: entries come back
  deep-equal, unknown types intact. ``None`` for a key without a ref.
- The session summary the SDK folds (``fold_session_summary``) is kept as
  an artifact named by the tip commit's tag ``claude.summary`` (folded
  over the whole transcript when the tip is another writer's); its
  ``mtime``, like ``list_sessions``', is the ref's last move.
- An entry the codec reads as no message (a ``user`` line without a
  ``message``) is stored as written, with the server's warning (the codec
  keeps every UTF-8 line, and each entry is one). An entry whose own type
  is ``ctx-verbatim`` is stored wrapped in one, so that ``load``, which
  unwraps them (as earlier versions wrapped entries the codec refused),
  gives it back exactly.
- ``delete`` removes the ref (and, for a main key, its subkeys' refs); the
  commits stay reachable by id until erased by the lifecycle operations.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from datetime import datetime
from typing import Any

import anyio
from claude_agent_sdk import fold_session_summary
from claude_agent_sdk.types import (
    SessionKey,
    SessionListSubkeysKey,
    SessionStore,
    SessionStoreEntry,
    SessionStoreListEntry,
    SessionSummaryEntry,
)

from ._core import CommitClock, artifact_ref_of
from ._listing import all_refs
from ._names import decode_segment, encode_segment
from .client import AsyncClient
from .errors import ConflictError, NotFoundError

__all__ = ["CtxSessionStore", "decode_segment", "encode_segment"]

log = logging.getLogger(__name__)

FORMAT = "claude-code-v1"
TAG_SUMMARY = "claude.summary"
# An entry whose own type is this one is stored wrapped in one, and load
# unwraps every one (earlier versions wrapped entries the codec refused).
VERBATIM = "ctx-verbatim"
# ctx's ref-name limit, and the length of the Claude session ids (UUIDs) a
# project's ref prefix is sized for.
MAX_REF = 200
SESSION_ID_LEN = 36


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


def _uuid(entry: Any) -> str | None:
    u = entry.get("uuid") if isinstance(entry, dict) else None
    return u if isinstance(u, str) else None


class _Tip:
    """What this process knows of a key's ref: the tip it last saw or
    wrote; the uuids of the entries up to it, and digests of those without
    one; the session summary at the tip once read or folded."""

    def __init__(self, commit: str | None, entries: list[SessionStoreEntry]) -> None:
        self.commit = commit
        self.known: set[str] = set()
        self.seen: set[bytes] = set()
        self.summary: SessionSummaryEntry | None = None
        self.add(entries)

    def add(self, entries: list[SessionStoreEntry]) -> None:
        for e in entries:
            u = _uuid(e)
            if u is not None:
                self.known.add(u)
            else:
                self.seen.add(_fingerprint(e))

    def holds(self, batch: list[SessionStoreEntry]) -> bool:
        """Whether ``batch`` is a re-send: it has a uuid, and every entry
        of it is on the chain (by uuid, or by content for those without)."""
        return any(_uuid(e) for e in batch) and all(
            _uuid(e) in self.known if _uuid(e) is not None else _fingerprint(e) in self.seen
            for e in batch
        )


def _fingerprint(entry: Any) -> bytes:
    text = json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


# The largest delta (characters) an append sends in one batch with its
# folded summary; a larger one goes as before (the summary uploaded, then
# the checkpoint), well inside the batch's inline and body limits.
_BATCH_DELTA_CHARS = 256 * 1024


class CtxSessionStore(SessionStore):
    """A ``SessionStore`` that keeps Claude Agent SDK transcripts in ctx.

    ``CtxSessionStore(AsyncClient(url, token=...))``; pass it as
    ``ClaudeAgentOptions(session_store=...)``. ``namespace`` is the first
    part of every ref name (``claude``, where Claude Code hooks write too);
    ``principal`` and ``template`` are recorded on each commit. An append
    that keeps losing the compare-and-swap to other writers waits a random
    part of ``conflict_backoff * 2**n`` seconds (at most 1 s) before its
    n-th retry, and gives up after ``max_attempts``.
    """

    def __init__(
        self,
        client: AsyncClient,
        *,
        namespace: str = "claude",
        principal: str = "claude-agent-sdk",
        template: str = "claude-agent-sdk",
        max_attempts: int = 32,
        conflict_backoff: float = 0.005,
    ) -> None:
        self.client = client
        self.namespace = namespace.strip("/")
        self.principal = principal
        self.template = template
        self.max_attempts = max_attempts
        self.conflict_backoff = conflict_backoff
        self._tips: dict[str, _Tip] = {}
        self._clock = CommitClock()

    # --- keys ---------------------------------------------------------------

    def _session_prefix(self, project_key: str) -> str:
        """``{namespace}/{project}/``. The project part is shortened as
        ``ctx hook claude-code`` shortens it (the first characters, ``-``
        and 16 hex digits of the key's BLAKE3) when a session's ref, with
        a 36-character session id, would pass ctx's 200 bytes, so both
        name a session's ref alike."""
        seg = encode_segment(project_key)
        fixed = len(self.namespace) + 1 + 1 + SESSION_ID_LEN
        if fixed + len(seg) <= MAX_REF:
            return f"{self.namespace}/{seg}/"
        from blake3 import blake3

        digest = blake3(project_key.encode("utf-8")).hexdigest()[:16]
        keep = max(MAX_REF - (fixed + 1 + 16), 0)
        return f"{self.namespace}/{seg[:keep]}-{digest}/"

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

    async def _read(self, ref: str) -> tuple[str, list[SessionStoreEntry]] | None:
        """The ref's tip and its entries, in one request (``POST /v1/read``);
        ``None`` when the ref has no commit (the empty context answered)."""
        read, data = await self.client.read_bytes(ref, stop="root")
        if read["commit"] is None:
            return None
        return read["commit"], _entries_of(data)

    async def _entries_at(self, commit: str) -> list[SessionStoreEntry]:
        _, data = await self.client.materialize_bytes(commit, stop="root")
        return _entries_of(data)

    async def _summary_at(
        self, key: SessionKey, commit: str, entries: list[SessionStoreEntry] | None = None
    ) -> SessionSummaryEntry:
        """The session summary at ``commit``: the one its tag names, or
        (a commit another writer made, as the hooks do) folded over the
        whole transcript."""
        tags = (await self.client.get_commit(commit)).get("tags", {})
        art = tags.get(TAG_SUMMARY)
        if art:
            stored = json.loads(await self.client.download_artifact(art))
            return {"session_id": stored["session_id"], "mtime": 0, "data": stored["data"]}
        if entries is None:
            entries = await self._entries_at(commit)
        return fold_session_summary(None, key, entries)

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """Appends ``entries`` as one commit on the key's ref (see the module doc)."""
        if not entries:
            return
        ref = self.ref_name(key)
        main = not key.get("subpath")
        tip = self._tips.get(ref)
        if tip is None:
            # Unknown here: the ref may hold entries of this batch already
            # (written by a call whose response was lost, or by the hooks).
            tip = await self._refresh(ref, key)
        conflicts = 0
        # The folded summary of the main transcript: (the tip and pending
        # count it was folded for, its artifact's ref, the entry, its bytes).
        summarized: tuple[str | None, int, str, SessionSummaryEntry, bytes] | None = None
        while True:
            if tip.holds(entries):
                return  # all of it is on the chain already: a re-send
            # Entries without a uuid are appended as sent (a second
            # identical tag entry is a second entry).
            pending = [e for e in entries if _uuid(e) is None or _uuid(e) not in tip.known]
            tags: dict[str, str] = {}
            folded: SessionSummaryEntry | None = None
            if main:
                if summarized is None or summarized[:2] != (tip.commit, len(pending)):
                    if tip.summary is None and tip.commit is not None:
                        tip.summary = await self._summary_at(key, tip.commit)
                    fold = fold_session_summary(tip.summary, key, pending)
                    stored = {"session_id": fold["session_id"], "data": fold["data"]}
                    data = json.dumps(stored, sort_keys=True, separators=(",", ":")).encode()
                    summarized = (tip.commit, len(pending), artifact_ref_of(data), fold, data)
                tags[TAG_SUMMARY] = summarized[2]
                folded = summarized[3]
            delta = "".join(_line(_wrap(e) if _must_wrap(e) else e) for e in pending)
            fields: dict[str, Any] = {
                "principal": self.principal,
                "template": self.template,
                "format": FORMAT,
                "delta": delta,
                "parent": tip.commit,
                "session_id": encode_segment(key["session_id"]),
                "created_at": self._clock.now(),
                "tags": tags,
            }
            try:
                if summarized is not None and len(delta) <= _BATCH_DELTA_CHARS:
                    # The folded summary and the commit naming it, one
                    # request and one atomic write.
                    done = await self.client.batch(
                        commits=[fields],
                        refs=[{"name": ref, "expected": tip.commit, "target_in_batch": 0}],
                        artifacts=[summarized[4]],
                    )
                    commit = done["commits"][0]
                else:
                    if summarized is not None:
                        # A large append: the summary first, then the
                        # checkpoint (which uploads a large delta itself).
                        await self.client.upload_artifact(summarized[4])
                    commit = await self.client.checkpoint(**fields, ref=ref, expected=tip.commit)
            except ConflictError:
                # Another writer moved the ref (or removed it), or an
                # earlier call of ours landed unseen: rebase on where it is
                # now, without the entries it already holds.
                conflicts += 1
                if conflicts >= self.max_attempts:
                    break
                if self.conflict_backoff > 0:
                    # Jitter, so a writer that keeps winning (its tip is
                    # fresh) does not starve the others.
                    cap = min(self.conflict_backoff * 2**conflicts, 1.0)
                    await anyio.sleep(random.uniform(0, cap))
                tip = await self._refresh(ref, key)
                continue
            tip.commit = commit["id"]
            tip.add(pending)
            tip.summary = folded
            return
        raise ConflictError(
            f"ref {ref} kept moving: gave up after {self.max_attempts} attempts",
            kind="conflict",
        )

    async def _refresh(self, ref: str, key: SessionKey) -> _Tip:
        """Where the ref is now, and what it holds."""
        read = await self._read(ref)
        if read is None:
            tip = _Tip(None, [])
            self._tips[ref] = tip
            return tip
        target, entries = read
        tip = _Tip(target, entries)
        if not key.get("subpath"):
            tip.summary = await self._summary_at(key, target, entries)
        self._tips[ref] = tip
        return tip

    # --- load ---------------------------------------------------------------

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        """The key's entries, oldest first, or ``None`` if it has no ref."""
        read = await self._read(self.ref_name(key))
        return None if read is None else read[1]

    # --- listing ------------------------------------------------------------

    async def _refs_under(self, prefix: str) -> list[dict[str, Any]]:
        return await all_refs(self.client, prefix)

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
        prefix = self._session_prefix(project_key)
        for r in await self._main_refs(project_key):
            key: SessionKey = {
                "project_key": project_key,
                "session_id": decode_segment(r["name"][len(prefix) :]),
            }
            try:
                summary = await self._summary_at(key, r["target"])
            except NotFoundError:
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


def _entries_of(data: bytes) -> list[SessionStoreEntry]:
    """A materialized transcript's entries (JSONL), verbatim ones unwrapped.
    A line that is not JSON (the Claude Code hook stores a transcript's
    lines as written, a damaged one too) is no entry: skipped, with a
    warning, as Claude Code's own loader skips it."""
    out: list[SessionStoreEntry] = []
    # Only "\n" ends a line: str.splitlines would also cut at U+2028.
    for n, line in enumerate(data.decode("utf-8").split("\n"), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            log.warning("line %d of the transcript is not JSON; skipped", n)
            continue
        if isinstance(entry, dict) and entry.get("type") == VERBATIM and "entry" in entry:
            entry = entry["entry"]
        out.append(entry)
    return out
