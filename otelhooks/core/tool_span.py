"""What one tool call records: its span, the spans of its phases, and its metrics.

The executor's flow (:mod:`otelhooks.core.execute`) says what happened; this module says how it
looks on the trace. :class:`ToolCallRecorder` (one per executor) starts a call's
``execute_tool {tool}`` span; the :class:`CallTrace` it returns gives each phase a child span
(:class:`Phase`) and sets the outcome on the call's span when it ends.

Contracts
---------
* When the call's span does not record (tracing off, or not sampled) its phases get no span at
  all and every recording method does nothing: nothing of it could be exported. Code still runs
  in the call's context, so that a trace started elsewhere propagates.
* Text the runtime writes on a span (captured content, status descriptions) goes through the
  hooks' redaction (``scrub``) first and is cut after; an attribute redaction changed is named in
  ``otelhooks.redacted.paths``.
* Nothing here raises for a value it is given: it only records.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import trace
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

from ..telemetry import attributes as A
from ..telemetry.content import Capture, cap_text, to_json_text
from ..telemetry.instruments import Instruments
from ..version import __version__
from .chain import HookRun
from .hooks import ScrubFn, ToolCallRecord
from .messages import ToolCall
from .tools import Tool

_MAX_NAME_ATTR: Final = 200  # plus the cut's marker: under 256 characters
_MAX_STATUS: Final = 200

DEFAULT_TOOL_CONTENT_LENGTH: Final = 4096
"""Characters of a tool call's captured arguments or result kept on its span."""


class Recorder:
    """What a recorder holds: the tracer, the content capture mode (fixed at construction), the
    most characters of content an attribute keeps, and the metric instruments."""

    __slots__ = (
        "_identity",
        "capture",
        "content_on_span",
        "instruments",
        "max_content_length",
        "tracer",
    )

    def __init__(
        self,
        tracer_provider: TracerProvider | None,
        *,
        capture: Capture,
        max_content_length: int,
        instruments: Instruments,
    ) -> None:
        self.tracer = trace.get_tracer("otelhooks", __version__, tracer_provider=tracer_provider)
        self.capture = capture
        self.content_on_span = capture.on_span
        self.max_content_length = max_content_length
        self.instruments = instruments
        # Per tool: the span name and the attributes every call of it starts with.
        self._identity: dict[str, tuple[Any, str, dict[str, Any]]] = {}


class ToolCallRecorder(Recorder):
    """Starts the span of each call an executor runs and records its metrics. Content goes on
    the span as attributes when the capture mode puts it on spans."""

    __slots__ = ()

    @property
    def capture_content(self) -> bool:
        """Whether arguments, results and progress go on the spans."""
        return self.content_on_span

    @property
    def tracing_off(self) -> bool:
        """Whether the tracer is the API's no-op one (no SDK, or the SDK disabled)."""
        tracer = self.tracer
        if type(tracer) is NoOpTracer:
            return True
        return type(tracer) is ProxyTracer and type(tracer._tracer) is NoOpTracer

    def start(
        self,
        call: ToolCall,
        tool: Tool | None,
        parent: otel_context.Context | None,
        links: Sequence[Link] | None,
        scrub: ScrubFn,
    ) -> CallTrace:
        """Start the call's span under ``parent`` (default: the current context)."""
        name, attributes = self._span_identity(call, tool)
        span = self.tracer.start_span(name, parent, SpanKind.INTERNAL, attributes, links)
        return CallTrace(self, span, trace.set_span_in_context(span, parent), scrub)

    def _span_identity(self, call: ToolCall, tool: Tool | None) -> tuple[str, dict[str, Any]]:
        """The span name and the attributes of a call, the per-tool part built once."""
        if tool is not None:
            cached = self._identity.get(tool.name)
            if cached is None or cached[0] is not tool:  # new, or re-registered under its name
                base: dict[str, Any] = {
                    A.GEN_AI_OPERATION_NAME: A.OP_EXECUTE_TOOL,
                    A.GEN_AI_TOOL_NAME: tool.name,
                    A.GEN_AI_TOOL_TYPE: A.TOOL_TYPE_FUNCTION,
                }
                if tool.description:
                    base[A.GEN_AI_TOOL_DESCRIPTION] = tool.description
                cached = (tool, f"{A.OP_EXECUTE_TOOL} {tool.name}", base)
                self._identity[tool.name] = cached
            _, name, base = cached
            attributes = base.copy()
        else:
            name = A.UNKNOWN_TOOL_SPAN_NAME
            attributes = {
                A.GEN_AI_OPERATION_NAME: A.OP_EXECUTE_TOOL,
                A.GEN_AI_TOOL_NAME: cap_text(str(call.name), _MAX_NAME_ATTR),
                A.GEN_AI_TOOL_TYPE: A.TOOL_TYPE_FUNCTION,
            }
        call_id = call.id if type(call.id) is str else str(call.id)
        attributes[A.GEN_AI_TOOL_CALL_ID] = cap_text(call_id, _MAX_NAME_ATTR)
        return name, attributes


def _mark_error(span: Span, error_type: str, message: str) -> None:
    span.set_status(Status(StatusCode.ERROR, message))
    span.set_attribute(A.ERROR_TYPE, error_type)


class CallTrace:
    """The span of one call: its phases' spans, and its outcome when it ends."""

    __slots__ = ("_recorder", "context", "recording", "redacted", "scrub", "span", "started")

    def __init__(
        self,
        recorder: ToolCallRecorder,
        span: Span,
        context: otel_context.Context,
        scrub: ScrubFn,
    ) -> None:
        self._recorder = recorder
        self.span = span
        self.context = context
        self.recording = span.is_recording()
        self.scrub = scrub
        self.started = time.perf_counter()
        self.redacted: list[str] | None = None  # attributes the hooks' redaction changed

    def elapsed_ms(self) -> float:
        """Milliseconds since the call started."""
        return (time.perf_counter() - self.started) * 1000.0

    @property
    def capture_content(self) -> bool:
        """Whether content (arguments, results, progress) goes on the spans."""
        return self._recorder.capture_content

    def phase(self, name: str, *, current: bool = False) -> Phase:
        """A child span for one phase (``before``, ``run``, ``after``), ended by ``with``. With
        ``current`` the phase's context (the call's, when nothing records) is current inside the
        block: hooks and the handler run in it, so their own spans nest under the phase."""
        if self.recording:
            return Phase(self, self._recorder.tracer.start_span(name, self.context), True, current)
        return Phase(self, trace.INVALID_SPAN, False, current)

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        """Attributes a tool adds to its call's span (ignored when it does not record)."""
        if self.recording:
            self.span.set_attributes(attributes)

    def observer_failed(self, exc: Exception, hook: str) -> None:
        """An observer raised: recorded and ignored."""
        if self.recording:
            self.span.record_exception(exc, {A.EVENT_HOOK_NAME: hook})

    def content(self, text: str, attribute: str) -> str:
        """Text for a span attribute: scrubbed by the hooks' redaction first (noted in
        ``otelhooks.redacted.paths``), then cut."""
        scrubbed = self.scrub(text)
        if scrubbed is not text and scrubbed != text:
            if self.redacted is None:
                self.redacted = []
            self.redacted.append(attribute)
        return cap_text(scrubbed, self._recorder.max_content_length)

    def end(
        self,
        record: ToolCallRecord,
        *,
        tool_known: bool,
        overridden: bool | None,
        args: Mapping[str, Any],
    ) -> None:
        """Set the outcome on the call's span, end it, and count the call."""
        if self.recording:
            result = record.result
            self.span.set_attributes(self._outcome(record, tool_known, overridden, args))
            if record.error_type is not None:
                description = cap_text(self.scrub(result.content), _MAX_STATUS)
                self.span.set_status(Status(StatusCode.ERROR, description))
        self.span.end()
        tool = record.tool_name if tool_known else A.UNKNOWN_TOOL
        self._recorder.instruments.record_tool(
            tool, record.decision, record.error_type, time.perf_counter() - self.started
        )

    def _outcome(
        self,
        record: ToolCallRecord,
        tool_known: bool,
        overridden: bool | None,
        args: Mapping[str, Any],
    ) -> dict[str, Any]:
        """Everything the call's span learns at its end, set in one go."""
        result = record.result
        decision = record.decision
        attrs: dict[str, Any] = {A.RESULT_IS_ERROR: result.is_error}
        if decision is not None:
            attrs[A.DECISION] = decision
            if decision != A.DECISION_SKIP:
                attrs[A.ARGUMENTS_REWRITTEN] = record.arguments_rewritten
        if record.deciding_hook is not None:
            attrs[A.DECISION_HOOK] = record.deciding_hook
        if record.block_reason is not None:
            attrs[A.BLOCK_REASON] = record.block_reason
        if overridden is not None:
            attrs[A.RESULT_OVERRIDDEN] = overridden
        if result.terminate:
            attrs[A.TERMINATE] = True
        if record.error_type is not None:
            attrs[A.ERROR_TYPE] = record.error_type
            if record.error_type == A.ERR_CANCELLED:
                attrs[A.CANCELLED] = True
        if self._recorder.content_on_span:
            if tool_known and decision is not None:
                attrs[A.GEN_AI_TOOL_CALL_ARGUMENTS] = self.content(
                    to_json_text(dict(args)), A.GEN_AI_TOOL_CALL_ARGUMENTS
                )
            if not result.is_error:  # an error goes to the status and error.type
                attrs[A.GEN_AI_TOOL_CALL_RESULT] = self.content(
                    result.content, A.GEN_AI_TOOL_CALL_RESULT
                )
        if self.redacted:
            attrs[A.REDACTED_PATHS] = tuple(dict.fromkeys(self.redacted))
        return attrs

    def end_cancelled(self) -> None:
        """End the span of a call that an asyncio cancellation from outside stopped."""
        if self.recording:
            _mark_error(self.span, A.ERR_CANCELLED, "cancelled")
            self.span.set_attribute(A.CANCELLED, True)
        self.span.end()

    def end_failed(self, exc: BaseException) -> None:
        """End the span of a call the runtime itself failed (a bug in otelhooks)."""
        if self.recording:
            self.span.record_exception(exc)
            _mark_error(self.span, type(exc).__qualname__, f"otelhooks internal error: {exc}")
        self.span.end()


class Phase:
    """The span of one phase of a call (or none, when the call's span does not record)."""

    __slots__ = ("_call", "_current", "_token", "recording", "span")

    def __init__(self, call: CallTrace, span: Span, recording: bool, current: bool) -> None:
        self._call = call
        self.span = span
        self.recording = recording
        self._current = current

    def __enter__(self) -> Phase:
        if self._current:
            context = self._call.context
            if self.recording:
                context = trace.set_span_in_context(self.span, context)
            self._token = otel_context.attach(context)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._current:
            otel_context.detach(self._token)
        self.span.end()

    def fail(self, error_type: str, message: str) -> None:
        """The phase ended the call with an error of its own (no exception to record)."""
        if self.recording:
            _mark_error(self.span, error_type, message)

    def raised(self, exc: Exception, error_type: str, message: str) -> None:
        """The handler raised ``exc``; its ``attributes`` (if any) go on the call's span."""
        if self.recording:
            self.span.record_exception(exc)
            _mark_error(self.span, error_type, message)
        extra = getattr(exc, "attributes", None)
        if extra:
            self._call.set_attributes(extra)

    def cancelled(self, reason: str) -> None:
        """The run's signal stopped the call during this phase."""
        if self.recording:
            _mark_error(self.span, A.ERR_CANCELLED, reason)
            self.span.set_attribute(A.CANCELLED, True)

    def event(self, name: str, attributes: Mapping[str, Any]) -> None:
        """A span event on the phase."""
        if self.recording:
            self.span.add_event(name, attributes)

    def hooks(self, runs: Sequence[HookRun]) -> None:
        """One event per hook that ran (its decision and duration); a failure also marks the
        phase as an error, with the exception the hook raised."""
        if not self.recording:
            return
        span = self.span
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
                _mark_error(span, failure.error_type, str(failure))
            span.add_event(A.EVENT_HOOK, attrs)

    def progress(self, index: int, update: Any) -> None:
        """The tool reported partial result number ``index`` (its content when captured)."""
        if not self.recording:
            return
        attrs: dict[str, Any] = {A.EVENT_PROGRESS_INDEX: index}
        if self._call.capture_content:
            text = update if isinstance(update, str) else to_json_text(update)
            attrs[A.EVENT_PROGRESS_CONTENT] = self._call.content(text, A.EVENT_PROGRESS)
        self.span.add_event(A.EVENT_PROGRESS, attrs)

    def callback_failed(self, exc: Exception) -> None:
        """A consumer of the tool's progress raised (recorded; the tool goes on)."""
        if self.recording:
            self.span.record_exception(exc)
