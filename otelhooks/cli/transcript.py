"""What the demo prints, and the stream it prints it on.

:class:`Transcript` turns a run's events into the seed chapter's transcript (or JSON lines);
hooks add their own lines with :meth:`Transcript.note`, which only records the line: printing
is never part of a hook's execution. The lines go out at the next event, and at
:meth:`Transcript.flush`, through an :class:`Output`: a stream whose reader may leave
(``otelhooks demo | head -5``). Once it has, what is written is dropped, quietly, and
:attr:`Output.reader_gone` says so. :class:`HeldLines` keeps log lines back until the transcript
they belong to is out, so that they never land inside it.
"""

from __future__ import annotations

import json
import os
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


class Output:
    """A text stream whose reader may go away. A write or flush that finds the pipe closed
    (``BrokenPipeError``) marks :attr:`reader_gone`, points the file descriptor at
    ``/dev/null`` (so that nothing fails again when the interpreter flushes at exit) and is
    dropped, as is every write after it; it never raises."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.reader_gone = False

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                self.stream.write(text)
            except BrokenPipeError:
                self._gone()
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._gone()

    def line(self, text: str) -> None:
        """Write ``text`` and a newline, and flush."""
        self.write(text + "\n")
        self.flush()

    def _gone(self) -> None:
        self.reader_gone = True
        try:
            fd = self.stream.fileno()
        except (AttributeError, OSError, ValueError):
            return
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        finally:
            os.close(devnull)


class HeldLines:
    """A file for a logger (``structlog.PrintLoggerFactory(file=...)``) that keeps what is
    written until :meth:`release` sends it on, or :meth:`drop` discards it."""

    def __init__(self) -> None:
        self._parts: list[str] = []

    def write(self, text: str) -> int:
        self._parts.append(text)
        return len(text)

    def flush(self) -> None:
        """Nothing: the lines wait for :meth:`release`."""

    def release(self, to: Output, *, apart: bool = False) -> None:
        """Write what was held to ``to`` (after an empty line when ``apart``), and flush it."""
        parts, self._parts = self._parts, []
        if parts:
            to.write(("\n" if apart else "") + "".join(parts))
            to.flush()

    def drop(self) -> None:
        self._parts = []


class Transcript:
    """A subscriber for :meth:`otelhooks.core.loop.Agent.subscribe`.

    Text mode prints ``[user]``, ``message_start``, ``tool_call: echo``, ``tool_result: ...``,
    ``text_delta: ...``, ``message_end: stop``, ``[assistant]``...; hooks add their own lines with
    :meth:`note` (``[beforeToolCall]``, ``allow: echo``). JSON mode prints one object per line:
    every event's ``to_dict()`` and every note as ``{"type": "note", "text": ...}``.

    :meth:`note` and the events only record lines; the lines are written at each event and at
    :meth:`flush`, in the order they were recorded, to an :class:`Output` (``out`` is wrapped in
    one unless it is one).
    """

    def __init__(self, out: IO[str] | Output | None = None, *, json_lines: bool = False) -> None:
        self.out = out if isinstance(out, Output) else Output(out)
        self.json_lines = json_lines
        self._pending: list[str] = []

    @property
    def reader_gone(self) -> bool:
        """Whether the reader of the output went away (a closed pipe)."""
        return self.out.reader_gone

    def note(self, text: str, **fields: Any) -> None:
        """Record a line (in JSON mode, a ``note`` object with ``fields``); never writes."""
        if self.json_lines:
            self._json({"type": "note", "text": text, **fields})
        else:
            self._line(text)

    def gap(self) -> None:
        """Record an empty line between two parts (text mode only)."""
        if not self.json_lines:
            self._line("")

    def flush(self) -> None:
        """Write the recorded lines."""
        lines, self._pending = self._pending, []
        if lines:
            self.out.write("".join(f"{line}\n" for line in lines))
            self.out.flush()

    def __call__(self, event: AgentEvent) -> None:
        if self.json_lines:
            self._json(event.to_dict())
        else:
            self._text(event)
        self.flush()

    def _text(self, event: AgentEvent) -> None:
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
        self._pending.append(text)

    def _json(self, obj: dict[str, Any]) -> None:
        self._pending.append(json.dumps(obj, ensure_ascii=False, default=str))
