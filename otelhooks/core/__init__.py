"""The core: messages, tools, hooks, one call through before -> run -> after, the loop, its
events and the provider protocol.

The core depends on the OpenTelemetry API and on the telemetry vocabulary
(:mod:`otelhooks.telemetry.attributes`, content capture, GenAI attributes, instruments), never on a
telemetry set-up, a built-in hook, a provider, an integration or the command line (the rule is in
docs/development.md, "Architecture", and a test checks it). The names below are the public core;
each is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from .approvals import (
        DEFAULT_APPROVAL_TTL,
        ApprovalDecision,
        ApprovalOutcome,
        ApprovalRequest,
        ApprovalSettings,
        Approve,
        Approver,
        ApproveWithEdit,
        CallIdentity,
        Deny,
    )
    from .cancel import *
    from .events import *
    from .execute import *
    from .hooks import *
    from .loop import *
    from .messages import *
    from .outcome import Allowed, Deferred, Ended, Prepared
    from .provider import *
    from .scrub import NO_SCRUBBING, Scrubber
    from .tool_span import ToolCallRecorder
    from .tools import *

__getattr__, __dir__ = lazy_names(
    __name__,
    globals(),
    {
        "approvals": (
            "DEFAULT_APPROVAL_TTL ApprovalDecision ApprovalOutcome ApprovalRequest "
            "ApprovalSettings Approve ApproveWithEdit Approver CallIdentity Deny"
        ),
        "cancel": "CancelSignal",
        "events": (
            "AgentEnd AgentEvent AgentStart MessageEnd MessageStart TextDelta ToolCallRequested "
            "ToolExecutionEnd ToolExecutionStart ToolExecutionUpdate ToolResultEvent TurnEnd "
            "TurnStart"
        ),
        "execute": "DEFAULT_TOOL_TIMEOUT ToolExecutor",
        "hooks": (
            "FAIL_CLOSED FAIL_OPEN KEEP AfterOverride AfterToolCallContext BeforeDecision "
            "BeforeAction BeforeToolCallContext HookChain Hooks RegisteredHook ToolCallRecord "
            "ToolCheckError ToolCheckWarning ToolHook UnmatchedToolPattern "
            "UnmatchedToolPatternError allow ask block defer rewrite"
        ),
        "loop": "Agent AgentConfig AgentStateError RunResult",
        "outcome": "Allowed Deferred Ended Prepared",
        "messages": (
            "AgentContext AgentMessage AssistantMessage CustomMessage MediaContent Message "
            "ThinkingBlock ToolCall ToolResult ToolSpec Usage UserMessage"
        ),
        "provider": "Done ModelParams Provider ProviderRequest StreamEvent TextChunk ToolCallChunk",
        "scrub": "NO_SCRUBBING Scrubber",
        "tool_span": "ToolCallRecorder",
        "tools": (
            "TOOL_NAME InvalidArguments Tool ToolContext ToolError ToolNotFound ToolOutput "
            "ToolRegistry ToolSet make_tool"
        ),
    },
)

__all__ = [
    "DEFAULT_APPROVAL_TTL",
    "DEFAULT_TOOL_TIMEOUT",
    "FAIL_CLOSED",
    "FAIL_OPEN",
    "KEEP",
    "NO_SCRUBBING",
    "TOOL_NAME",
    "AfterOverride",
    "AfterToolCallContext",
    "Agent",
    "AgentConfig",
    "AgentContext",
    "AgentEnd",
    "AgentEvent",
    "AgentMessage",
    "AgentStart",
    "AgentStateError",
    "Allowed",
    "ApprovalDecision",
    "ApprovalOutcome",
    "ApprovalRequest",
    "ApprovalSettings",
    "Approve",
    "ApproveWithEdit",
    "Approver",
    "AssistantMessage",
    "BeforeAction",
    "BeforeDecision",
    "BeforeToolCallContext",
    "CallIdentity",
    "CancelSignal",
    "CustomMessage",
    "Deferred",
    "Deny",
    "Done",
    "Ended",
    "HookChain",
    "Hooks",
    "InvalidArguments",
    "MediaContent",
    "Message",
    "MessageEnd",
    "MessageStart",
    "ModelParams",
    "Prepared",
    "Provider",
    "ProviderRequest",
    "RegisteredHook",
    "RunResult",
    "Scrubber",
    "StreamEvent",
    "TextChunk",
    "TextDelta",
    "ThinkingBlock",
    "Tool",
    "ToolCall",
    "ToolCallChunk",
    "ToolCallRecord",
    "ToolCallRecorder",
    "ToolCallRequested",
    "ToolCheckError",
    "ToolCheckWarning",
    "ToolContext",
    "ToolError",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "ToolExecutor",
    "ToolHook",
    "ToolNotFound",
    "ToolOutput",
    "ToolRegistry",
    "ToolResult",
    "ToolResultEvent",
    "ToolSet",
    "ToolSpec",
    "TurnEnd",
    "TurnStart",
    "UnmatchedToolPattern",
    "UnmatchedToolPatternError",
    "Usage",
    "UserMessage",
    "allow",
    "ask",
    "block",
    "defer",
    "make_tool",
    "rewrite",
]
