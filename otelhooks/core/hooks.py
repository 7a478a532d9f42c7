"""Hooks: what a before-hook and an after-hook receive, what they may return, the contract of a
hook object, and the chain.

Contracts
---------
* A **before-hook** is called with a :class:`BeforeToolCallContext` and returns ``None`` or
  :func:`allow` (go on), :func:`block` (stop: the handler never runs, the after-hooks do not run,
  the model gets ``blocked: <reason>``; ``block(reason, terminate=True)`` also asks the loop to
  end the run after this batch), :func:`rewrite` (go on with new arguments, which are
  validated against the tool's schema again), :func:`ask` (run only if an approver approves
  this exact call: :mod:`otelhooks.core.approvals`) or :func:`defer` (end the run after this
  batch with the call pending, resumable with a decision). Hooks run in registration order;
  each sees the arguments as rewritten by the ones before it; the first block wins and ends the
  chain; asks and defers are collected while the chain goes on (block > defer > ask > allow).
  When a
  hook rewrote the arguments, every hook before it runs again on the final arguments
  (``ctx.recheck`` is then true: a hook that counts calls must not count it twice), so that every
  hook that let the call through has seen the arguments the handler gets; a block then blocks,
  and a hook that would change them again blocks the call (the hooks do not agree).
* An **after-hook** is called with an :class:`AfterToolCallContext` and returns ``None`` (keep),
  a ``str`` (new content) or an :class:`AfterOverride`: a field-level override in which omitted
  fields keep their values (``terminate=True`` asks the loop to end the run after this batch).
  Hooks run in order, each seeing the result as overridden so far.
* An **observer** (``on_tool_call_end``) is called once per call with the final
  :class:`ToolCallRecord`, while the call's span is current. It cannot change anything.
* Any of these may be sync or ``async``. A hook that raises (``asyncio.CancelledError`` it raised
  itself included), returns a value of the wrong type or overruns its ``timeout`` is handled by
  its failure policy: ``"fail_closed"`` blocks the call (before) or withholds the result (after);
  ``"fail_open"`` ignores the hook. The defaults are fail closed for before-hooks and fail open
  for after-hooks. Either way the failure is recorded on the trace and the call ends with a
  result. An observer that raises is recorded and ignored.
* Every hook failure is also logged (a structlog ``hook.failed`` warning naming the hook, the
  tool and what went wrong, a wrong return type by its name), so a hook meant to hide something
  that fails open is never silent.
* A **hook object** takes part through the members of :class:`ToolHook` (a base class with no-op
  methods; subclassing it is optional): ``before_tool_call``, ``after_tool_call``,
  ``on_tool_call_end``, the check ``check_tools`` and the settings ``name``, ``tools``,
  ``timeout``, ``before_failure``, ``after_failure``, ``patterns``, ``requires_scrubber``. An
  object with a public attribute that looks like a hook method but is none (within two edits of
  one, or starting with ``before_``, ``after_`` or ``on_tool``) is refused with a ``TypeError``
  naming the method it probably meant: a misspelt after-hook never silently stops running.
* A hook that only applies to some tools (``tools=``, or a policy's ``patterns``) is checked
  against the registered tools when the registry is known (``Hooks(registry=...)``, and when an
  agent starts): a pattern that matches no tool raises :class:`UnmatchedToolPatternError` naming
  the pattern, the tool it probably meant and the tools there are. A hook object's own
  ``check_tools`` is asked at the same moments, with the tools' specs: a problem it names (a
  guard's argument that no tool it applies to takes) raises :class:`ToolCheckError`.
  ``tools_later=True`` on a registration defers its check to the agent's start (tools
  registered later); ``Hooks(strict=False)`` turns the errors into warnings
  (:class:`UnmatchedToolPattern`, :class:`ToolCheckWarning`). A typo must not let the tool it
  meant run unguarded.
* Redaction of what the runtime writes is not a hook's business: it is the scrubber given to the
  executor (:mod:`otelhooks.core.scrub`). A hook that redacts results declares
  ``requires_scrubber = True``: an executor or agent without a scrubber then refuses to run it.
* A hook never sees the runtime's own copy of the arguments: ``args`` is a read-only mapping and
  every value that is not an immutable scalar is a deep copy.
"""

from __future__ import annotations

import difflib
import fnmatch
import inspect
import warnings
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Literal,
    NamedTuple,
    TypeAlias,
    TypedDict,
    TypeVar,
    Unpack,
    overload,
)

from .approvals import ApprovalOutcome
from .cancel import CancelSignal
from .frozen import quick_init
from .messages import AgentContext, AssistantMessage, ToolCall, ToolResult, ToolSpec

if TYPE_CHECKING:
    from .tools import ToolRegistry

FailurePolicy = Literal["fail_closed", "fail_open"]
FAIL_CLOSED: Final = "fail_closed"
FAIL_OPEN: Final = "fail_open"


class _Keep:
    """Marker for an :class:`AfterOverride` field that keeps its value (use :data:`KEEP`)."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Final = _Keep()


BeforeAction = Literal["allow", "block", "ask", "defer"]
"""What a before-hook answers: go on, stop, run only if approved, or end the run now (resumable
later with a decision). Precedence over a chain: block > defer > ask > allow."""
BEFORE_ACTIONS: Final = ("allow", "block", "ask", "defer")


@dataclass(frozen=True, slots=True)
class BeforeDecision:
    """What a before-hook decided. Build with :func:`allow`, :func:`block`, :func:`rewrite`,
    :func:`ask` or :func:`defer`.

    ``action`` is the answer; ``arguments`` the rewritten arguments (an ``allow`` that rewrites);
    ``policies`` the ids of the policies or rules that decided (they go on the call's span and in
    the audit log); ``terminate`` (a block's) asks the loop to end the run after this batch.
    """

    action: BeforeAction = "allow"
    reason: str = ""
    arguments: Mapping[str, Any] | None = None
    terminate: bool = False
    policies: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.action not in BEFORE_ACTIONS:
            near = difflib.get_close_matches(str(self.action), BEFORE_ACTIONS, 1, 0.5)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ValueError(
                f"a before-hook decides one of {', '.join(BEFORE_ACTIONS)}, "
                f"not {self.action!r}{hint}"
            )
        if self.arguments is not None and self.action != "allow":
            raise ValueError("only allow may rewrite the arguments (rewrite(arguments))")
        if isinstance(self.policies, str) or not all(isinstance(p, str) for p in self.policies):
            raise TypeError("policies must be a sequence of policy ids (strings)")

    @property
    def block(self) -> bool:
        """Whether the call is blocked."""
        return self.action == "block"


_ALLOW: Final = BeforeDecision()


def _policies(policies: Sequence[str]) -> tuple[str, ...]:
    """The policy ids as a tuple; one id given as a string would be split into letters."""
    if isinstance(policies, str):
        raise TypeError(f"policies must be a sequence of policy ids, not the string {policies!r}")
    return tuple(policies)


def allow() -> BeforeDecision:
    """Let the call go on unchanged (the same as returning ``None``)."""
    return _ALLOW


def block(reason: str, *, terminate: bool = False, policies: Sequence[str] = ()) -> BeforeDecision:
    """Stop the call: the handler never runs and the model gets ``blocked: <reason>``.

    With ``terminate=True`` the loop ends the run after the current batch of tool calls.
    ``policies`` name the policies or rules that decided.
    """
    return BeforeDecision(
        "block", reason or "blocked", terminate=terminate, policies=_policies(policies)
    )


def rewrite(arguments: Mapping[str, Any]) -> BeforeDecision:
    """Go on with these arguments instead; they are validated against the tool's schema again."""
    return BeforeDecision(arguments=dict(arguments))


def ask(reason: str, *, policies: Sequence[str] = ()) -> BeforeDecision:
    """Run the call only if an approver approves it (:mod:`otelhooks.core.approvals`): the
    approval is bound to the tool, the digest of the final arguments and the identity asking.
    The hooks after this one still run (a later block wins). Without an approver the call is
    blocked with a reason that says so."""
    return BeforeDecision("ask", reason or "approval required", policies=_policies(policies))


def defer(reason: str, *, policies: Sequence[str] = ()) -> BeforeDecision:
    """End the run after this batch with the call pending: the run's result holds a state to
    resume from with a decision (:meth:`otelhooks.Agent.resume`). The hooks after this one
    still run (a later block wins). Where nothing can resume it (an executor alone, a gateway)
    the call is asked about as for :func:`ask`: blocked when there is no approver."""
    return BeforeDecision("defer", reason or "deferred", policies=_policies(policies))


@dataclass(frozen=True, slots=True)
class AfterOverride:
    """Field-level override of a tool result; a field left as ``KEEP`` keeps its value."""

    content: str | _Keep = KEEP
    details: Any = KEEP
    is_error: bool | _Keep = KEEP
    terminate: bool | _Keep = KEEP


@quick_init
@dataclass(frozen=True, slots=True)
class BeforeToolCallContext:
    """What a before-hook sees.

    ``tool_call`` is the call as the model sent it (raw arguments); ``args`` the validated
    arguments as rewritten by earlier hooks; ``assistant_message`` the message that asked for the
    call (``None`` outside a loop); ``context`` a snapshot of the run; ``signal`` the run's
    cancellation signal; ``recheck`` is true when the hook already let this call through and
    runs again because a later hook rewrote the arguments (count nothing twice).
    """

    tool_call: ToolCall
    args: Mapping[str, Any]
    tool: ToolSpec
    assistant_message: AssistantMessage | None
    context: AgentContext
    signal: CancelSignal
    recheck: bool = False


@quick_init
@dataclass(frozen=True, slots=True)
class AfterToolCallContext:
    """What an after-hook sees: the before-context's fields plus the result so far."""

    tool_call: ToolCall
    args: Mapping[str, Any]
    tool: ToolSpec
    assistant_message: AssistantMessage | None
    context: AgentContext
    signal: CancelSignal
    result: ToolResult
    is_error: bool


Decision = Literal["allow", "block", "skip", "defer"]
NO_ARGUMENTS: Final[Mapping[str, Any]] = MappingProxyType({})
"""The arguments of a call that ended before they were validated."""


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """The outcome of one call, given to observers when it ends.

    ``decision`` is the action enforced: ``allow`` (the handler was asked to run), ``block`` (a
    hook stopped it, or an approval was refused), ``defer`` (the run ended with the call
    pending) or ``skip`` (the loop skipped it); a call that failed before any decision (unknown
    tool, invalid arguments) has ``decision=None`` and ``error_type`` set.
    """

    tool_call: ToolCall
    tool_name: str
    result: ToolResult
    decision: Decision | None
    deciding_hook: str | None
    block_reason: str | None
    arguments_rewritten: bool
    error_type: str | None
    duration_ms: float
    arguments: Mapping[str, Any] = field(default_factory=lambda: NO_ARGUMENTS)
    """The arguments the handler got (validated, as rewritten), read-only; empty when the call
    ended before validation."""
    verdict: BeforeAction | None = None
    """What the before-hooks answered together (``allow``, ``block``, ``ask``, ``defer``; the
    enforced action is ``decision``); ``None`` when no before-hook ran."""
    policies: tuple[str, ...] = ()
    """The policies or rules that decided."""
    approval: ApprovalOutcome | None = None
    """What became of the call's ask, when one asked."""


class Outcome(NamedTuple):
    """How a call ended, built once where it was decided: its record
    (:meth:`record`), its span and its metrics are made from it and nothing else.

    ``decision`` is the action enforced, ``allow`` (the handler was asked to run), ``block``,
    ``defer`` or ``skip``, or ``None``
    when the call ended before any decision (unknown tool, invalid arguments, cancelled in its
    before phase). ``error_type`` is set exactly when the call failed: a refusal, a block by a
    failing hook, a handler that raised or timed out, a result that says it is an error, a
    cancellation, the runtime's own ``failure``; never for a block or a refused approval
    alone. ``overridden`` is ``None`` when no after-hook ran. ``verdict`` is what the
    before-hooks answered (``ask`` for a call that waited for an approval, whatever the
    answer), ``policies`` the policies that decided, ``approval`` what became of the ask.
    """

    result: ToolResult
    decision: Decision | None
    error_type: str | None = None
    deciding_hook: str | None = None
    block_reason: str | None = None
    rewritten: bool = False
    arguments: Mapping[str, Any] = NO_ARGUMENTS
    overridden: bool | None = None
    failure: BaseException | None = None
    verdict: BeforeAction | None = None
    policies: tuple[str, ...] = ()
    approval: ApprovalOutcome | None = None

    def record(self, call: ToolCall, duration_ms: float) -> ToolCallRecord:
        """The record observers get."""
        args = self.arguments
        return ToolCallRecord(
            call,
            str(call.name),
            self.result,
            self.decision,
            self.deciding_hook,
            self.block_reason,
            self.rewritten,
            self.error_type,
            duration_ms,
            MappingProxyType(args) if type(args) is dict else args,
            self.verdict,
            self.policies,
            self.approval,
        )


BeforeResult: TypeAlias = BeforeDecision | None
AfterResult: TypeAlias = AfterOverride | str | None
BeforeHookFn: TypeAlias = Callable[[BeforeToolCallContext], Any]
AfterHookFn: TypeAlias = Callable[[AfterToolCallContext], Any]
ObserverFn: TypeAlias = Callable[[ToolCallRecord], Any]
BeforeF = TypeVar("BeforeF", bound=BeforeHookFn)
AfterF = TypeVar("AfterF", bound=AfterHookFn)
_HookF = TypeVar("_HookF", bound=Callable[[Any], Any])


class ToolHook:
    """The contract of a hook object, with no-op methods: override the phases the hook takes
    part in (only those run) and set the settings it needs. Subclassing is optional; an object
    that does not subclass takes part through the same names, and only those (see the module's
    contracts: a near miss is refused).
    """

    name: str = ""
    """The hook's name on spans and in logs (default: the class name)."""
    tools: str | Iterable[str] | None = None
    """Tool names or glob patterns the hook applies to (default: every tool)."""
    timeout: float | None = None
    """Seconds one call of the hook may take."""
    before_failure: FailurePolicy = FAIL_CLOSED
    """What a failure of ``before_tool_call`` does."""
    after_failure: FailurePolicy = FAIL_OPEN
    """What a failure of ``after_tool_call`` does."""
    patterns: Iterable[str] = ()
    """Tool patterns of the hook's own (a policy's list), checked like ``tools``."""
    requires_scrubber: bool = False
    """The hook redacts results, and means the runtime to scrub what it writes as well: an
    executor without a scrubber refuses to run it (a half-redacted call is a leak)."""

    def before_tool_call(
        self, ctx: BeforeToolCallContext
    ) -> BeforeResult | Awaitable[BeforeResult]:
        """Allow, block or rewrite the call (see :func:`allow`, :func:`block`,
        :func:`rewrite`)."""
        return None

    def after_tool_call(self, ctx: AfterToolCallContext) -> AfterResult | Awaitable[AfterResult]:
        """Keep the result (``None``) or override it."""
        return None

    def on_tool_call_end(self, record: ToolCallRecord) -> None:
        """See the call's outcome (sync)."""
        return None

    def check_tools(self, tools: Sequence[ToolSpec]) -> Sequence[str]:
        """The problems of the hook's own settings against the tools it is registered for
        (those its registration's ``tools=`` match; all of them without), each a sentence
        naming what it probably meant (a guard whose argument no tool it applies to takes would
        guard nothing); empty when it fits. Asked with the tool pattern checks (see the module's
        contracts), and reported the same way."""
        return ()


HOOK_METHODS: Final = ("before_tool_call", "after_tool_call", "on_tool_call_end")
"""The methods through which a hook object takes part."""
HOOK_SETTINGS: Final = (
    "name",
    "tools",
    "timeout",
    "before_failure",
    "after_failure",
    "patterns",
    "requires_scrubber",
)
"""The settings a hook object may carry."""
HOOK_CHECKS: Final = ("check_tools",)
"""The checks of its configuration a hook object may offer."""
_CONTRACT: Final = frozenset(HOOK_METHODS + HOOK_SETTINGS + HOOK_CHECKS)
_RETIRED: Final = {
    "scrub_text": "give the redactor to the executor or agent as scrubber=... instead",
    "scrub_result": "give the redactor to the executor or agent as scrubber=... instead",
    "scrub_identifier": "give the redactor to the executor or agent as scrubber=... instead",
}
_HOOKISH_PREFIXES: Final = ("before_", "after_", "on_tool")


def _edits(a: str, b: str, most: int) -> int:
    """The optimal-string-alignment distance of ``a`` and ``b`` (``most + 1`` once above
    ``most``): insertions, deletions, substitutions and swaps of neighbours."""
    if abs(len(a) - len(b)) > most:
        return most + 1
    before: list[int] = []
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        previous, row = row, [i]
        for j, cb in enumerate(b, 1):
            cost = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, before[j - 2] + 1)
            row.append(cost)
        before = previous
        if min(row) > most:
            return most + 1
    return row[-1]


def check_hook_object(hook: object) -> None:
    """Refuse (``TypeError``) a hook object with a public attribute that looks like a hook
    method but is none: a misspelt method would never run."""
    kind = type(hook).__name__
    for attribute in dir(hook):
        if attribute.startswith("_") or attribute in _CONTRACT:
            continue
        retired = _RETIRED.get(attribute)
        if retired is not None:
            raise TypeError(
                f"{kind}.{attribute} is no longer found on hooks: {retired} "
                "(see otelhooks.core.scrub)"
            )
        near = [m for m in HOOK_METHODS if _edits(attribute, m, 2) <= 2]
        if near or attribute.startswith(_HOOKISH_PREFIXES):
            meant = near or difflib.get_close_matches(attribute, HOOK_METHODS, 1, 0.0)
            raise TypeError(
                f"{kind}.{attribute} is not a hook method; did you mean {meant[0]!r}? "
                f"(a hook object takes part through {', '.join(HOOK_METHODS)})"
            )


def _member(hook: object, method: str) -> Callable[[Any], Any] | None:
    """``hook``'s implementation of a hook method, or ``None`` (absent, or
    :class:`ToolHook`'s no-op)."""
    fn = getattr(hook, method, None)
    if fn is None:
        return None
    if getattr(fn, "__func__", None) is getattr(ToolHook, method):
        return None  # the base class's no-op: the hook takes no part in this phase
    if not callable(fn):
        raise TypeError(f"{type(hook).__name__}.{method} must be callable")
    return fn  # type: ignore[no-any-return]


class ToolCheckWarning(UserWarning):
    """A hook does not fit the registered tools (its own ``check_tools`` found a problem)."""


class UnmatchedToolPattern(ToolCheckWarning):
    """A hook's tool pattern matches no registered tool (a typo lets the tool run unguarded)."""


class ToolCheckError(ValueError):
    """Raised instead of :class:`ToolCheckWarning` when the check is strict."""


class UnmatchedToolPatternError(ToolCheckError):
    """Raised instead of :class:`UnmatchedToolPattern` when the check is strict."""


@dataclass(frozen=True, eq=False)
class RegisteredHook:
    """One registration: the callables of each phase, which tools it applies to, and its policy."""

    name: str
    before: BeforeHookFn | None = None
    after: AfterHookFn | None = None
    observe: ObserverFn | None = None
    tools: tuple[str, ...] | None = None
    timeout: float | None = None
    before_failure: FailurePolicy = FAIL_CLOSED
    after_failure: FailurePolicy = FAIL_OPEN
    patterns: tuple[str, ...] = ()  # tool patterns of the hook's own (a policy's list)
    tools_later: bool = False  # its tools are registered later: not checked at registration
    requires_scrubber: bool = False  # see ToolHook.requires_scrubber
    check: Callable[[Sequence[ToolSpec]], Iterable[str]] | None = None  # ToolHook.check_tools
    _exact: frozenset[str] = field(default=frozenset(), repr=False)
    _globs: tuple[str, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        if self.tools is not None:
            patterns = tuple(self.tools)
            exact = frozenset(p for p in patterns if not _is_glob(p))
            object.__setattr__(self, "_exact", exact)
            object.__setattr__(self, "_globs", tuple(p for p in patterns if _is_glob(p)))
        for policy in (self.before_failure, self.after_failure):
            if policy not in (FAIL_CLOSED, FAIL_OPEN):
                raise ValueError(
                    f"failure policy must be 'fail_closed' or 'fail_open', got {policy!r}"
                )

    def applies_to(self, tool_name: str) -> bool:
        """Whether this hook runs for calls of ``tool_name`` (its ``tools=`` names and globs; all
        tools without)."""
        if self.tools is None or tool_name in self._exact:
            return True
        return any(fnmatch.fnmatchcase(tool_name, g) for g in self._globs)

    def unmatched_patterns(self, tool_names: Iterable[str]) -> list[str]:
        """The hook's tool patterns (``tools`` and its own) that match none of ``tool_names``."""
        names = list(tool_names)
        return [
            pattern
            for pattern in (*(self.tools or ()), *self.patterns)
            if not any(fnmatch.fnmatchcase(name, pattern) for name in names)
        ]


def _is_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


@dataclass(frozen=True, slots=True)
class PhaseHooks:
    """The hooks that apply to one tool, per phase, in registration order."""

    before: tuple[RegisteredHook, ...]
    after: tuple[RegisteredHook, ...]
    observers: tuple[RegisteredHook, ...]


NO_HOOKS: Final = PhaseHooks((), (), ())
"""What applies to a tool no hook matches."""


class HookChain:
    """An immutable, ordered set of registrations (what one turn or one executor uses)."""

    __slots__ = ("hooks", "requiring_scrubber")

    def __init__(self, hooks: Iterable[RegisteredHook] = ()) -> None:
        self.hooks: tuple[RegisteredHook, ...] = tuple(hooks)
        self.requiring_scrubber: tuple[str, ...] = tuple(
            h.name for h in self.hooks if h.requires_scrubber
        )
        """The hooks that refuse to run without a scrubber (see :class:`ToolHook`)."""

    def check_scrubber(self, scrubbing: bool) -> None:
        """Raise ``ValueError`` when a hook requires a scrubber and there is none."""
        if self.requiring_scrubber and not scrubbing:
            names = ", ".join(repr(n) for n in self.requiring_scrubber)
            raise ValueError(
                f"hook {names} redacts results, but without a scrubber the runtime would write "
                "block reasons, error messages and span content unredacted: give the redactor "
                "to the executor or agent as scrubber=... as well"
            )

    def check_tools(self, tools: Iterable[str | ToolSpec], *, strict: bool = True) -> list[str]:
        """Raise on (or, not ``strict``, warn about) tool patterns that match no tool and the
        problems hooks find with the tools (see :func:`check_tool_patterns`); returns the
        messages."""
        return check_tool_patterns(self.hooks, tools, strict=strict)

    def for_tool(self, tool_name: str) -> PhaseHooks:
        """The before-hooks, after-hooks and observers that apply to ``tool_name``, in order."""
        applicable = [h for h in self.hooks if h.applies_to(tool_name)]
        if not applicable:
            return NO_HOOKS
        return PhaseHooks(
            tuple(h for h in applicable if h.before is not None),
            tuple(h for h in applicable if h.after is not None),
            tuple(h for h in applicable if h.observe is not None),
        )


def check_tool_patterns(
    hooks: Iterable[RegisteredHook], tools: Iterable[str | ToolSpec], *, strict: bool = True
) -> list[str]:
    """Check hooks against the tools there are (names, or specs): raise
    :class:`UnmatchedToolPatternError` naming each hook tool pattern that matches none of them
    (the tool it probably meant, and the tools there are), and :class:`ToolCheckError` for the
    problems a hook's own ``check_tools`` finds with the specs (asked only when every tool is
    given as a spec); with ``strict`` false warn instead. Returns the messages."""
    given = list(tools)
    names = sorted(t if isinstance(t, str) else t.name for t in given)
    specs = [t for t in given if not isinstance(t, str)]
    complete = len(specs) == len(given)
    unmatched: list[str] = []
    misfits: list[str] = []
    for hook in hooks:
        for pattern in hook.unmatched_patterns(names):
            meant = difflib.get_close_matches(pattern, names, 1, 0.6)
            hint = f" (did you mean {meant[0]!r}?)" if meant else ""
            unmatched.append(
                f"hook {hook.name!r}: tool pattern {pattern!r} matches no registered tool{hint}; "
                f"the tools are: {', '.join(names) or 'none'}"
            )
        if hook.check is not None and complete:  # asked about the tools it applies to
            scoped = [spec for spec in specs if hook.applies_to(spec.name)]
            misfits.extend(str(problem) for problem in hook.check(scoped))
    problems = unmatched + misfits
    if problems and strict:
        error = UnmatchedToolPatternError if unmatched else ToolCheckError
        raise error("; ".join(problems))
    for problem in unmatched:
        warnings.warn(problem, UnmatchedToolPattern, stacklevel=3)
    for problem in misfits:
        warnings.warn(problem, ToolCheckWarning, stacklevel=3)
    return problems


class HookOptions(TypedDict, total=False):
    """What a hook registration accepts besides its callables (see :meth:`Hooks.add`)."""

    name: str | None
    """The hook's name on spans and in logs (default: the function's)."""
    tools: str | Iterable[str] | None
    """Tool names or glob patterns the hook applies to (default: every tool)."""
    timeout: float | None
    """Seconds one call of the hook may take."""
    tools_later: bool
    """The ``tools=`` name tools registered later: checked when an agent starts, not now."""


class BeforeOptions(HookOptions, total=False):
    """What ``@hooks.before(...)`` accepts."""

    before_failure: FailurePolicy | None
    """What a failure of the hook does: ``fail_closed`` (default: block) or ``fail_open``."""


class AfterOptions(HookOptions, total=False):
    """What ``@hooks.after(...)`` accepts."""

    after_failure: FailurePolicy | None
    """What a failure of the hook does: ``fail_open`` (default: keep) or ``fail_closed``."""


class Hooks:
    """The mutable list of hook registrations an agent or executor uses.

    ``snapshot()`` gives the :class:`HookChain` a run or a turn uses, so that registering a hook
    while a turn runs affects the next turn only. With ``registry``, each registration's tool
    patterns are checked against its tools at once: a pattern that matches none is an
    :class:`UnmatchedToolPatternError` (``tools_later=True`` defers one registration's check;
    ``strict=False`` makes them warnings). Agents check again when they start.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "snapshot" in vars(cls):  # the runtime reads chain, which add and remove make
            raise TypeError(
                f"{cls.__name__}.snapshot would not be asked per call: the runtime reads "
                "Hooks.chain, made by add() and remove(); override those instead"
            )

    def __init__(
        self,
        hooks: Iterable[Any] = (),
        *,
        registry: ToolRegistry | None = None,
        strict: bool = True,
    ) -> None:
        self._hooks: list[RegisteredHook] = []
        self.chain = HookChain()
        """The current registrations as an immutable :class:`HookChain`: made anew by each
        :meth:`add` and :meth:`remove`, the same object in between (:meth:`snapshot`)."""
        self.registry = registry
        self.strict = strict
        for h in hooks:
            self.add(h)

    def check_tools(
        self, tools: Iterable[str | ToolSpec], *, strict: bool | None = None
    ) -> list[str]:
        """Raise on (or, not strict, warn about) tool patterns that match none of ``tools``
        (names or specs) and, given specs, what hooks' own ``check_tools`` find; every
        registration is checked, deferred ones included."""
        return check_tool_patterns(
            self._hooks, tools, strict=self.strict if strict is None else strict
        )

    def add(
        self,
        hook: Any = None,
        *,
        before: BeforeHookFn | None = None,
        after: AfterHookFn | None = None,
        observe: ObserverFn | None = None,
        name: str | None = None,
        tools: str | Iterable[str] | None = None,
        timeout: float | None = None,
        before_failure: FailurePolicy | None = None,
        after_failure: FailurePolicy | None = None,
        tools_later: bool = False,
    ) -> RegisteredHook:
        """Register a hook object (see :class:`ToolHook`), or explicit ``before``/``after``/
        ``observe`` callables; keywords override what the object says.

        ``tools`` limits the hook to tools whose name equals one of the names or matches one of
        the glob patterns (``"fs.*"``). ``timeout`` (seconds) bounds each call of the hook.
        ``tools_later`` says the tools are registered later (no check now).
        """
        if isinstance(hook, RegisteredHook):
            registered = hook
        else:
            if inspect.isclass(hook):
                raise TypeError(
                    f"hooks.add() got the class {hook.__name__}; pass an instance: "
                    f"hooks.add({hook.__name__}(...))"
                )
            own_patterns: tuple[str, ...] = ()
            requires_scrubber = False
            check = None
            if hook is not None:
                check_hook_object(hook)
                before = before or _member(hook, "before_tool_call")
                after = after or _member(hook, "after_tool_call")
                observe = observe or _member(hook, "on_tool_call_end")
                own_patterns = tuple(getattr(hook, "patterns", None) or ())
                name = name or getattr(hook, "name", None) or type(hook).__name__
                tools = tools if tools is not None else getattr(hook, "tools", None)
                timeout = timeout if timeout is not None else getattr(hook, "timeout", None)
                before_failure = before_failure or getattr(hook, "before_failure", None)
                after_failure = after_failure or getattr(hook, "after_failure", None)
                requires_scrubber = getattr(hook, "requires_scrubber", False) is True
                check = _member(hook, "check_tools")
            if before is None and after is None and observe is None:
                raise TypeError(
                    "a hook needs before_tool_call, after_tool_call or on_tool_call_end"
                    f" (got {type(hook).__name__})"
                )
            for label, fn_ in (("before", before), ("after", after), ("observe", observe)):
                if fn_ is not None and not callable(fn_):
                    raise TypeError(f"hook {label} must be callable, got {type(fn_).__name__}")
            fn = before or after or observe
            registered = RegisteredHook(
                name=str(name or getattr(fn, "__name__", "hook")),
                before=before,
                after=after,
                observe=observe,
                tools=(tools,) if isinstance(tools, str) else tuple(tools) if tools else None,
                timeout=timeout,
                before_failure=before_failure or FAIL_CLOSED,
                after_failure=after_failure or FAIL_OPEN,
                patterns=own_patterns,
                tools_later=tools_later,
                requires_scrubber=requires_scrubber,
                check=check,
            )
        if self.registry is not None and not registered.tools_later:
            check_tool_patterns([registered], self.registry.specs(), strict=self.strict)
        self._hooks.append(registered)
        self.chain = HookChain(self._hooks)
        return registered

    @overload
    def before(self, fn: BeforeF, /) -> BeforeF: ...

    @overload
    def before(
        self, fn: None = None, /, **options: Unpack[BeforeOptions]
    ) -> Callable[[BeforeF], BeforeF]: ...

    def before(
        self, fn: BeforeF | None = None, /, **options: Unpack[BeforeOptions]
    ) -> BeforeF | Callable[[BeforeF], BeforeF]:
        """Register a before-hook: ``@hooks.before`` or ``@hooks.before(tools=...)``; the
        function is returned unchanged."""
        return self._decorator("before", fn, options)

    @overload
    def after(self, fn: AfterF, /) -> AfterF: ...

    @overload
    def after(
        self, fn: None = None, /, **options: Unpack[AfterOptions]
    ) -> Callable[[AfterF], AfterF]: ...

    def after(
        self, fn: AfterF | None = None, /, **options: Unpack[AfterOptions]
    ) -> AfterF | Callable[[AfterF], AfterF]:
        """Register an after-hook: ``@hooks.after`` or ``@hooks.after(tools=...,
        after_failure="fail_closed")``; the function is returned unchanged."""
        return self._decorator("after", fn, options)

    def _decorator(
        self, phase: str, fn: _HookF | None, options: Mapping[str, Any]
    ) -> _HookF | Callable[[_HookF], _HookF]:
        """``fn`` registered for ``phase`` (and returned), or the decorator that does it."""

        def decorate(f: _HookF) -> _HookF:
            if phase == "before":
                self.add(before=f, **options)
            else:
                self.add(after=f, **options)
            return f

        return decorate(fn) if fn is not None else decorate

    def remove(self, registered: RegisteredHook) -> None:
        """Unregister a hook (as returned by :meth:`add`)."""
        self._hooks.remove(registered)
        self.chain = HookChain(self._hooks)

    def snapshot(self) -> HookChain:
        """The current registrations as an immutable :class:`HookChain` (the same object until
        they change: :attr:`chain`)."""
        return self.chain

    def __len__(self) -> int:
        return len(self._hooks)

    def __iter__(self) -> Iterator[RegisteredHook]:
        return iter(list(self._hooks))
