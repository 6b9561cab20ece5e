"""Thread-wide operations: delete, delete by run, copy, prune."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _routes as routes
from ._document import _unb64
from ._names import _bucket, _checkpoint_segment, _parse_thread_ref, _unescape, encode_segment
from ._op import Op, _maybe
from ._values import _Values


class _Threads(_Values):
    """Operations on whole threads and runs; they move refs only."""

    def delete_thread(self, thread_id: str) -> Op[None]:
        refs = yield from self.list_refs(self.names.thread(thread_id))
        for r in refs:
            self.tips.pop(r["name"], None)
        if refs:
            yield [_maybe(routes.delete_ref(r["name"], r["target"]), 409) for r in refs]
        return None

    def reset_head(self, thread_seg_prefix: str) -> Op[None]:
        """Points ``{ns}/head`` at the newest remaining checkpoint of the
        namespace whose prefix is given (``.../{thread}/{ns}/``)."""
        refs = yield from self.list_refs(thread_seg_prefix + "c/")
        head = thread_seg_prefix + "head"
        best = None
        for r in refs:
            p = _parse_thread_ref(self.names, r["name"])
            if p and p.checkpoint_id and (best is None or p.checkpoint_id > best[0]):
                best = (p.checkpoint_id, r["target"])
        current = yield from self.get_ref(head)
        if best is None:
            if current is not None:
                yield from self.delete_ref(head, current)
        elif current != best[1]:
            yield from self.set_ref(head, best[1], current)
        return None

    def delete_for_runs(self, run_ids: Sequence[str]) -> Op[None]:
        touched: set[str] = set()
        for run_id in run_ids:
            refs = yield from self.list_refs(self.names.run(run_id))
            for r in refs:
                t_seg, n_seg, c_seg = r["name"][len(self.names.run(run_id)) :].split("/")
                cid = _unescape("_" + c_seg) or ""
                ns_prefix = f"{self.names.prefix}/t/{t_seg}/{n_seg}/"
                cname = f"{ns_prefix}c/{_bucket(cid)}/{c_seg}"
                target = yield from self.get_ref(cname)
                if target is not None:
                    yield from self.delete_ref(cname, target)
                yield from self.delete_ref(r["name"], r["target"])
                touched.add(ns_prefix)
        for ns_prefix in sorted(touched):
            yield from self.reset_head(ns_prefix)
        return None

    def copy_thread(self, source: str, target: str) -> Op[None]:
        src = self.names.thread(source)
        dst = self.names.thread(target)
        refs = yield from self.list_refs(src)
        checkpoints = []
        for r in refs:
            yield from self.set_ref(dst + r["name"][len(src) :], r["target"])
            p = _parse_thread_ref(self.names, r["name"])
            if p and p.kind == "c" and p.checkpoint_id:
                checkpoints.append((p, r["target"]))
        docs = yield from self.docs_of([t for _, t in checkpoints])
        for (p, tip), doc in zip(checkpoints, docs, strict=True):
            if doc.get("placeholder"):
                continue
            md = self.serde.loads_typed((doc["metadata"][0], _unb64(doc["metadata"][1])))
            run_id = md.get("run_id")
            if isinstance(run_id, str) and run_id:
                name = (
                    f"{self.names.run(run_id)}{encode_segment(target)}/{p.ns_seg}/"
                    f"{_checkpoint_segment(p.checkpoint_id or '')}"
                )
                yield from self.set_ref(name, tip)
        return None

    def prune(self, thread_ids: Sequence[str], strategy: str) -> Op[None]:
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"strategy {strategy!r}: use 'keep_latest' or 'delete'")
        for thread_id in thread_ids:
            if strategy == "delete":
                yield from self.delete_thread(thread_id)
                continue
            refs = yield from self.list_refs(self.names.thread(thread_id))
            by_ns: dict[str, list[tuple[str, dict[str, Any]]]] = {}
            for r in refs:
                p = _parse_thread_ref(self.names, r["name"])
                if p and p.kind == "c" and p.checkpoint_id:
                    by_ns.setdefault(p.ns_seg, []).append((p.checkpoint_id, r))
            doomed: list[dict[str, Any]] = []
            for entries in by_ns.values():
                entries.sort(key=lambda e: e[0])
                doomed.extend(r for _, r in entries[:-1])
            for r in doomed:
                self.tips.pop(r["name"], None)
            if doomed:
                yield [_maybe(routes.delete_ref(r["name"], r["target"]), 409) for r in doomed]
        return None


# --- drivers -----------------------------------------------------------------
