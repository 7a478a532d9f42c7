"""Running a hook chain: each hook called within its timeout, its answer checked, its failure
handled by its policy, and a record of every hook's part for the trace.

Contracts
---------
* :func:`run_before_chain` runs the before-hooks in order and returns a verdict: :class:`Let`
  (go on, with the final arguments), :class:`Asked` (go on only if approved), :class:`Held`
  (end the run with the call pending), :class:`Blocked` or :class:`Interrupted` (the run's
  signal stopped a hook). The first block (or a fail-closed failure) ends the chain; asks and
  defers are collected and the chain goes on, so the precedence is block > defer > ask >
  allow (a hook that runs again on rewritten arguments answers again: its last answer counts).
  A rewrite is
  validated again before the next hook sees it; after a rewrite, the hooks before the rewriting
  one run again on the final arguments (``recheck``), so every hook that let the call through
  saw what the handler gets.
* :func:`run_after_chain` runs the after-hooks in order, each seeing the result as overridden so
  far (each override scrubbed by the caller's ``rescrub`` first); a fail-closed failure
  withholds the result.
* Neither raises for a hook's fault: a raise, a ``CancelledError`` the hook raised itself, a wrong
  return type or a timeout becomes a :class:`HookFailure`. Only a cancellation from outside the
  call passes through (:func:`otelhooks.core.cancel.cancelled_by` says which is which).
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from types import CoroutineType, MappingProxyType
from typing import Any, Final, Literal, NamedTuple, NoReturn, TypeAlias

from ..telemetry.attributes import ERR_HOOK_FAILED, ERR_HOOK_TIMEOUT, ERR_INVALID_ARGUMENTS
from .cancel import CancelSignal, cancelled_by
from .deadline import Deadline, deadline
from .hooks import (
    FAIL_CLOSED,
    KEEP,
    AfterOverride,
    AfterToolCallContext,
    BeforeDecision,
    BeforeToolCallContext,
    RegisteredHook,
)
from .messages import ToolCall, ToolResult
from .scrub import Scrubber
from .threads import WORKERS


class HookFailure(Exception):
    """A hook raised, returned a value of the wrong type, or overran its timeout."""

    def __init__(self, hook: str, error_type: str, message: str, cause: BaseException | None):
        super().__init__(message)
        self.hook = hook
        self.error_type = error_type
        self.cause = cause


class _SignalStopped(Exception):
    """The run's signal cancelled a hook while it ran."""


class HookRun(NamedTuple):
    """One hook's part in a chain, for the trace: its decision and how long it took."""

    hook: str
    decision: str  # allow | block | ask | defer | rewrite | keep | override | failed | timeout
    duration_ms: float
    failure: HookFailure | None = None
    recheck: bool = False  # it ran again on arguments a later hook rewrote


class Let(NamedTuple):
    """The before-hooks let the call through with ``args`` (as rewritten, validated)."""

    args: Mapping[str, Any]
    rewritten: bool
    deciding_hook: str | None
    runs: tuple[HookRun, ...]


@dataclass(frozen=True, slots=True)
class HookRequest:
    """One before-hook's ask or defer: its reason and the policies that decided."""

    hook: str
    action: Literal["ask", "defer"]
    reason: str
    policies: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Requested:
    """The before-hooks would let the call through with ``args``, once a person decides:
    ``requests`` are their asks and defers (in hook order)."""

    args: Mapping[str, Any]
    rewritten: bool
    deciding_hook: str | None
    requests: tuple[HookRequest, ...]
    runs: tuple[HookRun, ...]


@dataclass(frozen=True, slots=True)
class Asked(_Requested):
    """Hooks asked (none deferred, none blocked): the call runs only if an approver approves."""


@dataclass(frozen=True, slots=True)
class Held(_Requested):
    """A hook deferred the call (none blocked): the run ends with it pending."""


@dataclass(frozen=True, slots=True)
class Blocked:
    """A before-hook blocked the call (or failed closed: ``failure``); ``policies`` name the
    policies that decided."""

    args: Mapping[str, Any]
    rewritten: bool
    hook: str
    reason: str
    terminate: bool
    failure: HookFailure | None
    runs: tuple[HookRun, ...]
    policies: tuple[str, ...] = ()


class Interrupted(NamedTuple):
    """The run's signal stopped the chain while a hook ran."""

    args: Mapping[str, Any]
    rewritten: bool
    runs: tuple[HookRun, ...]


BeforeVerdict: TypeAlias = Let | Asked | Held | Blocked | Interrupted


class AfterVerdict(NamedTuple):
    """The result the after-hooks leave, whether one changed it, and the failure that withheld
    it (fail closed)."""

    result: ToolResult
    overridden: bool
    failure: HookFailure | None
    runs: tuple[HookRun, ...]


_IMMUTABLE: Final = frozenset({str, int, float, bool, bytes, type(None)})


def readonly_args(args: Mapping[str, Any]) -> Mapping[str, Any]:
    """A view of ``args`` a hook cannot change the runtime's copy through: read-only at the top,
    and every value that is not an immutable scalar deep-copied (containers inside tuples
    included)."""
    for value in args.values():
        if type(value) not in _IMMUTABLE:
            return MappingProxyType(copy.deepcopy(dict(args)))
    return MappingProxyType(dict(args))


# What sync hooks return: no need to ask whether it is awaitable.
_PLAIN_RESULTS: Final = frozenset({type(None), str, BeforeDecision, AfterOverride})


def call_hook(
    hook: RegisteredHook, fn: Callable[[Any], Any], ctx: Any, signal: CancelSignal
) -> Any:
    """Call one hook (sync or async) within its timeout: its answer when it has one at once (a
    sync hook without a timeout that returned something not awaitable), else a coroutine (to
    be awaited) that gives it; either raises :class:`HookFailure` on a fault.

    A sync hook with a timeout runs in a worker thread (:mod:`otelhooks.core.threads`) so that a
    hook that hangs can neither stall the event loop nor hold a thread another hook needs.
    """
    if hook.timeout is not None:
        return _bounded_hook(hook, fn, ctx, signal)
    try:
        value = fn(ctx)
    except (Exception, asyncio.CancelledError) as exc:
        _hook_failed(hook, exc, None, signal)
    if type(value) not in _PLAIN_RESULTS and inspect.isawaitable(value):
        return _awaited_hook(hook, value, signal)
    return value


async def _awaited_hook(hook: RegisteredHook, value: Awaitable[Any], signal: CancelSignal) -> Any:
    """The answer of a hook without a timeout whose call gave an awaitable."""
    try:
        return await value
    except (Exception, asyncio.CancelledError) as exc:
        _hook_failed(hook, exc, None, signal)


async def _bounded_hook(
    hook: RegisteredHook, fn: Callable[[Any], Any], ctx: Any, signal: CancelSignal
) -> Any:
    """The answer of a hook with a timeout (an async one awaited, a sync one in a worker)."""
    bound = None
    try:
        with deadline(hook.timeout) as bound:
            if inspect.iscoroutinefunction(fn):
                value = await fn(ctx)
            else:
                value = await WORKERS.run(fn, ctx)
                if inspect.isawaitable(value):
                    value = await value
        return value
    except (Exception, asyncio.CancelledError) as exc:
        _hook_failed(hook, exc, bound, signal)


def _hook_failed(
    hook: RegisteredHook, exc: BaseException, bound: Deadline | None, signal: CancelSignal
) -> NoReturn:
    """Raise what a hook's exception becomes (the one rule for every hook): a
    :class:`HookFailure` (its timeout expired, it raised, it cancelled itself); a cancellation
    from outside goes on as it is, one of the call's signal as :class:`_SignalStopped`."""
    if isinstance(exc, TimeoutError):
        if bound is None or not bound.expired:  # the hook's own TimeoutError
            raise HookFailure(
                hook.name, ERR_HOOK_FAILED, f"hook {hook.name!r} raised TimeoutError: {exc}", exc
            ) from None
        raise HookFailure(
            hook.name, ERR_HOOK_TIMEOUT, f"hook {hook.name!r} timed out after {hook.timeout}s", exc
        ) from None
    if isinstance(exc, asyncio.CancelledError):
        source = cancelled_by(signal)
        if source == "outside":
            raise exc
        if source == "signal":
            raise _SignalStopped from None
        raise HookFailure(
            hook.name, ERR_HOOK_FAILED, f"hook {hook.name!r} raised CancelledError", exc
        ) from None
    raise HookFailure(
        hook.name, ERR_HOOK_FAILED, f"hook {hook.name!r} raised {type(exc).__name__}: {exc}", exc
    ) from None


def report_hook_failure(call: ToolCall, failure: HookFailure, scrubber: Scrubber) -> None:
    """Log a hook failure as a structlog ``hook.failed`` warning (besides its span event); the
    message and the call id go through the scrubber first (an exception message may quote a
    secret; the model chose the id)."""
    import structlog

    structlog.get_logger("otelhooks").warning(
        "hook.failed",
        hook=failure.hook,
        tool_name=str(call.name),
        call_id=scrubber.redact_identifier(str(call.id), "call_id")[0],
        error_type=failure.error_type,
        message=scrubber.redact_text(str(failure))[0],
    )


def _ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0


def _failed(hook: RegisteredHook, start: float, failure: HookFailure, recheck: bool) -> HookRun:
    kind = "timeout" if failure.error_type == ERR_HOOK_TIMEOUT else "failed"
    return HookRun(hook.name, kind, _ms_since(start), failure, recheck)


def _answer(
    hook: RegisteredHook,
    value: Any,
    revalidate: Callable[[Mapping[str, Any]], Mapping[str, Any]],
) -> BeforeDecision | Mapping[str, Any] | None:
    """A before-hook's return ``value`` as its answer: ``None`` (allow), a block, an ask, a
    defer, or the rewritten arguments (validated). Raises :class:`HookFailure` for its faults."""
    if value is None:
        return None
    if not isinstance(value, BeforeDecision):
        raise HookFailure(
            hook.name,
            ERR_HOOK_FAILED,
            f"hook {hook.name!r} returned {type(value).__name__}; "
            "expected allow(), block(reason), rewrite(arguments), ask(reason), defer(reason) "
            "or None",
            None,
        )
    if value.action != "allow":
        return value
    if value.arguments is None:
        return None
    try:
        return revalidate(value.arguments)
    except Exception as exc:
        raise HookFailure(
            hook.name,
            ERR_INVALID_ARGUMENTS,
            f"hook {hook.name!r} rewrote the arguments into invalid ones: {exc}",
            exc,
        ) from None


async def run_before_chain(
    hooks: tuple[RegisteredHook, ...],
    ctx: BeforeToolCallContext,
    args: Mapping[str, Any],
    revalidate: Callable[[Mapping[str, Any]], Mapping[str, Any]],
    signal: CancelSignal,
) -> BeforeVerdict:
    """Run the before-hooks in order (see the module's contracts).

    ``args`` is the runtime's own copy of the validated arguments (hooks see ``ctx.args``, a
    read-only copy); ``revalidate`` checks rewritten arguments and may raise.
    """
    runs: list[HookRun] = []
    last_rewrite = -1  # the index of the last hook that rewrote the arguments
    deciding: str | None = None
    held: dict[int, HookRequest] = {}  # asks and defers by hook index (its last answer)

    async def one(hook: RegisteredHook, index: int, recheck: bool) -> Blocked | Interrupted | None:
        """Ask hook number ``index``; a verdict when the chain ends with it."""
        nonlocal args, ctx, deciding, last_rewrite
        start = time.perf_counter()
        rewritten = last_rewrite >= 0
        try:
            assert hook.before is not None
            value = call_hook(hook, hook.before, ctx, signal)
            if type(value) is CoroutineType:  # its answer is still to come
                value = await value
            answer = _answer(hook, value, revalidate)
        except _SignalStopped:
            return Interrupted(args, rewritten, tuple(runs))
        except HookFailure as failure:
            runs.append(_failed(hook, start, failure, recheck))
            if hook.before_failure != FAIL_CLOSED:
                return None
            reason = _failure_reason(failure)
            return Blocked(args, rewritten, hook.name, reason, False, failure, (*runs,))
        if isinstance(answer, BeforeDecision):
            action = answer.action
            runs.append(HookRun(hook.name, action, _ms_since(start), None, recheck))
            if action == "block":
                return Blocked(
                    args, rewritten, hook.name, answer.reason, answer.terminate, None,
                    (*runs,), answer.policies,
                )  # fmt: skip
            assert action == "ask" or action == "defer"
            held[index] = HookRequest(hook.name, action, answer.reason, answer.policies)
            return None
        held.pop(index, None)
        if answer is None or (recheck and answer == args):
            runs.append(HookRun(hook.name, "allow", _ms_since(start), None, recheck))
            return None
        runs.append(HookRun(hook.name, "rewrite", _ms_since(start), None, recheck))
        if recheck:  # it would change what the hooks after it agreed on
            disagreement = HookFailure(
                hook.name,
                ERR_HOOK_FAILED,
                f"hook {hook.name!r} rewrote the arguments again after hook {deciding!r} "
                "rewrote them: the before-hooks do not agree on the arguments",
                None,
            )
            return Blocked(args, True, hook.name, str(disagreement), False, disagreement, (*runs,))
        args, deciding, last_rewrite = answer, hook.name, index
        ctx = replace(ctx, args=readonly_args(answer))
        return None

    for index, hook in enumerate(hooks):
        ended = await one(hook, index, False)
        if ended is not None:
            return ended
    if last_rewrite > 0:  # the hooks before the last rewrite see the final arguments too
        ctx = replace(ctx, recheck=True)
        for index, hook in enumerate(hooks[:last_rewrite]):
            ended = await one(hook, index, True)
            if ended is not None:
                return ended
    rewritten = last_rewrite >= 0
    if not held:
        return Let(args, rewritten, deciding, tuple(runs))
    requests = tuple(held[i] for i in sorted(held))
    if any(r.action == "defer" for r in requests):
        return Held(args, rewritten, deciding, requests, tuple(runs))
    return Asked(args, rewritten, deciding, requests, tuple(runs))


def _failure_reason(failure: HookFailure) -> str:
    if failure.error_type == ERR_HOOK_TIMEOUT:
        return str(failure)
    if failure.error_type == ERR_INVALID_ARGUMENTS:
        return f"hook {failure.hook!r} rewrote the arguments into invalid ones"
    # The exception's message stays on the (scrubbed) span; the model gets the type only.
    cause = type(failure.cause).__name__ if failure.cause is not None else "a wrong return type"
    return f"hook {failure.hook!r} failed ({cause})"


async def run_after_chain(
    hooks: tuple[RegisteredHook, ...],
    ctx: AfterToolCallContext,
    signal: CancelSignal,
    rescrub: Callable[[ToolResult, ToolResult], ToolResult],
) -> AfterVerdict | Interrupted:
    """Run the after-hooks in order, each seeing the result as overridden so far; an override is
    passed through ``rescrub(new, old)`` before anything else sees it. A result's ``details``
    (when they are not an immutable scalar) reach each hook as a deep copy: a hook changes them
    by returning an override, never in place behind the scrubber's back."""
    runs: list[HookRun] = []
    result = ctx.result
    overridden = False
    for hook in hooks:
        assert hook.after is not None
        start = time.perf_counter()
        details = result.details
        seen = (
            ctx
            if type(details) in _IMMUTABLE
            else replace(ctx, result=replace(result, details=copy.deepcopy(details)))
        )
        try:
            value = call_hook(hook, hook.after, seen, signal)
            if type(value) is CoroutineType:  # its answer is still to come
                value = await value
            if value is None:
                runs.append(HookRun(hook.name, "keep", _ms_since(start)))
                continue
            if isinstance(value, str):
                value = AfterOverride(content=value)
            elif not isinstance(value, AfterOverride):
                got = (
                    "a before-hook decision (allow/block/rewrite)"
                    if isinstance(value, BeforeDecision)
                    else type(value).__name__
                )
                raise HookFailure(
                    hook.name,
                    ERR_HOOK_FAILED,
                    f"after-hook {hook.name!r} returned {got}; expected AfterOverride, str or None",
                    None,
                )
            try:
                changed = apply_override(result, value)
            except TypeError as exc:
                raise HookFailure(
                    hook.name, ERR_HOOK_FAILED, f"hook {hook.name!r}: {exc}", exc
                ) from None
        except _SignalStopped:
            return Interrupted(ctx.args, False, tuple(runs))
        except HookFailure as failure:
            runs.append(_failed(hook, start, failure, False))
            if hook.after_failure != FAIL_CLOSED:
                continue
            withheld = ToolResult(
                result.tool_call_id,
                result.tool_name,
                f"error: {_failure_reason(failure)}; the result was withheld",
                None,
                True,
            )
            return AfterVerdict(withheld, True, failure, tuple(runs))
        if changed is not result:
            result, overridden = rescrub(changed, result), True
            ctx = replace(ctx, result=result, is_error=result.is_error)
        runs.append(HookRun(hook.name, "override", _ms_since(start)))
    return AfterVerdict(result, overridden, None, tuple(runs))


def apply_override(result: ToolResult, override: AfterOverride) -> ToolResult:
    """``result`` with the fields the override sets; the same object when it sets none."""
    content = result.content if override.content is KEEP else override.content
    details = result.details if override.details is KEEP else override.details
    is_error = result.is_error if override.is_error is KEEP else override.is_error
    terminate = result.terminate if override.terminate is KEEP else override.terminate
    if not isinstance(content, str):
        raise TypeError(f"AfterOverride.content must be a str, got {type(content).__name__}")
    if not isinstance(is_error, bool) or not isinstance(terminate, bool):
        raise TypeError("AfterOverride.is_error and AfterOverride.terminate must be bools")
    if (
        content is result.content
        and details is result.details
        and is_error is result.is_error
        and terminate is result.terminate
    ):
        return result
    return replace(result, content=content, details=details, is_error=is_error, terminate=terminate)
