"""The plan of a tool under a hook chain: what every call of that tool does the same way, worked
out once.

A :class:`CallPlan` holds the hooks of each phase that apply to the tool and the identity its
span starts with (name and attributes). It depends only on a frozen :class:`~otelhooks.Tool` and
an immutable :class:`~otelhooks.HookChain`, so :class:`PlanCache` keeps it keyed on exactly those
two objects: a tool registered again under its name, or hooks registered since, are new keys,
and nothing needs telling that something changed. This module is the runtime's only per-tool
shortcut; a test runs the same calls with the cache on and off and expects the same results,
error texts and span trees.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..telemetry import attributes as A
from .hooks import NO_HOOKS, HookChain, PhaseHooks
from .tools import Tool

DEFAULT_PLANS: Final = 1024
"""Plans a cache keeps at most (then it starts again)."""


@dataclass(frozen=True, slots=True)
class CallPlan:
    """What every call of ``tool`` under one hook chain shares."""

    tool: Tool
    hooks: PhaseHooks
    span_name: str
    span_attributes: Mapping[str, Any]
    """The attributes every call's span starts with (copied per call, the call id added)."""


def make_plan(chain: HookChain, tool: Tool) -> CallPlan:
    """The plan of ``tool`` under ``chain``."""
    attributes: dict[str, Any] = {
        A.GEN_AI_OPERATION_NAME: A.OP_EXECUTE_TOOL,
        A.GEN_AI_TOOL_NAME: tool.name,
        A.GEN_AI_TOOL_TYPE: A.TOOL_TYPE_FUNCTION,
    }
    if tool.description:
        attributes[A.GEN_AI_TOOL_DESCRIPTION] = tool.description
    hooks = chain.for_tool(tool.name) if chain.hooks else NO_HOOKS
    return CallPlan(tool, hooks, f"{A.OP_EXECUTE_TOOL} {tool.name}", attributes)


class PlanCache:
    """Plans by (hook chain, tool), at most ``size`` of them; ``enabled=False`` works every
    plan out afresh (the same plans, only slower)."""

    __slots__ = ("_plans", "enabled", "size")

    def __init__(self, *, enabled: bool = True, size: int = DEFAULT_PLANS) -> None:
        self.enabled = enabled
        self.size = size
        self._plans: dict[tuple[HookChain, Tool], CallPlan] = {}

    def plan(self, chain: HookChain, tool: Tool) -> CallPlan:
        """The plan of ``tool`` under ``chain``."""
        if not self.enabled:
            return make_plan(chain, tool)
        key = (chain, tool)
        found = self._plans.get(key)
        if found is None:
            if len(self._plans) >= self.size:
                self._plans.clear()
            found = self._plans[key] = make_plan(chain, tool)
        return found
