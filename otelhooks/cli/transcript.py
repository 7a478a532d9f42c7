"""Print a run's events in the shape of the seed chapter's transcripts, or as JSON lines."""

from __future__ import annotations

import json
import sys
from typing import IO, Any

from ..core.events import (
    AgentEnd,
    AgentEvent,
    MessageEnd,
    MessageStart,
    TextDelta,
    ToolCallRequested,
    ToolExecutionUpdate,
    ToolResultEvent,
)
from ..core.messages import AssistantMessage, UserMessage


class Transcript:
    """A subscriber for :meth:`otelhooks.loop.Agent.subscribe`.

    Text mode prints ``[user]``, ``message_start``, ``tool_call: echo``, ``tool_result: ...``,
    ``text_delta: ...``, ``message_end: stop``, ``[assistant]``...; hooks add their own lines with
    :meth:`note` (``[beforeToolCall]``, ``allow: echo``). JSON mode prints one object per line:
    every event's ``to_dict()`` and every note as ``{"type": "note", "text": ...}``.
    """

    def __init__(self, out: IO[str] | None = None, *, json_lines: bool = False) -> None:
        self.out = out or sys.stdout
        self.json_lines = json_lines

    def note(self, text: str, **fields: Any) -> None:
        if self.json_lines:
            self._json({"type": "note", "text": text, **fields})
        else:
            self._line(text)

    def __call__(self, event: AgentEvent) -> None:
        if self.json_lines:
            self._json(event.to_dict())
            return
        if isinstance(event, MessageStart) and event.role == "assistant":
            self._line("message_start")
        elif isinstance(event, MessageEnd):
            message = event.message
            if isinstance(message, UserMessage):
                self._line(f"[user]\n{message.content}\n")
            elif isinstance(message, AssistantMessage):
                self._line(f"message_end: {message.stop_reason}")
                if message.error_message:
                    self._line(f"error: {message.error_message}")
        elif isinstance(event, TextDelta):
            self._line(f"text_delta: {event.delta}")
        elif isinstance(event, ToolCallRequested):
            self._line(f"tool_call: {event.tool_call.name}")
        elif isinstance(event, ToolExecutionUpdate):
            self._line(f"tool_update: {event.tool_call.name} {event.update}")
        elif isinstance(event, ToolResultEvent):
            self._line(f"tool_result: {event.result.content}")
        elif isinstance(event, AgentEnd):
            last = next(
                (m for m in reversed(event.messages) if isinstance(m, AssistantMessage)), None
            )
            self._line("\n[assistant]")
            self._line(f"content: {last.text if last else ''}")
            self._line(f"stopReason: {event.stop_reason}")

    def _line(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def _json(self, obj: dict[str, Any]) -> None:
        print(json.dumps(obj, ensure_ascii=False, default=str), file=self.out, flush=True)
