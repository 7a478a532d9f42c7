"""otelhooks: agent tool calls as before -> run -> after, one OpenTelemetry span tree per call.

The public names below are imported on first use (PEP 562), so ``import otelhooks`` (and the
pytest plugin every pytest session of a project loads) costs next to nothing; a name costs its
module's import the first time it is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .version import __version__

if TYPE_CHECKING:
    from .cancel import CancelSignal
    from .content import Capture
    from .execute import DEFAULT_TOOL_TIMEOUT, PreparedCall, ToolExecutor
    from .hooks import (
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
    from .loop import Agent, AgentStateError, RunResult
    from .messages import (
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
    from .tools import (
        InvalidArguments,
        Tool,
        ToolContext,
        ToolError,
        ToolNotFound,
        ToolOutput,
        ToolRegistry,
        make_tool,
    )

_MODULES: dict[str, tuple[str, ...]] = {
    "cancel": ("CancelSignal",),
    "content": ("Capture",),
    "execute": ("DEFAULT_TOOL_TIMEOUT", "PreparedCall", "ToolExecutor"),
    "hooks": (
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
    "loop": ("Agent", "AgentStateError", "RunResult"),
    "messages": (
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
    "tools": (
        "InvalidArguments",
        "Tool",
        "ToolContext",
        "ToolError",
        "ToolNotFound",
        "ToolOutput",
        "ToolRegistry",
        "make_tool",
    ),
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}

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
    "UnmatchedToolPattern",
    "UnmatchedToolPatternError",
    "Usage",
    "UserMessage",
    "__version__",
    "allow",
    "block",
    "make_tool",
    "rewrite",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'otelhooks' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return __all__
