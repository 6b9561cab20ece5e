"""Counts the HTTP requests a client sends, by API operation.

:class:`CountingTransport` is an ``httpx.AsyncHTTPTransport`` that records
each request it sends as the operationId of the route it matches
(``get_ref``, ``checkpoint``, ``materialize``, ...: the names of the
OpenAPI document, :data:`ctx_client._generated.OPERATIONS`), so a test or
a bench can see how many round trips an adapter operation costs without
changing the client: ``AsyncClient(url, token=..., transport=counting)``.

Used by tests/test_request_counts.py and bench/session_stores.py.
"""

from __future__ import annotations

import re
from collections import Counter

import httpx

from ctx_client._generated import OPERATIONS

# Path parameters that may hold '/' (ref names, workspace file paths).
_SLASHED = {"name", "path"}


def _pattern(template: str) -> re.Pattern[str]:
    out = ""
    for part in re.split(r"(\{[^}]+\})", template):
        if part.startswith("{"):
            out += ".+" if part[1:-1] in _SLASHED else "[^/]+"
        else:
            out += re.escape(part)
    return re.compile(out + "$")


# Most literal characters first, so `/v1/refs/{name}/evict` wins over
# `/v1/refs/{name}` for a path that matches both.
_ROUTES = sorted(
    (
        (method, _pattern(template), op, len(re.sub(r"\{[^}]+\}", "", template)))
        for op, (method, template) in OPERATIONS.items()
    ),
    key=lambda r: -r[3],
)


def operation_of(method: str, path: str) -> str:
    """The operationId a request is for; ``"METHOD path"`` when no route
    matches (a redirect to storage, say)."""
    for m, pattern, op, _ in _ROUTES:
        if m == method and pattern.match(path):
            return op
    return f"{method} {path}"


class CountingTransport(httpx.AsyncHTTPTransport):
    """An async transport that records the operation of every request it
    sends, in order, in :attr:`seen` (the other origin's requests too: a
    redirect to storage is a round trip)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(operation_of(request.method, request.url.path))
        return await super().handle_async_request(request)

    def mark(self) -> int:
        """Where the record is now: :meth:`since` takes it."""
        return len(self.seen)

    def since(self, mark: int) -> list[str]:
        """The operations sent since ``mark``."""
        return self.seen[mark:]

    def tally(self, mark: int = 0) -> Counter[str]:
        """How many requests of each operation were sent since ``mark``."""
        return Counter(self.seen[mark:])
