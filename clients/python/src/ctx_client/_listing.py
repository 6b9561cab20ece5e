"""Every ref under a prefix, a page at a time (``GET /v1/refs`` with
``after``): what the adapters that list sessions share."""

from __future__ import annotations

from typing import Any

from .client import AsyncClient

__all__ = ["PAGE", "all_refs"]

# The server's largest page.
PAGE = 1000


async def all_refs(client: AsyncClient, prefix: str) -> list[dict[str, Any]]:
    """Every ref whose name starts with ``prefix``, by name: each full
    page's last name is where the next page starts."""
    out: list[dict[str, Any]] = []
    after: str | None = None
    while True:
        page = await client.list_refs(prefix=prefix, limit=PAGE, after=after)
        out.extend(dict(r) for r in page)
        if len(page) < PAGE:
            return out
        after = page[-1]["name"]
