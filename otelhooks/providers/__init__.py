"""Providers: anything that turns (messages, tool specs) into a stream of assistant events.

On the official SDKs (each behind its extra): :mod:`otelhooks.providers.openai` (Chat Completions
and Responses; any OpenAI-compatible server through ``base_url``) and
:mod:`otelhooks.providers.anthropic` (Messages).
"""

from ..core.provider import (
    Done,
    ModelParams,
    Provider,
    ProviderRequest,
    StreamEvent,
    TextChunk,
    ToolCallChunk,
)
from .scripted import ScriptedProvider, Step, quote_last_tool_result

__all__ = [
    "Done",
    "ModelParams",
    "Provider",
    "ProviderRequest",
    "ScriptedProvider",
    "Step",
    "StreamEvent",
    "TextChunk",
    "ToolCallChunk",
    "quote_last_tool_result",
]
