"""DeltaChannel's ancestor walk over the commit chain."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import DeltaChannelHistory, get_checkpoint_id

from .. import _routes as routes
from ..errors import NotFoundError
from ._document import _merged, _unb64
from ._op import Op, _maybe
from ._values import _Values, read_state

HISTORY_PAGE = 1000
# The first history request of a walk: a running graph's walk starts a few
# commits above where its previous walk went (commits are immutable, so
# the saver keeps the ones it saw), and goes on from its cache.
HISTORY_FIRST = 32
HISTORY_BATCH = 32
# The commits a page of the server's walk joins.
JOIN_PAGE = 256
# How many of the nearest ancestors DeltaChannel's walk re-reads by ref.
VERIFY_NEAREST = 4


class _DeltaHistory(_Values):
    """``get_delta_channel_history`` as an operation."""

    def ancestry(self, cursor: str, depth: int) -> Op[list[dict[str, Any]]]:
        """``cursor`` and its ancestors, newest first: from the saver's
        cache of the commits it has seen (up to a page), else one history
        request of ``depth`` commits, kept in that cache."""
        out: list[dict[str, Any]] = []
        at: str | None = cursor
        while at is not None and len(out) < HISTORY_PAGE:
            hit = self.commits.get(at)
            if hit is None:
                break
            out.append(hit)
            at = hit.get("parent")
        if out:
            return out
        page = yield routes.history(cursor, depth=depth)
        for c in page["commits"]:
            slim = {k: c.get(k) for k in ("id", "parent", "checkpoint", "artifact_ref")}
            self.commits.put(c["id"], slim, 200)
            out.append(slim)
        return out

    def delta_history(
        self, config: RunnableConfig, channels: Sequence[str]
    ) -> Op[dict[str, DeltaChannelHistory]]:
        """LangGraph's ancestor walk for ``DeltaChannel`` (the contract of
        ``BaseCheckpointSaver.get_delta_channel_history``). A saver that has
        seen the start's commits walks them from its cache
        (:meth:`walk_commits`); otherwise the server walks the chain and
        answers every ancestor's document and writes joined, a page of
        commits a request (:meth:`walk_joined`). Either way the nearest
        ancestors are read again by ref, so writes that landed after the
        child was put (LangGraph sends writes and the next checkpoint from
        background threads) still count, and a deleted one ends the walk as
        in LangGraph's own; deeper ancestors are taken as their child saw
        them."""
        if not channels:
            return {}
        conf = config["configurable"]
        thread_id = conf["thread_id"]
        ns = conf.get("checkpoint_ns", "")
        checkpoint_id = get_checkpoint_id(config)
        name = (
            self.names.checkpoint(thread_id, ns, checkpoint_id)
            if checkpoint_id
            else self.names.head(thread_id, ns)
        )
        got = None
        if not self.walks_warm(thread_id, ns, name):
            got = yield from self.walk_joined(thread_id, ns, name, channels)
        if got is None:
            got = yield from self.walk_commits(thread_id, ns, name, channels)
        collected, seeds = got
        seed_values = {}
        if seeds:
            values = yield from self.values({"values": seeds})
            seed_values = values
        result: dict[str, DeltaChannelHistory] = {}
        for ch in channels:
            writes = [
                (w[0], w[2], self.serde.loads_typed((w[3], _unb64(w[4]))))
                for ancestor in reversed(collected)
                for w in ancestor
                if w[2] == ch
            ]
            entry: DeltaChannelHistory = {"writes": writes}
            if ch in seed_values:
                entry["seed"] = seed_values[ch]
            result[ch] = entry
        return result

    def walks_warm(self, thread_id: str, ns: str, name: str) -> bool:
        """Whether this saver walks the start's history from what it holds:
        the commits of an earlier walk, or (a running graph's saver) the
        start's state and its parent's. Otherwise the server walks."""
        seen = self.tips.get(name)
        if seen is None:
            return False
        if self.commits.get(seen) is not None:
            return True
        doc = self.docs.get(seen)
        if doc is None or not doc.get("parent"):
            return False
        parent = self.tips.get(self.names.checkpoint(thread_id, ns, doc["parent"]))
        return parent is not None and self.docs.get(parent) is not None

    def walk_commits(
        self, thread_id: str, ns: str, name: str, channels: Sequence[str]
    ) -> Op[tuple[list[list[Any]], dict[str, Any]]]:
        """The walk over the commit chain: one history request per 1,000
        commits (none for the commits this saver has seen) gives the
        ancestors' tips (the commit after each checkpoint commit), whose
        states come concurrently. Per ancestor, newest first, its sorted
        writes of ``channels``; and the seeds found."""
        collected: list[list[Any]] = []  # per ancestor, newest first: its sorted writes
        seeds: dict[str, Any] = {}
        remaining = set(channels)
        # A checkpoint's every tip leads to the same ancestors (its writes
        # differ, and the walk takes the ancestors'): one this saver saw
        # will do. A head may have moved to another checkpoint: read it.
        if name in self.tips and not name.endswith("/head"):
            cursor = self.tips[name]
        else:
            cursor = yield from self.get_ref(name)
        after_checkpoint = False
        prev: str | None = None  # the commit before the one looked at
        stopped = cursor is None
        depth = HISTORY_FIRST
        while cursor is not None and remaining and not stopped:
            commits = yield from self.ancestry(cursor, depth)
            depth = HISTORY_PAGE
            cursor = commits[-1].get("parent")
            tips = []
            for c in commits:
                if after_checkpoint and c["checkpoint"] == "explicit" and prev is not None:
                    # A list's link under the checkpoint before it (a put
                    # that committed both in one batch): the walk goes on
                    # from the parent's tip that document names.
                    ck = yield from self.doc(prev)
                    cursor = ck.get("pt")
                    break
                if after_checkpoint:
                    tips.append(c)
                after_checkpoint = c["checkpoint"] == "turn_boundary"
                prev = c["id"]
            for i in range(0, len(tips), HISTORY_BATCH):
                batch = tips[i : i + HISTORY_BATCH]
                docs = yield from self.docs_of([c["id"] for c in batch])
                # The nearest ancestors' refs as they are now: writes can land
                # after the child's put only while its parent's tasks finish.
                near = max(0, VERIFY_NEAREST - len(collected))
                names = [self.names.checkpoint(thread_id, ns, d["id"]) for d in docs[:near]]
                current = (yield [_maybe(routes.get_ref(n)) for n in names]) if names else []
                for k, (c, doc) in enumerate(zip(batch, docs, strict=True)):
                    now = (current[k]["target"] if current[k] else None) if k < near else c["id"]
                    if now is None:
                        stopped = True  # deleted: the walk ends here
                        break
                    if now != c["id"]:
                        doc = yield from self.doc(now)
                    if _take(doc, collected, seeds, remaining):
                        break
                if stopped or not remaining:
                    break
        return collected, seeds

    def walk_joined(
        self, thread_id: str, ns: str, name: str, channels: Sequence[str]
    ) -> Op[tuple[list[list[Any]], dict[str, Any]] | None]:
        """The walk done by the server: ``POST /v1/read`` of the start's
        ref with ``delta``, ``stop: root`` and a ``depth`` answers the
        newest commits' bytes joined (each ancestor's document line and the
        write lines after it, as the child saw them), and ``parent`` names
        where the next page starts. Then the nearest ancestors' states by
        ref, concurrently. ``None`` when the chain holds something else (a
        list's links under a document that sits on them, or documents
        that are not lines): :meth:`walk_commits` walks it."""
        groups: list[dict[str, Any]] = []  # newest first: each a state
        carry: list[list[Any]] = []  # writes before a page's first document
        try:
            read = yield routes.read(name, delta=True, stop="root", depth=JOIN_PAGE)
        except NotFoundError as e:
            if e.field != "ref":
                raise
            self.saw(name, None)
            return [], {}
        self.saw(name, read["commit"])
        while True:
            data = routes.content_of(read)
            if data is None:
                data = yield routes.download_artifact(read["artifact_ref"])
            page = _groups(data)
            if page is None:
                return None
            lead, states = page
            if not states:  # all writes: of the checkpoint a later page starts
                carry = lead + carry
            else:
                if carry:
                    states[-1] = {**states[-1], "writes": _merged(states[-1]["writes"], carry)}
                carry = lead
            if any("pt" in g for g in states):
                return None  # below such a document: its list's links
            groups.extend(reversed(states))
            ancestors = groups[1:]
            if read.get("parent") is None or _seeded(ancestors, channels):
                break
            read = yield routes.read(
                commit=read["parent"], delta=True, stop="root", depth=JOIN_PAGE
            )
        ancestors = groups[1:]
        # The nearest ancestors as they are now.
        near = ancestors[:VERIFY_NEAREST]
        names = [self.names.checkpoint(thread_id, ns, d["id"]) for d in near]
        current = (yield [_maybe(read_state(ref=n)) for n in names]) if names else []
        collected: list[list[Any]] = []
        seeds: dict[str, Any] = {}
        remaining = set(channels)
        for k, doc in enumerate(ancestors):
            if k < len(near):
                if current[k] is None:
                    break  # deleted: the walk ends here
                doc = yield from self.doc_of(current[k])
            if _take(doc, collected, seeds, remaining):
                break
        return collected, seeds


def _take(
    doc: dict[str, Any],
    collected: list[list[Any]],
    seeds: dict[str, Any],
    remaining: set[str],
) -> bool:
    """Adds an ancestor's state to the walk: its sorted writes of the
    channels still wanted, and the seeds it holds. Whether every channel
    has its seed now."""
    writes = sorted(doc.get("writes", []), key=lambda w: (w[5], w[0], w[1]))
    collected.append([w for w in writes if w[2] in remaining])
    for ch in list(remaining):
        if ch in doc.get("values", {}):
            seeds[ch] = doc["values"][ch]
            remaining.discard(ch)
    return not remaining


def _seeded(ancestors: list[dict[str, Any]], channels: Sequence[str]) -> bool:
    """Whether every channel has a seed among ``ancestors``."""
    return all(any(ch in a.get("values", {}) for a in ancestors) for ch in channels)


def _groups(data: bytes) -> tuple[list[list[Any]], list[dict[str, Any]]] | None:
    """A joined page of a thread's commits, oldest first, as states: the
    write lines before its first document (the older page's last
    checkpoint's), and each document with the writes after it (a
    document written again with its writes merged, as before writes were
    deltas, replaces the one before it). ``None`` when the bytes are not
    documents and writes."""
    try:
        text = data.decode()
        items = []
        decoder = json.JSONDecoder()
        i, n = 0, len(text)
        while True:
            while i < n and text[i] in " \t\r\n":
                i += 1
            if i >= n:
                break
            item, i = decoder.raw_decode(text, i)
            items.append(item)
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None
    lead: list[list[Any]] = []
    # Each document with the write lines after it, merged once at the end.
    found: list[tuple[dict[str, Any], list[list[Any]]]] = []
    for item in items:
        if isinstance(item, dict) and "id" in item:
            if found and found[-1][0]["id"] == item["id"]:
                found[-1] = (item, [])
            else:
                found.append((item, []))
        elif isinstance(item, list) and len(item) == 6:
            (found[-1][1] if found else lead).append(item)
        else:
            return None
    states = [{**doc, "writes": _merged(doc["writes"], more)} for doc, more in found]
    return lead, states
