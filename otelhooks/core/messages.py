"""The data that flows through a run: tool calls, tool results, messages and the context snapshot.

All types are frozen dataclasses. Mappings inside them are read-only views: a hook or a tool that
wants different arguments returns them; it cannot change the runtime's copy behind its back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .frozen import quick_init

StopReason = Literal["stop", "toolUse", "length", "error", "aborted"]


@dataclass(frozen=True, slots=True)
class MediaContent:
    """An image or audio clip carried next to text (in a tool result or a user message).

    ``data`` is base64 text, ``mime_type`` its type (``image/png``, ``audio/wav``).
    """

    kind: Literal["image", "audio"]
    data: str
    mime_type: str


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A model's request to run one tool.

    ``arguments`` is what the model sent: a mapping, or a JSON text that must decode to an object.
    It is validated against the tool's schema before any hook sees it.
    """

    id: str
    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)


@quick_init
@dataclass(frozen=True, slots=True)
class ToolResult:
    """What one tool call gives back to the model.

    ``content`` is the text the model sees. ``details`` is structured data for the application (the
    handler's return value when it was not a string); it is never sent to the model by the loop.
    ``media`` holds images or audio the tool returned (providers send them where the API allows).
    ``terminate`` asks the loop to end the run after the current batch of tool calls, once every
    result of the batch asks for it (Pi's rule).
    """

    tool_call_id: str
    tool_name: str
    content: str
    details: Any = None
    is_error: bool = False
    terminate: bool = False
    media: tuple[MediaContent, ...] = ()
    role: Literal["toolResult"] = "toolResult"


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one provider response, or summed over a run (``a + b``).

    ``input_tokens`` counts every input token, cached ones included; ``cache_read_tokens`` and
    ``cache_write_tokens`` say how many of them were read from or written to the provider's cache.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True, slots=True)
class UserMessage:
    content: str
    media: tuple[MediaContent, ...] = ()
    role: Literal["user"] = "user"


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    """A model's reasoning, kept so it can be sent back as the provider requires.

    ``signature`` (Anthropic) or ``encrypted`` (redacted thinking, OpenAI reasoning items) is the
    opaque part the provider checks; ``provider`` says whose it is, so it is only sent back there.
    """

    text: str = ""
    signature: str = ""
    encrypted: str = ""
    id: str = ""
    provider: str = ""


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """One complete assistant message: its text, the tool calls it asks for and why it stopped."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    stop_reason: StopReason = "stop"
    model: str = ""
    usage: Usage | None = None
    error_message: str | None = None
    thinking: tuple[ThinkingBlock, ...] = ()
    response_id: str = ""
    provider: str = ""
    refusal: str = ""
    error_type: str | None = None
    finish_reason: str = ""
    role: Literal["assistant"] = "assistant"


Message = UserMessage | AssistantMessage | ToolResult


class CustomMessage:
    """Base for an application's own message types kept in an agent's history (notes, UI
    events, compaction summaries). They never reach a provider as they are: the agent's
    ``convert_messages`` turns them into :data:`Message` values, or drops them (the default)."""

    role: str = "custom"


AgentMessage = Message | CustomMessage


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as an LLM provider sees it: name, description and a JSON Schema of its parameters."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """``{name, description, parameters}``, the shape most provider APIs take (a deep copy)."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": json.loads(json.dumps(self.parameters)),
        }


@dataclass(frozen=True, slots=True)
class AgentContext:
    """A read-only snapshot of a run, taken when a turn starts.

    Hooks receive it to decide with the whole picture; changing the agent during a turn changes the
    next turn's snapshot, never this one.
    """

    run_id: str = ""
    agent_name: str = ""
    model: str = ""
    system_prompt: str = ""
    messages: tuple[AgentMessage, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    turn_index: int = 0
    framework: Any = None
    """The framework's own context when the call comes through an integration: Pydantic AI's
    ``RunContext``, the OpenAI Agents SDK's ``ToolContext``, LangChain's ``RunnableConfig``."""
    user: str | None = None
    """The person the run acts for (``user`` given to ``run()``), if any: the principal of
    :class:`~otelhooks.builtin.cedar.CedarPolicy`."""
