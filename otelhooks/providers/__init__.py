"""Providers: anything that turns (messages, tool specs) into a stream of assistant events."""

from .base import Done, Provider, ProviderRequest, StreamEvent, TextChunk, ToolCallChunk
from .scripted import ScriptedProvider, Step, quote_last_tool_result

__all__ = [
    "Done",
    "Provider",
    "ProviderRequest",
    "ScriptedProvider",
    "Step",
    "StreamEvent",
    "TextChunk",
    "ToolCallChunk",
    "quote_last_tool_result",
]
