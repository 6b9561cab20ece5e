"""What the MCP client scripts here share: `ctx mcp` on stdio as the
Rust tests start it, and reading a tool's result."""
import json
import os

from mcp.client.stdio import StdioServerParameters, stdio_client

# Passed on to `ctx mcp` when the test sets them (CTX_DATA: the hooks'
# state, for current_context).
FORWARDED = ("CTX_SERVER", "CTX_TOKEN", "CTX_DATA", "PATH")


def ctx_mcp():
    """`ctx mcp` (CTX_BIN) on stdio, against CTX_SERVER with CTX_TOKEN."""
    env = {k: os.environ[k] for k in FORWARDED if k in os.environ}
    return stdio_client(StdioServerParameters(command=os.environ["CTX_BIN"], args=["mcp"], env=env))


def is_error(result):
    # mcp 2.x names fields in snake_case; 1.x in camelCase.
    return getattr(result, "is_error", None) or getattr(result, "isError", False)


def payload(result):
    """A successful tool result's JSON."""
    assert not is_error(result), result.content
    return json.loads(result.content[0].text)


async def call(session, name, args):
    """Calls a tool that must succeed; its JSON."""
    r = await session.call_tool(name, args)
    assert not is_error(r), (name, r.content)
    return json.loads(r.content[0].text)
