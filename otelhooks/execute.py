"""One tool call as a straight line, before -> run -> after, traced from outside.

:class:`ToolExecutor` resolves the tool, validates the arguments, runs the before-hooks, asks the
registry to run the handler, runs the after-hooks and returns a :class:`ToolResult`. It never
raises for a bad call: unknown tools, invalid arguments, hooks and handlers that raise or hang all
end as error results. Only ``asyncio.CancelledError`` from outside passes through, after every span
of the call has ended.

The span tree of one call::

    execute_tool {tool}          gen_ai.* attributes, otelhooks.decision, error.type
      before                     validation and the before-hooks (one event per hook)
      run                        the handler (absent when the call was blocked or invalid)
      after                      the after-hooks (present whenever run is, hooks or not)
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import (
    Link,
    NoOpTracer,
    ProxyTracer,
    Span,
    SpanKind,
    Status,
    StatusCode,
    TracerProvider,
)

from . import attributes as A
from .cancel import CancelSignal
from .content import Capture, cap_text, capture_from_env, parse_capture, to_json_text
from .hooks import (
    AfterToolCallContext,
    BeforeOutcome,
    BeforeToolCallContext,
    HookChain,
    HookRun,
    Hooks,
    PhaseHooks,
    ToolCallRecord,
    readonly_args,
    report_hook_failure,
    run_after_chain,
    run_before_chain,
)
from .messages import AgentContext, AssistantMessage, ToolCall, ToolResult
from .metrics import Instruments
from .tools import InvalidArguments, Tool, ToolOutput, ToolRegistry, decode_arguments
from .version import __version__

UpdateCallback = Callable[[ToolCall, Any], None]

_EMPTY_CONTEXT = AgentContext()
_NOT_WATCHED = contextlib.nullcontext()
_MAX_NAME_ATTR = 200  # plus the cut's marker: under 256 characters
_MAX_STATUS = 200

DEFAULT_TOOL_TIMEOUT: float = 180.0
"""Seconds a tool call may run when neither the tool nor the call sets a timeout (Pi's default)."""

TIMEOUT_ARGUMENT = "timeout"
"""A tool whose parameters include a numeric ``timeout`` (seconds) lets each call set its own
bound, as in Pi: a positive number replaces the default for that call, ``0`` disables it."""


_UNWATCHED = CancelSignal()  # never cancelled: the signal of a call nobody can cancel
_PLAIN = frozenset({str, int, float, bool, dict, list, tuple, type(None), ToolOutput})


async def _collect(gen: Any) -> list[Any]:
    """A generator's items, as the result of a tool that returned it (nobody to report to)."""
    if inspect.isasyncgen(gen):
        return [item async for item in gen]
    items = []
    for item in gen:
        items.append(item)
        await asyncio.sleep(0)  # let timeouts and cancellation in between items
    return items


def _as_result(call: ToolCall, value: Any) -> ToolResult:
    """A handler's return value as the call's result."""
    name = call.name
    if type(value) is str:
        return ToolResult(call.id, name, value)
    if isinstance(value, ToolOutput):
        return ToolResult(
            call.id,
            name,
            value.content,
            value.details,
            value.is_error,
            value.terminate,
            value.media,
        )
    if isinstance(value, str):
        return ToolResult(call.id, name, value)
    if value is None:
        return ToolResult(call.id, name, "")
    return ToolResult(call.id, name, to_json_text(value), value)


def _live_meter_provider() -> bool:
    """Whether a meter provider that records was set globally."""
    provider = metrics.get_meter_provider()
    return type(provider).__name__ not in ("_ProxyMeterProvider", "NoOpMeterProvider")


def _error_text(exc: BaseException) -> str:
    message = str(exc)
    return f"error: {message}" if message else f"error: {type(exc).__name__}"


@dataclass(slots=True)
class PreparedCall:
    """A call whose before phase is done. ``result`` is set when it ends there (blocked, unknown
    tool, invalid arguments, skipped); otherwise :meth:`ToolExecutor.finish` runs it."""

    call: ToolCall
    span: Span
    span_context: otel_context.Context
    start: float
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
    redacted: list[str] | None = None  # span attributes the hooks' redaction changed


class ToolExecutor:
    """Executes tool calls through the hook boundary and traces each one.

    ``tracer_provider`` defaults to the global one. Content (arguments and results) goes on spans
    when ``capture_content`` says so (``True``, a :class:`~otelhooks.content.Capture` mode, or by
    default the standard environment variable), scrubbed by the hooks' redaction and then cut to
    ``max_content_length`` characters. ``tool_timeout`` (seconds, default
    :data:`DEFAULT_TOOL_TIMEOUT`; ``None`` disables it) bounds tools that set no timeout of their
    own; it applies to async handlers and to handlers that run in a worker thread (a sync handler
    running inline holds the event loop, so no timer could fire).
    """

    def __init__(
        self,
        registry: ToolRegistry,
        hooks: Hooks | HookChain | None = None,
        *,
        tracer_provider: TracerProvider | None = None,
        capture_content: bool | str | Capture | None = None,
        max_content_length: int = 4096,
        tool_timeout: float | None = DEFAULT_TOOL_TIMEOUT,
        meter_provider: MeterProvider | None = None,
        instruments: Instruments | None = None,
    ) -> None:
        self.registry = registry
        self.hooks = hooks if hooks is not None else Hooks()
        self.tracer = trace.get_tracer("otelhooks", __version__, tracer_provider=tracer_provider)
        self.capture = (
            capture_from_env() if capture_content is None else parse_capture(capture_content)
        )
        self.capture_content = self.capture.on_span
        self.max_content_length = max_content_length
        self.tool_timeout = tool_timeout
        self._attr_cache: dict[str, tuple[Tool, str, dict[str, Any]]] = {}
        self._instruments = instruments or Instruments(meter_provider)
        self._metrics_live = meter_provider is not None or _live_meter_provider()

    # -- public entry points ------------------------------------------------------------------

    async def execute(
        self,
        call: ToolCall,
        *,
        assistant_message: AssistantMessage | None = None,
        context: AgentContext | None = None,
        signal: CancelSignal | None = None,
        on_update: UpdateCallback | None = None,
        hooks: HookChain | None = None,
        timeout: float | None = None,
    ) -> ToolResult:
        """Run one call through before -> run -> after and return its result.

        ``timeout`` (seconds) overrides the tool's and the executor's for this call; ``0``
        disables it.
        """
        if signal is None and on_update is None and self._tracing_off():
            chain = hooks if hooks is not None else self._chain()
            name = call.name
            tool = self.registry.get(name) if type(name) is str else None
            if tool is not None and tool.prepare_arguments is None and not tool._context_param:
                phase = chain.for_tool(name)
                if not (phase.before or phase.after or phase.observers):
                    return await self._untraced(call, tool, timeout)
        prepared = await self.prepare(
            call,
            assistant_message=assistant_message,
            context=context,
            signal=signal,
            on_update=on_update,
            hooks=hooks,
            timeout=timeout,
        )
        return await self.finish(prepared)

    async def prepare(
        self,
        call: ToolCall,
        *,
        assistant_message: AssistantMessage | None = None,
        context: AgentContext | None = None,
        signal: CancelSignal | None = None,
        on_update: UpdateCallback | None = None,
        hooks: HookChain | None = None,
        parent: otel_context.Context | None = None,
        links: Sequence[Link] | None = None,
        timeout: float | None = None,
    ) -> PreparedCall:
        """Start the call's span and run its before phase (validation and before-hooks).

        ``parent`` is the context the tool span is created under (default: the current one);
        ``links`` link it to other spans (the loop links the ``chat`` span that asked for it).
        """
        prepared = self._start(call, parent, links, hooks, context, signal)
        prepared.assistant_message = assistant_message
        prepared.on_update = on_update
        prepared.timeout = timeout
        try:
            with prepared.signal.watching() if prepared.watched else _NOT_WATCHED:
                await self._before(prepared)
        except asyncio.CancelledError:
            self._end_cancelled(prepared)
            raise
        except Exception as exc:  # a bug in the runtime itself: an error result, never a raise
            self._end_with_internal_error(prepared, exc)
        except BaseException as exc:  # KeyboardInterrupt, SystemExit: end the span, then go
            self._end_with_internal_error(prepared, exc)
            raise
        else:
            if prepared.result is not None:
                self._end(prepared)
        return prepared

    async def finish(self, prepared: PreparedCall) -> ToolResult:
        """Run the handler and after-hooks of a prepared call; end its span; return the result."""
        if prepared.result is not None:
            return prepared.result
        try:
            with prepared.signal.watching() if prepared.watched else _NOT_WATCHED:
                result = await self._run(prepared)
                result = await self._after(prepared, result)
        except asyncio.CancelledError:
            self._end_cancelled(prepared)
            raise
        except Exception as exc:
            return self._end_with_internal_error(prepared, exc)
        except BaseException as exc:
            self._end_with_internal_error(prepared, exc)
            raise
        prepared.result = result
        self._end(prepared)
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
        prepared = self._start(call, parent, links, hooks, context, None)
        return self.skip_prepared(prepared, reason)

    def skip_prepared(self, prepared: PreparedCall, reason: str) -> ToolResult:
        """End a prepared call without running it (``otelhooks.decision=skip``): its span keeps
        the ``before`` child it has, and the result is an error result with ``reason``."""
        if prepared.result is not None:
            return prepared.result
        prepared.decision = A.DECISION_SKIP
        result = prepared.result = ToolResult(
            prepared.call.id, str(prepared.call.name), reason, None, True
        )
        self._end(prepared)
        return result

    def _tracing_off(self) -> bool:
        """Whether this executor's tracer is the API's no-op one (no SDK, or SDK disabled), and
        no meter provider was set when it was made: then nothing would record a call."""
        if self._metrics_live:
            return False
        tracer = self.tracer
        if type(tracer) is NoOpTracer:
            return True
        return type(tracer) is ProxyTracer and type(tracer._tracer) is NoOpTracer

    async def _untraced(self, call: ToolCall, tool: Tool, timeout: float | None) -> ToolResult:
        """A call that nothing would record and no hook applies to: validation, the handler and
        the result, with the outcomes of the traced path (``_run``) and none of its span work."""
        try:
            args = tool.validate(call.arguments)
        except InvalidArguments as exc:
            message = f"error: invalid arguments for tool {tool.name!r}: {exc}"
            return ToolResult(call.id, tool.name, message, None, True)
        if tool.is_async or tool.blocking or tool.timeout is not None or timeout is not None:
            bound, in_thread = self._bound(timeout, args, tool)
        else:  # a plain sync tool (its timeout argument, if any, cannot start a thread)
            bound, in_thread = None, False
        try:
            if not (tool.is_async or in_thread):  # inline: no coroutine to make
                value = tool.call(args, tool_call_id=call.id, signal=_UNWATCHED)
                if type(value) not in _PLAIN and inspect.isawaitable(value):
                    value = await value
            elif bound is None:
                value = await self.registry.run(
                    tool, args, tool_call_id=call.id, signal=_UNWATCHED, in_thread=in_thread
                )
            else:
                async with asyncio.timeout(bound):
                    value = await self.registry.run(
                        tool, args, tool_call_id=call.id, signal=_UNWATCHED, in_thread=in_thread
                    )
            if type(value) is not str and (inspect.isgenerator(value) or inspect.isasyncgen(value)):
                value = await _collect(value)
        except TimeoutError:
            message = f"error: tool {tool.name!r} timed out after {bound}s"
            return ToolResult(call.id, tool.name, message, None, True)
        except Exception as exc:
            return ToolResult(call.id, tool.name, _error_text(exc), None, True)
        return _as_result(call, value)

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
        span_name, attrs = self._span_identity(call, tool)
        span = self.tracer.start_span(span_name, parent, SpanKind.INTERNAL, attrs, links)
        chain = hooks if hooks is not None else self._chain()
        phase_hooks = chain.for_tool(call.name if tool is not None else str(call.name))
        if tool is None and (phase_hooks.before or phase_hooks.after):
            phase_hooks = PhaseHooks((), (), phase_hooks.observers)  # observers only
        return PreparedCall(
            call=call,
            span=span,
            span_context=trace.set_span_in_context(span, parent),
            start=time.perf_counter(),
            hooks=phase_hooks,
            chain=chain,
            context=context or _EMPTY_CONTEXT,
            signal=signal or CancelSignal(),
            tool=tool,
            watched=signal is not None,
        )

    # -- phases -------------------------------------------------------------------------------

    async def _before(self, p: PreparedCall) -> None:
        span = self._phase_span(p, A.SPAN_BEFORE)
        try:
            if p.tool is None:
                self._fail_before(
                    p, span, A.ERR_TOOL_NOT_FOUND, self.registry.not_found(p.call.name)
                )
                return
            args: Mapping[str, Any]
            try:
                args = p.tool.validate(self._prepared_arguments(p.tool, p.call, span))
            except InvalidArguments as exc:
                exc = InvalidArguments(f"invalid arguments for tool {p.tool.name!r}: {exc}")
                self._fail_before(p, span, A.ERR_INVALID_ARGUMENTS, exc)
                return
            if p.hooks.before:
                token = otel_context.attach(self._phase_context(p, span))
                ctx = BeforeToolCallContext(
                    p.call,
                    readonly_args(args),
                    p.tool.spec,
                    p.assistant_message,
                    p.context,
                    p.signal,
                )
                try:
                    outcome = await run_before_chain(p.hooks.before, ctx, args, p.tool.validate)
                except asyncio.CancelledError as exc:
                    if p.signal.absorbs(exc):
                        self._cancelled_result(p, span)
                        return
                    raise
                finally:
                    otel_context.detach(token)
                self._record_runs(p, span, outcome.runs)
                args = outcome.args
                self._decide(p, span, outcome)
            else:
                p.decision = A.DECISION_ALLOW
            p.args = args
            if p.signal.cancelled and p.result is None:
                self._cancelled_result(p, span)
        finally:
            span.end()

    def _prepared_arguments(
        self, tool: Tool, call: ToolCall, span: Span
    ) -> Mapping[str, Any] | str:
        """The call's raw arguments after the tool's ``prepare_arguments`` (if any)."""
        prepare = tool.prepare_arguments
        if prepare is None:
            return call.arguments
        raw = decode_arguments(call.arguments)
        try:
            prepared = prepare(dict(raw))
        except Exception as exc:
            raise InvalidArguments(
                f"prepare_arguments failed ({type(exc).__name__}: {exc})"
            ) from None
        if span.is_recording():
            span.add_event(A.EVENT_PREPARE_ARGUMENTS, {A.ARGUMENTS_PREPARED: prepared != raw})
        if not isinstance(prepared, (Mapping, str)):
            raise InvalidArguments(
                f"prepare_arguments returned {type(prepared).__name__}, not a mapping"
            )
        return prepared

    def _decide(self, p: PreparedCall, span: Span, outcome: BeforeOutcome) -> None:
        p.rewritten, p.deciding_hook = outcome.rewritten, outcome.deciding_hook
        if outcome.blocked:
            reason = p.chain.scrub(outcome.reason)
            p.decision, p.block_reason = A.DECISION_BLOCK, reason
            p.result = ToolResult(
                p.call.id, p.call.name, f"blocked: {reason}", None, True, outcome.terminate
            )
            if outcome.failure is not None:
                p.error_type = outcome.failure.error_type
                if span.is_recording():
                    self._mark_error(span, outcome.failure.error_type, str(outcome.failure))
        else:
            p.decision = A.DECISION_ALLOW

    def _fail_before(self, p: PreparedCall, span: Span, error_type: str, exc: Exception) -> None:
        p.error_type = error_type
        p.result = ToolResult(
            p.call.id, str(p.call.name), p.chain.scrub(f"error: {exc}"), None, True
        )
        if span.is_recording():
            self._mark_error(span, error_type, str(exc))

    def _timeout(
        self, override: float | None, args: Mapping[str, Any], tool: Tool
    ) -> tuple[float | None, bool]:
        """The call's timeout, and whether it is the call's or the tool's own (not the
        executor-wide default): the caller's override, then a numeric ``timeout`` argument the
        tool declares, then the tool's, then the executor's. ``0`` disables."""
        if override is None and TIMEOUT_ARGUMENT in args:
            value = args[TIMEOUT_ARGUMENT]
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if number and math.isfinite(value) and value >= 0:
                override = float(value)
        if override is not None:
            return (override or None), True
        if tool.timeout is not None:
            return tool.timeout, True
        return self.tool_timeout, False

    def _bound(
        self, override: float | None, args: Mapping[str, Any], tool: Tool
    ) -> tuple[float | None, bool]:
        """The timeout a handler runs under, and whether it runs in a worker thread (a sync
        handler with a timeout of its own, or marked blocking: an inline one holds the loop, so
        no timer could fire)."""
        timeout, own = self._timeout(override, args, tool)
        in_thread = tool.blocking or (own and timeout is not None and not tool.is_async)
        return (timeout if tool.is_async or in_thread else None), in_thread

    async def _run(self, p: PreparedCall) -> ToolResult:
        tool = p.tool
        assert tool is not None
        span = self._phase_span(p, A.SPAN_RUN)
        token = otel_context.attach(self._phase_context(p, span))
        timeout, in_thread = self._bound(p.timeout, p.args, tool)
        on_progress = self._progress_callback(p, span) if tool._context_param else None
        on_attributes = p.span.set_attributes if tool._context_param else None
        try:
            try:
                if timeout is None:
                    value = await self._invoke(p, tool, span, on_progress, on_attributes, in_thread)
                else:
                    async with asyncio.timeout(timeout):
                        value = await self._invoke(
                            p, tool, span, on_progress, on_attributes, in_thread
                        )
                return _as_result(p.call, value)
            except TimeoutError:
                p.error_type = A.ERR_TOOL_TIMEOUT
                message = f"tool {tool.name!r} timed out after {timeout}s"
                if span.is_recording():
                    self._mark_error(span, A.ERR_TOOL_TIMEOUT, message)
                return ToolResult(p.call.id, tool.name, f"error: {message}", None, True)
            except asyncio.CancelledError as exc:
                if p.signal.absorbs(exc):
                    return self._cancelled_result(p, span)
                raise
            except Exception as exc:
                p.error_type = getattr(exc, "error_type", None) or type(exc).__qualname__
                if span.is_recording():
                    span.record_exception(exc)
                    span.set_status(Status(StatusCode.ERROR, _error_text(exc)))
                    span.set_attribute(A.ERROR_TYPE, p.error_type)
                extra = getattr(exc, "attributes", None)
                if extra and p.span.is_recording():
                    p.span.set_attributes(extra)
                return ToolResult(p.call.id, tool.name, _error_text(exc), None, True)
        finally:
            otel_context.detach(token)
            span.end()

    async def _invoke(
        self,
        p: PreparedCall,
        tool: Tool,
        span: Span,
        on_progress: Callable[[Any], None] | None,
        on_attributes: Callable[[Mapping[str, Any]], None] | None,
        in_thread: bool,
    ) -> Any:
        value = await self.registry.run(
            tool,
            p.args,
            tool_call_id=p.call.id,
            signal=p.signal,
            on_progress=on_progress,
            on_attributes=on_attributes,
            in_thread=in_thread,
        )
        if type(value) is not str and (inspect.isgenerator(value) or inspect.isasyncgen(value)):
            value = await self._drain(value, p, span)
        return value

    async def _after(self, p: PreparedCall, result: ToolResult) -> ToolResult:
        """The after phase: always a span (the contract: before, run, after), hooks or not."""
        span = self._phase_span(p, A.SPAN_AFTER)
        if not p.hooks.after:
            span.end()
            return result
        tool = p.tool
        assert tool is not None
        token = otel_context.attach(self._phase_context(p, span))
        try:
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
                if p.signal.absorbs(exc):
                    return self._cancelled_result(p, span)
                raise
            self._record_runs(p, span, outcome.runs)
            if outcome.failure is not None:
                p.error_type = outcome.failure.error_type
                if span.is_recording():
                    self._mark_error(span, outcome.failure.error_type, str(outcome.failure))
            p.overridden = outcome.overridden
            if outcome.changed_after_scrub:  # redaction holds whatever later hooks did
                return p.chain.scrub_result(outcome.result)
            return outcome.result
        finally:
            otel_context.detach(token)
            span.end()

    # -- helpers ------------------------------------------------------------------------------

    def _phase_span(self, p: PreparedCall, name: str) -> Span:
        """A child span of the call, or, when the call's span does not record (not sampled, or
        tracing off), no span at all: nothing of it could be exported."""
        if p.span.is_recording():
            return self.tracer.start_span(name, p.span_context)
        return trace.INVALID_SPAN

    def _phase_context(self, p: PreparedCall, span: Span) -> otel_context.Context:
        """The context code runs in during a phase: its span's, else the call's."""
        if span is trace.INVALID_SPAN:
            return p.span_context
        return trace.set_span_in_context(span, p.span_context)

    def _chain(self) -> HookChain:
        hooks = self.hooks
        return hooks.snapshot() if isinstance(hooks, Hooks) else hooks

    def _span_identity(self, call: ToolCall, tool: Tool | None) -> tuple[str, dict[str, Any]]:
        """The span name and the attributes of a call, the per-tool part built once."""
        if tool is not None:
            cached = self._attr_cache.get(tool.name)
            if cached is None or cached[0] is not tool:  # new, or re-registered under its name
                base: dict[str, Any] = {
                    A.GEN_AI_OPERATION_NAME: A.OP_EXECUTE_TOOL,
                    A.GEN_AI_TOOL_NAME: tool.name,
                    A.GEN_AI_TOOL_TYPE: A.TOOL_TYPE_FUNCTION,
                }
                if tool.description:
                    base[A.GEN_AI_TOOL_DESCRIPTION] = tool.description
                cached = (tool, f"{A.OP_EXECUTE_TOOL} {tool.name}", base)
                self._attr_cache[tool.name] = cached
            _, name, base = cached
            attrs = base.copy()
        else:
            name = A.UNKNOWN_TOOL_SPAN_NAME
            attrs = {
                A.GEN_AI_OPERATION_NAME: A.OP_EXECUTE_TOOL,
                A.GEN_AI_TOOL_NAME: cap_text(str(call.name), _MAX_NAME_ATTR),
                A.GEN_AI_TOOL_TYPE: A.TOOL_TYPE_FUNCTION,
            }
        call_id = call.id if type(call.id) is str else str(call.id)
        attrs[A.GEN_AI_TOOL_CALL_ID] = cap_text(call_id, _MAX_NAME_ATTR)
        return name, attrs

    def _record_runs(self, p: PreparedCall, span: Span, runs: list[HookRun]) -> None:
        for run in runs:
            failure = run.failure
            if failure is not None:
                report_hook_failure(p.call, failure, p.chain.scrub)
        if not span.is_recording():
            return
        for run in runs:
            attrs: dict[str, Any] = {
                A.EVENT_HOOK_NAME: run.hook,
                A.EVENT_HOOK_DECISION: run.decision,
                A.EVENT_HOOK_DURATION_MS: round(run.duration_ms, 3),
            }
            failure = run.failure
            if failure is not None:
                attrs[A.EVENT_HOOK_ERROR] = str(failure)
                if failure.cause is not None and not isinstance(failure.cause, TimeoutError):
                    span.record_exception(failure.cause)
                span.set_attribute(A.ERROR_TYPE, failure.error_type)
                span.set_status(Status(StatusCode.ERROR, str(failure)))
            span.add_event(A.EVENT_HOOK, attrs)

    def _mark_error(self, span: Span, error_type: str, message: str) -> None:
        span.set_status(Status(StatusCode.ERROR, message))
        span.set_attribute(A.ERROR_TYPE, error_type)

    def _content(self, p: PreparedCall, text: str, attribute: str) -> str:
        """Text for a span attribute: scrubbed by the hooks' redaction first (noted in
        ``otelhooks.redacted.paths``), then cut."""
        scrubbed = p.chain.scrub(text)
        if scrubbed is not text and scrubbed != text:
            if p.redacted is None:
                p.redacted = []
            p.redacted.append(attribute)
        return cap_text(scrubbed, self.max_content_length)

    def _progress_callback(self, p: PreparedCall, span: Span) -> Callable[[Any], None]:
        count = 0

        def on_progress(update: Any) -> None:
            nonlocal count
            count += 1
            if span.is_recording():
                attrs: dict[str, Any] = {A.EVENT_PROGRESS_INDEX: count}
                if self.capture_content:
                    text = update if isinstance(update, str) else to_json_text(update)
                    attrs[A.EVENT_PROGRESS_CONTENT] = self._content(p, text, A.EVENT_PROGRESS)
                span.add_event(A.EVENT_PROGRESS, attrs)
            if p.on_update is not None:
                try:
                    p.on_update(p.call, update)
                except Exception as exc:  # a consumer's bug must not fail the tool
                    if span.is_recording():
                        span.record_exception(exc)

        return on_progress

    async def _drain(self, gen: Any, p: PreparedCall, span: Span) -> list[Any]:
        """A tool that returns a generator reports each item as progress; the result is the list."""
        report = self._progress_callback(p, span)
        items: list[Any] = []
        if inspect.isasyncgen(gen):
            async for item in gen:
                items.append(item)
                report(item)
        else:
            for item in gen:
                items.append(item)
                report(item)
                await asyncio.sleep(0)  # let timeouts and cancellation in between items
        return items

    def _cancelled_result(self, p: PreparedCall, span: Span) -> ToolResult:
        p.error_type = A.ERR_CANCELLED
        reason = p.signal.reason or "cancelled"
        if span.is_recording():
            self._mark_error(span, A.ERR_CANCELLED, reason)
            span.set_attribute(A.CANCELLED, True)
        p.result = ToolResult(
            p.call.id, str(p.call.name), f"error: cancelled: {reason}", None, True
        )
        return p.result

    def _end(self, p: PreparedCall) -> None:
        """Set the outcome on the tool span, tell the observers, end the span."""
        result = p.result
        assert result is not None
        if result.is_error and p.error_type is None and p.decision == A.DECISION_ALLOW:
            p.error_type = A.ERR_TOOL_ERROR  # the tool (or an after-hook) said it failed
        span = p.span
        if span.is_recording():
            span.set_attributes(self._outcome_attributes(p, result))
            if p.error_type is not None:
                description = cap_text(p.chain.scrub(result.content), _MAX_STATUS)
                span.set_status(Status(StatusCode.ERROR, description))
        if p.hooks.observers:
            self._notify(p, result)
        span.end()
        tool = p.tool.name if p.tool is not None else A.UNKNOWN_TOOL
        self._instruments.record_tool(tool, p.decision, p.error_type, time.perf_counter() - p.start)

    def _outcome_attributes(self, p: PreparedCall, result: ToolResult) -> dict[str, Any]:
        """Everything the call's span learns at its end, set in one go."""
        attrs: dict[str, Any] = {A.RESULT_IS_ERROR: result.is_error}
        if p.decision is not None:
            attrs[A.DECISION] = p.decision
            if p.decision != A.DECISION_SKIP:
                attrs[A.ARGUMENTS_REWRITTEN] = p.rewritten
        if p.deciding_hook is not None:
            attrs[A.DECISION_HOOK] = p.deciding_hook
        if p.block_reason is not None:
            attrs[A.BLOCK_REASON] = p.block_reason
        if p.overridden is not None:
            attrs[A.RESULT_OVERRIDDEN] = p.overridden
        if result.terminate:
            attrs[A.TERMINATE] = True
        if p.error_type is not None:
            attrs[A.ERROR_TYPE] = p.error_type
            if p.error_type == A.ERR_CANCELLED:
                attrs[A.CANCELLED] = True
        if self.capture_content:
            if p.tool is not None and p.decision is not None:
                arguments = to_json_text(dict(p.args))
                attrs[A.GEN_AI_TOOL_CALL_ARGUMENTS] = self._content(
                    p, arguments, A.GEN_AI_TOOL_CALL_ARGUMENTS
                )
            if not result.is_error:  # an error goes to the status and error.type
                attrs[A.GEN_AI_TOOL_CALL_RESULT] = self._content(
                    p, result.content, A.GEN_AI_TOOL_CALL_RESULT
                )
        if p.redacted:
            attrs[A.REDACTED_PATHS] = tuple(dict.fromkeys(p.redacted))
        return attrs

    def _notify(self, p: PreparedCall, result: ToolResult) -> None:
        record = ToolCallRecord(
            tool_call=p.call,
            tool_name=str(p.call.name),
            result=result,
            decision=p.decision,  # type: ignore[arg-type]
            deciding_hook=p.deciding_hook,
            block_reason=p.block_reason,
            arguments_rewritten=p.rewritten,
            error_type=p.error_type,
            duration_ms=(time.perf_counter() - p.start) * 1000.0,
        )
        token = otel_context.attach(p.span_context)
        try:
            for hook in p.hooks.observers:
                assert hook.observe is not None
                try:
                    value = hook.observe(record)
                    if inspect.isawaitable(value):  # observers should be sync; close it cleanly
                        close = getattr(value, "close", None)
                        if close is not None:
                            close()
                        raise TypeError("on_tool_call_end must not be async")
                except Exception as exc:
                    if p.span.is_recording():
                        p.span.record_exception(exc, {A.EVENT_HOOK_NAME: hook.name})
        finally:
            otel_context.detach(token)

    def _end_cancelled(self, p: PreparedCall) -> None:
        if p.span.is_recording():
            self._mark_error(p.span, A.ERR_CANCELLED, "cancelled")
            p.span.set_attribute(A.CANCELLED, True)
        p.span.end()

    def _end_with_internal_error(self, p: PreparedCall, exc: BaseException) -> ToolResult:
        """End a call that the runtime itself failed: the span records it, the model gets an
        error result (the exception's type only), the caller carries on."""
        if p.span.is_recording():
            p.span.record_exception(exc)
            self._mark_error(p.span, type(exc).__qualname__, f"otelhooks internal error: {exc}")
        p.span.end()
        p.result = ToolResult(
            p.call.id,
            str(p.call.name),
            f"error: the tool call failed inside otelhooks ({type(exc).__name__})",
            None,
            True,
        )
        return p.result
