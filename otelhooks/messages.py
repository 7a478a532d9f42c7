"""The data that flows through a run: tool calls, tool results, messages and the context snapshot.

All types are frozen dataclasses. Mappings inside them are read-only views: a hook or a tool that
wants different arguments returns them; it cannot change the runtime's copy behind its back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

StopReason = Literal["stop", "toolUse", "length", "error", "aborted"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A model's request to run one tool.

    ``arguments`` is what the model sent: a mapping, or a JSON text that must decode to an object.
    It is validated against the tool's schema before any hook sees it.
    """

    id: str
    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What one tool call gives back to the model.

    ``content`` is the text the model sees. ``details`` is structured data for the application (the
    handler's return value when it was not a string); it is never sent to the model by the loop.
    """

    tool_call_id: str
    tool_name: str
    content: str
    details: Any = None
    is_error: bool = False
    role: Literal["toolResult"] = "toolResult"


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True, slots=True)
class UserMessage:
    content: str
    role: Literal["user"] = "user"


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """One complete assistant message: its text, the tool calls it asks for and why it stopped."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    stop_reason: StopReason = "stop"
    model: str = ""
    usage: Usage | None = None
    error_message: str | None = None
    role: Literal["assistant"] = "assistant"


Message = UserMessage | AssistantMessage | ToolResult


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as an LLM provider sees it: name, description and a JSON Schema of its parameters."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
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
    messages: tuple[Message, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    turn_index: int = 0
