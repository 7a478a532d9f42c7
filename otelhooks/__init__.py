"""otelhooks: agent tool calls as before -> run -> after, one OpenTelemetry span tree per call.

The packages show the architecture: :mod:`otelhooks.core` (messages, tools, hooks, the executor,
the loop), :mod:`otelhooks.telemetry` (attribute names, content capture, tracing and metrics
set-up, span trees, test helpers), :mod:`otelhooks.builtin` (the hooks that come with it),
:mod:`otelhooks.providers` (models), :mod:`otelhooks.integrations` (MCP, frameworks) and
:mod:`otelhooks.cli` (the command).

The public names below are imported on first use (PEP 562), so ``import otelhooks`` (and the
pytest plugin every pytest session of a project loads) costs next to nothing; a name costs its
module's import the first time it is used. ``setup_tracing`` and ``in_memory_tracing`` need the
``sdk`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_names
from .version import __version__

if TYPE_CHECKING:
    from .core.cancel import (
        CancelSignal,
    )
    from .core.execute import (
        DEFAULT_TOOL_TIMEOUT,
        PreparedCall,
        ToolExecutor,
    )
    from .core.hooks import (
        FAIL_CLOSED,
        FAIL_OPEN,
        KEEP,
        AfterOverride,
        AfterToolCallContext,
        BeforeDecision,
        BeforeToolCallContext,
        HookChain,
        Hooks,
        RegisteredHook,
        ToolCallRecord,
        UnmatchedToolPattern,
        UnmatchedToolPatternError,
        allow,
        block,
        rewrite,
    )
    from .core.loop import (
        Agent,
        AgentStateError,
        RunResult,
    )
    from .core.messages import (
        AgentContext,
        AgentMessage,
        AssistantMessage,
        CustomMessage,
        MediaContent,
        Message,
        ThinkingBlock,
        ToolCall,
        ToolResult,
        ToolSpec,
        Usage,
        UserMessage,
    )
    from .core.tools import (
        InvalidArguments,
        Tool,
        ToolContext,
        ToolError,
        ToolNotFound,
        ToolOutput,
        ToolRegistry,
        make_tool,
    )
    from .telemetry.content import (
        Capture,
    )
    from .telemetry.testing import (
        InMemoryTracing,
        in_memory_tracing,
    )
    from .telemetry.tracing import (
        TracingSetup,
        setup_tracing,
    )

__getattr__, __dir__ = lazy_names(
    __name__,
    globals(),
    {
        "core.cancel": ("CancelSignal",),
        "core.execute": (
            "DEFAULT_TOOL_TIMEOUT",
            "PreparedCall",
            "ToolExecutor",
        ),
        "core.hooks": (
            "FAIL_CLOSED",
            "FAIL_OPEN",
            "KEEP",
            "AfterOverride",
            "AfterToolCallContext",
            "BeforeDecision",
            "BeforeToolCallContext",
            "HookChain",
            "Hooks",
            "RegisteredHook",
            "ToolCallRecord",
            "UnmatchedToolPattern",
            "UnmatchedToolPatternError",
            "allow",
            "block",
            "rewrite",
        ),
        "core.loop": (
            "Agent",
            "AgentStateError",
            "RunResult",
        ),
        "core.messages": (
            "AgentContext",
            "AgentMessage",
            "AssistantMessage",
            "CustomMessage",
            "MediaContent",
            "Message",
            "ThinkingBlock",
            "ToolCall",
            "ToolResult",
            "ToolSpec",
            "Usage",
            "UserMessage",
        ),
        "core.tools": (
            "InvalidArguments",
            "Tool",
            "ToolContext",
            "ToolError",
            "ToolNotFound",
            "ToolOutput",
            "ToolRegistry",
            "make_tool",
        ),
        "telemetry.content": ("Capture",),
        "telemetry.tracing": (
            "TracingSetup",
            "setup_tracing",
        ),
        "telemetry.testing": (
            "InMemoryTracing",
            "in_memory_tracing",
        ),
    },
)

__all__ = [
    "DEFAULT_TOOL_TIMEOUT",
    "FAIL_CLOSED",
    "FAIL_OPEN",
    "KEEP",
    "AfterOverride",
    "AfterToolCallContext",
    "Agent",
    "AgentContext",
    "AgentMessage",
    "AgentStateError",
    "AssistantMessage",
    "BeforeDecision",
    "BeforeToolCallContext",
    "CancelSignal",
    "Capture",
    "CustomMessage",
    "HookChain",
    "Hooks",
    "InMemoryTracing",
    "InvalidArguments",
    "MediaContent",
    "Message",
    "PreparedCall",
    "RegisteredHook",
    "RunResult",
    "ThinkingBlock",
    "Tool",
    "ToolCall",
    "ToolCallRecord",
    "ToolContext",
    "ToolError",
    "ToolExecutor",
    "ToolNotFound",
    "ToolOutput",
    "ToolRegistry",
    "ToolResult",
    "ToolSpec",
    "TracingSetup",
    "UnmatchedToolPattern",
    "UnmatchedToolPatternError",
    "Usage",
    "UserMessage",
    "__version__",
    "allow",
    "block",
    "in_memory_tracing",
    "make_tool",
    "rewrite",
    "setup_tracing",
]
