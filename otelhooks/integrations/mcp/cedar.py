"""Cedar at the gateway: the same policy files as in-process (``[cedar]`` in the TOML), with the
gateway's caller as the principal and each tool keyed on its upstream and its own name there.

The principal is the authenticated user (``User::"<subject>"``, its groups as parents); a
caller without a subject (a client's own token, the host of a stdio proxy) is the agent,
``Agent::"<client id>"``. ``context.client`` is the client (its ``client_id``) and
``context.agent`` the gateway (its ``[proxy] name``). Every serving path (Streamable HTTP, stdio
through the SDK server, the stdio line relay) goes through :class:`~otelhooks.integrations.mcp.
gateway.Gateway`, which runs :class:`GatewayCedar`'s hook with the others and asks it about
resource reads and prompts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import mcp.types as mcp_types
from opentelemetry import trace

from ...builtin.cedar import CedarPolicy, policy_attributes
from ...builtin.cedar_engine import CedarEngine, Requester, Verdict
from ...builtin.cedar_model import AGENT, LOCAL, USER, Principal, ToolKey
from ...core import BeforeToolCallContext
from .access import Caller, current_caller
from .naming import ToolRef
from .policy import ProxyPolicy


class GatewayCedar:
    """The gateway's Cedar: its hook, its table of tool keys, its decisions on resources and
    prompts, and what ``--check`` prints."""

    @classmethod
    def of(cls, policy: ProxyPolicy) -> GatewayCedar | None:
        """The Cedar policies of ``policy``'s ``[cedar]`` (``None`` without)."""
        config = policy.cedar
        return None if config is None else cls(config.engine, policy.name)

    def __init__(self, engine: CedarEngine, name: str) -> None:
        self.engine = engine
        self.name = name
        self.keys: dict[str, ToolKey] = {}
        self.hook = CedarPolicy(engine=engine, key_of=self.key_of, requester_of=self.requester)

    def key_of(self, name: str) -> ToolKey:
        """The key of the tool served as ``name``. When the call's upstream is known and is
        not the key's (two upstreams serving one name), the key is the caller's upstream's:
        Cedar judges the tool that runs."""
        found = self.keys.get(name)
        if found is None:
            return ToolKey(LOCAL, name)  # a tool of no upstream: no policy names it
        caller = current_caller()
        routed = caller.upstream if caller is not None else None
        if routed is not None and routed != found.upstream:
            return ToolKey(routed, found.name)
        return found

    def requester_of(self, caller: Caller | None) -> Requester:
        """Who asks, from the gateway's caller."""
        identity = caller.identity if caller is not None else None
        client = identity.client_id if identity is not None else "unknown"
        if identity is not None and identity.subject:
            principal = Principal(USER, identity.subject, tuple(sorted(identity.groups)))
        else:
            principal = Principal(AGENT, client)
        return Requester(principal, self.name, client)

    def requester(self, ctx: BeforeToolCallContext) -> Requester:
        """Who asks for the call in progress (the gateway's caller)."""
        return self.requester_of(current_caller())

    def bind_refs(self, refs: Mapping[str, ToolRef]) -> None:
        """Key served names as an upstream set maps them (served name -> upstream, name)."""
        for served, ref in refs.items():
            self.keys[served] = ToolKey(ref.upstream, ref.name)

    def bind_listing(self, upstream: str, tools: Iterable[tuple[str, mcp_types.Tool]]) -> None:
        """Key an upstream's listing (served name, listing). The policies are validated with
        every tool at start (:meth:`Gateway.check_policy`), and with a tool first seen later
        when it is first called."""
        for served, listing in tools:
            known = self.keys.get(served)
            if known is not None and known.upstream != upstream:
                continue  # the name is another upstream's (served by the first registered)
            self.keys[served] = ToolKey(upstream, listing.name)
        self.engine.bind_upstreams([upstream])

    def decide(
        self, caller: Caller, kind: Literal["resource", "prompt"], upstream: str, target: str
    ) -> Verdict:
        """The decision on a resource read or a prompt of ``upstream``."""
        return self.engine.decide_other(kind, upstream, target, self.requester_of(caller))

    def refusal(
        self, caller: Caller, kind: Literal["resource", "prompt"], upstream: str, target: str
    ) -> str | None:
        """Why ``caller`` may not read the resource or get the prompt ``target`` (its URI, or
        its own name) of ``upstream`` (``None``: permitted); the policies that decided go on
        the current span. A permit that needs an approval refuses (approvals are asked for
        tool calls)."""
        verdict = self.decide(caller, kind, upstream, target)
        span = trace.get_current_span()
        if span.is_recording() and verdict.policies:
            span.set_attributes(policy_attributes(verdict.policies))
        if verdict.effect == "allow":
            return None
        if verdict.effect == "ask":
            return verdict.reason + " (approvals are asked for tool calls only)"
        return verdict.reason

    def report(self, served: str) -> str | None:
        """What ``--check`` says of the tool served as ``served``: the policies that apply
        to it, in file order (``None``: none does, so no call of it is permitted)."""
        key = self.keys.get(served)
        if key is None:
            return None
        lines = [info.summary() for info in self.engine.matching(key)]
        return "cedar: " + ("; ".join(lines) if lines else "no policy applies (denied)")


def cedar_keys(*servers: Any) -> Callable[[str], ToolKey]:
    """A ``key_of`` for :class:`~otelhooks.builtin.cedar.CedarPolicy` in-process: the tools of
    these :class:`~otelhooks.integrations.mcp.MCPServerTools` keyed on the server's name and
    each tool's own name there (as a gateway whose upstream has that name keys them); any other
    tool is ``local``."""

    def key_of(name: str) -> ToolKey:
        for server in servers:
            for entry in server.listings:
                if entry.name == name:
                    return ToolKey(server.name, entry.listing.name)
        return ToolKey(LOCAL, name)

    return key_of
