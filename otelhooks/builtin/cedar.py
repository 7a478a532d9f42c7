"""Cedar policies as a before-hook: :class:`CedarPolicy`, the same files in-process and at the
gateway (``[cedar]`` in its TOML).

A call is permitted when a permit applies and no forbid does (Cedar's rule: forbid overrides
permit, nothing permitted is denied). A permit annotated ``@approval("required")`` permits only
with an approval: when it is among the policies that determined an Allow, the call is *asked*
(run only if an approver approves it, bound to its arguments and identity). A denied call is
blocked with the policies that decided; an argument Cedar cannot hold exactly (see
:mod:`~otelhooks.builtin.cedar_model`) blocks the call, naming it.

The model, the schema generated from it and how arguments map are in
:mod:`~otelhooks.builtin.cedar_model`; loading, reloads and the decision cache in
:mod:`~otelhooks.builtin.cedar_engine`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry import trace

from ..core import BeforeDecision, BeforeToolCallContext, ToolHook, ToolSpec, block
from ..core.hooks import ask
from ..telemetry import attributes as A
from .cedar_engine import CedarEngine, Requester, Verdict
from .cedar_model import AGENT, LOCAL, USER, Principal, ToolKey, Unrepresentable
from .cedar_source import CedarError

__all__ = [
    "CedarEngine",
    "CedarError",
    "CedarPolicy",
    "Principal",
    "Requester",
    "ToolKey",
    "Verdict",
    "local_requester",
]

KeyOf = Callable[[str], ToolKey]
RequesterOf = Callable[[BeforeToolCallContext], Requester]


def local_requester(ctx: BeforeToolCallContext) -> Requester:
    """In-process: the run's user (``user`` given to the run) is the principal, else the
    agent; the client is ``local``."""
    agent = ctx.context.agent_name or "agent"
    user = ctx.context.user
    principal = Principal(USER, user) if user else Principal(AGENT, agent)
    return Requester(principal, agent, LOCAL)


def local_key(name: str) -> ToolKey:
    """In-process Python tools: upstream ``local``, the tool's own name."""
    return ToolKey(LOCAL, name)


class CedarPolicy(ToolHook):
    """Decide each call with Cedar policies (see the module's docs).

    ``policies``, ``entities`` and ``schema`` are files (or give ``engine``, an
    :class:`~otelhooks.builtin.cedar_engine.CedarEngine`). ``key_of`` maps the name a tool is
    registered under to its :class:`~otelhooks.builtin.cedar_model.ToolKey` (default: upstream
    ``local``; :func:`otelhooks.integrations.mcp.cedar_keys` for an MCP server's tools);
    ``requester_of`` says who asks (default :func:`local_requester`).
    """

    name = "cedar"

    def __init__(
        self,
        policies: str | os.PathLike[str] | None = None,
        entities: str | os.PathLike[str] | None = None,
        schema: str | os.PathLike[str] | None = None,
        *,
        engine: CedarEngine | None = None,
        key_of: KeyOf | None = None,
        requester_of: RequesterOf | None = None,
        reload_interval: float | None = None,
    ) -> None:
        if engine is None:
            if policies is None:
                raise TypeError("CedarPolicy needs the policies file (or an engine)")
            options = {} if reload_interval is None else {"reload_interval": reload_interval}
            engine = CedarEngine(policies, entities, schema, **options)  # type: ignore[arg-type]
        self.engine = engine
        self.key_of = key_of or local_key
        self.requester_of = requester_of or local_requester

    def check_tools(self, tools: Sequence[ToolSpec]) -> Sequence[str]:
        """Validate the policies against the schema of these tools; a problem names the file,
        the line and what was probably meant."""
        try:
            self.engine.bind_tools({self.key_of(t.name): t.parameters for t in tools})
        except CedarError as exc:
            return [str(exc)]
        return ()

    def decide(self, ctx: BeforeToolCallContext) -> Verdict:
        """The Cedar decision on the call (an unrepresentable argument is a deny)."""
        key = self.key_of(ctx.tool.name)
        try:
            return self.engine.decide_tool(
                key, ctx.tool.parameters, self.requester_of(ctx), ctx.args
            )
        except Unrepresentable as exc:
            return Verdict("deny", (), f"{exc} (Cedar decides on exact values)")

    def before_tool_call(self, ctx: BeforeToolCallContext) -> BeforeDecision:
        """Allow, block or ask, naming the policies that determined it."""
        verdict = self.decide(ctx)
        if verdict.effect == "allow" and verdict.policies:
            # the core records the policies of a block or an ask on the call's span; those of
            # an allow go on the before phase's span (current while the hook runs)
            span = trace.get_current_span()
            if span.is_recording():
                span.set_attributes(policy_attributes(verdict.policies))
        return decision_of(verdict)


@functools.lru_cache(maxsize=4096)
def decision_of(verdict: Verdict) -> BeforeDecision:
    """A verdict as a before-hook's answer, naming the policies that determined it."""
    if verdict.effect == "allow":
        return BeforeDecision("allow", policies=verdict.policies)
    if verdict.effect == "ask":
        return ask(verdict.reason, policies=verdict.policies)
    return block(verdict.reason, policies=verdict.policies)


def policy_attributes(policies: Sequence[str]) -> dict[str, Any]:
    """The policies that decided, as the call's span names them: the proposal's one id (the
    first) and otelhooks' list of all."""
    return {A.GEN_AI_GUARDRAIL_POLICY_ID: policies[0], A.POLICIES: list(policies)}


def tool_keys(names: Mapping[str, ToolKey]) -> KeyOf:
    """A ``key_of`` from a table (registered name -> key); a name not in it is ``local``."""

    def key_of(name: str) -> ToolKey:
        return names.get(name) or ToolKey(LOCAL, name)

    return key_of
