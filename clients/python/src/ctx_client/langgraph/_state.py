"""What a saver's operations keep between calls."""

from __future__ import annotations

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
        self.list_deltas = list_deltas
        # Where this saver last saw each ref point: the first guess of a
        # compare-and-swap (a wrong guess costs a 409 that says the truth).
        self.tips: dict[str, str | None] = {}

    def saw(self, name: str, target: str | None) -> None:
        if len(self.tips) > 100_000:
            self.tips.clear()
        self.tips[name] = target
