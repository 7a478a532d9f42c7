"""Claude models on the official ``anthropic`` SDK (the ``anthropic`` extra).

:class:`AnthropicMessages` speaks the Messages API, streaming through the SDK's message stream:
text as it comes, each ``tool_use`` block as a tool call once its input is complete (parallel
tool use included), then the complete message. Thinking blocks (and redacted thinking) are kept
with their signatures and sent back unchanged with the tool results of the same turn, as the API
requires; tool results are ``tool_result`` blocks (images included) in one user message.

Usage: ``gen_ai.usage.input_tokens`` counts every input token, the cached ones included (the
API's ``input_tokens`` plus its cache read and cache write counts), as the GenAI conventions
want; the cache counts are also recorded on their own. Errors, retries and timeouts as for the
OpenAI providers (see :mod:`otelhooks.providers.openai`).

The SDK can make spans of its own (its ``open_telemetry`` option): a client this module makes
has them off, since the loop makes the ``chat`` span; for a client you pass with them on,
``instrumented`` is true and the loop makes none, so that tokens are not counted twice.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

import anthropic
from anthropic import AsyncAnthropic

from ..core.messages import (
    AssistantMessage,
    MediaContent,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from ..core.provider import Done, ProviderRequest, StreamEvent, TextChunk, ToolCallChunk
from ._common import (
    Attempts,
    SDKProvider,
    counting_client,
    error_message,
    missing_key,
    unusable,
)

PROVIDER: Final = "anthropic"
DEFAULT_MAX_TOKENS: Final = 4096
DEFAULT_TIMEOUT: Final = 120.0

_STOP: Final = {
    "end_turn": ("stop", "stop"),
    "stop_sequence": ("stop", "stop"),
    "pause_turn": ("stop", "stop"),
    "tool_use": ("toolUse", "tool_call"),
    "max_tokens": ("length", "length"),
    "model_context_window_exceeded": ("length", "length"),
    "refusal": ("error", "content_filter"),
}


def anthropic_messages(request: ProviderRequest, provider: str = PROVIDER) -> list[dict[str, Any]]:
    """The conversation as Messages API messages: roles alternate (consecutive user content and
    tool results are merged into one user message), thinking blocks from this provider are kept
    in front of the assistant's text and tool use."""
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for message in request.messages:
        if isinstance(message, UserMessage):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": message.content}]
            blocks.extend(_image(m) for m in message.media if m.kind == "image")
            add("user", blocks)
        elif isinstance(message, ToolResult):
            content: list[dict[str, Any]] = [{"type": "text", "text": message.content or "(empty)"}]
            content.extend(_image(m) for m in message.media if m.kind == "image")
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": content,
            }
            if message.is_error:
                block["is_error"] = True
            add("user", [block])
        else:
            add("assistant", _assistant_blocks(message, provider))
    return out


def _image(media: MediaContent) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": media.mime_type, "data": media.data},
    }


def _assistant_blocks(message: AssistantMessage, provider: str) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for thought in message.thinking:
        if thought.provider != provider:
            continue
        if thought.encrypted:
            blocks.append({"type": "redacted_thinking", "data": thought.encrypted})
        elif thought.signature:
            blocks.append(
                {"type": "thinking", "thinking": thought.text, "signature": thought.signature}
            )
    if message.text:
        blocks.append({"type": "text", "text": message.text})
    for call in message.tool_calls:
        arguments = call.arguments
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                arguments = {"_raw": arguments}
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
    return blocks or [{"type": "text", "text": "(no content)"}]


class AnthropicMessages(SDKProvider):
    """The Messages API (``client.messages.stream``).

    ``client`` is an ``AsyncAnthropic`` you made; else one is made from ``api_key`` (default
    ``ANTHROPIC_API_KEY``), ``base_url``, ``timeout`` and ``max_retries``, with the SDK's own
    spans off. ``max_tokens`` is the default token limit (the API requires one; the request
    parameters' ``max_tokens`` wins). ``thinking`` (``{"type": "enabled", "budget_tokens":
    2048}``) turns extended thinking on. ``extra_body`` is merged into every request; request
    parameters the SDK no longer names (``temperature``, ``top_p``) travel there.
    """

    provider_name: str = PROVIDER

    def __init__(
        self,
        client: AsyncAnthropic | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = 2,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        thinking: Mapping[str, Any] | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        if client is None:
            self.missing = missing_key(
                api_key, ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"), "Anthropic"
            )
        self._connect(
            client,
            None,
            extra_body,
            lambda: counting_client(
                AsyncAnthropic,
                anthropic.DefaultAsyncHttpxClient,
                api_key=api_key,
                base_url=base_url,
                timeout=timeout,
                max_retries=max_retries,
                open_telemetry=False,
            ),
        )
        self.max_tokens = max_tokens
        self.thinking = dict(thinking) if thinking else None

    @property
    def instrumented(self) -> bool:
        """Whether the client makes spans of its own (the SDK's ``open_telemetry`` option)."""
        try:
            return self.client._tracer is not None
        except Exception:
            return False

    def _request(self, request: ProviderRequest) -> dict[str, Any]:
        params = request.params
        kwargs: dict[str, Any] = {
            "model": request.model,
            "max_tokens": params.max_tokens or self.max_tokens,
            "messages": anthropic_messages(request, self.provider_name),
        }
        if request.system_prompt:
            kwargs["system"] = request.system_prompt
        if request.tools:
            kwargs["tools"] = [
                {
                    "name": t.name,
                    "description": t.description,
                    "input_schema": json.loads(json.dumps(t.parameters)),
                }
                for t in request.tools
            ]
            if params.tool_choice:
                choice = params.tool_choice
                kwargs["tool_choice"] = (
                    {"type": "auto"}
                    if choice == "auto"
                    else {"type": "none"}
                    if choice == "none"
                    else {"type": "any"}
                    if choice == "required"
                    else {"type": "tool", "name": choice}
                )
        if params.stop:
            kwargs["stop_sequences"] = list(params.stop)
        if self.thinking:
            kwargs["thinking"] = self.thinking
        extra = dict(self.extra_body)
        if params.temperature is not None:
            extra.setdefault("temperature", params.temperature)
        if params.top_p is not None:
            extra.setdefault("top_p", params.top_p)
        if extra:
            kwargs["extra_body"] = extra
        return kwargs

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        """One streamed message as stream events (see the module's documentation)."""
        if (cannot := unusable(self, request.model)) is not None:
            yield Done(cannot)
            return
        text: list[str] = []
        final: Any = None
        with Attempts():
            try:
                async with self.client.messages.stream(**self._request(request)) as stream:
                    event: Any  # the SDK's stream events, told apart by their type
                    async for event in stream:
                        if event.type == "text":
                            text.append(event.text)
                            yield TextChunk(event.text)
                        elif event.type == "content_block_stop":
                            block = event.content_block
                            if block.type == "tool_use":
                                yield ToolCallChunk(
                                    ToolCall(block.id, block.name, dict(block.input))
                                )
                    snapshot = stream.current_message_snapshot
                    final = snapshot if snapshot.stop_reason is not None else None
            except anthropic.APIError as exc:
                yield Done(
                    error_message(exc, request.model, self.provider_name, text="".join(text))
                )
                return
        yield Done(self._message(request, final, text))

    def _message(self, request: ProviderRequest, final: Any, text: list[str]) -> AssistantMessage:
        if final is None:
            return AssistantMessage(
                "".join(text),
                (),
                "error",
                request.model,
                error_message="the stream ended before the message was complete",
                error_type="stream_incomplete",
                provider=self.provider_name,
                finish_reason="error",
            )
        texts: list[str] = []
        calls: list[ToolCall] = []
        thinking: list[ThinkingBlock] = []
        for block in final.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "thinking":
                thinking.append(
                    ThinkingBlock(block.thinking, signature=block.signature, provider=PROVIDER)
                )
            elif block.type == "redacted_thinking":
                thinking.append(ThinkingBlock(encrypted=block.data, provider=PROVIDER))
            elif block.type == "tool_use":
                calls.append(ToolCall(block.id, block.name, dict(block.input)))
        u = final.usage
        cache_read = u.cache_read_input_tokens or 0
        cache_write = u.cache_creation_input_tokens or 0
        usage = Usage(
            (u.input_tokens or 0) + cache_read + cache_write,
            u.output_tokens or 0,
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
        )
        stop_reason, finish_reason = _STOP.get(final.stop_reason, ("stop", final.stop_reason))
        error = "the model refused to answer" if final.stop_reason == "refusal" else None
        return AssistantMessage(
            "".join(texts),
            tuple(calls),
            stop_reason,
            final.model or request.model,
            usage,
            error,
            thinking=tuple(thinking),
            response_id=final.id or "",
            provider=self.provider_name,
            error_type="content_filter" if error else None,
            finish_reason=finish_reason,
        )
