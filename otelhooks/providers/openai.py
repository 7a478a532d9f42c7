"""OpenAI models on the official ``openai`` SDK (the ``openai`` extra).

:class:`OpenAIChat` speaks the Chat Completions API, which every OpenAI-compatible server also
speaks (vLLM, Ollama, llama.cpp's server, LM Studio: give their ``base_url``);
:class:`OpenAIResponses` speaks the Responses API. Both stream: text as it comes, each tool call
once its arguments are complete (arguments streamed in pieces are assembled; parallel calls are
kept apart by their index or item), then the complete message with its usage (cached input
tokens included), finish reason, response id and model. A refusal is kept on the message. A
failed request (401, 429, 400, 5xx, a timeout, a stream cut before its end) ends the turn with
``stop_reason="error"`` and a message saying what happened; the SDK's retries (``max_retries``)
are counted on the ``chat`` span as ``otelhooks.chat.retries``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypedDict, Unpack

import openai
from openai import AsyncOpenAI

from ..core.messages import (
    AssistantMessage,
    MediaContent,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
    UserMessage,
)
from ..core.provider import (
    Done,
    ModelParams,
    ProviderRequest,
    StreamEvent,
    TextChunk,
    ToolCallChunk,
)
from ._common import (
    Attempts,
    SDKProvider,
    counting_client,
    decode_arguments,
    error_message,
    missing_key,
    unusable,
    wrapped,
)

DEFAULT_TIMEOUT: Final = 120.0
_UNSET_KEY: Final = "no-key-set"  # lets the client be made; no request is sent with it
PROVIDER: Final = "openai"

_CHAT_FINISH: Final = {
    "stop": ("stop", "stop"),
    "tool_calls": ("toolUse", "tool_call"),
    "function_call": ("toolUse", "tool_call"),
    "length": ("length", "length"),
    "content_filter": ("error", "content_filter"),
}


class OpenAIOptions(TypedDict, total=False):
    """What :class:`OpenAIChat` and :class:`OpenAIResponses` accept besides their own options
    (when no ``client`` is given, the first four make one)."""

    api_key: str | None
    """The API key (default ``OPENAI_API_KEY``)."""
    base_url: str | None
    """The server (default ``OPENAI_BASE_URL``, else OpenAI's): any OpenAI-compatible one."""
    timeout: float
    """Seconds per request (default 120)."""
    max_retries: int
    """The SDK's retries (default 2)."""
    provider_name: str | None
    """``gen_ai.provider.name`` (default ``openai``; say ``ollama`` or ``vllm`` for those)."""
    extra_body: Mapping[str, Any] | None
    """Fields merged into every request."""


class _OpenAIBase(SDKProvider):
    provider_name: str = PROVIDER

    def __init__(self, client: AsyncOpenAI | None, options: OpenAIOptions) -> None:
        if client is None:
            self.missing = missing_key(options.get("api_key"), ("OPENAI_API_KEY",), "OpenAI")
        self._connect(
            client,
            options.get("provider_name"),
            options.get("extra_body"),
            lambda: counting_client(
                AsyncOpenAI,
                openai.DefaultAsyncHttpxClient,
                api_key=options.get("api_key") or (_UNSET_KEY if self.missing else None),
                base_url=options.get("base_url"),
                timeout=options.get("timeout", DEFAULT_TIMEOUT),
                max_retries=options.get("max_retries", 2),
            ),
        )

    def _common(self, params: ModelParams) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if params.temperature is not None:
            kwargs["temperature"] = params.temperature
        if params.top_p is not None:
            kwargs["top_p"] = params.top_p
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        return kwargs

    def _failed(self, exc: BaseException, model: str, text: str) -> AssistantMessage:
        return error_message(exc, model, self.provider_name, text=text)


# -- Chat Completions -------------------------------------------------------------------------


def chat_messages(request: ProviderRequest) -> list[dict[str, Any]]:
    """The conversation in Chat Completions form. Tool results are ``tool`` messages; images a
    tool returned (which ``tool`` messages cannot carry) follow them in a ``user`` message."""
    out: list[dict[str, Any]] = []
    if request.system_prompt:
        out.append({"role": "system", "content": request.system_prompt})
    pending_media: list[MediaContent] = []
    for message in request.messages:
        if not isinstance(message, ToolResult) and pending_media:
            out.append(_media_message(pending_media))
            pending_media = []
        if isinstance(message, UserMessage):
            if message.media:
                parts: list[dict[str, Any]] = [{"type": "text", "text": message.content}]
                parts.extend(_image_part(m) for m in message.media if m.kind == "image")
                out.append({"role": "user", "content": parts})
            else:
                out.append({"role": "user", "content": message.content})
        elif isinstance(message, ToolResult):
            out.append(
                {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
            )
            pending_media.extend(m for m in message.media if m.kind == "image")
        else:
            out.append(_chat_assistant(message))
    if pending_media:
        out.append(_media_message(pending_media))
    return out


def _image_part(media: MediaContent) -> dict[str, Any]:
    return {
        "type": "image_url",
        "image_url": {"url": f"data:{media.mime_type};base64,{media.data}"},
    }


def _media_message(media: list[MediaContent]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": "Images returned by the tools:"}]
    parts.extend(_image_part(m) for m in media)
    return {"role": "user", "content": parts}


def _arguments_text(arguments: Mapping[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(dict(arguments))


def _chat_assistant(message: AssistantMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": message.text or None}
    if message.refusal:
        out["refusal"] = message.refusal
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": _arguments_text(call.arguments)},
            }
            for call in message.tool_calls
        ]
    return out


def chat_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as Chat Completions ``tools`` (function tools)."""
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": json.loads(json.dumps(t.parameters)),
            },
        }
        for t in tools
    ]


def _chat_tool_choice(choice: str) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def done(self) -> ToolCall:
        return ToolCall(self.id, self.name, decode_arguments("".join(self.arguments)))


class OpenAIChat(_OpenAIBase):
    """The Chat Completions API (``client.chat.completions``), streaming.

    ``client`` is an ``AsyncOpenAI`` you made (its retries are then not counted); else one is
    made from ``api_key`` (default ``OPENAI_API_KEY``), ``base_url`` (default
    ``OPENAI_BASE_URL``, else OpenAI's), ``timeout`` (seconds per request; default 120) and
    ``max_retries``. ``provider_name`` is ``gen_ai.provider.name`` (``openai``; say ``ollama``
    or ``vllm`` for those). ``max_tokens_field`` is the request field the token limit goes in:
    ``max_completion_tokens`` for OpenAI, ``max_tokens`` (the default with a ``base_url``) for
    servers that only know that one. ``extra_body`` is merged into every request.
    """

    def __init__(
        self,
        client: AsyncOpenAI | None = None,
        *,
        max_tokens_field: str | None = None,
        **options: Unpack[OpenAIOptions],
    ) -> None:
        super().__init__(client, options)
        self.max_tokens_field = max_tokens_field or (
            "max_tokens" if options.get("base_url") is not None else "max_completion_tokens"
        )

    @property
    def instrumented(self) -> bool:
        """Whether an instrumentation wraps ``chat.completions.create`` (and makes the span)."""
        return wrapped(type(self.client.chat.completions).create)

    def _request(self, request: ProviderRequest) -> dict[str, Any]:
        params = request.params
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": chat_messages(request),
            "stream": True,
            "stream_options": {"include_usage": True},
            **self._common(params),
        }
        if request.tools:
            kwargs["tools"] = chat_tools(request.tools)
            kwargs["parallel_tool_calls"] = True
            if params.tool_choice:
                kwargs["tool_choice"] = _chat_tool_choice(params.tool_choice)
        if params.max_tokens is not None:
            kwargs[self.max_tokens_field] = params.max_tokens
        if params.stop:
            kwargs["stop"] = list(params.stop)
        if params.seed is not None:
            kwargs["seed"] = params.seed
        return kwargs

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        """One streamed chat completion as stream events (see the module's documentation)."""
        if (cannot := unusable(self, request.model)) is not None:
            yield Done(cannot)
            return
        text: list[str] = []
        refusal: list[str] = []
        calls: dict[int, _PartialCall] = {}
        finish: str | None = None
        response_id = model = ""
        usage: Usage | None = None
        with Attempts():
            try:
                stream = await self.client.chat.completions.create(**self._request(request))
                async with stream:
                    async for chunk in stream:
                        response_id = chunk.id or response_id
                        model = chunk.model or model
                        if chunk.usage is not None:
                            details = chunk.usage.prompt_tokens_details
                            cached = (details.cached_tokens or 0) if details is not None else 0
                            usage = Usage(
                                chunk.usage.prompt_tokens or 0,
                                chunk.usage.completion_tokens or 0,
                                cache_read_tokens=cached,
                            )
                        for choice in chunk.choices:
                            delta = choice.delta
                            if delta.content:
                                text.append(delta.content)
                                yield TextChunk(delta.content)
                            if delta.refusal:
                                refusal.append(delta.refusal)
                            for piece in delta.tool_calls or ():
                                partial = calls.setdefault(piece.index, _PartialCall())
                                partial.id = piece.id or partial.id
                                if piece.function is not None:
                                    partial.name = piece.function.name or partial.name
                                    partial.arguments.append(piece.function.arguments or "")
                            if choice.finish_reason is not None:
                                finish = choice.finish_reason
            except openai.APIError as exc:
                yield Done(self._failed(exc, model or request.model, "".join(text)))
                return
        tool_calls = tuple(calls[i].done() for i in sorted(calls))
        for call in tool_calls:
            yield ToolCallChunk(call)
        yield Done(
            self._message(request, finish, text, refusal, tool_calls, model, response_id, usage)
        )

    def _message(
        self,
        request: ProviderRequest,
        finish: str | None,
        text: list[str],
        refusal: list[str],
        tool_calls: tuple[ToolCall, ...],
        model: str,
        response_id: str,
        usage: Usage | None,
    ) -> AssistantMessage:
        common: dict[str, Any] = {
            "model": model or request.model,
            "usage": usage,
            "response_id": response_id,
            "provider": self.provider_name,
            "refusal": "".join(refusal),
        }
        if finish is None:
            return AssistantMessage(
                "".join(text),
                (),
                "error",
                error_message="the stream ended before the response was complete",
                error_type="stream_incomplete",
                finish_reason="error",
                **common,
            )
        stop_reason, finish_reason = _CHAT_FINISH.get(finish, ("stop", finish))
        error = None
        if finish == "content_filter":
            error = "the response was stopped by the content filter"
        elif common["refusal"] and not text and not tool_calls:
            stop_reason, error = "error", f"the model refused: {common['refusal']}"
            finish_reason = "content_filter"
        return AssistantMessage(
            "".join(text),
            tool_calls,
            stop_reason,  # type: ignore[arg-type]
            error_message=error,
            error_type="content_filter" if error else None,
            finish_reason=finish_reason,
            **common,
        )


# -- Responses ---------------------------------------------------------------------------------


def response_input(request: ProviderRequest, provider: str) -> list[dict[str, Any]]:
    """The conversation as Responses API input items. Reasoning items are sent back (encrypted)
    to the provider that made them; tool outputs carry images where the API allows."""
    items: list[dict[str, Any]] = []
    for message in request.messages:
        if isinstance(message, UserMessage):
            content: list[dict[str, Any]] = [{"type": "input_text", "text": message.content}]
            content.extend(_input_image(m) for m in message.media if m.kind == "image")
            items.append({"role": "user", "content": content})
        elif isinstance(message, ToolResult):
            images = [m for m in message.media if m.kind == "image"]
            output: Any = message.content
            if images:
                output = [{"type": "input_text", "text": message.content}]
                output.extend(_input_image(m) for m in images)
            items.append(
                {"type": "function_call_output", "call_id": message.tool_call_id, "output": output}
            )
        else:
            items.extend(_response_assistant(message, provider))
    return items


def _input_image(media: MediaContent) -> dict[str, Any]:
    return {"type": "input_image", "image_url": f"data:{media.mime_type};base64,{media.data}"}


def _response_assistant(message: AssistantMessage, provider: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for block in message.thinking:
        if block.provider == provider and block.encrypted:
            items.append(
                {
                    "type": "reasoning",
                    "id": block.id,
                    "encrypted_content": block.encrypted,
                    "summary": [{"type": "summary_text", "text": block.text}] if block.text else [],
                }
            )
    if message.text:
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": message.text, "annotations": []}],
            }
        )
    for call in message.tool_calls:
        items.append(
            {
                "type": "function_call",
                "call_id": call.id,
                "name": call.name,
                "arguments": _arguments_text(call.arguments),
            }
        )
    return items


class OpenAIResponses(_OpenAIBase):
    """The Responses API (``client.responses``), streaming, stateless (``store=False``; the
    reasoning of one turn is sent back, encrypted, with the next). Options as
    :class:`OpenAIChat`; ``reasoning`` (``{"effort": "low"}``) goes to the request."""

    def __init__(
        self,
        client: AsyncOpenAI | None = None,
        *,
        reasoning: Mapping[str, Any] | None = None,
        **options: Unpack[OpenAIOptions],
    ) -> None:
        super().__init__(client, options)
        self.reasoning = dict(reasoning) if reasoning else None

    @property
    def instrumented(self) -> bool:
        """Whether an instrumentation wraps ``responses.create``."""
        return wrapped(type(self.client.responses).create)

    def _request(self, request: ProviderRequest) -> dict[str, Any]:
        params = request.params
        kwargs: dict[str, Any] = {
            "model": request.model,
            "input": response_input(request, self.provider_name),
            "stream": True,
            "store": False,
            "include": ["reasoning.encrypted_content"],
            **self._common(params),
        }
        if request.system_prompt:
            kwargs["instructions"] = request.system_prompt
        if request.tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": json.loads(json.dumps(t.parameters)),
                    "strict": False,
                }
                for t in request.tools
            ]
            kwargs["parallel_tool_calls"] = True
            if params.tool_choice:
                choice = params.tool_choice
                kwargs["tool_choice"] = (
                    choice
                    if choice in ("auto", "none", "required")
                    else {"type": "function", "name": choice}
                )
        if params.max_tokens is not None:
            kwargs["max_output_tokens"] = params.max_tokens
        if self.reasoning:
            kwargs["reasoning"] = self.reasoning
        return kwargs

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        """One streamed response as stream events (see the module's documentation)."""
        if (cannot := unusable(self, request.model)) is not None:
            yield Done(cannot)
            return
        text: list[str] = []
        final: Any = None
        failure: str | None = None
        with Attempts():
            try:
                stream = await self.client.responses.create(**self._request(request))
                async with stream:
                    async for event in stream:
                        kind = event.type
                        if kind == "response.output_text.delta":
                            text.append(event.delta)
                            yield TextChunk(event.delta)
                        elif (
                            kind == "response.output_item.done"
                            and event.item.type == "function_call"
                        ):
                            item = event.item
                            yield ToolCallChunk(
                                ToolCall(item.call_id, item.name, decode_arguments(item.arguments))
                            )
                        elif kind in (
                            "response.completed",
                            "response.incomplete",
                            "response.failed",
                        ):
                            final = event.response
                        elif kind == "error":
                            failure = f"{getattr(event, 'code', None) or 'error'}: {event.message}"
            except openai.APIError as exc:
                yield Done(self._failed(exc, request.model, "".join(text)))
                return
        yield Done(self._message(request, final, text, failure))

    def _message(
        self, request: ProviderRequest, final: Any, text: list[str], failure: str | None
    ) -> AssistantMessage:
        if final is None:
            return AssistantMessage(
                "".join(text),
                (),
                "error",
                request.model,
                error_message=failure or "the stream ended before the response was complete",
                error_type="stream_incomplete" if failure is None else "response_error",
                provider=self.provider_name,
                finish_reason="error",
            )
        texts: list[str] = []
        calls: list[ToolCall] = []
        thinking: list[ThinkingBlock] = []
        refusal: list[str] = []
        for item in final.output or ():
            if item.type == "message":
                for part in item.content:
                    if part.type == "output_text":
                        texts.append(part.text)
                    elif part.type == "refusal":
                        refusal.append(part.refusal)
            elif item.type == "function_call":
                calls.append(ToolCall(item.call_id, item.name, decode_arguments(item.arguments)))
            elif item.type == "reasoning":
                summary = "".join(s.text for s in (item.summary or ()))
                thinking.append(
                    ThinkingBlock(
                        summary,
                        encrypted=item.encrypted_content or "",
                        id=item.id or "",
                        provider=self.provider_name,
                    )
                )
        usage = None
        if final.usage is not None:
            details = final.usage.input_tokens_details
            usage = Usage(
                final.usage.input_tokens or 0,
                final.usage.output_tokens or 0,
                cache_read_tokens=(details.cached_tokens or 0) if details is not None else 0,
            )
        status = final.status
        reason = getattr(final.incomplete_details, "reason", None)
        common: dict[str, Any] = {
            "model": final.model or request.model,
            "usage": usage,
            "thinking": tuple(thinking),
            "response_id": final.id or "",
            "provider": self.provider_name,
            "refusal": "".join(refusal),
        }
        body = "".join(texts) or "".join(text)
        if status == "failed":
            error = getattr(final.error, "message", None) or failure or "the response failed"
            code = getattr(final.error, "code", None) or "response_failed"
            return AssistantMessage(
                body, (), "error", error_message=error, error_type=str(code),
                finish_reason="error", **common,
            )  # fmt: skip
        if status == "incomplete":
            if reason == "content_filter":
                return AssistantMessage(
                    body, tuple(calls), "error",
                    error_message="the response was stopped by the content filter",
                    error_type="content_filter", finish_reason="content_filter", **common,
                )  # fmt: skip
            return AssistantMessage(body, tuple(calls), "length", finish_reason="length", **common)
        if calls:
            return AssistantMessage(
                body, tuple(calls), "toolUse", finish_reason="tool_call", **common
            )
        if common["refusal"] and not body:
            return AssistantMessage(
                body, (), "error", error_message=f"the model refused: {common['refusal']}",
                error_type="content_filter", finish_reason="content_filter", **common,
            )  # fmt: skip
        return AssistantMessage(body, (), "stop", finish_reason="stop", **common)
