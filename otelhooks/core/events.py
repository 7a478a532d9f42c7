"""The events a run emits, in the order they happen.

::

    agent_start
      message_start / message_end            the prompt, when there is one
      turn_start
        message_start / message_end          messages queued with steer(), if any
        message_start                        the assistant's message
          text_delta* tool_call*
        message_end
        tool_execution_start                 per call, in source order, before its before-hooks
          tool_execution_update*             progress reported by the tool
        tool_execution_end                   per call, as it finishes
        tool_result                          per call, in source order
      turn_end
      message_start / message_end            follow-up messages, which start another turn
    agent_end

Every event is a frozen dataclass with a ``type`` and a ``to_dict()`` for JSON output.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, is_dataclass
from typing import Any, ClassVar

from .messages import AgentMessage, AssistantMessage, StopReason, ToolCall, ToolResult


def _plain(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return {k: _plain(v) for k, v in asdict(value).items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


@dataclass(frozen=True, slots=True)
class AgentEvent:
    """The base of every event: ``type`` names it, ``to_dict()`` gives it as JSON-ready data."""

    type: ClassVar[str] = "event"

    def to_dict(self) -> dict[str, Any]:
        """The event as a JSON-ready dict (``type`` and its fields)."""
        return {"type": self.type, **_plain(asdict(self))}


@dataclass(frozen=True, slots=True)
class AgentStart(AgentEvent):
    """A run began (before its prompt is added)."""

    type: ClassVar[str] = "agent_start"
    run_id: str


@dataclass(frozen=True, slots=True)
class AgentEnd(AgentEvent):
    """A run ended: why it stopped and every message it added, in order."""

    type: ClassVar[str] = "agent_end"
    run_id: str
    stop_reason: StopReason
    messages: tuple[AgentMessage, ...]


@dataclass(frozen=True, slots=True)
class TurnStart(AgentEvent):
    """A turn began: one provider call and the tool calls it asks for (``turn_index`` from 1)."""

    type: ClassVar[str] = "turn_start"
    turn_index: int


@dataclass(frozen=True, slots=True)
class TurnEnd(AgentEvent):
    """A turn ended: the assistant's message and the results of its tool calls, in source order."""

    type: ClassVar[str] = "turn_end"
    turn_index: int
    message: AssistantMessage
    tool_results: tuple[ToolResult, ...]


@dataclass(frozen=True, slots=True)
class MessageStart(AgentEvent):
    """A message began: the prompt, a queued message (``user``) or the model's reply
    (``assistant``)."""

    type: ClassVar[str] = "message_start"
    role: str


@dataclass(frozen=True, slots=True)
class MessageEnd(AgentEvent):
    """A message is complete; for the assistant's, this is the final message of the turn."""

    type: ClassVar[str] = "message_end"
    message: AgentMessage


@dataclass(frozen=True, slots=True)
class TextDelta(AgentEvent):
    """A piece of the assistant's text as it streams."""

    type: ClassVar[str] = "text_delta"
    delta: str


@dataclass(frozen=True, slots=True)
class ToolCallRequested(AgentEvent):
    """The model asked for a tool call (while its message streams; not yet executed)."""

    type: ClassVar[str] = "tool_call"
    tool_call: ToolCall


@dataclass(frozen=True, slots=True)
class ToolExecutionStart(AgentEvent):
    """A tool call starts its before phase (in source order)."""

    type: ClassVar[str] = "tool_execution_start"
    tool_call: ToolCall


@dataclass(frozen=True, slots=True)
class ToolExecutionUpdate(AgentEvent):
    """A running tool reported progress (``ToolContext.progress`` or a generator's item)."""

    type: ClassVar[str] = "tool_execution_update"
    tool_call: ToolCall
    update: Any


@dataclass(frozen=True, slots=True)
class ToolExecutionEnd(AgentEvent):
    """A tool call finished (in the order calls finish; parallel ones may interleave)."""

    type: ClassVar[str] = "tool_execution_end"
    tool_call: ToolCall
    result: ToolResult


@dataclass(frozen=True, slots=True)
class ToolResultEvent(AgentEvent):
    """A tool call's final result, in source order, after every call of the turn ended."""

    type: ClassVar[str] = "tool_result"
    result: ToolResult
