"""A provider that replays a deterministic script: for demos and tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace

from ..core.messages import AssistantMessage, ToolResult, Usage
from ..core.provider import Done, ProviderRequest, StreamEvent, TextChunk, ToolCallChunk

Step = AssistantMessage | Callable[[ProviderRequest], AssistantMessage]


def quote_last_tool_result(template: str = "The tool result is: {content}") -> Step:
    """A step that answers with the content of the latest tool result(s), joined by ``; ``."""

    def step(request: ProviderRequest) -> AssistantMessage:
        results: list[str] = []
        for message in reversed(request.messages):
            if isinstance(message, ToolResult):
                results.append(message.content)
            elif results:
                break
        return AssistantMessage(text=template.format(content="; ".join(reversed(results))))

    return step


class ScriptedProvider:
    """Replays ``steps`` in order, one per provider call.

    A step is an :class:`AssistantMessage` or a function of the request returning one. Text is
    streamed in chunks of ``chunk_size`` characters (all at once when ``None``), then tool calls,
    then ``Done``. ``delay`` seconds pass before each chunk, so cancellation can land mid-stream.
    Past the end of the script it answers with a ``stop`` message saying so. Usage is reported
    as one token per word, so token attributes are exercised. ``requests`` keeps every request.
    Its ``provider_name`` is ``scripted``; each message gets a response id (``scripted-1``, ...).
    """

    provider_name = "scripted"

    def __init__(
        self,
        steps: Sequence[Step],
        *,
        model: str = "scripted",
        chunk_size: int | None = None,
        delay: float = 0.0,
    ) -> None:
        self.steps = list(steps)
        self.model = model
        self.chunk_size = chunk_size
        self.delay = delay
        self.requests: list[ProviderRequest] = []

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        """Replay the next step: its text in chunks, its tool calls, then ``Done``."""
        index = len(self.requests)
        self.requests.append(request)
        if index < len(self.steps):
            step = self.steps[index]
            message = step(request) if callable(step) else step
        else:
            message = AssistantMessage(text="(the script has no more steps)")
        stop_reason = message.stop_reason
        if message.tool_calls and stop_reason == "stop":
            stop_reason = "toolUse"
        prompt_words = sum(
            len(str(getattr(m, "content", getattr(m, "text", ""))).split())
            for m in request.messages
        )
        message = replace(
            message,
            model=message.model or self.model,
            stop_reason=stop_reason,
            usage=message.usage or Usage(prompt_words, len(message.text.split())),
            response_id=message.response_id or f"scripted-{index + 1}",
            provider=message.provider or self.provider_name,
        )
        text = message.text
        size = self.chunk_size or max(len(text), 1)
        for start in range(0, len(text), size):
            if self.delay:
                await asyncio.sleep(self.delay)
            yield TextChunk(text[start : start + size])
        for call in message.tool_calls:
            if self.delay:
                await asyncio.sleep(self.delay)
            yield ToolCallChunk(call)
        yield Done(message)
