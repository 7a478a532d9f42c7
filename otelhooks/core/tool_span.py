"""What one tool call records: its span, the spans of its phases, and its metrics.

The executor's flow (:mod:`otelhooks.core.execute`) says what happened; this module says how it
looks on the trace. :class:`ToolCallRecorder` (one per executor, or shared) starts a call's
``execute_tool {tool}`` span and hands back a :class:`CallTrace`: a recording one when the span
records, else the null one (as OpenTelemetry's ``NonRecordingSpan``), chosen once per call by
asking the span, so a tracer provider installed after the executor was built is used from the
next call on. Each phase gets a child span (:class:`Phase`, or the null :class:`NoPhase`); the
outcome goes on the call's span when it ends, and the call is counted in the metrics either way.

Contracts
---------
* A null trace records no span and no event; code still runs in the call's context when that
  context carries a span (a trace sampled out elsewhere propagates), and the metrics are
  recorded.
* Text the runtime writes on a span goes through the scrubber once (:mod:`otelhooks.core.scrub`):
  captured arguments and progress, hook failure messages, exception messages; the result and
  the status description are the model's text, scrubbed already. Attributes a scrub changed are
  named in ``otelhooks.redacted.paths``; text is cut after it is scrubbed.
* A call's trace ends once: ending it again changes nothing.
* Nothing here raises for a value it is given: it only records.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import (
    Link,
    NoOpTracerProvider,
    ProxyTracerProvider,
    Span,
    SpanKind,
    Status,
    StatusCode,
    Tracer,
    TracerProvider,
)

from ..telemetry import attributes as A
from ..telemetry.content import Capture, cap_text, to_json_text
from ..telemetry.instruments import Instruments, tool_call_attributes
from ..version import __version__
from .chain import HookRun
from .hooks import Outcome
from .messages import ToolCall, ToolResult
from .plan import CallPlan
from .scrub import NO_SCRUBBING, Scrubber, resolve, scrub_override, scrub_result

_MAX_NAME_ATTR: Final = 200  # plus the cut's marker: under 256 characters
_MAX_STATUS: Final = 200
_STATUS: Final = "status.description"

DEFAULT_TOOL_CONTENT_LENGTH: Final = 4096
"""Characters of a tool call's captured arguments or result kept on its span."""


class Recorder:
    """What a recorder holds: the tracer, the content capture mode (fixed at construction), the
    most characters of content an attribute keeps, the metric instruments and the scrubber."""

    __slots__ = (
        "capture",
        "content_on_span",
        "identifier",
        "instruments",
        "max_content_length",
        "null",
        "provider",
        "scrub_result",
        "scrubber",
        "tracer",
    )

    def __init__(
        self,
        tracer_provider: TracerProvider | None,
        *,
        capture: Capture,
        max_content_length: int,
        instruments: Instruments,
        scrubber: Scrubber | None = None,
    ) -> None:
        self.provider = tracer_provider
        """The tracer provider given (``None``: the global one, whatever it is at the time)."""
        self.tracer = trace.get_tracer("otelhooks", __version__, tracer_provider=tracer_provider)
        self.capture = capture
        self.content_on_span = capture.on_span
        self.max_content_length = max_content_length
        self.instruments = instruments
        self.scrubber: Scrubber = resolve(scrubber)  # None: the default one
        scrubs = self.scrubber is not NO_SCRUBBING
        # Decided here, once: with no scrubber, text passes without a call.
        self.scrub_result: Callable[[ToolResult], tuple[ToolResult, list[str]]] = (
            partial(scrub_result, self.scrubber) if scrubs else _unchanged
        )
        self.identifier: Callable[[str, str], tuple[str, list[str]]] | None = (
            self.scrubber.redact_identifier if scrubs else None
        )
        self.null = CallTrace(self)
        """The trace of every call whose span records nothing and carries no context (it
        keeps nothing of a call: one serves them all)."""


class ToolCallRecorder(Recorder):
    """Starts the span of each call an executor runs and records its metrics. Content goes on
    the span as attributes when the capture mode puts it on spans."""

    __slots__ = ()

    @property
    def capture_content(self) -> bool:
        """Whether arguments, results and progress go on the spans."""
        return self.content_on_span

    @property
    def recording(self) -> bool:
        """Whether a span started now could record: asked on every call, through the public
        OpenTelemetry API only. ``False`` for the API's no-op provider, and for the global
        provider while none has been installed (the API's proxy), so a provider installed
        later is used from the next call on. A provider that samples a span out answers
        through the span (:meth:`start`)."""
        provider = self.provider if self.provider is not None else trace.get_tracer_provider()
        return not isinstance(provider, _SILENT)

    def start(
        self,
        call: ToolCall,
        plan: CallPlan | None,
        parent: otel_context.Context | None,
        links: Sequence[Link] | None,
    ) -> CallTrace:
        """Start the call's span under ``parent`` (default: the current context): the recording
        trace when the span records, else the null one (without a span at all when nothing
        could record)."""
        provider = self.provider if self.provider is not None else trace.get_tracer_provider()
        if isinstance(provider, _SILENT):  # nothing could record (see recording)
            return self.null
        scrub = self.identifier  # the model chose the id (and an unknown tool's name)
        if plan is not None:
            name = plan.span_name
            attributes = {**plan.span_attributes}
        else:
            name = A.UNKNOWN_TOOL_SPAN_NAME
            tool_name = str(call.name) if scrub is None else scrub(str(call.name), "")[0]
            attributes = {
                A.GEN_AI_OPERATION_NAME: A.OP_EXECUTE_TOOL,
                A.GEN_AI_TOOL_NAME: cap_text(tool_name, _MAX_NAME_ATTR),
                A.GEN_AI_TOOL_TYPE: A.TOOL_TYPE_FUNCTION,
            }
        call_id = call.id if type(call.id) is str else str(call.id)
        if scrub is not None:
            call_id = scrub(call_id, A.GEN_AI_TOOL_CALL_ID)[0]
        attributes[A.GEN_AI_TOOL_CALL_ID] = (
            call_id if len(call_id) <= _MAX_NAME_ATTR else cap_text(call_id, _MAX_NAME_ATTR)
        )
        span = self.tracer.start_span(name, parent, SpanKind.INTERNAL, attributes, links)
        if span.is_recording():
            hooks = plan.hooks if plan is not None else None
            return RecordingCallTrace(
                self,
                span,
                trace.set_span_in_context(span, parent),
                before_current=hooks is not None and bool(hooks.before),
                after_current=hooks is not None and bool(hooks.after),
            )
        if span.get_span_context().is_valid:  # sampled out: its context still propagates
            return SampledOutCallTrace(self, span, trace.set_span_in_context(span, parent))
        return self.null


_SILENT: Final = (NoOpTracerProvider, ProxyTracerProvider)


class NoPhase:
    """The phase of a call that records nothing: it only makes the call's context current when
    asked to (and the call has one)."""

    __slots__ = ("_context", "_token")

    hears_progress: Final = False
    """Whether the phase records a tool's progress itself (:meth:`reporter` is then needed
    even with no ``on_update``)."""

    def __init__(self, context: otel_context.Context | None) -> None:
        self._context = context

    def open(self) -> None:
        """Enter the phase: the call's context made current (when it has one)."""
        if self._context is not None:
            self._token = otel_context.attach(self._context)

    def close(self) -> None:
        """Leave the phase (after :meth:`open`, whatever happened in it)."""
        if self._context is not None:
            otel_context.detach(self._token)

    def empty(self) -> None:
        """The phase with nothing run in it (in place of :meth:`open` and :meth:`close`)."""

    def fail(self, error_type: str, message: str) -> None:
        """The phase ended the call with an error of its own."""

    def raised(self, exc: BaseException, error_type: str, message: str) -> None:
        """The handler raised ``exc``."""

    def cancelled(self, reason: str) -> None:
        """The run's signal stopped the call during this phase."""

    def event(self, name: str, attributes: Mapping[str, Any]) -> None:
        """A span event on the phase."""

    def hooks(self, runs: Sequence[HookRun]) -> None:
        """One event per hook that ran."""

    def progress(self, index: int, update: Any) -> None:
        """The tool reported partial result number ``index``."""

    def callback_failed(self, exc: Exception) -> None:
        """A consumer of the tool's progress raised."""

    def reporter(
        self, call: ToolCall, on_update: Callable[[ToolCall, Any], None] | None
    ) -> Callable[[Any], None] | None:
        """What a tool's progress goes to: a span event (:meth:`progress`) and ``on_update``;
        ``None`` when nothing would hear it."""
        return _reporter(self, call, on_update) if on_update is not None else None


def _reporter(
    phase: NoPhase | Phase, call: ToolCall, on_update: Callable[[ToolCall, Any], None] | None
) -> Callable[[Any], None]:
    count = 0

    def report(update: Any) -> None:
        nonlocal count
        count += 1
        phase.progress(count, update)
        if on_update is not None:
            try:
                on_update(call, update)
            except Exception as exc:  # a consumer's bug must not fail the tool
                phase.callback_failed(exc)

    return report


_DETACHED: Final = NoPhase(None)
_NO_PATHS: Final[list[str]] = []


def _unchanged(result: ToolResult) -> tuple[ToolResult, list[str]]:
    return result, _NO_PATHS


class CallTrace:
    """The trace of a call whose span does not record (the null object): its phases
    (:attr:`before`, :attr:`run`, :attr:`after`, each opened and closed once) have no span,
    and the call is counted when it ends. :class:`RecordingCallTrace` is the one that records.
    A trace keeps no state of the call's own (the call's state,
    :class:`~otelhooks.core.outcome.CallState`, times it and keeps its outcome), so the null
    trace of a call with no context to carry is one object per recorder (``recorder.null``).

    The ``run`` phase makes the call's context current (the handler's spans nest under it);
    ``before`` and ``after`` do when hooks run in them."""

    __slots__ = ("_recorder",)

    span: Span = trace.INVALID_SPAN
    """The call's span (one that records nothing)."""
    context: otel_context.Context | None = None
    """The call's context (its span current), ``None`` when the span carries nothing to
    propagate: code then runs in the caller's context."""
    before: Phase | NoPhase = _DETACHED
    run: Phase | NoPhase = _DETACHED
    after: Phase | NoPhase = _DETACHED

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        """Attributes a tool adds to its call's span."""

    def redacted(self, paths: Sequence[str]) -> None:
        """Paths of the model's text the scrubber changed."""

    def for_model(self, result: ToolResult) -> ToolResult:
        """``result`` as the model may see it: through the scrubber once (the paths it changed
        noted on the span); the same object when nothing changed."""
        result, paths = self._recorder.scrub_result(result)
        if paths:
            self.redacted(paths)
        return result

    def for_model_override(self, new: ToolResult, old: ToolResult) -> ToolResult:
        """An after-hook's override of ``old`` as the model may see it (only the fields it
        changed are scrubbed)."""
        new, paths = scrub_override(self._recorder.scrubber, new, old)
        self.redacted(paths)
        return new

    def observer_failed(self, exc: Exception, hook: str) -> None:
        """An observer raised: recorded and ignored."""

    def end(self, outcome: Outcome, plan: CallPlan | None, seconds: float, close: bool) -> None:
        """Record the call's outcome (the caller ends a call once), count the call (of the
        tool ``plan`` is for; ``None``: an unknown tool) as taking ``seconds``, and with
        ``close`` end its span (else :meth:`close` does, after the observers)."""
        error_type = outcome.error_type
        if plan is not None and error_type is None and outcome.decision == A.DECISION_ALLOW:
            attributes = plan.allowed_metrics
        else:
            tool = outcome.result.tool_name if plan is not None else A.UNKNOWN_TOOL
            attributes = tool_call_attributes(tool, outcome.decision, error_type)
        instruments = self._recorder.instruments  # the mapping is kept by the SDK's aggregation
        instruments.tool_calls.add(1, attributes)
        instruments.tool_duration.record(seconds, attributes)

    def close(self) -> None:
        """End the span (a span that does not record has nothing to end)."""

    def end_run(self) -> None:
        """Close the run phase of a call no after-hook runs for (its after phase empty): the
        null trace's phases have nothing to close."""


class SampledOutCallTrace(CallTrace):
    """The trace of a call whose span was sampled out: it records nothing, but its context
    propagates (the handler runs in it, so the trace goes on downstream as sampled out)."""

    __slots__ = ("context", "run", "span")

    def __init__(self, recorder: ToolCallRecorder, span: Span, context: otel_context.Context):
        super().__init__(recorder)
        self.span = span
        self.context = context
        self.run = NoPhase(context)

    def end_run(self) -> None:
        """Close the run phase (its context leaves); the after phase has nothing."""
        self.run.close()


def _mark_error(span: Span, error_type: str, message: str) -> None:
    span.set_status(Status(StatusCode.ERROR, message))
    span.set_attribute(A.ERROR_TYPE, error_type)


def _exception(span: Span, exc: BaseException, scrubber: Scrubber) -> None:
    """``exc`` as a span event, its message and stack trace scrubbed."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    span.record_exception(
        exc,
        {
            A.EXCEPTION_MESSAGE: scrubber.redact_text(str(exc))[0],
            A.EXCEPTION_STACKTRACE: scrubber.redact_text(text)[0],
        },
    )


class RecordingCallTrace(CallTrace):
    """The trace of a call whose span records: a child span per phase, and the outcome on the
    call's span when it ends."""

    __slots__ = ("after", "before", "context", "paths", "run", "span")

    def __init__(
        self,
        recorder: ToolCallRecorder,
        span: Span,
        context: otel_context.Context,
        *,
        before_current: bool,
        after_current: bool,
    ) -> None:
        super().__init__(recorder)
        self.span = span
        self.context = context
        self.paths: list[str] | None = None  # what the scrubber changed, for redacted.paths
        self.before = Phase(self, A.SPAN_BEFORE, before_current)
        self.run = Phase(self, A.SPAN_RUN, True)
        self.after = Phase(self, A.SPAN_AFTER, after_current)

    def end_run(self) -> None:
        """Close the run phase; the after phase ends with no hook run in it."""
        self.run.close()
        self.after.empty()

    @property
    def scrubber(self) -> Scrubber:
        """The recorder's scrubber."""
        return self._recorder.scrubber

    @property
    def tracer(self) -> Tracer:
        """The tracer the phases' spans come from."""
        return self._recorder.tracer

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        """Attributes a tool adds to its call's span."""
        self.span.set_attributes(attributes)

    def redacted(self, paths: Sequence[str]) -> None:
        """Paths of the model's text the scrubber changed."""
        if paths:
            if self.paths is None:
                self.paths = []
            self.paths.extend(paths)

    def observer_failed(self, exc: Exception, hook: str) -> None:
        """An observer raised: recorded and ignored."""
        self.span.record_exception(exc, {A.EVENT_HOOK_NAME: hook})

    @property
    def content_on_span(self) -> bool:
        """Whether content (arguments, results, progress) goes on the spans."""
        return self._recorder.content_on_span

    def text(self, text: str, attribute: str, limit: int | None = None) -> str:
        """Text the runtime writes on a span: scrubbed (noted in ``otelhooks.redacted.paths``),
        then cut to ``limit`` characters (default: the content limit)."""
        scrubbed, found = self._recorder.scrubber.redact_text(text, attribute)
        if found:
            self.redacted((attribute,))
        return cap_text(scrubbed, self._recorder.max_content_length if limit is None else limit)

    def end(self, outcome: Outcome, plan: CallPlan | None, seconds: float, close: bool) -> None:
        """Record the outcome on the call's span (see :meth:`CallTrace.end`)."""
        self._outcome(outcome, plan is not None)
        super().end(outcome, plan, seconds, close)
        if close:
            self.span.end()

    def close(self) -> None:
        """End the span."""
        self.span.end()

    def _outcome(self, outcome: Outcome, tool_known: bool) -> None:
        """Everything the call's span learns at its end, set in one go."""
        span = self.span
        result = outcome.result
        decision = outcome.decision
        attrs: dict[str, Any] = {A.RESULT_IS_ERROR: result.is_error}
        if decision is not None:
            attrs[A.DECISION] = decision
            if decision != A.DECISION_SKIP:
                attrs[A.ARGUMENTS_REWRITTEN] = outcome.rewritten
        if outcome.deciding_hook is not None:
            attrs[A.DECISION_HOOK] = outcome.deciding_hook
        if outcome.block_reason is not None:
            attrs[A.BLOCK_REASON] = outcome.block_reason
        if outcome.overridden is not None:
            attrs[A.RESULT_OVERRIDDEN] = outcome.overridden
        if outcome.verdict is not None:
            _verdict(attrs, outcome)
        if result.terminate:
            attrs[A.TERMINATE] = True
        error_type = outcome.error_type
        if error_type is not None:
            attrs[A.ERROR_TYPE] = error_type
            if error_type == A.ERR_CANCELLED:
                attrs[A.CANCELLED] = True
        if self._recorder.content_on_span:
            if tool_known and decision is not None:
                attrs[A.GEN_AI_TOOL_CALL_ARGUMENTS] = self.text(
                    to_json_text(dict(outcome.arguments)), A.GEN_AI_TOOL_CALL_ARGUMENTS
                )
            if not result.is_error:  # an error goes to the status and error.type
                attrs[A.GEN_AI_TOOL_CALL_RESULT] = cap_text(
                    result.content, self._recorder.max_content_length
                )
        if self.paths:
            attrs[A.REDACTED_PATHS] = tuple(dict.fromkeys(self.paths))
        span.set_attributes(attrs)
        if outcome.failure is not None:
            _exception(span, outcome.failure, self._recorder.scrubber)
        if error_type is not None:
            span.set_status(Status(StatusCode.ERROR, cap_text(result.content, _MAX_STATUS)))


_GUARDRAIL_VERDICT: Final = {
    "allow": A.GUARDRAIL_ALLOW,
    "block": A.GUARDRAIL_DENY,
    "ask": A.GUARDRAIL_ESCALATE,
    "defer": A.GUARDRAIL_ESCALATE,
}
_GUARDRAIL_ACTION: Final = {
    A.DECISION_ALLOW: A.GUARDRAIL_ALLOW,
    A.DECISION_BLOCK: A.GUARDRAIL_BLOCK,
    A.DECISION_DEFER: A.GUARDRAIL_ESCALATE,
}


def _verdict(attrs: dict[str, Any], outcome: Outcome) -> None:
    """The decision of the before phase in the guardrail proposal's names: the verdict the
    hooks returned apart from the action enforced (a rewrite is ``modify``), the policies that
    decided, and for a call that asked, the keyed digest of its arguments and who answered."""
    verdict = outcome.verdict
    assert verdict is not None
    modified = outcome.rewritten and verdict == "allow"
    attrs[A.VERDICT] = verdict
    attrs[A.GEN_AI_GUARDRAIL_TARGET_TYPE] = A.GUARDRAIL_TARGET_INPUT
    attrs[A.GEN_AI_GUARDRAIL_TARGET_SUBTYPE] = A.GUARDRAIL_TARGET_TOOL_CALL
    attrs[A.GEN_AI_GUARDRAIL_VERDICT_TYPE] = (
        A.GUARDRAIL_MODIFY if modified else _GUARDRAIL_VERDICT[verdict]
    )
    action = _GUARDRAIL_ACTION.get(outcome.decision or "")
    if action is not None:
        attrs[A.GEN_AI_GUARDRAIL_ACTION_TYPE] = (
            A.GUARDRAIL_MODIFY if modified and action == A.GUARDRAIL_ALLOW else action
        )
    if outcome.policies:
        attrs[A.GEN_AI_GUARDRAIL_POLICY_ID] = outcome.policies[0]
        attrs[A.POLICIES] = outcome.policies
    if outcome.block_reason is not None:
        attrs[A.GEN_AI_GUARDRAIL_VERDICT_REASON] = outcome.block_reason
    if outcome.deciding_hook is not None and (verdict != "allow" or modified):
        attrs[A.GEN_AI_GUARDRAIL_COMPONENT_NAME] = outcome.deciding_hook
    approval = outcome.approval
    if approval is not None:
        attrs[A.GEN_AI_GUARDRAIL_INPUT_HASH] = approval.digest
        attrs[A.APPROVAL_ANSWER] = approval.answer
        if approval.by is not None:
            attrs[A.APPROVAL_BY] = approval.by


class Phase:
    """The span of one phase of a call whose span records, started when the phase is entered."""

    __slots__ = ("_call", "_current", "_name", "_token", "span")

    hears_progress: Final = True
    """A tool's progress is a span event of the phase (:meth:`progress`)."""

    def __init__(self, call: RecordingCallTrace, name: str, current: bool) -> None:
        self._call = call
        self._name = name
        self._current = current
        self.span: Span = trace.INVALID_SPAN

    def open(self) -> None:
        """Enter the phase: its span started (and made current when hooks run in it)."""
        context = self._call.context
        self.span = span = self._call.tracer.start_span(self._name, context)
        if self._current:
            self._token = otel_context.attach(trace.set_span_in_context(span, context))

    def close(self) -> None:
        """Leave the phase (after :meth:`open`, whatever happened in it): its span ended."""
        if self._current:
            otel_context.detach(self._token)
        self.span.end()

    def empty(self) -> None:
        """The phase with nothing run in it (in place of :meth:`open` and :meth:`close`): its
        span started and ended."""
        self.span = span = self._call.tracer.start_span(self._name, self._call.context)
        span.end()

    def fail(self, error_type: str, message: str) -> None:
        """The phase ended the call with an error of its own (no exception to record)."""
        _mark_error(self.span, error_type, self._call.text(message, _STATUS, _MAX_STATUS))

    def raised(self, exc: BaseException, error_type: str, message: str) -> None:
        """The handler raised ``exc`` (``message``: what the model read, scrubbed already); its
        ``attributes`` (if any) go on the call's span."""
        _exception(self.span, exc, self._call.scrubber)
        _mark_error(self.span, error_type, cap_text(message, _MAX_STATUS))
        extra = getattr(exc, "attributes", None)
        if extra:
            self._call.set_attributes(extra)

    def cancelled(self, reason: str) -> None:
        """The run's signal stopped the call during this phase."""
        _mark_error(self.span, A.ERR_CANCELLED, reason)
        self.span.set_attribute(A.CANCELLED, True)

    def event(self, name: str, attributes: Mapping[str, Any]) -> None:
        """A span event on the phase."""
        self.span.add_event(name, attributes)

    def hooks(self, runs: Sequence[HookRun]) -> None:
        """One event per hook that ran (its decision and duration); a failure also marks the
        phase as an error, with the exception the hook raised."""
        span = self.span
        for run in runs:
            attrs: dict[str, Any] = {
                A.EVENT_HOOK_NAME: run.hook,
                A.EVENT_HOOK_DECISION: run.decision,
                A.EVENT_HOOK_DURATION_MS: round(run.duration_ms, 3),
            }
            if run.recheck:
                attrs[A.EVENT_HOOK_RECHECK] = True
            failure = run.failure
            if failure is not None:
                message = self._call.text(str(failure), A.EVENT_HOOK_ERROR)
                attrs[A.EVENT_HOOK_ERROR] = message
                if failure.cause is not None and not isinstance(failure.cause, TimeoutError):
                    _exception(span, failure.cause, self._call.scrubber)
                _mark_error(span, failure.error_type, cap_text(message, _MAX_STATUS))
            span.add_event(A.EVENT_HOOK, attrs)

    def progress(self, index: int, update: Any) -> None:
        """The tool reported partial result number ``index`` (its content when captured)."""
        attrs: dict[str, Any] = {A.EVENT_PROGRESS_INDEX: index}
        if self._call.content_on_span:
            text = update if isinstance(update, str) else to_json_text(update)
            attrs[A.EVENT_PROGRESS_CONTENT] = self._call.text(text, A.EVENT_PROGRESS)
        self.span.add_event(A.EVENT_PROGRESS, attrs)

    def callback_failed(self, exc: Exception) -> None:
        """A consumer of the tool's progress raised (recorded; the tool goes on)."""
        _exception(self.span, exc, self._call.scrubber)

    def reporter(
        self, call: ToolCall, on_update: Callable[[ToolCall, Any], None] | None
    ) -> Callable[[Any], None]:
        """What a tool's progress goes to: a span event and ``on_update``."""
        return _reporter(self, call, on_update)
