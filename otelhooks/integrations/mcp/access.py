"""What each caller may do: the identity rules of the policy (``[[identity]]`` tables), and the
caller of the call in progress.

A rule matches an identity when every criterion it names matches: ``subjects``, ``client_ids``
and ``groups`` (any of each), ``scopes`` (all of them). The first rule that matches decides for
the identity (its name is the "deciding rule" of the audit log); an identity that matches none
is refused everything (``[auth] unmatched = "allow"`` lets it use the policy's common rules
alone).

Every MCP capability needs a rule: a rule lists the ``tools`` it may call (patterns; ``deny``
takes some away), the ``resources`` it may list, read and subscribe to (URI patterns), the
``prompts`` it may get, and whether it may use ``completion`` and ``logging``; what it does not
list it may not use. A rule may also bound the calls (``max_calls`` in all, ``rate`` per minute)
and guard arguments (``[[identity.guard]]``). What an identity may not use is neither listed nor
advertised to it, and a request for it is answered as if it did not exist.
"""

from __future__ import annotations

import contextvars
import fnmatch
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ...core import BeforeDecision, BeforeToolCallContext, ToolSpec, block
from .auth import Identity
from .naming import uri_matches


@dataclass(slots=True)
class Caller:
    """The caller of the call in progress and what the proxy learns about it on the way."""

    identity: Identity | None
    session_id: str | None = None
    transport: str = "pipe"  # network.transport of the host's connection
    upstream: str | None = None
    rule: str | None = None  # the identity rule that applied
    grant: Grant | None = None  # what the caller may use (None: everything)
    upstream_set: str | None = None  # the key of the upstream set serving the call


CALLER: Final[contextvars.ContextVar[Caller | None]] = contextvars.ContextVar(
    "otelhooks_mcp_caller", default=None
)


def current_caller() -> Caller | None:
    """The caller of the call in progress (``None`` outside the proxy's calls)."""
    return CALLER.get()


@dataclass(frozen=True)
class IdentityRule:
    """One ``[[identity]]`` table."""

    name: str
    subjects: tuple[str, ...] = ()
    client_ids: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()  # tool patterns it may call (none: no tool)
    deny: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()  # resource URI patterns it may list, read, subscribe to
    prompts: tuple[str, ...] = ()  # prompt patterns it may list and get
    completion: bool = False
    logging: bool = False
    max_calls: int | None = None
    rate: float | None = None  # calls per minute
    guards: tuple[Any, ...] = ()

    def matches(self, identity: Identity) -> bool:
        """Whether every criterion the rule names fits ``identity``."""
        if self.subjects and identity.subject not in self.subjects:
            return False
        if self.client_ids and identity.client_id not in self.client_ids:
            return False
        if self.groups and not set(self.groups) & set(identity.groups):
            return False
        return not self.scopes or set(self.scopes) <= set(identity.scopes)

    def refusal(self, tool: str) -> str | None:
        """Why the rule does not let ``tool`` be called (``None`` when it does)."""
        for pattern in self.deny:
            if fnmatch.fnmatchcase(tool, pattern):
                return f"denied ({pattern})"
        if not any(fnmatch.fnmatchcase(tool, p) for p in self.tools):
            return "not in its tools"
        return None


@dataclass(frozen=True, slots=True)
class Grant:
    """What one caller may use: the rule that decided (``None``: every capability, for a proxy
    without identity rules or an unmatched identity let through), or nothing at all."""

    rule: IdentityRule | None
    everything: bool = False

    def tool(self, name: str) -> bool:
        """Whether the caller may see and call the tool served as ``name``."""
        if self.everything:
            return True
        return self.rule is not None and self.rule.refusal(name) is None

    def resource(self, uri: str) -> bool:
        """Whether the caller may list, read and subscribe to the resource ``uri``."""
        if self.everything:
            return True
        return self.rule is not None and any(uri_matches(uri, p) for p in self.rule.resources)

    def prompt(self, name: str) -> bool:
        """Whether the caller may see and get the prompt served as ``name``."""
        if self.everything:
            return True
        return self.rule is not None and any(
            fnmatch.fnmatchcase(name, p) for p in self.rule.prompts
        )

    def may(self, capability: str) -> bool:
        """Whether the caller may use any of ``capability`` (``tools``, ``resources``,
        ``prompts``, ``completion``, ``logging``) at all."""
        if self.everything:
            return True
        rule = self.rule
        if rule is None:
            return False
        if capability == "tools":
            return bool(rule.tools)
        if capability == "resources":
            return bool(rule.resources)
        if capability == "prompts":
            return bool(rule.prompts)
        if capability == "completion":
            return rule.completion and bool(rule.prompts or rule.resources)
        if capability == "logging":
            return rule.logging
        return False

    @property
    def nothing(self) -> bool:
        """Whether the caller may use nothing at all (no upstream is started for it)."""
        return not any(self.may(c) for c in CAPABILITIES)


CAPABILITIES: Final = ("tools", "resources", "prompts", "completion", "logging")
EVERYTHING: Final = Grant(None, everything=True)
NOTHING: Final = Grant(None)


@dataclass
class _Usage:
    calls: int = 0
    recent: deque[float] = field(default_factory=deque)


class IdentityRules:
    """The before-hook that applies the identity rules to each call (``identity`` in traces)."""

    name = "identity"

    def __init__(self, rules: Sequence[IdentityRule], *, unmatched: str = "deny") -> None:
        self.rules = tuple(rules)
        self.unmatched = unmatched
        self._usage: dict[str, _Usage] = {}
        self._grants: dict[Identity, Grant] = {}
        self._lock = threading.Lock()

    @property
    def patterns(self) -> tuple[str, ...]:
        """Every tool pattern of the rules: one that matches no tool stops the start."""
        return tuple(p for r in self.rules for p in (*r.tools, *r.deny))

    @property
    def guards(self) -> tuple[Any, ...]:
        """Every argument guard of the rules."""
        return tuple(g for r in self.rules for g in r.guards)

    def check_tools(self, tools: Sequence[ToolSpec]) -> list[str]:
        """The problems of the rules' guards against the tools there are (a guard whose
        argument no tool takes would guard nothing: the start is refused)."""
        problems = []
        for rule in self.rules:
            for guard in rule.guards:
                check = getattr(guard, "check_tools", None)
                for problem in check(tools) if check is not None else ():
                    problems.append(f"identity rule {rule.name!r}: {problem}")
        return problems

    def rule_for(self, identity: Identity | None) -> IdentityRule | None:
        """The first rule that matches ``identity``."""
        if identity is None:
            return None
        return next((r for r in self.rules if r.matches(identity)), None)

    def grant(self, identity: Identity | None) -> Grant:
        """What ``identity`` may use (decided once per identity)."""
        if identity is None:
            return NOTHING if self.rules else EVERYTHING
        found = self._grants.get(identity)
        if found is None:
            rule = self.rule_for(identity)
            if rule is not None:
                found = Grant(rule)
            else:
                found = EVERYTHING if self.unmatched == "allow" else NOTHING
            if len(self._grants) >= 4096:  # bounded: identities come from tokens
                self._grants.clear()
            self._grants[identity] = found
        return found

    def allows(self, identity: Identity | None, tool: str) -> bool:
        """Whether the rules let ``identity`` call ``tool`` (what ``tools/list`` shows it)."""
        return self.grant(identity).tool(tool)

    def before_tool_call(self, ctx: BeforeToolCallContext) -> BeforeDecision | None:
        """Block the call when the caller's rule does not let it through."""
        if not self.rules:
            return None
        caller = CALLER.get()
        identity = caller.identity if caller is not None else None
        tool = ctx.tool_call.name
        rule = self.rule_for(identity)
        # The reason reaches the host, spans and logs: it never names the caller (who may be
        # shown only as a pseudonym there), and the caller knows who it is.
        who = "the caller" if identity is not None else "an unknown caller"
        if rule is None:
            if self.unmatched == "allow":
                return None
            return block(f"{who} matches no identity rule of the gateway")
        if caller is not None:
            caller.rule = rule.name
        refusal = rule.refusal(tool)
        if refusal is not None:
            return block(f"{who} may not call {tool!r}: identity rule {rule.name!r}: {refusal}")
        # Counted once: not again when a later hook's rewrite runs this hook again.
        limited = None if ctx.recheck else self._count(rule, identity)
        if limited is not None:
            return block(f"{who}: identity rule {rule.name!r}: {limited}")
        for guard in rule.guards:
            decision = guard.before_tool_call(ctx)
            if decision is not None and decision.block:
                return block(f"{decision.reason} (identity rule {rule.name!r})")
        return None

    def _count(self, rule: IdentityRule, identity: Identity | None) -> str | None:
        key = f"{rule.name}\x1f{identity.principal if identity is not None else ''}"
        now = time.monotonic()
        with self._lock:
            usage = self._usage.setdefault(key, _Usage())
            if rule.max_calls is not None and usage.calls >= rule.max_calls:
                return f"its {rule.max_calls} calls are used up"
            if rule.rate is not None:
                while usage.recent and usage.recent[0] <= now - 60:
                    usage.recent.popleft()
                if len(usage.recent) >= rule.rate:
                    return f"more than {rule.rate:g} calls a minute"
                usage.recent.append(now)
            usage.calls += 1
        return None
