"""An MCP server that misbehaves on request, for the MCP tests.

Built on the official SDK's ``MCPServer``. Every request's ``_meta`` and every call that reached a
tool are appended as JSON lines to ``$FAULT_SERVER_RECORD`` (when set), so a test can prove what
arrived and what never did. ``--http PORT`` serves Streamable HTTP instead of stdio.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import sys
import time
from typing import Annotated, Any

import mcp.types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field

RECORD = os.environ.get("FAULT_SERVER_RECORD")
SECRET = "ghp_Zq8RkT2mWx9LpN4vB7cY1dF6hJ3sA5eG0uIo"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n fake image bytes").decode()

server = MCPServer("fault-server", version="1.0")


def record(event: str, **fields: Any) -> None:
    if RECORD:
        with open(RECORD, "a") as out:
            out.write(json.dumps({"event": event, **fields}) + "\n")


async def _record_meta(ctx: Any, call_next: Any) -> Any:
    meta = ctx.meta.model_dump(by_alias=True) if hasattr(ctx.meta, "model_dump") else ctx.meta
    record("request", method=ctx.method, meta=meta, params=dict(ctx.params or {}))
    return await call_next(ctx)


server.middleware.append(_record_meta)


@server.tool()
def echo(text: str) -> str:
    """Echo the text."""
    record("tool", name="echo", text=text)
    return text


@server.tool()
def routed(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
    """Answer with the region (its argument is mirrored into an ``Mcp-Param-Region`` header)."""
    return region


@server.tool()
def fail_soft(reason: str = "disk full") -> str:
    """Fail with an isError result."""
    record("tool", name="fail_soft")
    raise ToolError(reason)


@server.tool()
def explode() -> str:
    """Raise an unexpected exception."""
    record("tool", name="explode")
    raise RuntimeError("kaboom")


@server.tool()
async def hang(seconds: float = 3600) -> str:
    """Never answer (until cancelled)."""
    record("tool", name="hang")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        record("cancelled", name="hang")
        raise
    return "woke up"


@server.tool()
def crash() -> str:
    """Kill the server process in the middle of the call."""
    record("tool", name="crash")
    os._exit(3)


@server.tool()
async def slow_progress(steps: int = 3, ctx: Context | None = None) -> str:
    """Report progress before answering."""
    assert ctx is not None
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
        await asyncio.sleep(0.01)
    return f"done after {steps} steps"


@server.tool()
def protocol_error(code: int = -32602) -> str:
    """Answer with a JSON-RPC error instead of a result."""
    record("tool", name="protocol_error")
    raise MCPError(code=code, message="the server refused this request")


@server.tool()
def big(size: int = 1_000_000) -> str:
    """Return a large text."""
    return "x" * size


@server.tool()
def leak() -> str:
    """Return a secret in ordinary output."""
    record("tool", name="leak")
    return f"config loaded: GITHUB_TOKEN={SECRET}"


@server.tool()
def rich() -> list[Any]:
    """Return every kind of content block."""
    return [
        types.TextContent(type="text", text="a picture, a sound and two resources"),
        types.ImageContent(type="image", data=PNG, mime_type="image/png"),
        types.AudioContent(type="audio", data=PNG, mime_type="audio/wav"),
        types.ResourceLink(type="resource_link", name="readme", uri="file:///srv/readme.md"),
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(uri="file:///srv/notes.txt", text="embedded notes"),
        ),
    ]


@server.tool()
def weather(city: str) -> dict[str, Any]:
    """Structured output."""
    return {"city": city, "temperature_c": 11.5}


@server.tool()
def garbage() -> str:
    """Write something that is not JSON-RPC to stdout, then answer."""
    sys.stdout.write("this is not json-rpc\n")
    sys.stdout.flush()
    return "answered after garbage"


@server.tool()
async def add_tool(name: str, description: str = "", ctx: Context | None = None) -> str:
    """Add a tool (replacing one of that name: a changed definition), and tell the client the
    list changed. Its description is ``description``, else one made of the time."""
    assert ctx is not None

    def added() -> str:
        return f"I am {name}"

    with contextlib.suppress(Exception):
        server.remove_tool(name)
    server.add_tool(added, name=name, description=description or f"added at {time.time()}")
    await ctx.notify_tools_changed()
    return f"added {name}"


class Confirm(BaseModel):
    confirmed: bool


@server.tool()
async def ask(question: str, ctx: Context | None = None) -> str:
    """Ask the user (an elicitation request to the client) and say what came back."""
    assert ctx is not None
    answer = await ctx.elicit(question, Confirm)
    data = getattr(answer, "data", None)
    return f"{answer.action}: {data.confirmed if data is not None else None}"


@server.resource("config://app", mime_type="text/plain")
def app_config() -> str:
    """A configuration file with a credential in it."""
    return f"service=billing\napi_token={SECRET}\n"


@server.prompt()
def review(code: str) -> str:
    """Ask for a code review."""
    return f"Review this code:\n{code}"


if os.environ.get("FAULT_SERVER_MANY_TOOLS"):
    for index in range(int(os.environ["FAULT_SERVER_MANY_TOOLS"])):

        def numbered(value: int = 0, index: int = index) -> str:
            return f"tool {index}: {value}"

        server.add_tool(numbered, name=f"tool_{index:03d}", description=f"Numbered tool {index}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--hang-after-first":
        # serves once; every later start never speaks MCP (a server gone bad after a check)
        marker = sys.argv[2]
        if os.path.exists(marker):
            time.sleep(3600)
        open(marker, "w").close()
        server.run("stdio")
    elif len(sys.argv) > 2 and sys.argv[1] == "--http":
        server.run("streamable-http", port=int(sys.argv[2]))
    else:
        server.run("stdio")
