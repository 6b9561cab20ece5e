"""Pending writes merged into a checkpoint's document."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import WRITES_IDX_MAP

from .. import _routes as routes
from ..errors import ConflictError, NotFoundError
from ._checkpoints import _Checkpoints
from ._document import DOC_VERSION, _b64, _now
from ._op import Op


class _Writes(_Checkpoints):
    """``put_writes``: a child commit, the checkpoint's ref moved by CAS."""

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> Op[None]:
        conf = config["configurable"]
        thread_id = conf["thread_id"]
        ns = conf.get("checkpoint_ns", "")
        checkpoint_id = conf["checkpoint_id"]
        name = self.names.checkpoint(thread_id, ns, checkpoint_id)
        encoded: list[tuple[str, int, str, str, str]] = []
        for idx, (channel, value) in enumerate(writes):
            typ, data = self.serde.dumps_typed(value)
            encoded.append((task_id, WRITES_IDX_MAP.get(channel, idx), channel, typ, _b64(data)))
        tip = yield from self.known_ref(name)
        for _ in range(50):
            if tip is None:
                # The checkpoint's put has not landed yet: keep the writes in a
                # placeholder document that the put will take them from.
                doc = {"v": DOC_VERSION, "id": checkpoint_id, "placeholder": True, "writes": []}
            else:
                doc = yield from self.doc(tip)
            merged = {(w[0], w[1]): w for w in doc["writes"]}
            changed = False
            for task, idx, channel, typ, b64 in encoded:
                key = (task, idx)
                if idx >= 0 and key in merged:
                    continue
                entry = [task, idx, channel, typ, b64, task_path]
                if merged.get(key) != entry:
                    merged[key] = entry
                    changed = True
            if not changed:
                return None
            new_doc = {**doc, "writes": list(merged.values())}
            try:
                new_tip = yield from self.commit_doc(
                    new_doc,
                    thread_id=thread_id,
                    parent=tip,
                    ref=name,
                    expected=tip,
                    trigger="tool_call",
                    created_at=_now(),
                )
            except ConflictError as e:
                # Another task's writes (or the put) landed first: merge again.
                self.saw(name, e.current)
                tip = e.current
                continue
            if tip is None:
                return None
            head = self.names.head(thread_id, ns)
            try:  # the head follows this checkpoint if it pointed at it
                yield routes.put_ref(head, new_tip, tip)
                self.saw(head, new_tip)
            except (ConflictError, NotFoundError):
                pass
            return None
        raise RuntimeError(f"writes to {checkpoint_id} kept conflicting")
