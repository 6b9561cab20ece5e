"""ctx inside this process: the native module ``ctx_client.Embedded``
runs on. Each call is one HTTP request of the API, answered in memory."""

import asyncio
from collections.abc import Callable
from os import PathLike

Headers = list[tuple[str, str]]

class Native:
    """A data directory opened in this process."""

    def __init__(self, path: str | PathLike[str], tenant: str | None = None) -> None: ...
    @property
    def data(self) -> str: ...
    @property
    def tenant(self) -> str: ...
    def call(
        self, method: str, target: str, headers: Headers, body: bytes
    ) -> tuple[int, Headers, bytes]:
        """Answers one request: (status, headers, body)."""
    def call_async(
        self,
        method: str,
        target: str,
        headers: Headers,
        body: bytes,
        event_loop: asyncio.AbstractEventLoop,
        done: Callable[..., None],
        future: asyncio.Future[tuple[int, Headers, bytes]],
    ) -> None:
        """Starts one request; ``event_loop.call_soon_threadsafe(done,
        future, status, headers, body)`` when it is answered."""
    def flush(self) -> None:
        """Waits for cached results still being written."""
