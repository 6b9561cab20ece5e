"""What a saver's operations keep between calls."""

from __future__ import annotations

import threading
from concurrent.futures import Future

from langgraph.checkpoint.serde.base import SerializerProtocol

from ._cache import _Cache
from ._names import _Names


class _State:
    """The serializer, ref names, caches and last-seen ref targets
    that the operations share."""

    def __init__(
        self,
        serde: SerializerProtocol,
        *,
        prefix: str,
        principal: str,
        cache_bytes: int,
        list_deltas: bool,
    ) -> None:
        self.serde = serde
        self.names = _Names(prefix)
        self.principal = principal
        self.docs = _Cache(cache_bytes // 4)
        self.blobs = _Cache(cache_bytes)
        self.links = _Cache(cache_bytes)
        # The objects a link's elements were serialized from or read back
        # as (the next put of the list serializes only what is new), until
        # a put on the link takes them: about one entry per thread.
        self.link_seen = _Cache(cache_bytes // 8)
        # Commits seen in history pages (immutable): DeltaChannel's walks.
        self.commits = _Cache(cache_bytes // 8)
        self.list_deltas = list_deltas
        # Where this saver last saw each ref point: the first guess of a
        # compare-and-swap (a wrong guess costs a 409 that says the truth).
        self.tips: dict[str, str | None] = {}
        # The puts and the put_writes in flight, by their checkpoint's ref:
        # writes that reach the saver while their checkpoint's put is on
        # its way wait for it (instead of racing it through a placeholder),
        # and a put waits for its parent's put and for its own writes that
        # came first, never for its parent's writes (ADR 0008, v4).
        # LangGraph sends both from background threads; writes of parallel
        # tasks still go in parallel.
        self.putting: dict[str, set[Future[None]]] = {}
        self.writing: dict[str, set[Future[None]]] = {}
        self._inflight = threading.Lock()

    def saw(self, name: str, target: str | None) -> None:
        if len(self.tips) > 100_000:
            self.tips.clear()
        self.tips[name] = target

    def begin(
        self,
        table: dict[str, set[Future[None]]],
        name: str,
        *after: tuple[dict[str, set[Future[None]]], str],
    ) -> tuple[Future[None], list[Future[None]]]:
        """Records an operation on ``name`` in flight in ``table``; with it,
        the operations in flight it follows (each ``(table, name)`` of
        ``after``), taken in the same step: an operation waits only for
        ones recorded before it, so no two wait for each other."""
        fut: Future[None] = Future()
        with self._inflight:
            before = [f for t, n in after for f in t.get(n, ())]
            table.setdefault(name, set()).add(fut)
        return fut, before

    def end(self, table: dict[str, set[Future[None]]], name: str, fut: Future[None]) -> None:
        """The operation ``begin`` recorded has ended (either way)."""
        with self._inflight:
            left = table.get(name)
            if left is not None:
                left.discard(fut)
                if not left:
                    del table[name]
        fut.set_result(None)
