"""What a documentation fragment (a code block marked ``<!-- fragment -->``) may assume: the
imports and objects the surrounding text has already introduced. Full examples need none of it."""

# ruff: noqa: F401
from __future__ import annotations

import asyncio
from typing import Any

import structlog

from otelhooks import (
    AfterOverride,
    AfterToolCallContext,
    AssistantMessage,
    BeforeToolCallContext,
    Hooks,
    ToolCall,
    ToolContext,
    ToolExecutor,
    ToolOutput,
    ToolRegistry,
    allow,
    block,
    rewrite,
)
from otelhooks.builtin import RedactingProcessor, RedactionHook, Redactor, StructlogEvents
from otelhooks.core.loop import Agent
from otelhooks.providers import ScriptedProvider, quote_last_tool_result
from otelhooks.telemetry.testing import in_memory_tracing

tools = ToolRegistry()


@tools.tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


hooks = Hooks()
redactor = Redactor()
tracing = in_memory_tracing()
provider = ScriptedProvider(
    [
        AssistantMessage(tool_calls=(ToolCall("c1", "echo", {"text": "hi"}),)),
        quote_last_tool_result(),
    ]
)
