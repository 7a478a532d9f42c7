"""What each caller may do: the identity rules of the policy (``[[identity]]`` tables), and the
caller of the call in progress.

A rule matches an identity when every criterion it names matches: ``subjects``, ``client_ids``
and ``groups`` (any of each), ``scopes`` (all of them). The first rule that matches decides for
the identity (its name is the "deciding rule" of the audit log); an identity that matches none
is refused every tool (``[auth] unmatched = "allow"`` lets it use the policy's common rules
alone). A rule may list the tools allowed (then nothing else is) and denied, bound the calls
(``max_calls`` in all, ``rate`` per minute) and guard arguments (``[[identity.guard]]``). Tools an
identity may not call are not listed to it either.
"""

from __future__ import annotations

import contextvars
import fnmatch
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ...core import BeforeDecision, BeforeToolCallContext, block
from .auth import Identity


@dataclass(slots=True)
class Caller:
    """The caller of the call in progress and what the proxy learns about it on the way."""

    identity: Identity | None
    session_id: str | None = None
    transport: str = "pipe"  # network.transport of the host's connection
    upstream: str | None = None
    rule: str | None = None  # the identity rule that applied


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
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()
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
        if self.allow is not None and not any(fnmatch.fnmatchcase(tool, p) for p in self.allow):
            return "not in its allow list"
        return None


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
        self._lock = threading.Lock()

    @property
    def patterns(self) -> tuple[str, ...]:
        """Every tool pattern of the rules: one that matches no tool stops the start."""
        return tuple(p for r in self.rules for p in (*(r.allow or ()), *r.deny))

    def rule_for(self, identity: Identity | None) -> IdentityRule | None:
        """The first rule that matches ``identity``."""
        if identity is None:
            return None
        return next((r for r in self.rules if r.matches(identity)), None)

    def allows(self, identity: Identity | None, tool: str) -> bool:
        """Whether the rules let ``identity`` call ``tool`` (what ``tools/list`` shows it)."""
        if not self.rules:
            return True
        rule = self.rule_for(identity)
        if rule is None:
            return self.unmatched == "allow"
        return rule.refusal(tool) is None

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
        limited = self._count(rule, identity)
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


def visible(
    rules: IdentityRules | None, identity: Identity | None, tools: Iterable[str]
) -> set[str]:
    """The tools of ``tools`` an identity may see."""
    return {t for t in tools if rules is None or rules.allows(identity, t)}
