"""A real MCP client (the `mcp` package's stdio client) calling `ctx mcp`'s
read_context tool on a workspace the Rust test populated over HTTP, and on
an unknown one and a bad id; prints what it saw as one JSON object.

Environment: CTX_BIN (the ctx binary), CTX_SERVER, CTX_TOKEN, WORKSPACE.
"""
import asyncio
import json
import os

from mcp import ClientSession
from mcp_common import ctx_mcp, is_error


async def main():
    out = {}
    async with ctx_mcp() as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            schema = getattr(tools["read_context"], "input_schema", None) or tools["read_context"].inputSchema
            out["required"] = schema["required"]
            r = await session.call_tool("read_context", {"image_id": os.environ["WORKSPACE"]})
            assert not is_error(r), r.content
            out["context"] = json.loads(r.content[0].text)
            r = await session.call_tool("read_context", {"image_id": "never-written"})
            out["fresh"] = json.loads(r.content[0].text)
            bad = await session.call_tool("read_context", {"image_id": "../x"})
            out["bad_is_error"] = bool(is_error(bad))
            out["bad_text"] = bad.content[0].text
    print(json.dumps(out))


asyncio.run(main())
