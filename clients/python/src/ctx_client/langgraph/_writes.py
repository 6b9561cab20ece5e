"""Pending writes merged into a checkpoint's document."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import WRITES_IDX_MAP

from ..errors import ConflictError
from ._checkpoints import Move, _Checkpoints
from ._document import DOC_VERSION, _b64, _fresh, _merged, _now
from ._op import Op, _Wait


class _Writes(_Checkpoints):
    """``put_writes``: a child commit of the writes alone, the checkpoint's
    ref (and the head) moved by CAS, in one batch."""

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> Op[None]:
        conf = config["configurable"]
        name = self.names.checkpoint(
            conf["thread_id"], conf.get("checkpoint_ns", ""), conf["checkpoint_id"]
        )
        # The checkpoint's put, when it is on its way (LangGraph sends both
        # from background threads): the writes then go on its tip.
        mine, before = self.begin(self.writing, name, (self.putting, name))
        try:
            if before:
                yield _Wait(before)
            yield from self._put_writes(config, writes, task_id, task_path)
        finally:
            self.end(self.writing, name, mine)

    def _put_writes(
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
        entries: list[list[Any]] = []
        for idx, (channel, value) in enumerate(writes):
            typ, data = self.serde.dumps_typed(value)
            entries.append(
                [task_id, WRITES_IDX_MAP.get(channel, idx), channel, typ, _b64(data), task_path]
            )
        head = self.names.head(thread_id, ns)
        # Where this saver last saw the checkpoint's ref; one it never saw
        # is taken not to exist yet (a checkpoint whose put this saver has
        # not sent), and a 409 says otherwise.
        tip = self.tips.get(name)
        for _ in range(50):
            if tip is None:
                # The checkpoint's put has not landed yet: keep the writes in a
                # placeholder document that the put will take them from.
                doc: dict[str, Any] | None = {
                    "v": DOC_VERSION,
                    "id": checkpoint_id,
                    "placeholder": True,
                    "writes": _merged([], entries),
                }
                new = None
            else:
                # Only the writes go, on the tip: its state is needed only
                # to skip repeats (a reader drops them too).
                doc = self.docs.get(tip)
                new = entries
                if doc is not None:
                    new = _fresh(doc["writes"], entries)
                    if not new:
                        return None
            moves: list[Move] = [(name, tip, "conflict")]
            if tip is not None:
                # The head follows this checkpoint if it still points at it,
                # and stays where it is otherwise (a newer checkpoint's put
                # may have landed first): no guess, and no 409 either way.
                moves.append((head, tip, "skip"))
            try:
                yield from self.commit_batch(
                    doc,
                    thread_id=thread_id,
                    parent=tip,
                    moves=moves,
                    trigger="tool_call",
                    created_at=_now(),
                    writes=new,
                )
            except ConflictError as e:
                k = e.stale_move()
                if k is None:
                    raise
                self.saw(moves[k][0], e.current)
                # Another task's writes (or the put) landed first: go on
                # its tip.
                tip = e.current
                continue
            return None
        raise RuntimeError(f"writes to {checkpoint_id} kept conflicting")
