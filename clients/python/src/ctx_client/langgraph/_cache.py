"""A bounded cache of immutable things."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any


class _Cache:
    """A bounded map of immutable things (commit → document, artifact → bytes),
    and of what was seen of them (:meth:`set`)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.items: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: str) -> Any | None:
        with self.lock:
            hit = self.items.get(key)
            if hit is None:
                return None
            self.items.move_to_end(key)
            return hit[0]

    def put(self, key: str, value: Any, size: int) -> None:
        """Keeps ``value`` unless ``key`` is held already."""
        self._put(key, value, size, replace=False)

    def set(self, key: str, value: Any, size: int) -> None:
        """Keeps ``value``, in place of what ``key`` held."""
        self._put(key, value, size, replace=True)

    def pop(self, key: str) -> Any | None:
        """What ``key`` held, no longer kept."""
        with self.lock:
            held = self.items.pop(key, None)
            if held is None:
                return None
            self.bytes -= held[1]
            return held[0]

    def _put(self, key: str, value: Any, size: int, *, replace: bool) -> None:
        with self.lock:
            held = self.items.get(key)
            if held is not None:
                if not replace:
                    return
                self.bytes -= held[1]
                del self.items[key]
            self.items[key] = (value, size)
            self.bytes += size
            while self.bytes > self.max_bytes and self.items:
                _, (_, s) = self.items.popitem(last=False)
                self.bytes -= s
