"""Hooks: what a before-hook and an after-hook receive, what they may return, and the chain.

Contracts
---------
* A **before-hook** is called with a :class:`BeforeToolCallContext` and returns ``None`` or
  :func:`allow` (go on), :func:`block` (stop: the handler never runs, the after-hooks do not run,
  the model gets ``blocked: <reason>``; ``block(reason, terminate=True)`` also asks the loop to
  end the run after this batch) or :func:`rewrite` (go on with new arguments, which are
  validated against the tool's schema again). Hooks run in registration order; each sees the
  arguments as rewritten by the ones before it; the first block wins and ends the chain.
* An **after-hook** is called with an :class:`AfterToolCallContext` and returns ``None`` (keep),
  a ``str`` (new content) or an :class:`AfterOverride`: a field-level override in which omitted
  fields keep their values (``terminate=True`` asks the loop to end the run after this batch).
  Hooks run in order, each seeing the result as overridden so far.
* An **observer** (``on_tool_call_end``) is called once per call with the final
  :class:`ToolCallRecord`, while the call's span is current. It cannot change anything.
* Any of these may be sync or ``async``. A hook that raises, returns a value of the wrong type or
  overruns its ``timeout`` is handled by its failure policy: ``"fail_closed"`` blocks the call
  (before) or withholds the result (after); ``"fail_open"`` ignores the hook. The defaults are
  fail closed for before-hooks and fail open for after-hooks. Either way the failure is recorded
  on the trace and the call ends with a result. An observer that raises is recorded and ignored.
* Every hook failure is also logged (a structlog ``hook.failed`` warning naming the hook, the
  tool and what went wrong, a wrong return type by its name), so a hook meant to hide something
  that fails open is never silent.
* A hook that only applies to some tools (``tools=``, or a policy's tool patterns) is checked
  against the registered tools: a pattern that matches no tool is a warning
  (:class:`UnmatchedToolPattern`) naming the pattern and the tools there are, or an error with
  ``strict=True``. A typo must not let the tool it meant run unguarded.
* A hook object may offer ``scrub_text(text) -> text`` (the built-in redaction hook does): the
  runtime then passes every text it writes itself for the model or a span through it (block
  reasons, error messages, captured content) before anything is cut; and
  ``scrub_identifier(name) -> name`` for a name the model chose (an unknown tool's name, a call
  id) where the runtime quotes it.
* A hook never sees the runtime's own copy of the arguments: ``args`` is a read-only mapping and
  nested containers are copies.
"""

from __future__ import annotations

import fnmatch
import inspect
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Literal,
    TypeAlias,
    TypedDict,
    TypeVar,
    Unpack,
    overload,
)

from .cancel import CancelSignal
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


@dataclass(frozen=True, slots=True)
class BeforeDecision:
    """What a before-hook decided. Build with :func:`allow`, :func:`block` or :func:`rewrite`."""

    block: bool = False
    reason: str = ""
    arguments: Mapping[str, Any] | None = None
    terminate: bool = False


_ALLOW: Final = BeforeDecision()


def allow() -> BeforeDecision:
    """Let the call go on unchanged (the same as returning ``None``)."""
    return _ALLOW


def block(reason: str, *, terminate: bool = False) -> BeforeDecision:
    """Stop the call: the handler never runs and the model gets ``blocked: <reason>``.

    With ``terminate=True`` the loop ends the run after the current batch of tool calls.
    """
    return BeforeDecision(block=True, reason=reason or "blocked", terminate=terminate)


def rewrite(arguments: Mapping[str, Any]) -> BeforeDecision:
    """Go on with these arguments instead; they are validated against the tool's schema again."""
    return BeforeDecision(arguments=dict(arguments))


@dataclass(frozen=True, slots=True)
class AfterOverride:
    """Field-level override of a tool result; a field left as ``KEEP`` keeps its value."""

    content: str | _Keep = KEEP
    details: Any = KEEP
    is_error: bool | _Keep = KEEP
    terminate: bool | _Keep = KEEP


@dataclass(frozen=True, slots=True)
class BeforeToolCallContext:
    """What a before-hook sees.

    ``tool_call`` is the call as the model sent it (raw arguments); ``args`` the validated
    arguments as rewritten by earlier hooks; ``assistant_message`` the message that asked for the
    call (``None`` outside a loop); ``context`` a snapshot of the run; ``signal`` the run's
    cancellation signal.
    """

    tool_call: ToolCall
    args: Mapping[str, Any]
    tool: ToolSpec
    assistant_message: AssistantMessage | None
    context: AgentContext
    signal: CancelSignal


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


Decision = Literal["allow", "block", "skip"]
_NO_ARGUMENTS: Final[Mapping[str, Any]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """The outcome of one call, given to observers when it ends.

    ``decision`` is ``allow`` (the handler was asked to run), ``block`` (a hook stopped it) or
    ``skip`` (the loop skipped it); a call that failed before any decision (unknown tool, invalid
    arguments) has ``decision=None`` and ``error_type`` set.
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
    arguments: Mapping[str, Any] = field(default_factory=lambda: _NO_ARGUMENTS)
    """The arguments the handler got (validated, as rewritten), read-only; empty when the call
    ended before validation."""


BeforeResult: TypeAlias = BeforeDecision | None
AfterResult: TypeAlias = AfterOverride | str | None
BeforeHookFn: TypeAlias = Callable[[BeforeToolCallContext], Any]
AfterHookFn: TypeAlias = Callable[[AfterToolCallContext], Any]
ObserverFn: TypeAlias = Callable[[ToolCallRecord], Any]
ScrubFn: TypeAlias = Callable[[str], str]
BeforeF = TypeVar("BeforeF", bound=BeforeHookFn)
AfterF = TypeVar("AfterF", bound=AfterHookFn)
_HookF = TypeVar("_HookF", bound=Callable[[Any], Any])


class UnmatchedToolPattern(UserWarning):
    """A hook's tool pattern matches no registered tool (a typo lets the tool run unguarded)."""


class UnmatchedToolPatternError(ValueError):
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
    scrub: ScrubFn | None = None
    scrub_result: Callable[[ToolResult], ToolResult] | None = None
    scrub_identifier: ScrubFn | None = None
    patterns: tuple[str, ...] = ()  # tool patterns of the hook's own (a policy's list)
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
"""What applies to a tool no hook matches (:meth:`HookChain.for_tool` returns this object)."""


class HookChain:
    """An immutable, ordered set of registrations, with the per-tool selection cached."""

    __slots__ = ("_cache", "_identifier_scrubbers", "_result_scrubbers", "_scrubbers", "hooks")

    def __init__(self, hooks: Iterable[RegisteredHook] = ()) -> None:
        self.hooks: tuple[RegisteredHook, ...] = tuple(hooks)
        self._cache: dict[str, PhaseHooks] = {}
        self._scrubbers = tuple(h.scrub for h in self.hooks if h.scrub is not None)
        self._result_scrubbers = tuple(
            h.scrub_result for h in self.hooks if h.scrub_result is not None
        )
        self._identifier_scrubbers = tuple(
            h.scrub_identifier for h in self.hooks if h.scrub_identifier is not None
        )

    def scrub(self, text: str) -> str:
        """``text`` through every registered hook's ``scrub_text`` (unchanged when none)."""
        for scrub in self._scrubbers:
            text = scrub(text)
        return text

    def scrub_identifier(self, name: str) -> str:
        """A model-chosen name through every hook's ``scrub_identifier`` (unchanged when none)."""
        for scrub in self._identifier_scrubbers:
            name = scrub(name)
        return name

    def scrub_result(self, result: ToolResult) -> ToolResult:
        """``result`` through every registered hook's ``scrub_result`` (unchanged when none)."""
        for scrub in self._result_scrubbers:
            result = scrub(result)
        return result

    def check_tools(self, tool_names: Iterable[str], *, strict: bool = False) -> list[str]:
        """Warn about (or with ``strict`` raise on) tool patterns that match no tool; returns
        the messages."""
        return check_tool_patterns(self.hooks, tool_names, strict=strict)

    def for_tool(self, tool_name: str) -> PhaseHooks:
        """The before-hooks, after-hooks and observers that apply to ``tool_name`` (cached per
        name)."""
        found = self._cache.get(tool_name)
        if found is None:
            if not self.hooks:
                return NO_HOOKS
            applicable = [h for h in self.hooks if h.applies_to(tool_name)]
            found = (
                PhaseHooks(
                    tuple(h for h in applicable if h.before is not None),
                    tuple(h for h in applicable if h.after is not None),
                    tuple(h for h in applicable if h.observe is not None),
                )
                if applicable
                else NO_HOOKS
            )
            if len(self._cache) < 4096:  # bounded: names come from the model
                self._cache[tool_name] = found
        return found


def check_tool_patterns(
    hooks: Iterable[RegisteredHook], tool_names: Iterable[str], *, strict: bool = False
) -> list[str]:
    """Warn (:class:`UnmatchedToolPattern`) about each hook tool pattern that matches none of
    ``tool_names``, or raise :class:`UnmatchedToolPatternError` when ``strict``."""
    names = sorted(tool_names)
    problems = []
    for hook in hooks:
        for pattern in hook.unmatched_patterns(names):
            problems.append(
                f"hook {hook.name!r}: tool pattern {pattern!r} matches no registered tool; "
                f"the tools are: {', '.join(names) or 'none'}"
            )
    if problems and strict:
        raise UnmatchedToolPatternError("; ".join(problems))
    for problem in problems:
        warnings.warn(problem, UnmatchedToolPattern, stacklevel=3)
    return problems


class HookOptions(TypedDict, total=False):
    """What a hook registration accepts besides its callables (see :meth:`Hooks.add`)."""

    name: str | None
    """The hook's name on spans and in logs (default: the function's)."""
    tools: str | Iterable[str] | None
    """Tool names or glob patterns the hook applies to (default: every tool)."""
    timeout: float | None
    """Seconds one call of the hook may take."""


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
    patterns are checked against its tools at once (see :meth:`check_tools`); ``strict`` makes a
    pattern that matches nothing an error instead of a warning. Agents and executors check again
    when they start.
    """

    def __init__(
        self,
        hooks: Iterable[Any] = (),
        *,
        registry: ToolRegistry | None = None,
        strict: bool = False,
    ) -> None:
        self._hooks: list[RegisteredHook] = []
        self._chain: HookChain | None = None
        self.registry = registry
        self.strict = strict
        for h in hooks:
            self.add(h)

    def check_tools(self, tool_names: Iterable[str], *, strict: bool | None = None) -> list[str]:
        """Warn about tool patterns that match none of ``tool_names`` (raise when strict)."""
        return check_tool_patterns(
            self._hooks, tool_names, strict=self.strict if strict is None else strict
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
    ) -> RegisteredHook:
        """Register a hook object, or explicit ``before``/``after``/``observe`` callables.

        ``tools`` limits the hook to tools whose name equals one of the names or matches one of
        the glob patterns (``"fs.*"``). ``timeout`` (seconds) bounds each call of the hook.
        """
        if isinstance(hook, RegisteredHook):
            registered = hook
        else:
            if inspect.isclass(hook):
                raise TypeError(
                    f"hooks.add() got the class {hook.__name__}; pass an instance: "
                    f"hooks.add({hook.__name__}(...))"
                )
            scrub: ScrubFn | None = None
            scrub_result: Callable[[ToolResult], ToolResult] | None = None
            scrub_identifier: ScrubFn | None = None
            own_patterns: tuple[str, ...] = ()
            if hook is not None:
                scrub = getattr(hook, "scrub_text", None)
                scrub_result = getattr(hook, "scrub_result", None)
                scrub_identifier = getattr(hook, "scrub_identifier", None)
                own_patterns = tuple(getattr(hook, "patterns", None) or ())
                before = before or getattr(hook, "before_tool_call", None)
                after = after or getattr(hook, "after_tool_call", None)
                observe = observe or getattr(hook, "on_tool_call_end", None)
                name = name or getattr(hook, "name", None) or type(hook).__name__
                tools = tools if tools is not None else getattr(hook, "tools", None)
                timeout = timeout if timeout is not None else getattr(hook, "timeout", None)
                before_failure = before_failure or getattr(hook, "before_failure", None)
                after_failure = after_failure or getattr(hook, "after_failure", None)
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
                scrub=scrub,
                scrub_result=scrub_result,
                scrub_identifier=scrub_identifier,
                patterns=own_patterns,
            )
        if self.registry is not None:
            check_tool_patterns([registered], [t.name for t in self.registry], strict=self.strict)
        self._hooks.append(registered)
        self._chain = None
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
        self._chain = None

    def snapshot(self) -> HookChain:
        """The current registrations as an immutable :class:`HookChain` (cached until changed)."""
        if self._chain is None:
            self._chain = HookChain(self._hooks)
        return self._chain

    def __len__(self) -> int:
        return len(self._hooks)

    def __iter__(self) -> Iterator[RegisteredHook]:
        return iter(list(self._hooks))
