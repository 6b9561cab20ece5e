"""A real MCP client (the `mcp` package's stdio client) calling `ctx mcp`'s
core tools (and that closing the session returns the branches it left
open): current_context (which stores the turn in progress the hooks
under CTX_DATA have not), show, log (two pages), show and materialize of a
ref name, materialize (translated, empty without a commit and for a ref
with no commit yet, a large context as a bounded excerpt), resolve, ref_get and
ref_list; prints what it saw as one JSON object for tests/hooks.rs.

Environment: CTX_BIN, CTX_SERVER, CTX_TOKEN, CTX_DATA, SESSION, REF, LARGE.
"""
import asyncio
import json
import os

from mcp import ClientSession
from mcp_common import call, ctx_mcp, is_error


async def main():
    env = os.environ
    out = {}
    async with ctx_mcp() as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            out["tools"] = sorted(t.name for t in (await session.list_tools()).tools)
            cur = await call(session, "current_context", {"session_id": env["SESSION"]})
            out["current"] = cur
            ctx = cur["context_id"]
            out["show"] = await call(session, "show", {"ctx": ctx})
            out["log"] = await call(session, "log", {"ctx": ctx, "depth": 2})
            # The next page, from the ref's name: where the first one stopped.
            out["log_next"] = await call(
                session, "log", {"ctx": env["REF"], "depth": 2, "cursor": out["log"]["next"]})
            out["show_ref"] = await call(session, "show", {"ctx": env["REF"]})
            out["materialize_ref"] = await call(session, "materialize", {"ctx": env["REF"]})
            out["materialize"] = await call(
                session, "materialize",
                {"ctx": ctx, "stop": "root", "format": "anthropic-messages-v1"})
            out["empty"] = await call(session, "materialize", {"format": "anthropic-messages-v1"})
            out["empty_log"] = await call(session, "materialize", {"ctx": None, "format": "claude-code-v1"})
            out["empty_ref"] = await call(
                session, "materialize", {"ctx": "sessions/no-commit-yet", "format": "openai-chat-v1"})
            large = await session.call_tool("materialize", {"ctx": env["LARGE"]})
            out["large"] = json.loads(large.content[0].text)
            out["large_bytes"] = len(large.content[0].text.encode())
            out["resolve"] = await call(session, "resolve", {"principal": "claude-code"})
            out["ref_get"] = await call(session, "ref_get", {"name": env["REF"]})
            out["ref_list"] = await call(session, "ref_list", {"prefix": "claude/", "limit": 1})
            # Left open: closing the MCP session returns it.
            out["open_branch"] = await call(
                session, "branch_create", {"session_id": "mcp-left-open", "description": "never returned"})
            bad = await session.call_tool("show", {"ctx": "nope"})
            out["bad_is_error"] = bool(is_error(bad))
            out["bad_text"] = bad.content[0].text
    print(json.dumps(out))


asyncio.run(main())
