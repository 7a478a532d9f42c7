"""What a run records: its ``invoke_agent`` span, a ``chat`` span per provider call, and the
GenAI client metrics.

The loop's flow (:mod:`otelhooks.core.loop`) says what happened; this module says how it looks on
the trace, following the OpenTelemetry GenAI conventions (:mod:`otelhooks.telemetry.genai`).

Contracts
---------
* A ``chat`` span is made only when wanted (``chat_spans``: by default not when the provider is
  already instrumented, so a request is not traced twice); the metrics are recorded unless the
  provider's own instrumentation records them.
* Content (request and response messages) is captured only as the capture mode says, through the
  recorder's scrubber first (:mod:`otelhooks.core.scrub`) and cut to ``max_content_length``
  characters after.
* An error or an abort ends the span with an error status and ``error.type``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode

from ..telemetry import attributes as A
from ..telemetry.content import Capture, cap_text
from ..telemetry.genai import (
    finish_reason,
    output_messages,
    params_attributes,
    provider_attributes,
    request_content,
    response_attributes,
    usage_attributes,
)
from ..telemetry.instruments import CHAT_METRIC_KEYS
from .messages import AssistantMessage, Usage
from .provider import ModelParams, ProviderRequest
from .tool_span import Recorder


def _mark_error(span: Span, error_type: str, message: str) -> None:
    span.set_attribute(A.ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, message))


def _ended_badly(message: AssistantMessage) -> bool:
    return message.stop_reason in ("error", "aborted")


class RunRecorder(Recorder):
    """Starts the spans of an agent's runs and provider calls, and records the chat metrics."""

    __slots__ = ()

    def run(
        self,
        agent_name: str,
        *,
        model: str,
        provider: Any,
        agent_id: str | None,
        conversation_id: str | None,
        links: Sequence[Link] = (),
    ) -> RunTrace:
        """Start the ``invoke_agent {agent}`` span of a run: the agent, its model and provider
        (``links``: the run it resumes)."""
        attributes: dict[str, Any] = {
            A.GEN_AI_OPERATION_NAME: A.OP_INVOKE_AGENT,
            A.GEN_AI_AGENT_NAME: agent_name,
            A.GEN_AI_REQUEST_MODEL: model,
        }
        provider_name = getattr(provider, "provider_name", None)
        if isinstance(provider_name, str) and provider_name:
            attributes[A.GEN_AI_PROVIDER_NAME] = provider_name
        if agent_id:
            attributes[A.GEN_AI_AGENT_ID] = agent_id
        if conversation_id:
            attributes[A.GEN_AI_CONVERSATION_ID] = conversation_id
        span = self.tracer.start_span(
            f"{A.OP_INVOKE_AGENT} {agent_name}",
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            links=links,
        )
        return RunTrace(span)

    def chat(
        self,
        run_context: otel_context.Context,
        *,
        turn_index: int,
        model: str,
        provider: Any,
        params: ModelParams,
        span_wanted: bool,
        metrics_wanted: bool,
    ) -> ChatTrace:
        """Start the ``chat {model}`` span of one provider call (or none, when not wanted)."""
        common = {
            A.GEN_AI_OPERATION_NAME: A.OP_CHAT,
            A.GEN_AI_REQUEST_MODEL: model,
            **provider_attributes(provider),
        }
        span: Span = trace.INVALID_SPAN
        if span_wanted:
            span = self.tracer.start_span(
                f"{A.OP_CHAT} {model}".strip(),
                run_context,
                SpanKind.CLIENT,
                {**common, **params_attributes(params), A.TURN_INDEX: turn_index},
            )
        return ChatTrace(self, span, run_context, common, turn_index, metrics_wanted)


class RunTrace:
    """The ``invoke_agent`` span of one run."""

    __slots__ = ("context", "span")

    def __init__(self, span: Span) -> None:
        self.span = span
        self.context = trace.set_span_in_context(span)

    def cancelled(self) -> None:
        """An asyncio cancellation from outside stopped the run."""
        self.span.set_attribute(A.CANCELLED, True)
        self.span.set_status(Status(StatusCode.ERROR, "cancelled"))
        self.span.set_attribute(A.ERROR_TYPE, A.ERR_CANCELLED)

    def finished(self, final: AssistantMessage, usage: Usage) -> None:
        """The run's outcome: its last message's finish reason and the usage of all turns."""
        span = self.span
        if not span.is_recording():
            return
        if _ended_badly(final):
            error_type = final.error_type or final.stop_reason
            _mark_error(span, error_type, final.error_message or final.stop_reason)
        span.set_attributes(
            {A.GEN_AI_RESPONSE_FINISH_REASONS: (finish_reason(final),), **usage_attributes(usage)}
        )

    def end(self) -> None:
        """End the span."""
        self.span.end()


class ChatTrace:
    """The ``chat`` span of one provider call, and its metrics."""

    __slots__ = (
        "_common",
        "_content",
        "_metrics_wanted",
        "_recorder",
        "_started",
        "context",
        "link",
        "span",
    )

    def __init__(
        self,
        recorder: RunRecorder,
        span: Span,
        run_context: otel_context.Context,
        common: dict[str, Any],
        turn_index: int,
        metrics_wanted: bool,
    ) -> None:
        self._recorder = recorder
        self.span = span
        self.context = trace.set_span_in_context(span, run_context)
        self._common = common
        self._metrics_wanted = metrics_wanted
        self._content: dict[str, str] = {}
        self._started = time.perf_counter()
        self.link: Link | None = (
            Link(span.get_span_context(), {A.TURN_INDEX: turn_index})
            if span.is_recording()
            else None
        )
        """What each tool call the message asks for links to (``None`` without a span)."""

    def _chat_content(self, attributes: Mapping[str, str]) -> dict[str, str]:
        """Content for the span: through the scrubber, then cut."""
        limit = self._recorder.max_content_length
        scrub = self._recorder.scrubber.redact_text
        return {key: cap_text(scrub(value, key)[0], limit) for key, value in attributes.items()}

    def request(self, request: ProviderRequest) -> None:
        """The request about to be sent (its content, when captured)."""
        capture = self._recorder.capture
        if self.span.is_recording() and capture is not Capture.NO_CONTENT:
            self._content = self._chat_content(request_content(request))
            if capture.on_span:
                self.span.set_attributes(self._content)

    def exception(self, exc: Exception) -> None:
        """The provider raised (the loop turns it into an error message)."""
        self.span.record_exception(exc)

    def cancelled(self) -> None:
        """An asyncio cancellation from outside stopped the call: end the span."""
        self.span.set_attribute(A.CANCELLED, True)
        self.span.set_status(Status(StatusCode.ERROR, "cancelled"))
        self.span.end()

    def end(self, message: AssistantMessage) -> None:
        """The message received: the response attributes, its content when captured, an error
        status when it ended badly; then the span ends and the metrics are recorded."""
        span = self.span
        if span.is_recording():
            span.set_attributes(response_attributes(message))
            capture = self._recorder.capture
            if capture is not Capture.NO_CONTENT:
                output = self._chat_content({A.GEN_AI_OUTPUT_MESSAGES: output_messages(message)})
                if capture.on_span:
                    span.set_attributes(output)
                if capture.as_event:
                    span.add_event(A.EVENT_INFERENCE_DETAILS, {**self._content, **output})
            if _ended_badly(message):
                _mark_error(
                    span,
                    message.error_type or message.stop_reason,
                    message.error_message or message.stop_reason,
                )
        span.end()
        if self._metrics_wanted:
            self._record_metrics(message, time.perf_counter() - self._started)

    def _record_metrics(self, message: AssistantMessage, seconds: float) -> None:
        attrs = {**self._common, **response_attributes(message)}
        if _ended_badly(message):
            attrs[A.ERROR_TYPE] = message.error_type or message.stop_reason
        points: dict[str, Any] = {k: attrs[k] for k in CHAT_METRIC_KEYS if k in attrs}
        usage = message.usage
        self._recorder.instruments.record_chat(
            seconds,
            points,
            usage.input_tokens if usage is not None else None,
            usage.output_tokens if usage is not None else None,
        )
