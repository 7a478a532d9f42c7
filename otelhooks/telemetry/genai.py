"""The ``chat`` span's attributes and content, in the OpenTelemetry GenAI conventions' shapes.

Request side: ``gen_ai.provider.name``, ``gen_ai.request.*`` parameters, ``server.address`` /
``server.port``. Response side: ``gen_ai.response.model``, ``gen_ai.response.id``,
``gen_ai.response.finish_reasons``, usage. Content (opt-in, see :mod:`otelhooks.content`):
``gen_ai.system_instructions``, ``gen_ai.input.messages``, ``gen_ai.output.messages`` and
``gen_ai.tool.definitions`` as the JSON documents the conventions define (messages with typed
``parts``: ``text``, ``tool_call``, ``tool_call_response``, ``reasoning``, ``blob``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from ..core.messages import AssistantMessage, Message, ToolResult, ToolSpec, Usage, UserMessage
from ..core.provider import ModelParams, ProviderRequest
from . import attributes as A

_FINISH_REASONS: Final = {
    "stop": A.FINISH_STOP,
    "toolUse": A.FINISH_TOOL_CALL,
    "length": A.FINISH_LENGTH,
    "error": A.FINISH_ERROR,
    "aborted": A.FINISH_ERROR,
}


def finish_reason(message: AssistantMessage) -> str:
    """The message's finish reason in the GenAI conventions' vocabulary (``stop``,
    ``tool_call``, ``length``, ``content_filter``, ``error``)."""
    return message.finish_reason or _FINISH_REASONS.get(message.stop_reason, A.FINISH_ERROR)


def usage_attributes(usage: Usage) -> dict[str, int]:
    """The GenAI usage attributes of ``usage`` (cache counts only when there are any)."""
    attrs = {
        A.GEN_AI_USAGE_INPUT_TOKENS: usage.input_tokens,
        A.GEN_AI_USAGE_OUTPUT_TOKENS: usage.output_tokens,
    }
    if usage.cache_read_tokens:
        attrs[A.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        attrs[A.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] = usage.cache_write_tokens
    return attrs


def provider_attributes(provider: Any) -> dict[str, Any]:
    """``gen_ai.provider.name`` and ``server.address``/``server.port`` a provider declares."""
    attrs: dict[str, Any] = {}
    name = getattr(provider, "provider_name", None)
    if isinstance(name, str) and name:
        attrs[A.GEN_AI_PROVIDER_NAME] = name
    address = getattr(provider, "server_address", None)
    if isinstance(address, str) and address:
        attrs[A.SERVER_ADDRESS] = address
        port = getattr(provider, "server_port", None)
        if isinstance(port, int):
            attrs[A.SERVER_PORT] = port
    return attrs


def params_attributes(params: ModelParams) -> dict[str, Any]:
    """The ``gen_ai.request.*`` attributes of the parameters that are set."""
    attrs: dict[str, Any] = {}
    if params.temperature is not None:
        attrs[A.GEN_AI_REQUEST_TEMPERATURE] = params.temperature
    if params.max_tokens is not None:
        attrs[A.GEN_AI_REQUEST_MAX_TOKENS] = params.max_tokens
    if params.top_p is not None:
        attrs[A.GEN_AI_REQUEST_TOP_P] = params.top_p
    if params.stop:
        attrs[A.GEN_AI_REQUEST_STOP_SEQUENCES] = params.stop
    if params.seed is not None:
        attrs[A.GEN_AI_REQUEST_SEED] = params.seed
    return attrs


def response_attributes(message: AssistantMessage) -> dict[str, Any]:
    """What the finished message tells the ``chat`` span."""
    attrs: dict[str, Any] = {A.GEN_AI_RESPONSE_FINISH_REASONS: (finish_reason(message),)}
    if message.model:
        attrs[A.GEN_AI_RESPONSE_MODEL] = message.model
    if message.response_id:
        attrs[A.GEN_AI_RESPONSE_ID] = message.response_id
    if message.usage is not None:
        attrs.update(usage_attributes(message.usage))
    return attrs


# -- content -----------------------------------------------------------------------------------


def _arguments(arguments: Mapping[str, Any] | str) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return dict(arguments)


def _assistant_parts(message: AssistantMessage) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [
        {"type": "reasoning", "content": block.text} for block in message.thinking if block.text
    ]
    if message.text:
        parts.append({"type": "text", "content": message.text})
    parts.extend(
        {
            "type": "tool_call",
            "id": call.id,
            "name": call.name,
            "arguments": _arguments(call.arguments),
        }
        for call in message.tool_calls
    )
    return parts


def _message(message: Message) -> dict[str, Any]:
    if isinstance(message, UserMessage):
        parts: list[dict[str, Any]] = [{"type": "text", "content": message.content}]
        parts.extend(
            {"type": "blob", "modality": m.kind, "mime_type": m.mime_type} for m in message.media
        )
        return {"role": "user", "parts": parts}
    if isinstance(message, ToolResult):
        return {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_call_response",
                    "id": message.tool_call_id,
                    "response": message.content,
                }
            ],
        }
    return {"role": "assistant", "parts": _assistant_parts(message)}


def input_messages(messages: Iterable[Message]) -> str:
    """``gen_ai.input.messages``: the conversation sent, as the conventions' JSON."""
    return json.dumps([_message(m) for m in messages], ensure_ascii=False, default=str)


def output_messages(message: AssistantMessage) -> str:
    """``gen_ai.output.messages``: the message received, with its finish reason."""
    document = {
        "role": "assistant",
        "parts": _assistant_parts(message),
        "finish_reason": finish_reason(message),
    }
    return json.dumps([document], ensure_ascii=False, default=str)


def system_instructions(system_prompt: str) -> str:
    """``gen_ai.system_instructions``."""
    return json.dumps([{"type": "text", "content": system_prompt}], ensure_ascii=False)


def tool_definitions(tools: Iterable[ToolSpec]) -> str:
    """``gen_ai.tool.definitions``."""
    return json.dumps(
        [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
            }
            for t in tools
        ],
        ensure_ascii=False,
        default=str,
    )


def request_content(request: ProviderRequest) -> dict[str, str]:
    """The content attributes of a request (before redaction and cutting)."""
    attrs = {A.GEN_AI_INPUT_MESSAGES: input_messages(request.messages)}
    if request.system_prompt:
        attrs[A.GEN_AI_SYSTEM_INSTRUCTIONS] = system_instructions(request.system_prompt)
    if request.tools:
        attrs[A.GEN_AI_TOOL_DEFINITIONS] = tool_definitions(request.tools)
    return attrs
