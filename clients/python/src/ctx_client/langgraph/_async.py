"""AsyncCtxSaver: the saver over an AsyncClient."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..client import AsyncClient
from ._op import Op, R, _drive_async
from ._saver import LIST_BATCH, _Saver
from ._serde import AllowedType


class AsyncCtxSaver(_Saver):
    """A LangGraph checkpointer storing checkpoints in ctx, over an
    :class:`~ctx_client.AsyncClient` (the same layout as :class:`CtxSaver`).

    The blocking methods work from threads other than the event loop's
    (as LangGraph's own async savers do) and refuse to run on it.
    ``allowed_types`` and ``serde`` are :class:`CtxSaver`'s.
    """

    def __init__(
        self,
        client: AsyncClient,
        *,
        serde: SerializerProtocol | None = None,
        allowed_types: Iterable[AllowedType] = (),
        prefix: str = "lg",
        principal: str = "langgraph",
        cache_bytes: int = 64 * 1024 * 1024,
        list_deltas: bool = True,
    ) -> None:
        super().__init__(
            serde=serde,
            allowed_types=allowed_types,
            prefix=prefix,
            principal=principal,
            cache_bytes=cache_bytes,
            list_deltas=list_deltas,
        )
        self.client = client
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    async def _run(self, op: Op[R]) -> R:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return await _drive_async(self.client, op)

    def _blocking(self, op: Op[R]) -> R:
        try:
            if asyncio.get_running_loop() is self._loop:
                raise asyncio.InvalidStateError(
                    "AsyncCtxSaver's blocking methods cannot run on its event loop; "
                    "use the async ones (aget_tuple, aput, ...) or CtxSaver"
                )
        except RuntimeError:
            pass
        if self._loop is None:
            raise asyncio.InvalidStateError("AsyncCtxSaver has not been used on a loop yet")
        return asyncio.run_coroutine_threadsafe(self._run(op), self._loop).result()

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the thread's newest."""
        return await self._run(self._core.get_tuple(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoints, newest first, matching ``filter`` (metadata equality)."""
        found = await self._run(self._core.found(config, filter, before, limit))
        left = limit
        for i in range(0, len(found), LIST_BATCH):
            page = await self._run(self._core.list_page(found[i : i + LIST_BATCH], filter))
            for tup in page:
                if left is not None and left <= 0:
                    return
                yield tup
                if left is not None:
                    left -= 1
            if left is not None and left <= 0:
                return

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """``DeltaChannel``'s ancestor walk over the commit chain."""
        return await self._run(self._core.delta_history(config, channels))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """:meth:`aget_delta_channel_history` from another thread."""
        return self._blocking(self._core.delta_history(config, channels))

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Stores a checkpoint as a commit whose parent is its parent's tip."""
        return await self._run(self._core.put(config, checkpoint, metadata, new_versions))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Attaches writes to a checkpoint (a child commit, the ref moved by CAS)."""
        await self._run(self._core.put_writes(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        """Removes the thread's refs (its commits stay reachable by id)."""
        await self._run(self._core.delete_thread(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Removes the checkpoints whose metadata ``run_id`` is one of these."""
        await self._run(self._core.delete_for_runs(run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Points the target thread's refs at the source's commits."""
        await self._run(self._core.copy_thread(source_thread_id, target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keeps each namespace's newest checkpoint (``keep_latest``) or none."""
        await self._run(self._core.prune(thread_ids, strategy))

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """:meth:`aget_tuple` from another thread."""
        return self._blocking(self._core.get_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """:meth:`alist` from another thread."""
        return self._list_blocking(self._blocking, config, filter, before, limit)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """:meth:`aput` from another thread."""
        return self._blocking(self._core.put(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """:meth:`aput_writes` from another thread."""
        self._blocking(self._core.put_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """:meth:`adelete_thread` from another thread."""
        self._blocking(self._core.delete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """:meth:`adelete_for_runs` from another thread."""
        self._blocking(self._core.delete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """:meth:`acopy_thread` from another thread."""
        self._blocking(self._core.copy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """:meth:`aprune` from another thread."""
        self._blocking(self._core.prune(thread_ids, strategy))
