"""Attribute and span names: the observable contract, in one place.

GenAI and MCP names follow the OpenTelemetry semantic conventions (the values equal the constants in
``opentelemetry.semconv._incubating.attributes``; a test checks they stay equal).
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
GEN_AI_AGENT_ID: Final = "gen_ai.agent.id"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
GEN_AI_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TOP_P: Final = "gen_ai.request.top_p"
GEN_AI_REQUEST_TOP_K: Final = "gen_ai.request.top_k"
GEN_AI_REQUEST_STOP_SEQUENCES: Final = "gen_ai.request.stop_sequences"
GEN_AI_REQUEST_SEED: Final = "gen_ai.request.seed"
GEN_AI_REQUEST_STREAM: Final = "gen_ai.request.stream"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
GEN_AI_TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
ERROR_TYPE: Final = "error.type"
EXCEPTION_MESSAGE: Final = "exception.message"
EXCEPTION_STACKTRACE: Final = "exception.stacktrace"
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"  # a metric point's attribute: input | output
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
NETWORK_TRANSPORT: Final = "network.transport"
NETWORK_PROTOCOL_NAME: Final = "network.protocol.name"

# MCP semantic conventions.
MCP_METHOD_NAME: Final = "mcp.method.name"
MCP_SESSION_ID: Final = "mcp.session.id"
MCP_PROTOCOL_VERSION: Final = "mcp.protocol.version"
MCP_RESOURCE_URI: Final = "mcp.resource.uri"
JSONRPC_REQUEST_ID: Final = "jsonrpc.request.id"
MCP_DISCOVERY: Final = "otelhooks.mcp.discovery"  # "unsupported" on a probe the server lacks
JSONRPC_PROTOCOL_VERSION: Final = "jsonrpc.protocol.version"
RPC_RESPONSE_STATUS_CODE: Final = "rpc.response.status_code"
GEN_AI_PROMPT_NAME: Final = "gen_ai.prompt.name"
# The caller of a gateway call (OpenTelemetry's general user attributes).
USER_ID: Final = "user.id"
USER_HASH: Final = "user.hash"
USER_ROLES: Final = "user.roles"

OP_EXECUTE_TOOL: Final = "execute_tool"
OP_INVOKE_AGENT: Final = "invoke_agent"
OP_CHAT: Final = "chat"
# GenAI finish reasons (the conventions' vocabulary).
FINISH_STOP: Final = "stop"
FINISH_TOOL_CALL: Final = "tool_call"
FINISH_LENGTH: Final = "length"
FINISH_CONTENT_FILTER: Final = "content_filter"
FINISH_ERROR: Final = "error"
TOOL_TYPE_FUNCTION: Final = "function"

# Span names of the three phases of one tool call.
SPAN_BEFORE: Final = "before"
SPAN_RUN: Final = "run"
SPAN_AFTER: Final = "after"
UNKNOWN_TOOL_SPAN_NAME: Final = "execute_tool unknown"
UNKNOWN_TOOL: Final = "unknown"  # the tool of a call naming none that is registered (metrics)

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
TERMINATE: Final = "otelhooks.terminate"
ARGUMENTS_PREPARED: Final = "otelhooks.arguments.prepared"
# otelhooks' own attributes of MCP calls through the proxy.
MCP_UPSTREAM: Final = "otelhooks.mcp.upstream"  # the upstream that served the call
MCP_SESSIONS_REFUSED: Final = "otelhooks.mcp.sessions.refused"  # why a new session was refused
IDENTITY_VIA: Final = "otelhooks.identity.via"  # jwt | token | stdio | loopback
IDENTITY_RULE: Final = "otelhooks.identity.rule"  # the [[identity]] rule that applied
CHAT_RETRIES: Final = "otelhooks.chat.retries"  # times the SDK sent a chat request again
TOOL_OUTCOME: Final = "otelhooks.tool.outcome"  # a tool metric point's: allow | block | error
LOG_PREFIX: Final = "log."  # a log event mirrored to its span: each field as log.<field>
LOG_LEVEL: Final = "log.level"

# A decision of the before phase, with the names of the GenAI guardrail proposal
# (open-telemetry/semantic-conventions-genai PR #427, as of commit 33c15531c6bf of its branch,
# habibam/semantic-conventions-genai; docs/concepts/approvals.md has the table): the verdict the
# hooks returned and the action enforced are apart; the policy that decided; the keyed digest.
GEN_AI_GUARDRAIL_VERDICT_TYPE: Final = "gen_ai.guardrail.verdict.type"
GEN_AI_GUARDRAIL_VERDICT_REASON: Final = "gen_ai.guardrail.verdict.reason"
GEN_AI_GUARDRAIL_ACTION_TYPE: Final = "gen_ai.guardrail.action.type"
GEN_AI_GUARDRAIL_COMPONENT_NAME: Final = "gen_ai.guardrail.component.name"  # the deciding hook
GEN_AI_GUARDRAIL_TARGET_TYPE: Final = "gen_ai.guardrail.target.type"
GEN_AI_GUARDRAIL_TARGET_SUBTYPE: Final = "gen_ai.guardrail.target.subtype"
GEN_AI_GUARDRAIL_POLICY_ID: Final = "gen_ai.guardrail.security.policy.id"
GEN_AI_GUARDRAIL_POLICY_RULE_ID: Final = "gen_ai.guardrail.security.policy.rule.id"
GEN_AI_GUARDRAIL_INPUT_HASH: Final = "gen_ai.guardrail.security.content.input.hash"
# Their well-known values otelhooks uses.
GUARDRAIL_ALLOW: Final = "allow"
GUARDRAIL_DENY: Final = "deny"  # a verdict
GUARDRAIL_BLOCK: Final = "block"  # an action
GUARDRAIL_MODIFY: Final = "modify"
GUARDRAIL_ESCALATE: Final = "escalate"
GUARDRAIL_TARGET_INPUT: Final = "input"
GUARDRAIL_TARGET_TOOL_CALL: Final = "tool_call"
# otelhooks' own names where the proposal has none.
VERDICT: Final = "otelhooks.verdict"  # allow | block | ask | defer: the before-hooks' answer
POLICIES: Final = "otelhooks.policies"  # every policy that decided (the proposal's id is one)
# otelhooks' own names of an approval (the proposal has none): on the event under ``before``.
EVENT_APPROVAL: Final = "otelhooks.approval"
APPROVAL_REQUEST_ID: Final = "otelhooks.approval.request_id"
APPROVAL_ID: Final = "otelhooks.approval.id"  # the approval used (single-use)
# approve | edit | deny | timeout | failed | missing | granted
APPROVAL_ANSWER: Final = "otelhooks.approval.answer"
APPROVAL_BY: Final = "otelhooks.approval.by"
APPROVAL_HOW: Final = "otelhooks.approval.how"  # terminal | store | elicitation | scripted | ...
APPROVAL_WAIT_MS: Final = "otelhooks.approval.wait_ms"
RESUMED_FROM: Final = "otelhooks.resumed_from"  # a resumed run's link: the run id it resumes

# Span events.
EVENT_HOOK: Final = "otelhooks.hook"
# The GenAI event with a chat request's content (capture EVENT_ONLY or SPAN_AND_EVENT).
EVENT_INFERENCE_DETAILS: Final = "gen_ai.client.inference.operation.details"
EVENT_PROGRESS: Final = "otelhooks.tool.progress"
EVENT_PREPARE_ARGUMENTS: Final = "otelhooks.prepare_arguments"
EVENT_HOOK_NAME: Final = "otelhooks.hook.name"
EVENT_HOOK_DECISION: Final = "otelhooks.hook.decision"
EVENT_HOOK_DURATION_MS: Final = "otelhooks.hook.duration_ms"
EVENT_HOOK_ERROR: Final = "otelhooks.hook.error"
EVENT_HOOK_RECHECK: Final = "otelhooks.hook.recheck"  # it ran again on rewritten arguments
EVENT_PROGRESS_CONTENT: Final = "otelhooks.tool.progress.content"
EVENT_PROGRESS_INDEX: Final = "otelhooks.tool.progress.index"

DECISION_ALLOW: Final = "allow"
DECISION_BLOCK: Final = "block"
DECISION_SKIP: Final = "skip"
DECISION_DEFER: Final = "defer"

# Stable error.type values (besides exception class names).
ERR_TOOL_NOT_FOUND: Final = "tool_not_found"
ERR_INVALID_ARGUMENTS: Final = "invalid_arguments"
ERR_HOOK_FAILED: Final = "hook_failed"
ERR_HOOK_TIMEOUT: Final = "hook_timeout"
ERR_TOOL_TIMEOUT: Final = "tool_timeout"
ERR_CANCELLED: Final = "cancelled"
ERR_TOOL_ERROR: Final = "tool_error"  # the result says it failed (is_error), nothing raised
ERR_APPROVER_FAILED: Final = "approver_failed"  # the approver raised or answered nonsense
ERR_TRUNCATED: Final = "truncated"  # the model's message was cut by the token limit

CAPTURE_CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
