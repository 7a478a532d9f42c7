"""The plan of a tool under a hook chain: what every call of that tool does the same way, worked
out once.

A :class:`CallPlan` holds the hooks of each phase that apply to the tool, the identity its
span starts with (name and attributes), the attributes of an allowed call's metric points, and
the bound a call runs under when neither the caller nor the model sets one. It depends only on a
frozen :class:`~otelhooks.Tool`, an immutable :class:`~otelhooks.HookChain` and the executor's
default timeout (a number), so :class:`PlanCache` keeps it keyed on exactly those three: a tool
registered again under its name, hooks registered since or another default are new keys, and
nothing needs telling that something changed. This module is the runtime's only per-tool
shortcut; a test runs the same calls with the cache on and off and expects the same results,
error texts and span trees.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..telemetry import attributes as A
from ..telemetry.instruments import tool_call_attributes
from .handler import call_bound, takes_timeout
from .hooks import NO_ARGUMENTS, NO_HOOKS, HookChain, PhaseHooks
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
    allowed_metrics: Mapping[str, Any]
    """The attributes of the metric points of a call that was allowed and did not fail (the
    same mapping for each: nothing changes it)."""
    bound: tuple[float | None, bool] | None
    """The bound of a call the caller gives no timeout (see
    :func:`~otelhooks.core.handler.call_bound`), when the tool takes no ``timeout`` argument
    that could narrow it; ``None``: worked out per call."""


def make_plan(chain: HookChain, tool: Tool, default_timeout: float | None = None) -> CallPlan:
    """The plan of ``tool`` under ``chain``, for an executor whose tools run at most
    ``default_timeout`` seconds unless they say otherwise."""
    attributes: dict[str, Any] = {
        A.GEN_AI_OPERATION_NAME: A.OP_EXECUTE_TOOL,
        A.GEN_AI_TOOL_NAME: tool.name,
        A.GEN_AI_TOOL_TYPE: A.TOOL_TYPE_FUNCTION,
    }
    if tool.description:
        attributes[A.GEN_AI_TOOL_DESCRIPTION] = tool.description
    hooks = chain.for_tool(tool.name) if chain.hooks else NO_HOOKS
    return CallPlan(
        tool,
        hooks,
        f"{A.OP_EXECUTE_TOOL} {tool.name}",
        attributes,
        tool_call_attributes(tool.name, A.DECISION_ALLOW, None),
        None if takes_timeout(tool) else call_bound(None, NO_ARGUMENTS, tool, default_timeout),
    )


class PlanCache:
    """Plans by (hook chain, tool, default timeout), at most ``size`` of them; ``enabled=False``
    works every plan out afresh (the same plans, only slower)."""

    __slots__ = ("_plans", "enabled", "size")

    def __init__(self, *, enabled: bool = True, size: int = DEFAULT_PLANS) -> None:
        self.enabled = enabled
        self.size = size
        self._plans: dict[tuple[HookChain, Tool, float | None], CallPlan] = {}

    def plan(self, chain: HookChain, tool: Tool, default_timeout: float | None = None) -> CallPlan:
        """The plan of ``tool`` under ``chain`` (see :func:`make_plan`)."""
        key = (chain, tool, default_timeout)
        found = self._plans.get(key)
        if found is None:
            found = make_plan(chain, tool, default_timeout)
            if self.enabled:
                if len(self._plans) >= self.size:
                    self._plans.clear()
                self._plans[key] = found
        return found
