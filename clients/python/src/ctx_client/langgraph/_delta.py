"""DeltaChannel's ancestor walk over the commit chain."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import DeltaChannelHistory, get_checkpoint_id

from .. import _routes as routes
from ._document import _unb64
from ._op import Op, _maybe
from ._values import _Values

HISTORY_PAGE = 1000
# The first history request of a walk: a running graph's walk starts a few
# commits above where its previous walk went (commits are immutable, so
# the saver keeps the ones it saw), and goes on from its cache.
HISTORY_FIRST = 32
HISTORY_BATCH = 32
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
        ``BaseCheckpointSaver.get_delta_channel_history``) over the commit
        chain: one history request per 1,000 commits gives the ancestors'
        tips (the commit after each checkpoint commit) and their documents
        come concurrently. The nearest ancestors' refs are read again, so
        writes that landed after the child was put (LangGraph sends writes
        and the next checkpoint from background threads) still count, and
        a deleted one ends the walk as in LangGraph's own; deeper ancestors
        are taken as their child saw them."""
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
        collected: list[list[Any]] = []  # per ancestor, newest first: its sorted writes
        seeds: dict[str, Any] = {}
        remaining = set(channels)
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
                    writes = sorted(doc.get("writes", []), key=lambda w: (w[5], w[0], w[1]))
                    collected.append([w for w in writes if w[2] in remaining])
                    for ch in list(remaining):
                        if ch in doc.get("values", {}):
                            seeds[ch] = doc["values"][ch]
                            remaining.discard(ch)
                    if not remaining:
                        break
                if stopped or not remaining:
                    break
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
