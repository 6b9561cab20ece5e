"""A real MCP client (the `mcp` package's stdio client) calling `ctx mcp`'s
agent context tools: window, save, history, clear, restore and
working_context_restore, for an agent the Rust test gave two messages over
HTTP; prints what it saw as one JSON object.

Environment: CTX_BIN (the ctx binary), CTX_SERVER, CTX_TOKEN, AGENT.
"""
import asyncio
import json
import os

from mcp import ClientSession
from mcp_common import call, ctx_mcp, is_error


async def main():
    agent = os.environ["AGENT"]
    out = {}
    async with ctx_mcp() as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            out["tools"] = sorted(t.name for t in (await session.list_tools()).tools)
            out["window"] = await call(session, "context_window", {"agent": agent})
            out["thread"] = await call(session, "context_window", {"agent": agent, "thread_id": "t2"})
            out["save"] = await call(session, "context_save", {"agent": agent, "description": "via mcp"})
            out["history"] = await call(session, "context_history", {"agent": agent})
            out["clear"] = await call(session, "context_clear", {"agent": agent})
            out["cleared_window"] = await call(session, "context_window", {"agent": agent})
            out["restore"] = await call(session, "context_restore",
                                        {"agent": agent, "save_id": out["save"]["save_id"]})
            out["restored_window"] = await call(session, "context_window", {"agent": agent})
            out["working"] = await call(session, "working_context_restore",
                                        {"agent": agent, "system_prompt": "You are tested."})
            out["assembled"] = await call(session, "context_assemble",
                                          {"agent": agent, "thread_id": "t1"})
            no_thread = await session.call_tool("context_assemble", {"agent": agent})
            out["no_thread_is_error"] = bool(is_error(no_thread))
            bad = await session.call_tool("context_restore", {"agent": agent, "save_id": "nope"})
            out["bad_is_error"] = bool(is_error(bad))
            out["bad_text"] = bad.content[0].text
    print(json.dumps(out))


asyncio.run(main())
