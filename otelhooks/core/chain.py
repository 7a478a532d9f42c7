"""Running a hook chain: each hook called within its timeout, its answer checked, its failure
handled by its policy, and a record of every hook's part for the trace.

Contracts
---------
* :func:`run_before_chain` runs the before-hooks in order; the first block (or a fail-closed
  failure) ends the chain; a rewrite is validated again before the next hook sees it.
* :func:`run_after_chain` runs the after-hooks in order, each seeing the result as overridden so
  far; a fail-closed failure withholds the result.
* Neither raises for a hook's fault: a raise, a wrong return type or a timeout becomes a
  :class:`HookFailure` in the outcome. Only ``asyncio.CancelledError`` passes through.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Final

from ..telemetry.attributes import ERR_HOOK_FAILED, ERR_HOOK_TIMEOUT, ERR_INVALID_ARGUMENTS
from .hooks import (
    _ALLOW,
    FAIL_CLOSED,
    KEEP,
    AfterOverride,
    AfterToolCallContext,
    BeforeDecision,
    BeforeToolCallContext,
    RegisteredHook,
    ScrubFn,
)
from .messages import ToolCall, ToolResult


class HookFailure(Exception):
    """A hook raised, returned a value of the wrong type, or overran its timeout."""

    def __init__(self, hook: str, error_type: str, message: str, cause: BaseException | None):
        super().__init__(message)
        self.hook = hook
        self.error_type = error_type
        self.cause = cause


@dataclass(frozen=True, slots=True)
class HookRun:
    """One hook's part in a chain, for the trace: its decision and how long it took."""

    hook: str
    decision: str  # allow | block | rewrite | keep | override | failed | timeout
    duration_ms: float
    failure: HookFailure | None = None


@dataclass(slots=True)
class BeforeOutcome:
    args: Mapping[str, Any]
    blocked: bool = False
    reason: str = ""
    terminate: bool = False
    deciding_hook: str | None = None
    rewritten: bool = False
    failure: HookFailure | None = None  # the failure that blocked the call (fail closed)
    runs: list[HookRun] = field(default_factory=list)


@dataclass(slots=True)
class AfterOutcome:
    result: ToolResult
    overridden: bool = False
    failure: HookFailure | None = None  # the failure that withheld the result (fail closed)
    runs: list[HookRun] = field(default_factory=list)
    changed_after_scrub: bool = False  # a hook changed the result after a scrubbing hook ran


def readonly_args(args: Mapping[str, Any]) -> Mapping[str, Any]:
    """A view of ``args`` a hook cannot change the runtime's copy through."""
    for v in args.values():
        if isinstance(v, (dict, list, set, bytearray)) or hasattr(v, "__dict__"):
            return MappingProxyType(copy.deepcopy(dict(args)))
    return MappingProxyType(dict(args))


# What sync hooks return: no need to ask whether it is awaitable.
_PLAIN_RESULTS: Final = frozenset({type(None), str, BeforeDecision, AfterOverride})


async def call_hook(hook: RegisteredHook, fn: Callable[[Any], Any], ctx: Any) -> Any:
    """Call one hook (sync or async) within its timeout; raise :class:`HookFailure` on a fault.

    A sync hook with a timeout runs in a worker thread so that a hook that hangs cannot stall the
    event loop. ``asyncio.CancelledError`` passes through untouched.
    """
    try:
        if hook.timeout is None:
            value = fn(ctx)
            if type(value) not in _PLAIN_RESULTS and inspect.isawaitable(value):
                value = await value
            return value
        async with asyncio.timeout(hook.timeout):
            if inspect.iscoroutinefunction(fn):
                return await fn(ctx)
            value = await asyncio.to_thread(fn, ctx)
            if inspect.isawaitable(value):
                value = await value
            return value
    except TimeoutError as exc:
        raise HookFailure(
            hook.name, ERR_HOOK_TIMEOUT, f"hook {hook.name!r} timed out after {hook.timeout}s", exc
        ) from None
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        raise HookFailure(
            hook.name,
            ERR_HOOK_FAILED,
            f"hook {hook.name!r} raised {type(exc).__name__}: {exc}",
            exc,
        ) from None


def report_hook_failure(call: ToolCall, failure: HookFailure, scrub: ScrubFn | None = None) -> None:
    """Log a hook failure as a structlog ``hook.failed`` warning (besides its span event); the
    message goes through ``scrub`` first (an exception message may quote a secret)."""
    import structlog

    message = str(failure)
    structlog.get_logger("otelhooks").warning(
        "hook.failed",
        hook=failure.hook,
        tool_name=str(call.name),
        call_id=str(call.id),
        error_type=failure.error_type,
        message=scrub(message) if scrub is not None else message,
    )


def _ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0


async def run_before_chain(
    hooks: tuple[RegisteredHook, ...],
    ctx: BeforeToolCallContext,
    args: Mapping[str, Any],
    revalidate: Callable[[Mapping[str, Any]], Mapping[str, Any]],
) -> BeforeOutcome:
    """Run the before-hooks in order.

    ``args`` is the runtime's own copy of the validated arguments (hooks see ``ctx.args``, a
    read-only copy); ``revalidate`` checks rewritten arguments and may raise.
    """
    outcome = BeforeOutcome(args=args)
    for hook in hooks:
        assert hook.before is not None
        start = time.perf_counter()
        try:
            value = await call_hook(hook, hook.before, ctx)
            if value is None or value is _ALLOW:
                outcome.runs.append(HookRun(hook.name, "allow", _ms_since(start)))
                continue
            if not isinstance(value, BeforeDecision):
                raise HookFailure(
                    hook.name,
                    ERR_HOOK_FAILED,
                    f"hook {hook.name!r} returned {type(value).__name__}; "
                    "expected allow(), block(reason), rewrite(arguments) or None",
                    None,
                )
            if value.block:
                outcome.runs.append(HookRun(hook.name, "block", _ms_since(start)))
                outcome.blocked, outcome.reason, outcome.deciding_hook = (
                    True,
                    value.reason,
                    hook.name,
                )
                outcome.terminate = value.terminate
                return outcome
            if value.arguments is not None:
                try:
                    new_args = revalidate(value.arguments)
                except Exception as exc:
                    raise HookFailure(
                        hook.name,
                        ERR_INVALID_ARGUMENTS,
                        f"hook {hook.name!r} rewrote the arguments into invalid ones: {exc}",
                        exc,
                    ) from None
                outcome.args, outcome.rewritten = new_args, True
                outcome.deciding_hook = hook.name
                ctx = BeforeToolCallContext(
                    ctx.tool_call,
                    readonly_args(new_args),
                    ctx.tool,
                    ctx.assistant_message,
                    ctx.context,
                    ctx.signal,
                )
                outcome.runs.append(HookRun(hook.name, "rewrite", _ms_since(start)))
            else:
                outcome.runs.append(HookRun(hook.name, "allow", _ms_since(start)))
        except HookFailure as failure:
            kind = "timeout" if failure.error_type == ERR_HOOK_TIMEOUT else "failed"
            outcome.runs.append(HookRun(hook.name, kind, _ms_since(start), failure))
            if hook.before_failure == FAIL_CLOSED:
                outcome.blocked, outcome.deciding_hook = True, hook.name
                outcome.reason = _failure_reason(failure)
                outcome.failure = failure
                return outcome
    return outcome


def _failure_reason(failure: HookFailure) -> str:
    if failure.error_type == ERR_HOOK_TIMEOUT:
        return str(failure)
    if failure.error_type == ERR_INVALID_ARGUMENTS:
        return f"hook {failure.hook!r} rewrote the arguments into invalid ones"
    # The exception's message stays on the (scrubbed) span; the model gets the type only.
    cause = type(failure.cause).__name__ if failure.cause is not None else "a wrong return type"
    return f"hook {failure.hook!r} failed ({cause})"


async def run_after_chain(
    hooks: tuple[RegisteredHook, ...], ctx: AfterToolCallContext
) -> AfterOutcome:
    """Run the after-hooks in order, each seeing the result as overridden so far."""
    outcome = AfterOutcome(result=ctx.result)
    scrubbed: ToolResult | None = None
    for hook in hooks:
        assert hook.after is not None
        start = time.perf_counter()
        try:
            value = await call_hook(hook, hook.after, ctx)
            if value is None:
                outcome.runs.append(HookRun(hook.name, "keep", _ms_since(start)))
                if hook.scrub_result is not None:
                    scrubbed = outcome.result
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
                result = apply_override(outcome.result, value)
            except TypeError as exc:
                raise HookFailure(
                    hook.name, ERR_HOOK_FAILED, f"hook {hook.name!r}: {exc}", exc
                ) from None
            if result is not outcome.result:
                outcome.result, outcome.overridden = result, True
                ctx = AfterToolCallContext(
                    ctx.tool_call,
                    ctx.args,
                    ctx.tool,
                    ctx.assistant_message,
                    ctx.context,
                    ctx.signal,
                    result,
                    result.is_error,
                )
            outcome.runs.append(HookRun(hook.name, "override", _ms_since(start)))
            if hook.scrub_result is not None:
                scrubbed = outcome.result
        except HookFailure as failure:
            kind = "timeout" if failure.error_type == ERR_HOOK_TIMEOUT else "failed"
            outcome.runs.append(HookRun(hook.name, kind, _ms_since(start), failure))
            if hook.after_failure == FAIL_CLOSED:
                outcome.result = ToolResult(
                    ctx.result.tool_call_id,
                    ctx.result.tool_name,
                    f"error: {_failure_reason(failure)}; the result was withheld",
                    None,
                    True,
                )
                outcome.overridden, outcome.failure = True, failure
                return outcome
    outcome.changed_after_scrub = scrubbed is not None and outcome.result is not scrubbed
    return outcome


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
