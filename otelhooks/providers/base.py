"""The provider protocol: how an LLM plugs into the loop.

A provider is any object with ``stream(request)`` returning an async iterator of
:data:`StreamEvent`: zero or more :class:`TextChunk` and :class:`ToolCallChunk`, then exactly one
:class:`Done` carrying the complete :class:`AssistantMessage` (its text, tool calls, stop reason
and token usage). A real provider adapts its SDK's streaming response to these three types; see
the README section "Plugging in a real LLM". The loop treats a provider that raises, or a stream
that ends without ``Done``, as a turn that stopped with ``stop_reason="error"``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from ..cancel import CancelSignal
from ..messages import AssistantMessage, Message, ToolCall, ToolSpec


@dataclass(frozen=True, slots=True)
class ProviderRequest:
    model: str
    system_prompt: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    signal: CancelSignal


@dataclass(frozen=True, slots=True)
class TextChunk:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallChunk:
    tool_call: ToolCall


@dataclass(frozen=True, slots=True)
class Done:
    message: AssistantMessage


StreamEvent = TextChunk | ToolCallChunk | Done


class Provider(Protocol):
    def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]: ...
