"""A bounded cache of immutable things."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any


class _Cache:
    """A bounded map of immutable things (commit → document, artifact → bytes)."""

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
        with self.lock:
            if key in self.items:
                return
            self.items[key] = (value, size)
            self.bytes += size
            while self.bytes > self.max_bytes and self.items:
                _, (_, s) = self.items.popitem(last=False)
                self.bytes -= s
