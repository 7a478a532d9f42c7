"""Attribute and span names: the observable contract, in one place.

GenAI names follow the OpenTelemetry GenAI semantic conventions (the values equal the constants in
``opentelemetry.semconv._incubating.attributes.gen_ai_attributes``; a test checks they stay equal).
Names under ``otelhooks.`` are this project's own.
"""

from __future__ import annotations

from typing import Final

# GenAI semantic conventions.
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
ERROR_TYPE: Final = "error.type"

OP_EXECUTE_TOOL: Final = "execute_tool"
OP_INVOKE_AGENT: Final = "invoke_agent"
OP_CHAT: Final = "chat"
TOOL_TYPE_FUNCTION: Final = "function"

# Span names of the three phases of one tool call.
SPAN_BEFORE: Final = "before"
SPAN_RUN: Final = "run"
SPAN_AFTER: Final = "after"
UNKNOWN_TOOL_SPAN_NAME: Final = "execute_tool unknown"

# otelhooks' own attributes.
DECISION: Final = "otelhooks.decision"  # allow | block | skip
DECISION_HOOK: Final = "otelhooks.decision.hook"
BLOCK_REASON: Final = "otelhooks.block.reason"
ARGUMENTS_REWRITTEN: Final = "otelhooks.arguments.rewritten"
RESULT_IS_ERROR: Final = "otelhooks.result.is_error"
RESULT_OVERRIDDEN: Final = "otelhooks.result.overridden"
CANCELLED: Final = "otelhooks.cancelled"
REDACTED_PATHS: Final = "otelhooks.redacted.paths"
TURN_INDEX: Final = "otelhooks.turn.index"

# Span events.
EVENT_HOOK: Final = "otelhooks.hook"
EVENT_PROGRESS: Final = "otelhooks.tool.progress"
EVENT_HOOK_NAME: Final = "otelhooks.hook.name"
EVENT_HOOK_DECISION: Final = "otelhooks.hook.decision"
EVENT_HOOK_DURATION_MS: Final = "otelhooks.hook.duration_ms"
EVENT_HOOK_ERROR: Final = "otelhooks.hook.error"
EVENT_PROGRESS_CONTENT: Final = "otelhooks.tool.progress.content"
EVENT_PROGRESS_INDEX: Final = "otelhooks.tool.progress.index"

DECISION_ALLOW: Final = "allow"
DECISION_BLOCK: Final = "block"
DECISION_SKIP: Final = "skip"

# Stable error.type values (besides exception class names).
ERR_TOOL_NOT_FOUND: Final = "tool_not_found"
ERR_INVALID_ARGUMENTS: Final = "invalid_arguments"
ERR_HOOK_FAILED: Final = "hook_failed"
ERR_HOOK_TIMEOUT: Final = "hook_timeout"
ERR_TOOL_TIMEOUT: Final = "tool_timeout"
ERR_CANCELLED: Final = "cancelled"

CAPTURE_CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
