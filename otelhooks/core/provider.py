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
from dataclasses import dataclass, field
from typing import Protocol

from .cancel import CancelSignal
from .messages import AssistantMessage, Message, ToolCall, ToolSpec


@dataclass(frozen=True, slots=True)
class ModelParams:
    """Request parameters a provider passes to its API (``None``: the API's default).

    ``tool_choice`` is ``"auto"``, ``"none"``, ``"required"`` (call some tool) or the name of the
    one tool to call. The ``chat`` span records each one that is set
    (``gen_ai.request.temperature``, ``gen_ai.request.max_tokens``, ...).
    """

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    tool_choice: str | None = None


@dataclass(frozen=True, slots=True)
class ProviderRequest:
    """What the loop asks a provider for: one assistant message, given the conversation so far
    (user messages, assistant messages with their tool calls and thinking, tool results), the
    system prompt, the tools the model may call and the request parameters. ``signal`` is the
    run's cancellation signal: a provider stops reading when it fires."""

    model: str
    system_prompt: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    signal: CancelSignal
    params: ModelParams = field(default_factory=ModelParams)


@dataclass(frozen=True, slots=True)
class TextChunk:
    """A piece of the assistant's text, as it streams in."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallChunk:
    """One complete tool call (its arguments assembled), as soon as the model finished it."""

    tool_call: ToolCall


@dataclass(frozen=True, slots=True)
class Done:
    """The end of the stream: the complete assistant message. A provider that fails (an HTTP
    error, a cut stream) ends with ``Done`` of a message whose ``stop_reason`` is ``"error"``
    and whose ``error_message`` and ``error_type`` say what happened."""

    message: AssistantMessage


StreamEvent = TextChunk | ToolCallChunk | Done


class Provider(Protocol):
    """Anything with ``stream(request)``. Optional attributes the loop reads for its spans and
    metrics: ``provider_name`` (``gen_ai.provider.name``: ``openai``, ``anthropic``, ...),
    ``server_address`` and ``server_port``, and ``instrumented`` (true when the SDK, or an
    instrumentation of it, already makes a ``chat`` span per request: the loop then makes none,
    so that backends do not count the tokens twice)."""

    def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        """The events of one assistant message: chunks as they come, then one ``Done``."""
        ...
