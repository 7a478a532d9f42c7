"""The demo's ``mcp`` case: a scripted agent calls the tools of ``mcp-server-time`` (the
reference MCP server from PyPI) through before -> run -> after, with the demo's hooks.

Needs the ``mcp`` extra and ``mcp-server-time`` (both in the ``dev`` extra).
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

import mcp  # noqa: F401  (first: without the mcp extra, the one-line hint names it)
from opentelemetry.trace import TracerProvider

from ..builtin import Redactor
from ..core.loop import RunResult
from ..core.messages import ToolCall
from ..core.tools import ToolRegistry
from ..integrations.mcp.client import MCPServerTools
from .demo_cases import DemoCase, demo_agent
from .transcript import Transcript

MCP_CASE = DemoCase(
    "mcp",
    "What time is it in Tokyo, and what is 09:30 in London in New York time?",
    (
        ToolCall("call_1", "time_get_current_time", {"timezone": "Asia/Tokyo"}),
        ToolCall(
            "call_2",
            "time_convert_time",
            {
                "source_timezone": "Europe/London",
                "time": "09:30",
                "target_timezone": "America/New_York",
            },
        ),
    ),
)


class MissingServer(ModuleNotFoundError):
    """``mcp-server-time`` is not installed."""


def time_server_command() -> list[str]:
    """How to start ``mcp-server-time`` with this Python (UTC as its local zone)."""
    if importlib.util.find_spec("mcp_server_time") is None:
        raise MissingServer(
            "the mcp case runs mcp-server-time: pip install mcp-server-time",
            name="mcp_server_time",
        )
    return [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]


async def run_mcp_case(
    transcript: Transcript,
    *,
    redactor: Redactor,
    tracer_provider: TracerProvider | None,
    logger: Any = None,
    meter_provider: Any = None,
) -> RunResult:
    """Start ``mcp-server-time``, register its tools as ``time_*`` and run the case."""
    async with MCPServerTools(time_server_command(), prefix="time") as server:
        registry = ToolRegistry()
        server.register(registry)
        agent = demo_agent(
            MCP_CASE,
            transcript,
            redactor=redactor,
            tracer_provider=tracer_provider,
            logger=logger,
            tools=registry,
            meter_provider=meter_provider,
        )
        return await agent.run(MCP_CASE.prompt)
