"""The memory loop through a real MCP client (the `mcp` package's stdio
client) calling `ctx mcp`: two branches fail the same way, a third on a
similar task is created with inject_memories, and its root (read back with
the materialize tool) shows the anti-pattern with its provenance; then
memory_search finds both. Prints what it saw as one JSON object.

Environment: CTX_BIN (the ctx binary), CTX_SERVER, CTX_TOKEN, SESSION.
"""
import asyncio
import json
import os

from mcp import ClientSession
from mcp_common import call, ctx_mcp, is_error


async def main():
    session_id = os.environ["SESSION"]
    out = {"failed": []}
    async with ctx_mcp() as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            out["tools"] = sorted(t.name for t in (await session.list_tools()).tools)
            for attempt in range(2):
                b = await call(session, "branch_create", {
                    "session_id": session_id,
                    "description": "make the upload test pass",
                    "prompt": f"attempt {attempt}",
                })
                await call(session, "branch_return", {
                    "branch_id": b["branch_id"],
                    "status": "failed",
                    "error": "raising the upload timeout did not help: the mock server never answers",
                })
                out["failed"].append(b["branch_id"])
            third = await call(session, "branch_create", {
                "session_id": session_id,
                "description": "make the upload test pass without timeouts",
                "budget": 4000,
                "inject_memories": True,
            })
            out["third"] = third
            out["root"] = await call(session, "materialize", {
                "ctx": third["root_commit"], "stop": "root", "format": "raw",
            })
            out["search"] = await call(session, "memory_search", {
                "q": "upload test", "kind": "anti_pattern",
            })
            bad = await session.call_tool("memory_search", {"q": " "})
            out["blank_is_error"] = bool(is_error(bad))
            out["blank_text"] = bad.content[0].text
    print(json.dumps(out))


asyncio.run(main())
