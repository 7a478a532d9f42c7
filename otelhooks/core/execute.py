"""One tool call as a straight line, before -> run -> after, traced from outside.

:meth:`ToolExecutor.execute` is :meth:`~ToolExecutor.prepare` then :meth:`~ToolExecutor.finish`
(their parts, not a copy of them), nothing in front of it:

* ``prepare`` resolves the tool, validates the arguments and runs the before-hooks; it returns
  :class:`~otelhooks.core.outcome.Allowed` or :class:`~otelhooks.core.outcome.Ended`;
* ``finish`` asks the registry to start the handler (``registry.start``; awaited only when its
  value is still to come), runs the after-hooks, and returns the :class:`ToolResult`.

``execute`` awaits nothing for a phase that has nothing to wait for: the before phase is a
coroutine only when before-hooks run, the run and after phases only when the handler's value is
still to come (an async handler, a worker thread, a generator) or after-hooks run.

The registry never learns about hooks or spans; the hooks are the outer decoration; the recorder
(:mod:`otelhooks.core.tool_span`) turns what happened into spans and metrics, or into nothing
when the call's span does not record. The executor never raises for a bad call: unknown tools,
invalid arguments, hooks and handlers that raise or hang all end as error results. Only an
``asyncio.CancelledError`` from outside passes through (``KeyboardInterrupt`` and ``SystemExit``
too), after the call's outcome was recorded (:func:`otelhooks.core.cancel.cancelled_by` is the
rule).

The span tree of one call::

    execute_tool {tool}          gen_ai.* attributes, otelhooks.decision, error.type
      before                     validation and the before-hooks (one event per hook)
      run                        the handler (absent when the call was blocked or invalid)
      after                      the after-hooks (present whenever run is, hooks or not)
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping, Sequence
from types import CoroutineType
from typing import Any, Final, TypeVar, Unpack

from opentelemetry import context as otel_context
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import Link, TracerProvider

from ..telemetry import attributes as A
from ..telemetry.content import Capture, capture_from_env, parse_capture
from ..telemetry.instruments import Instruments
from .approvals import (
    ApprovalSettings,
    Approver,
)
from .asking import Approvals, Deferral
from .cancel import cancelled_by
from .chain import (
    AfterVerdict,
    Asked,
    Blocked,
    Held,
    HookRun,
    Interrupted,
    readonly_args,
    report_hook_failure,
    run_after_chain,
    run_before_chain,
)
from .deadline import Deadline, deadline
from .handler import as_result, call_bound, error_result, error_text
from .hooks import (
    NO_HOOKS,
    AfterToolCallContext,
    BeforeAction,
    BeforeToolCallContext,
    Decision,
    HookChain,
    Hooks,
    PhaseHooks,
)
from .messages import AgentContext, ToolCall, ToolResult
from .outcome import (
    NO_ARGUMENTS,
    Allowed,
    CallOptions,
    CallState,
    Deferred,
    Ended,
    Outcome,
    Prepared,
    blocked,
    end_call,
    end_outcome,
    refused,
)
from .plan import PlanCache
from .scrub import NO_SCRUBBING, Scrubber
from .tool_span import DEFAULT_TOOL_CONTENT_LENGTH, NoPhase, Phase, ToolCallRecorder
from .tools import InvalidArguments, ToolSet, prepared_arguments

_NO_PHASE: Final = NoPhase(None)

_made: Final = tuple.__new__
"""Makes a named tuple from all of its fields in order, without the Python ``__new__`` its
class call goes through (half of its cost): ``_made(Allowed, (state, tool, ...))`` is
``Allowed(state, tool, ...)`` with every field given. Used where a call makes one every time."""

_T = TypeVar("_T")

DEFAULT_TOOL_TIMEOUT: float = 180.0
"""Seconds a tool call may run when neither the tool nor the call sets a timeout (Pi's default)."""


class ToolExecutor:
    """Executes tool calls through the hook boundary and traces each one.

    ``tracer_provider`` defaults to the global one, looked up through the API's proxy: a provider
    installed after the executor was built is used from the next call on. Content (arguments and
    results) goes on spans when ``capture_content`` says so (``True``, a
    :class:`~otelhooks.telemetry.content.Capture` mode, or by default the standard environment
    variable), cut to ``max_content_length`` characters. ``scrubber`` (a
    :class:`~otelhooks.core.scrub.Scrubber`, such as :class:`otelhooks.builtin.Redactor`) removes
    secrets from everything the call hands the model and writes on its span (see
    :mod:`otelhooks.core.scrub`). ``tool_timeout`` (seconds, default :data:`DEFAULT_TOOL_TIMEOUT`;
    ``None`` disables it) bounds tools that set no timeout of their own: async handlers and
    handlers that run in a worker thread (a sync handler that runs inline holds the event loop,
    so no timer could fire; give it ``blocking=True`` or a timeout of its own to bound it).
    ``recorder`` records the calls (executors may share one); when given, it holds the tracer,
    the content capture, the instruments and the scrubber. ``plans`` caches what every call of a
    tool shares (:mod:`otelhooks.core.plan`). ``approver`` (an async callable, or
    :class:`~otelhooks.core.approvals.ApprovalSettings` with its time to live and digest key)
    answers the calls a before-hook asks about; without one an ask blocks
    (:mod:`otelhooks.core.approvals`).
    """

    def __init__(
        self,
        registry: ToolSet,
        hooks: Hooks | HookChain | None = None,
        *,
        tracer_provider: TracerProvider | None = None,
        capture_content: bool | str | Capture | None = None,
        max_content_length: int = DEFAULT_TOOL_CONTENT_LENGTH,
        tool_timeout: float | None = DEFAULT_TOOL_TIMEOUT,
        meter_provider: MeterProvider | None = None,
        instruments: Instruments | None = None,
        recorder: ToolCallRecorder | None = None,
        scrubber: Scrubber | None = None,
        plans: PlanCache | None = None,
        approver: Approver | ApprovalSettings | None = None,
    ) -> None:
        self.registry = registry
        self.hooks = hooks if hooks is not None else Hooks()
        self.tool_timeout = tool_timeout
        if recorder is None:
            recorder = ToolCallRecorder(
                tracer_provider,
                capture=(
                    capture_from_env()
                    if capture_content is None
                    else parse_capture(capture_content)
                ),
                max_content_length=max_content_length,
                instruments=instruments or Instruments(meter_provider),
                scrubber=scrubber,
            )
        elif scrubber is not None and scrubber is not recorder.scrubber:
            raise ValueError(
                "the recorder has a scrubber of its own: give the scrubber to the recorder"
            )
        self.recorder = recorder
        self.capture = recorder.capture
        self.scrubber = recorder.scrubber
        self.plans = plans if plans is not None else PlanCache()
        settings = (
            approver if isinstance(approver, ApprovalSettings) else ApprovalSettings(approver)
        )
        self.approvals = Approvals(settings, self.scrubber)
        """How asks are answered (:mod:`otelhooks.core.asking`)."""
        self._scrubs = self.scrubber is not NO_SCRUBBING  # decided here, once
        if isinstance(self.hooks, HookChain):
            self.hooks.check_scrubber(self.scrubber is not NO_SCRUBBING)

    # -- public entry points ------------------------------------------------------------------

    async def execute(self, call: ToolCall, **options: Unpack[CallOptions]) -> ToolResult:
        """Run one call through before -> run -> after and return its result (:meth:`prepare`
        then :meth:`finish`)."""
        prepared = self._admit(self._begin(call, None, None, options))
        if not isinstance(prepared, tuple):  # the before-hooks run
            prepared = await prepared
        finished = self._finish(prepared)
        return finished if isinstance(finished, ToolResult) else await finished

    async def prepare(
        self,
        call: ToolCall,
        *,
        parent: otel_context.Context | None = None,
        links: Sequence[Link] | None = None,
        **options: Unpack[CallOptions],
    ) -> Prepared:
        """Start the call's span and run its before phase (validation and before-hooks).

        ``parent`` is the context the tool span is created under (default: the current one);
        ``links`` link it to other spans (the loop links the ``chat`` span that asked for it).
        """
        prepared = self._admit(self._begin(call, parent, links, options))
        return prepared if isinstance(prepared, tuple) else await prepared

    async def finish(self, prepared: Prepared) -> ToolResult:
        """Run the handler and after-hooks of an allowed call, end its span and return its
        result; an ended or deferred call's result as it is."""
        finished = self._finish(prepared)
        return finished if isinstance(finished, ToolResult) else await finished

    def skip(
        self,
        call: ToolCall,
        reason: str,
        *,
        parent: otel_context.Context | None = None,
        context: AgentContext | None = None,
        hooks: HookChain | None = None,
        links: Sequence[Link] | None = None,
        tools: ToolSet | None = None,
    ) -> ToolResult:
        """End a call that will not run (``otelhooks.decision=skip``) with an error result."""
        options: CallOptions = {"context": context, "hooks": hooks, "tools": tools}
        return _skipped(self._begin(call, parent, links, options), reason, NO_ARGUMENTS)

    def skip_prepared(self, prepared: Prepared, reason: str) -> ToolResult:
        """End an allowed call without running it (``otelhooks.decision=skip``): its span keeps
        the ``before`` child it has, and the result is an error result with ``reason``. A call
        that ended already keeps its outcome."""
        if isinstance(prepared, (Ended, Deferred)):
            return prepared.result
        ended = prepared.state.ended
        if ended is not None:
            return ended.result
        return _skipped(prepared.state, reason, prepared.arguments)

    # -- the three phases ---------------------------------------------------------------------

    def _finish(self, prepared: Prepared) -> ToolResult | Coroutine[Any, Any, ToolResult]:
        """What :meth:`finish` returns, or when something is still to come (the handler's
        value, the after-hooks), the coroutine that gives it: the run phase starts the handler
        at once (:meth:`_run`), and a sync handler's call with no after-hooks ends here."""
        if not isinstance(prepared, Allowed):
            return prepared.result
        state = prepared.state
        ended = state.ended
        if ended is not None:  # finished or skipped already
            return ended.result
        trace = state.trace
        try:
            phase = trace.run
            phase.open()
            try:
                ran = self._run(prepared, phase)
            except BaseException:
                phase.close()
                raise
            if not isinstance(ran, tuple):  # the coroutine that awaits the handler's value
                return ran
            if state.hooks.after:
                return self._finish_later(prepared, ran)
            trace.end_run()  # its after phase runs no hook
            outcome = _ran(prepared, ran[0], ran[1], None)
        except BaseException as exc:
            outcome = _stopped(state, exc, prepared)
        return end_outcome(state, outcome).result

    async def _finish_later(
        self,
        allowed: Allowed,
        ran: tuple[ToolResult, str | None] | None,
        running: Coroutine[Any, Any, Any] | None = None,
        timeout: float | None = None,
    ) -> ToolResult:
        """The rest of :meth:`_finish` when something is to be awaited: the handler's value
        when it is still to come (``running``, within its bound ``timeout``: the one timeout
        mechanism; its run phase is open), then the after phase. ``ran`` is what the run
        phase gave when the handler's value was there at once."""
        state = allowed.state
        trace = state.trace
        try:
            try:
                if running is not None:  # the handler's value is still to come
                    limit = deadline(timeout)
                    try:
                        with limit:
                            value = await (_watched(state, running) if state.watched else running)
                        result = as_result(state.call, value)
                        ran = (trace.for_model(result) if self._scrubs else result), None
                    except (Exception, asyncio.CancelledError) as exc:
                        ran = _run_failed(allowed, trace.run, limit, timeout, exc)
            finally:
                trace.run.close()
            assert ran is not None
            result, error_type = ran
            if state.hooks.after and error_type != A.ERR_CANCELLED:  # the hooks decide
                phase = trace.after
                phase.open()
                try:
                    hooks = _after_chain(allowed, result)
                    verdict = await (_watched(state, hooks) if state.watched else hooks)
                    outcome = self._after_verdict(allowed, phase, verdict, error_type)
                finally:
                    phase.close()
            else:  # no after-hook runs in the phase
                trace.after.empty()
                outcome = _ran(allowed, result, error_type, None)
        except BaseException as exc:
            outcome = _stopped(state, exc, allowed)
        return end_outcome(state, outcome).result

    def _admit(self, state: CallState) -> Prepared | Coroutine[Any, Any, Prepared]:
        """The before phase: what :meth:`prepare` returns, or with before-hooks to run, the
        coroutine that runs the phase and returns it."""
        if state.hooks.before:
            return self._admit_through_hooks(state)
        phase = state.trace.before
        try:
            phase.open()
            try:
                step: Allowed | Outcome = self._admitted(state, phase)
            finally:
                phase.close()
        except BaseException as exc:
            step = _stopped(state, exc, None)
        return step if isinstance(step, Allowed) else _prepared(state, step)

    async def _admit_through_hooks(self, state: CallState) -> Prepared:
        """The before phase of a call with before-hooks: validation, then the hooks decide."""
        phase = state.trace.before
        try:
            phase.open()
            try:
                step: Allowed | Outcome | Deferral = self._admitted(state, phase)
                if isinstance(step, Allowed):
                    hooks = self._before_hooks(state, phase, step)
                    step = await (_watched(state, hooks) if state.watched else hooks)
            finally:
                phase.close()
        except BaseException as exc:
            step = _stopped(state, exc, None)
        return _prepared(state, step)

    def _admitted(self, state: CallState, phase: Phase | NoPhase) -> Allowed | Outcome:
        """The before phase up to its hooks: resolve the tool and validate the arguments. The
        call ends here (unknown tool, invalid arguments, cancelled) or goes on with its
        validated arguments (to its before-hooks, when any apply)."""
        call = state.call
        tool = state.tool
        if tool is None:
            name = str(call.name)
            message = str(state.tools.not_found(call.name))
            if name and name in message:  # the model chose the name: scrubbed as one
                message = message.replace(name, self.scrubber.redact_identifier(name)[0])
            return refused(state, phase, A.ERR_TOOL_NOT_FOUND, message)
        try:
            raw = call.arguments
            if tool.prepare_arguments is not None:
                raw, changed = prepared_arguments(tool, raw)
                phase.event(A.EVENT_PREPARE_ARGUMENTS, {A.ARGUMENTS_PREPARED: changed})
            args = tool.validate(raw)
        except InvalidArguments as exc:
            message = f"invalid arguments for tool {tool.name!r}: {exc}"
            return refused(state, phase, A.ERR_INVALID_ARGUMENTS, message)
        signal = state.made_signal
        if signal is not None and signal.reason is not None and not state.hooks.before:
            return _cancelled(state, phase, None, args, False)
        return _made(Allowed, (state, tool, args, False, None, None))

    async def _before_hooks(
        self, state: CallState, phase: Phase | NoPhase, admitted: Allowed, edits: int = 0
    ) -> Allowed | Outcome | Deferral:
        """The before-hooks: allow (with the arguments as they leave them, approved when a hook
        asked), defer or end. ``edits`` counts the approver's edits of this call so far."""
        tool, args = admitted.tool, admitted.arguments
        signal = state.signal
        ctx = BeforeToolCallContext(
            state.call,
            readonly_args(args),
            tool.spec,
            state.assistant_message,
            state.context,
            signal,
        )
        verdict = await run_before_chain(state.hooks.before, ctx, args, tool.validate, signal)
        self._hooks_ran(state, phase, verdict.runs)
        if isinstance(verdict, Blocked):
            return blocked(state, self.scrubber, phase, verdict)
        if isinstance(verdict, Interrupted) or signal.reason is not None:
            return _cancelled(state, phase, None, verdict.args, verdict.rewritten)
        rewritten = verdict.rewritten or admitted.rewritten
        deciding = verdict.deciding_hook or admitted.deciding_hook
        if isinstance(verdict, Held) and state.deferrable:
            return self.approvals.deferred(state, phase, tool.name, verdict, rewritten)
        if isinstance(verdict, (Asked, Held)):
            again = self._before_hooks
            return await self.approvals.asked(state, phase, admitted, verdict, edits, again)
        return Allowed(state, tool, verdict.args, rewritten, deciding)

    def _run(
        self, allowed: Allowed, phase: Phase | NoPhase
    ) -> tuple[ToolResult, str | None] | Coroutine[Any, Any, ToolResult]:
        """Start the handler (``registry.start``) in the ``run`` phase: the result (scrubbed)
        and the error type when it failed, or when the handler's value is still to come, the
        coroutine that awaits it within its bound and finishes the call
        (:meth:`_finish_later`). Whatever the handler raises becomes an error result."""
        state, tool = allowed.state, allowed.tool
        signal = state.made_signal
        if signal is not None and signal.reason is not None:  # stopped since its before phase
            return _run_cancelled(allowed, phase)
        call = state.call
        options = state.options
        override = options.get("timeout")
        plan = state.plan
        assert plan is not None  # the tool is known
        bound = plan.bound
        if bound is None or override is not None:  # the caller's or the model's bound
            bound = call_bound(override, allowed.arguments, tool, self.tool_timeout)
        timeout, in_thread = bound
        hears = options.get("on_update") is not None or phase.hears_progress  # anyone listening
        try:
            value = state.tools.start(
                tool,
                allowed.arguments,
                call.id,
                state.signal if tool.context_param else signal,  # made only for a ToolContext
                phase.reporter(call, options.get("on_update")) if hears else None,
                state.trace.set_attributes if tool.context_param else None,
                in_thread,
            )
            if isinstance(value, CoroutineType):  # the value is still to come
                return self._finish_later(allowed, None, value, timeout)
            result = (  # a string, the common value, as as_result makes it
                ToolResult(call.id, call.name, value)
                if type(value) is str
                else as_result(call, value)
            )
            return (state.trace.for_model(result) if self._scrubs else result), None
        except (Exception, asyncio.CancelledError) as exc:
            return _run_failed(allowed, phase, None, timeout, exc)

    def _after_verdict(
        self,
        allowed: Allowed,
        phase: Phase | NoPhase,
        verdict: AfterVerdict | Interrupted,
        error_type: str | None,
    ) -> Outcome:
        """What the after-hooks decided: keep the result or override it."""
        state = allowed.state
        self._hooks_ran(state, phase, verdict.runs)
        if isinstance(verdict, Interrupted):
            return _cancelled(state, phase, A.DECISION_ALLOW, allowed.arguments, allowed.rewritten)
        if verdict.failure is not None:
            error_type = verdict.failure.error_type
            phase.fail(error_type, str(verdict.failure))
            return _ran(allowed, state.trace.for_model(verdict.result), error_type, True)
        return _ran(allowed, verdict.result, error_type, verdict.overridden)

    # -- helpers ------------------------------------------------------------------------------

    def _begin(
        self,
        call: ToolCall,
        parent: otel_context.Context | None,
        links: Sequence[Link] | None,
        options: CallOptions,
    ) -> CallState:
        """Resolve the call's tool and plan, and start its trace."""
        tools = options.get("tools")
        if tools is None:
            tools = self.registry
        name = call.name
        tool = tools.get(name) if isinstance(name, str) else None
        chain = options.get("hooks")
        if chain is None:
            own = self.hooks
            chain = own.chain if isinstance(own, Hooks) else own
        if chain.requiring_scrubber:
            chain.check_scrubber(self.scrubber is not NO_SCRUBBING)
        if tool is not None:
            plan = self.plans.plan(chain, tool, self.tool_timeout)
            hooks = plan.hooks
        else:  # an unknown tool: only observers take part
            plan = None
            observers = chain.for_tool(str(name)).observers if chain.hooks else ()
            hooks = PhaseHooks((), (), observers) if observers else NO_HOOKS
        return CallState(
            call,
            tool,
            plan,
            hooks,
            self.recorder.start(call, plan, parent, links),
            options.get("signal"),
            tools,
            options,
        )

    def _hooks_ran(
        self, state: CallState, phase: Phase | NoPhase, runs: tuple[HookRun, ...]
    ) -> None:
        """Each hook's part goes on the phase's span; each failure is also logged."""
        for run in runs:
            if run.failure is not None:
                report_hook_failure(state.call, run.failure, self.scrubber)
        phase.hooks(runs)


def _skipped(state: CallState, reason: str, args: Mapping[str, Any]) -> ToolResult:
    """End the call without running it (``decision=skip``): an error result with ``reason``."""
    result = state.trace.for_model(error_result(state.call, reason))
    return end_call(state, Outcome(result, A.DECISION_SKIP, arguments=args)).result


def _stopped(state: CallState, exc: BaseException, allowed: Allowed | None) -> Outcome:
    """What stops a phase from outside the code it runs, said once: a cancellation from
    outside is recorded and goes on; one of the call's signal ends it as cancelled; any
    other exception is the runtime's own fault (an error result naming its type only), and
    ``KeyboardInterrupt`` or ``SystemExit`` go on after it was recorded."""
    decision: Decision | None = A.DECISION_ALLOW if allowed is not None else None
    args = allowed.arguments if allowed is not None else NO_ARGUMENTS
    rewritten = allowed is not None and allowed.rewritten
    if isinstance(exc, asyncio.CancelledError):
        source = cancelled_by(state.signal)
        if source == "signal":
            return _cancelled(state, _NO_PHASE, decision, args, rewritten)
        if source == "outside":
            result = error_result(state.call, "error: cancelled")
            cancelled = Outcome(result, decision, A.ERR_CANCELLED, None, None, rewritten, args)
            end_call(state, cancelled)
            raise exc
    result = error_result(
        state.call, f"error: the tool call failed inside otelhooks ({type(exc).__name__})"
    )
    failed = type(exc).__qualname__
    outcome = Outcome(result, decision, failed, None, None, rewritten, args, failure=exc)
    if not isinstance(exc, Exception):
        end_call(state, outcome)
        raise exc
    return outcome


def _after_chain(
    allowed: Allowed, result: ToolResult
) -> Coroutine[Any, Any, AfterVerdict | Interrupted]:
    """The after-hooks of a call that ran, to be awaited: each sees the result (as overridden
    so far) and a read-only view of the arguments."""
    state = allowed.state
    signal = state.signal
    ctx = AfterToolCallContext(
        state.call,
        readonly_args(allowed.arguments),
        allowed.tool.spec,
        state.assistant_message,
        state.context,
        signal,
        result,
        result.is_error,
    )
    return run_after_chain(state.hooks.after, ctx, signal, state.trace.for_model_override)


async def _watched(state: CallState, phases: Coroutine[Any, Any, _T]) -> _T:
    """``phases`` awaited while the caller's signal may cancel this task."""
    with state.signal.watching():
        return await phases


def _run_failed(
    allowed: Allowed,
    phase: Phase | NoPhase,
    limit: Deadline | None,
    timeout: float | None,
    exc: BaseException,
) -> tuple[ToolResult, str]:
    """The handler raised ``exc``, or its bound ``limit`` (``None``: none yet) expired, or
    a cancellation reached it: an error result, or the cancellation goes on when it came
    from outside."""
    state = allowed.state
    if isinstance(exc, TimeoutError) and limit is not None and limit.expired:
        message = f"tool {allowed.tool.name!r} timed out after {timeout}s"
        phase.fail(A.ERR_TOOL_TIMEOUT, message)
        result = state.trace.for_model(error_result(state.call, f"error: {message}"))
        return result, A.ERR_TOOL_TIMEOUT
    if isinstance(exc, asyncio.CancelledError):
        source = cancelled_by(state.signal)
        if source == "outside":
            raise exc
        if source == "signal":
            return _run_cancelled(allowed, phase)
    return _raised(state, phase, exc)  # the handler raised it itself


def _cancelled(
    state: CallState,
    phase: Phase | NoPhase,
    decision: Decision | None,
    args: Mapping[str, Any],
    rewritten: bool,
) -> Outcome:
    """The run's signal stopped the call: an error result saying why."""
    reason = state.signal.reason or "cancelled"
    phase.cancelled(reason)
    result = state.trace.for_model(error_result(state.call, f"error: cancelled: {reason}"))
    return Outcome(result, decision, A.ERR_CANCELLED, None, None, rewritten, args)


def _run_cancelled(allowed: Allowed, phase: Phase | NoPhase) -> tuple[ToolResult, str]:
    """The run's signal stopped the handler (or stopped the call before it started)."""
    args, rewritten = allowed.arguments, allowed.rewritten
    return _cancelled(allowed.state, phase, A.DECISION_ALLOW, args, rewritten).result, (
        A.ERR_CANCELLED
    )


def _raised(state: CallState, phase: Phase | NoPhase, exc: BaseException) -> tuple[ToolResult, str]:
    """The handler raised ``exc``: an error result with its message (scrubbed)."""
    error_type = getattr(exc, "error_type", None) or type(exc).__qualname__
    result = state.trace.for_model(error_result(state.call, error_text(exc)))
    phase.raised(exc, error_type, result.content)
    return result, error_type


def _prepared(state: CallState, step: Allowed | Outcome | Deferral) -> Prepared:
    """What the before phase's ``step`` makes of the call: allowed, or ended (deferred)."""
    if isinstance(step, Allowed):
        return step
    if isinstance(step, Deferral):
        ended = end_call(state, step.outcome)
        return Deferred(ended.call, ended.outcome, ended.duration_ms, step.request)
    return end_call(state, step)


def _ran(
    allowed: Allowed, result: ToolResult, error_type: str | None, overridden: bool | None
) -> Outcome:
    """The outcome of a call that ran: allowed, failed when the handler or an after-hook made
    it fail or the result says it is an error."""
    if result.is_error and error_type is None:
        error_type = A.ERR_TOOL_ERROR  # the tool (or an after-hook) said it failed
    approval = allowed.approval
    if approval is not None:
        verdict: BeforeAction | None = approval.asked
        policies = approval.policies
    else:
        verdict = "allow" if allowed.state.hooks.before else None
        policies = ()
    return _made(
        Outcome,
        (
            result,
            A.DECISION_ALLOW,
            error_type,
            allowed.deciding_hook,
            None,
            allowed.rewritten,
            allowed.arguments,
            overridden,
            None,
            verdict,
            policies,
            approval,
        ),
    )
