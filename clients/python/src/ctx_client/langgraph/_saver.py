"""What the two savers share: their operations, versions and listing."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from ._op import Op
from ._operations import _Core
from ._serde import AllowedType, StrictSerializer

LIST_BATCH = 16


class _Saver(BaseCheckpointSaver[str]):
    """A checkpointer whose operations are :class:`_Core`'s; the subclasses
    drive them."""

    def __init__(
        self,
        *,
        serde: SerializerProtocol | None,
        allowed_types: Iterable[AllowedType],
        prefix: str,
        principal: str,
        cache_bytes: int,
        list_deltas: bool,
    ) -> None:
        allowed_types = list(allowed_types)
        if serde is None:
            serde = StrictSerializer(allowed_types)
        elif allowed_types:
            raise ValueError(
                "allowed_types extends the saver's own serializer; "
                "with serde=..., allow types in that serializer"
            )
        super().__init__(serde=serde)
        self._core = _Core(
            self.serde,
            prefix=prefix,
            principal=principal,
            cache_bytes=cache_bytes,
            list_deltas=list_deltas,
        )

    def with_allowlist(
        self, extra_allowlist: Collection[tuple[str, ...]]
    ) -> BaseCheckpointSaver[str]:
        """LangGraph's way to allow more types (a graph's schema types,
        under ``LANGGRAPH_STRICT_MSGPACK``): a copy whose operations use the
        extended serializer and share this saver's caches and state."""
        clone = super().with_allowlist(extra_allowlist)
        if clone is self or not isinstance(clone, _Saver):
            return clone
        clone._core = copy.copy(self._core)
        clone._core.serde = clone.serde
        return clone

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Versions as LangGraph's own savers make them: a zero-padded
        counter and a random suffix, so they sort as strings."""
        return _next_version(current)

    def _list_blocking(
        self,
        run: Callable[[Op[Any]], Any],
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints, newest first, matching ``filter``, each page of
        :data:`LIST_BATCH` read by ``run`` (which drives an operation to its
        result)."""
        found: list[tuple[str, str, str, str]] = run(
            self._core.found(config, filter, before, limit)
        )
        left = limit
        for i in range(0, len(found), LIST_BATCH):
            page: list[CheckpointTuple] = run(
                self._core.list_page(found[i : i + LIST_BATCH], filter)
            )
            for tup in page:
                if left is not None and left <= 0:
                    return
                yield tup
                if left is not None:
                    left -= 1
            if left is not None and left <= 0:
                return


def _next_version(current: str | int | float | None) -> str:
    if current is None:
        n = 0
    elif isinstance(current, str):
        n = int(current.split(".")[0])
    else:
        n = int(current)
    return f"{n + 1:032}.{random.random():016}"
