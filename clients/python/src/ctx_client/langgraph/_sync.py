"""CtxSaver: the saver over a blocking Client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
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

from ..client import Client
from ._op import Op, R, _drive_sync
from ._saver import _Saver
from ._serde import AllowedType


class CtxSaver(_Saver):
    """A LangGraph checkpointer storing checkpoints in ctx, over a blocking
    :class:`~ctx_client.Client`.

    ``prefix`` is the first segment of every ref the saver writes (one
    saver per prefix sees only its own threads); ``principal`` names the
    commits' author. The async methods run the blocking ones in a thread.

    Checkpoints are read back by :class:`StrictSerializer`: plain data,
    LangChain's messages, LangGraph's own types and ``allowed_types``
    (classes, or ``(module, name)`` as stored); any other type a stored
    blob names raises :class:`DisallowedTypeError` and nothing of it is
    imported or called. ``serde`` replaces that serializer.

    Example::

        from ctx_client import Client
        from ctx_client.langgraph import CtxSaver

        graph = builder.compile(checkpointer=CtxSaver(Client("http://127.0.0.1:7878")))
    """

    def __init__(
        self,
        client: Client,
        *,
        serde: SerializerProtocol | None = None,
        allowed_types: Iterable[AllowedType] = (),
        prefix: str = "lg",
        principal: str = "langgraph",
        cache_bytes: int = 64 * 1024 * 1024,
        concurrency: int = 8,
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
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="ctx-saver")

    def _run(self, op: Op[R]) -> R:
        return _drive_sync(self.client, self._pool, op)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the thread's newest."""
        return self._run(self._core.get_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints, newest first, matching ``filter`` (metadata equality)."""
        return self._list_blocking(self._run, config, filter, before, limit)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """``DeltaChannel``'s ancestor walk over the commit chain."""
        return self._run(self._core.delta_history(config, channels))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """:meth:`get_delta_channel_history` in a worker thread."""
        return await asyncio.to_thread(self._run, self._core.delta_history(config, channels))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Stores a checkpoint as a commit whose parent is its parent's tip."""
        return self._run(self._core.put(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Attaches writes to a checkpoint (a child commit, the ref moved by CAS)."""
        self._run(self._core.put_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """Removes the thread's refs (its commits stay reachable by id)."""
        self._run(self._core.delete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Removes the checkpoints whose metadata ``run_id`` is one of these."""
        self._run(self._core.delete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Points the target thread's refs at the source's commits."""
        self._run(self._core.copy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keeps each namespace's newest checkpoint (``keep_latest``) or none."""
        self._run(self._core.prune(thread_ids, strategy))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """:meth:`get_tuple` in a worker thread."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """:meth:`list` in a worker thread."""
        items = await asyncio.to_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for item in items:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """:meth:`put` in a worker thread."""
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """:meth:`put_writes` in a worker thread."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """:meth:`delete_thread` in a worker thread."""
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """:meth:`delete_for_runs` in a worker thread."""
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """:meth:`copy_thread` in a worker thread."""
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """:meth:`prune` in a worker thread."""
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)
