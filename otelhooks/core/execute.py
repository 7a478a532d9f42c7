"""One tool call as a straight line, before -> run -> after, traced from outside.

:class:`ToolExecutor` resolves the tool, validates the arguments, runs the before-hooks, asks the
registry to run the handler, runs the after-hooks and returns a :class:`ToolResult`. It never
raises for a bad call: unknown tools, invalid arguments, hooks and handlers that raise or hang all
end as error results. Only ``asyncio.CancelledError`` from outside passes through, after every span
of the call has ended.

The span tree of one call (recorded by :mod:`otelhooks.core.tool_span`)::

    execute_tool {tool}          gen_ai.* attributes, otelhooks.decision, error.type
      before                     validation and the before-hooks (one event per hook)
      run                        the handler (absent when the call was blocked or invalid)
      after                      the after-hooks (present whenever run is, hooks or not)
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypedDict, Unpack

from opentelemetry import context as otel_context
from opentelemetry import metrics
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import Link, TracerProvider

from ..telemetry import attributes as A
from ..telemetry.content import Capture, capture_from_env, parse_capture
from ..telemetry.instruments import Instruments
from .cancel import CancelSignal
from .chain import (
    BeforeOutcome,
    HookRun,
    readonly_args,
    report_hook_failure,
    run_after_chain,
    run_before_chain,
)
from .deadline import bounded
from .handler import as_result, bound, collect, error_result, error_text, run_unobserved
from .hooks import (
    NO_HOOKS,
    AfterToolCallContext,
    BeforeToolCallContext,
    HookChain,
    Hooks,
    PhaseHooks,
    ToolCallRecord,
)
from .messages import AgentContext, AssistantMessage, ToolCall, ToolResult
from .tool_span import DEFAULT_TOOL_CONTENT_LENGTH, CallTrace, Phase, ToolCallRecorder
from .tools import InvalidArguments, Tool, ToolRegistry, decode_arguments

UpdateCallback = Callable[[ToolCall, Any], None]

_EMPTY_CONTEXT = AgentContext()
_NOT_WATCHED = contextlib.nullcontext()

DEFAULT_TOOL_TIMEOUT: float = 180.0
"""Seconds a tool call may run when neither the tool nor the call sets a timeout (Pi's default)."""


class CallOptions(TypedDict, total=False):
    """What :meth:`ToolExecutor.execute` and :meth:`ToolExecutor.prepare` accept besides the
    call; every key is optional."""

    assistant_message: AssistantMessage | None
    """The message that asked for the call (hooks see it)."""
    context: AgentContext | None
    """The run's snapshot (hooks see it)."""
    signal: CancelSignal | None
    """The run's cancellation signal: cancelling it stops the call."""
    on_update: UpdateCallback | None
    """Called with each progress update the tool reports."""
    hooks: HookChain | None
    """The hooks of this call (default: the executor's, as they are now)."""
    timeout: float | None
    """Seconds this call may run, replacing the tool's and the executor's; ``0`` disables."""


@dataclass(slots=True)
class PreparedCall:
    """A call whose before phase is done. ``result`` is set when it ends there (blocked, unknown
    tool, invalid arguments, skipped); otherwise :meth:`ToolExecutor.finish` runs it."""

    call: ToolCall
    trace: CallTrace
    hooks: PhaseHooks
    chain: HookChain
    context: AgentContext
    signal: CancelSignal
    tool: Tool | None = None
    assistant_message: AssistantMessage | None = None
    on_update: UpdateCallback | None = None
    watched: bool = False  # a caller's signal: it may cancel this call's task
    timeout: float | None = None  # the caller's per-call override (0 disables)
    args: Mapping[str, Any] = field(default_factory=dict)
    rewritten: bool = False
    deciding_hook: str | None = None
    result: ToolResult | None = None
    decision: str | None = None
    block_reason: str | None = None
    overridden: bool | None = None  # set when after-hooks ran
    error_type: str | None = None


class ToolExecutor:
    """Executes tool calls through the hook boundary and traces each one.

    ``tracer_provider`` defaults to the global one. Content (arguments and results) goes on spans
    when ``capture_content`` says so (``True``, a :class:`~otelhooks.telemetry.content.Capture`
    mode, or by default the standard environment variable), scrubbed by the hooks' redaction and
    then cut to ``max_content_length`` characters. ``tool_timeout`` (seconds, default
    :data:`DEFAULT_TOOL_TIMEOUT`; ``None`` disables it) bounds tools that set no timeout of their
    own; it applies to async handlers and to handlers that run in a worker thread (a sync handler
    running inline holds the event loop, so no timer could fire). ``recorder`` records the calls
    (executors may share one: the agent's turns do); when given, it decides the tracer, content
    capture and instruments.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        hooks: Hooks | HookChain | None = None,
        *,
        tracer_provider: TracerProvider | None = None,
        capture_content: bool | str | Capture | None = None,
        max_content_length: int = DEFAULT_TOOL_CONTENT_LENGTH,
        tool_timeout: float | None = DEFAULT_TOOL_TIMEOUT,
        meter_provider: MeterProvider | None = None,
        instruments: Instruments | None = None,
        recorder: ToolCallRecorder | None = None,
    ) -> None:
        self.registry = registry
        self.hooks = hooks if hooks is not None else Hooks()
        self.capture = (
            capture_from_env() if capture_content is None else parse_capture(capture_content)
        )
        self.tool_timeout = tool_timeout
        self.recorder = recorder or ToolCallRecorder(
            tracer_provider,
            capture=self.capture,
            max_content_length=max_content_length,
            instruments=instruments or Instruments(meter_provider),
        )
        # Nothing would record a call: no tracer that records, no meter provider.
        self._unobserved = self.recorder.tracing_off and not (
            meter_provider is not None or _live_meter_provider()
        )
        # The tools found plain (see _plain_tool) under one hook chain and registry generation;
        # a registry of another class (which may look tools up its own way) is never cached.
        self._plain: dict[str, Tool] = {}
        self._plain_chain: HookChain | None = None
        self._plain_generation = -1
        self._cache_plain = type(registry) is ToolRegistry

    # -- public entry points ------------------------------------------------------------------

    def execute(
        self, call: ToolCall, **options: Unpack[CallOptions]
    ) -> Coroutine[Any, Any, ToolResult]:
        """Run one call through before -> run -> after: a coroutine that returns its result
        (``await executor.execute(call)``)."""
        if self._unobserved:
            if not options:
                name = call.name
                own = self.hooks
                tool: Tool | None
                if (
                    type(name) is str
                    and name in self._plain
                    and (own._chain if type(own) is Hooks else own) is self._plain_chain
                    and self.registry.generation == self._plain_generation
                ):
                    tool = self._plain[name]
                else:
                    tool = self._plain_tool(call, None)
            elif options.get("signal") is None and options.get("on_update") is None:
                tool = self._plain_tool(call, options.get("hooks"))
            else:
                tool = None
            if tool is not None:  # the coroutine of the call itself: no layer around it
                return run_unobserved(
                    self.registry, call, tool, options.get("timeout"), self.tool_timeout
                )
        return self._execute(call, options)

    async def _execute(self, call: ToolCall, options: CallOptions) -> ToolResult:
        return await self.finish(await self.prepare(call, **options))

    async def prepare(
        self,
        call: ToolCall,
        *,
        parent: otel_context.Context | None = None,
        links: Sequence[Link] | None = None,
        **options: Unpack[CallOptions],
    ) -> PreparedCall:
        """Start the call's span and run its before phase (validation and before-hooks).

        ``parent`` is the context the tool span is created under (default: the current one);
        ``links`` link it to other spans (the loop links the ``chat`` span that asked for it).
        """
        p = self._start(
            call,
            parent,
            links,
            options.get("hooks"),
            options.get("context"),
            options.get("signal"),
        )
        p.assistant_message = options.get("assistant_message")
        p.on_update, p.timeout = options.get("on_update"), options.get("timeout")
        try:
            with p.signal.watching() if p.watched else _NOT_WATCHED:
                await self._before(p)
        except asyncio.CancelledError:
            p.trace.end_cancelled()
            raise
        except Exception as exc:  # a bug in the runtime itself: an error result, never a raise
            self._failed_inside(p, exc)
        except BaseException as exc:  # KeyboardInterrupt, SystemExit: end the span, then go
            self._failed_inside(p, exc)
            raise
        else:
            if p.result is not None:
                self._end(p)
        return p

    async def finish(self, prepared: PreparedCall) -> ToolResult:
        """Run the handler and after-hooks of a prepared call; end its span; return the result."""
        p = prepared
        if p.result is not None:
            return p.result
        try:
            with p.signal.watching() if p.watched else _NOT_WATCHED:
                result = await self._after(p, await self._run(p))
        except asyncio.CancelledError:
            p.trace.end_cancelled()
            raise
        except Exception as exc:
            return self._failed_inside(p, exc)
        except BaseException as exc:
            self._failed_inside(p, exc)
            raise
        p.result = result
        self._end(p)
        return result

    def skip(
        self,
        call: ToolCall,
        reason: str,
        *,
        parent: otel_context.Context | None = None,
        context: AgentContext | None = None,
        hooks: HookChain | None = None,
        links: Sequence[Link] | None = None,
    ) -> ToolResult:
        """End a call that will not run (``otelhooks.decision=skip``) with an error result."""
        return self.skip_prepared(self._start(call, parent, links, hooks, context, None), reason)

    def skip_prepared(self, prepared: PreparedCall, reason: str) -> ToolResult:
        """End a prepared call without running it (``otelhooks.decision=skip``): its span keeps
        the ``before`` child it has, and the result is an error result with ``reason``."""
        if prepared.result is not None:
            return prepared.result
        prepared.decision = A.DECISION_SKIP
        result = prepared.result = error_result(prepared.call, reason)
        self._end(prepared)
        return result

    # -- the three phases ---------------------------------------------------------------------

    async def _before(self, p: PreparedCall) -> None:
        """Resolve the tool, validate the arguments, run the before-hooks: allow or block."""
        with p.trace.phase(A.SPAN_BEFORE, current=bool(p.hooks.before)) as phase:
            tool = p.tool
            if tool is None:
                self._fail(p, phase, A.ERR_TOOL_NOT_FOUND, self.registry.not_found(p.call.name))
                return
            raw = p.call.arguments
            try:
                if tool.prepare_arguments is not None:
                    raw = self._prepared_arguments(tool, raw, phase)
                args = tool.validate(raw)
            except InvalidArguments as exc:
                message = f"invalid arguments for tool {tool.name!r}: {exc}"
                self._fail(p, phase, A.ERR_INVALID_ARGUMENTS, InvalidArguments(message))
                return
            p.args = args
            if p.hooks.before:
                ctx = BeforeToolCallContext(
                    p.call, readonly_args(args), tool.spec, p.assistant_message, p.context, p.signal
                )
                try:
                    outcome = await run_before_chain(p.hooks.before, ctx, args, tool.validate)
                except asyncio.CancelledError as exc:
                    if not p.signal.absorbs(exc):
                        raise
                    self._cancelled(p, phase)
                    return
                self._hooks_ran(p, phase, outcome.runs)
                self._decide(p, phase, outcome)
            else:
                p.decision = A.DECISION_ALLOW
            if p.signal.cancelled and p.result is None:
                self._cancelled(p, phase)

    async def _run(self, p: PreparedCall) -> ToolResult:
        """Run the handler; whatever it raises becomes an error result."""
        tool = p.tool
        assert tool is not None
        with p.trace.phase(A.SPAN_RUN, current=True) as phase:
            timeout, in_thread = bound(p.timeout, p.args, tool, self.tool_timeout)
            try:
                value = await bounded(self._invoke(p, tool, phase, in_thread), timeout)
                return as_result(p.call, value)
            except TimeoutError:
                p.error_type = A.ERR_TOOL_TIMEOUT
                message = f"tool {tool.name!r} timed out after {timeout}s"
                phase.fail(A.ERR_TOOL_TIMEOUT, message)
                return error_result(p.call, f"error: {message}")
            except asyncio.CancelledError as exc:
                if not p.signal.absorbs(exc):
                    raise
                return self._cancelled(p, phase)
            except Exception as exc:
                p.error_type = getattr(exc, "error_type", None) or type(exc).__qualname__
                phase.raised(exc, p.error_type, error_text(exc))
                return error_result(p.call, error_text(exc))

    async def _after(self, p: PreparedCall, result: ToolResult) -> ToolResult:
        """Run the after-hooks: keep the result or override it. Always a span (the contract:
        before, run, after), hooks or not."""
        with p.trace.phase(A.SPAN_AFTER, current=bool(p.hooks.after)) as phase:
            if not p.hooks.after:
                return result
            tool = p.tool
            assert tool is not None
            ctx = AfterToolCallContext(
                p.call,
                readonly_args(p.args),
                tool.spec,
                p.assistant_message,
                p.context,
                p.signal,
                result,
                result.is_error,
            )
            try:
                outcome = await run_after_chain(p.hooks.after, ctx)
            except asyncio.CancelledError as exc:
                if not p.signal.absorbs(exc):
                    raise
                return self._cancelled(p, phase)
            self._hooks_ran(p, phase, outcome.runs)
            if outcome.failure is not None:
                p.error_type = outcome.failure.error_type
                phase.fail(outcome.failure.error_type, str(outcome.failure))
            p.overridden = outcome.overridden
            if outcome.changed_after_scrub:  # redaction holds whatever later hooks did
                return p.chain.scrub_result(outcome.result)
            return outcome.result

    # -- what the phases decide ---------------------------------------------------------------

    def _decide(self, p: PreparedCall, phase: Phase, outcome: BeforeOutcome) -> None:
        p.args, p.rewritten = outcome.args, outcome.rewritten
        p.deciding_hook = outcome.deciding_hook
        if not outcome.blocked:
            p.decision = A.DECISION_ALLOW
            return
        reason = p.chain.scrub(outcome.reason)
        p.decision, p.block_reason = A.DECISION_BLOCK, reason
        p.result = ToolResult(
            p.call.id, p.call.name, f"blocked: {reason}", None, True, outcome.terminate
        )
        if outcome.failure is not None:
            p.error_type = outcome.failure.error_type
            phase.fail(outcome.failure.error_type, str(outcome.failure))

    def _fail(self, p: PreparedCall, phase: Phase, error_type: str, exc: Exception) -> None:
        """The call ends in its before phase with an error (unknown tool, invalid arguments)."""
        p.error_type = error_type
        message = str(exc)
        name = p.call.name
        if isinstance(name, str) and name and name in message:  # an unknown tool's name
            message = message.replace(name, p.chain.scrub_identifier(name))
        p.result = error_result(p.call, p.chain.scrub(f"error: {message}"))
        phase.fail(error_type, message)

    def _cancelled(self, p: PreparedCall, phase: Phase) -> ToolResult:
        """The run's signal stopped the call: an error result saying why."""
        p.error_type = A.ERR_CANCELLED
        reason = p.signal.reason or "cancelled"
        phase.cancelled(reason)
        p.result = error_result(p.call, f"error: cancelled: {reason}")
        return p.result

    def _hooks_ran(self, p: PreparedCall, phase: Phase, runs: list[HookRun]) -> None:
        """Each hook's part goes on the phase's span; each failure is also logged."""
        for run in runs:
            if run.failure is not None:
                report_hook_failure(p.call, run.failure, p.chain.scrub)
        phase.hooks(runs)

    def _end(self, p: PreparedCall) -> None:
        """The call's outcome: on its span, to the observers, in the metrics."""
        result = p.result
        assert result is not None
        if result.is_error and p.error_type is None and p.decision == A.DECISION_ALLOW:
            p.error_type = A.ERR_TOOL_ERROR  # the tool (or an after-hook) said it failed
        record = ToolCallRecord(
            tool_call=p.call,
            tool_name=str(p.call.name),
            result=result,
            decision=p.decision,  # type: ignore[arg-type]
            deciding_hook=p.deciding_hook,
            block_reason=p.block_reason,
            arguments_rewritten=p.rewritten,
            error_type=p.error_type,
            duration_ms=p.trace.elapsed_ms(),
            arguments=MappingProxyType(p.args) if isinstance(p.args, dict) else p.args,
        )
        if p.hooks.observers:
            self._notify(p, record)
        p.trace.end(record, tool_known=p.tool is not None, overridden=p.overridden, args=p.args)

    def _notify(self, p: PreparedCall, record: ToolCallRecord) -> None:
        """Observers see the record while the call's span is current; one that raises (or is
        async) is recorded on the span and ignored."""
        token = otel_context.attach(p.trace.context)
        try:
            for hook in p.hooks.observers:
                assert hook.observe is not None
                try:
                    value = hook.observe(record)
                    if value is not None and inspect.isawaitable(value):  # observers are sync
                        close = getattr(value, "close", None)
                        if close is not None:
                            close()
                        raise TypeError("on_tool_call_end must not be async")
                except Exception as exc:
                    p.trace.observer_failed(exc, hook.name)
        finally:
            otel_context.detach(token)

    def _failed_inside(self, p: PreparedCall, exc: BaseException) -> ToolResult:
        """End a call that the runtime itself failed: the span records it, the model gets an
        error result (the exception's type only), the caller carries on."""
        p.trace.end_failed(exc)
        p.result = error_result(
            p.call, f"error: the tool call failed inside otelhooks ({type(exc).__name__})"
        )
        return p.result

    # -- helpers ------------------------------------------------------------------------------

    def _chain(self, hooks: HookChain | None) -> HookChain:
        if hooks is not None:
            return hooks
        own = self.hooks
        if type(own) is Hooks and own._chain is not None:
            return own._chain  # its snapshot, cached until the hooks change
        return own.snapshot() if isinstance(own, Hooks) else own

    def _start(
        self,
        call: ToolCall,
        parent: otel_context.Context | None,
        links: Sequence[Link] | None,
        hooks: HookChain | None,
        context: AgentContext | None,
        signal: CancelSignal | None,
    ) -> PreparedCall:
        """Start the call's span and gather what its phases use."""
        tool = self.registry.get(call.name) if isinstance(call.name, str) else None
        chain = self._chain(hooks)
        phase_hooks = chain.for_tool(call.name if tool is not None else str(call.name))
        if tool is None and (phase_hooks.before or phase_hooks.after):
            phase_hooks = PhaseHooks((), (), phase_hooks.observers)  # observers only
        return PreparedCall(
            call=call,
            trace=self.recorder.start(call, tool, parent, links, chain.scrub),
            hooks=phase_hooks,
            chain=chain,
            context=context or _EMPTY_CONTEXT,
            signal=signal or CancelSignal(),
            tool=tool,
            watched=signal is not None,
        )

    def _prepared_arguments(
        self, tool: Tool, arguments: Mapping[str, Any] | str, phase: Phase
    ) -> Mapping[str, Any] | str:
        """The call's raw arguments after the tool's ``prepare_arguments``."""
        prepare = tool.prepare_arguments
        assert prepare is not None
        raw = decode_arguments(arguments)
        try:
            prepared = prepare(dict(raw))
        except Exception as exc:
            raise InvalidArguments(
                f"prepare_arguments failed ({type(exc).__name__}: {exc})"
            ) from None
        phase.event(A.EVENT_PREPARE_ARGUMENTS, {A.ARGUMENTS_PREPARED: prepared != raw})
        if not isinstance(prepared, (Mapping, str)):
            raise InvalidArguments(
                f"prepare_arguments returned {type(prepared).__name__}, not a mapping"
            )
        return prepared

    async def _invoke(self, p: PreparedCall, tool: Tool, phase: Phase, in_thread: bool) -> Any:
        """The handler's value; a generator's items are reported as progress."""
        on_progress = self._progress(p, phase) if tool._context_param else None
        value = await self.registry.run(
            tool,
            p.args,
            tool_call_id=p.call.id,
            signal=p.signal,
            on_progress=on_progress,
            on_attributes=p.trace.set_attributes if tool._context_param else None,
            in_thread=in_thread,
        )
        if type(value) is not str and (inspect.isgenerator(value) or inspect.isasyncgen(value)):
            value = await collect(value, on_progress or self._progress(p, phase))
        return value

    def _progress(self, p: PreparedCall, phase: Phase) -> Callable[[Any], None]:
        """What a tool's ``ToolContext.progress`` calls: a span event and the loop's update."""
        count = 0

        def on_progress(update: Any) -> None:
            nonlocal count
            count += 1
            phase.progress(count, update)
            if p.on_update is not None:
                try:
                    p.on_update(p.call, update)
                except Exception as exc:  # a consumer's bug must not fail the tool
                    phase.callback_failed(exc)

        return on_progress

    # -- a call nothing observes --------------------------------------------------------------

    def _plain_tool(self, call: ToolCall, hooks: HookChain | None) -> Tool | None:
        """The tool of a call that needs none of the traced path: registered, no hook applies,
        no argument preparation, no context parameter."""
        name = call.name
        tool = self.registry.get(name) if type(name) is str else None
        if tool is None or tool.prepare_arguments is not None or tool._context_param:
            return None
        chain = self._chain(hooks)
        if chain.for_tool(name) is not NO_HOOKS:
            return None
        if hooks is None and self._cache_plain:
            generation = self.registry.generation
            if chain is not self._plain_chain or generation != self._plain_generation:
                self._plain.clear()
                self._plain_chain, self._plain_generation = chain, generation
            if len(self._plain) < 4096:  # bounded: names come from the model
                self._plain[name] = tool
        return tool


def _live_meter_provider() -> bool:
    """Whether a meter provider that records was set globally."""
    provider = metrics.get_meter_provider()
    return type(provider).__name__ not in ("_ProxyMeterProvider", "NoOpMeterProvider")
