"""A real MCP client (the `mcp` package) against `ctx mcp` on stdio, or with
the argument `http` against `ctx serve`'s /mcp over streamable HTTP.

Lists the tools, then runs branch_create -> checkpoint (the tool, into the
branch's chain_ref, as the server's instructions say) -> branch_return ->
branch_status, and prints what it saw as
one JSON object for the Rust test to check.

Environment: CTX_BIN (the ctx binary), CTX_SERVER, CTX_TOKEN.
"""
import asyncio
import json
import os
import sys
import urllib.request

from mcp import ClientSession
from mcp_common import ctx_mcp, is_error, payload
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


def http(method, path, body=None):
    req = urllib.request.Request(
        os.environ["CTX_SERVER"] + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + os.environ["CTX_TOKEN"],
                 "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def transport():
    """`ctx mcp` on stdio (the default), or with `http` as the argument
    the streamable HTTP endpoint of `ctx serve` (`/mcp`, bearer auth)."""
    if sys.argv[1:] == ["http"]:
        client = create_mcp_http_client(
            headers={"Authorization": "Bearer " + os.environ["CTX_TOKEN"]})
        return streamable_http_client(os.environ["CTX_SERVER"] + "/mcp", http_client=client)
    return ctx_mcp()


async def main():
    out = {}
    async with transport() as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            info = getattr(init, "server_info", None) or init.serverInfo
            out["server"] = info.name
            out["protocol"] = getattr(init, "protocol_version", None) or init.protocolVersion
            out["tools"] = sorted(t.name for t in (await session.list_tools()).tools)
            created = payload(await session.call_tool("branch_create", {
                "session_id": "mcp-session", "description": "read the parser",
                "prompt": "find the off-by-one", "budget": 1000}))
            out["created"] = created
            out["instructions"] = init.instructions
            # ref: {name} alone continues the chain's tip (its root).
            out["checkpoint"] = payload(await session.call_tool("checkpoint", {
                "commit_type": "delta", "format": "raw",
                "delta": "tool: parser.rs line 42 indexes one past the end\n" * 20,
                "template": "t", "principal": "mcp-agent", "checkpoint": "tool_call",
                "ref": {"name": created["chain_ref"]}}))
            out["chain_tip"] = http("GET", "/v1/refs/" + created["chain_ref"])["target"]
            out["active"] = payload(await session.call_tool(
                "branch_status", {"session_id": "mcp-session"}))
            out["returned"] = payload(await session.call_tool("branch_return", {
                "branch_id": created["branch_id"],
                "message": "off-by-one at parser.rs:42; token ghp_0123456789abcdefghijABCDEFGHIJ012345"}))
            out["status"] = payload(await session.call_tool(
                "branch_status", {"branch_id": created["branch_id"]}))
            again = await session.call_tool("branch_return", {
                "branch_id": created["branch_id"], "message": "again"})
            out["again_is_error"] = bool(is_error(again))
            out["again_text"] = again.content[0].text
    print(json.dumps(out))


asyncio.run(main())
