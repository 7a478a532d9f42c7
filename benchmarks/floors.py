"""The set-ups the benchmarks measure: the README's, and the floors it is held against.

A floor is what a competent engineer writes by hand for the same job, not a copy of otelhooks'
machinery: the *same-work floor* does everything the README set-up does (four spans with the same
attributes, the hook event, the same redaction of the result, the same structlog JSON line with
the trace ids); the *minimal floor* is the least a careful engineer would do (four spans, one
hook event, one structlog JSON line, one compiled regex for the key format they worry about).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from typing import Any

import structlog
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from benchmarks.harness import EXPORTERS, Side
from otelhooks import Hooks, ToolCall, ToolRegistry
from otelhooks.builtin import (
    RedactingProcessor,
    RedactionHook,
    Redactor,
    StructlogEvents,
    add_trace_context,
)
from otelhooks.builtin.span_redaction import RedactingSpanProcessor
from otelhooks.telemetry import attributes as A


def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


def make_registry() -> ToolRegistry:
    """A registry with the one tool every side calls."""
    registry = ToolRegistry()
    registry.register(echo)
    return registry


def _exporter(exporter: SpanExporter | None) -> SpanExporter:
    if exporter is None:
        memory = InMemorySpanExporter()
        EXPORTERS.append(memory)
        return memory
    return exporter


def sdk_provider(redactor: Redactor, exporter: SpanExporter | None = None) -> TracerProvider:
    """TracerProvider -> RedactingSpanProcessor -> BatchSpanProcessor -> in-memory exporter."""
    provider = TracerProvider()
    batch = BatchSpanProcessor(_exporter(exporter), max_queue_size=65536)
    provider.add_span_processor(RedactingSpanProcessor(redactor, batch))
    return provider


def plain_provider(exporter: SpanExporter | None = None) -> TracerProvider:
    """TracerProvider -> BatchSpanProcessor -> in-memory exporter: no span redaction."""
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(_exporter(exporter), max_queue_size=65536))
    return provider


def make_logger(redactor: Redactor | None) -> Any:
    """structlog with the level, the trace ids, redaction (with a redactor) and JSON."""
    processors: list[Any] = [structlog.processors.add_log_level, add_trace_context]
    if redactor is not None:
        processors.append(RedactingProcessor(redactor))
    processors.append(structlog.processors.JSONRenderer())
    return structlog.wrap_logger(structlog.ReturnLogger(), processors=processors)


def default_hooks(redactor: Redactor, logger: Any) -> Hooks:
    """What the README turns on: redaction of results and one structlog event per call (the
    executor and the events get the same redactor: the README's is the default one, with the
    same rules; a side that holds another redactor holds it in every place)."""
    return Hooks([RedactionHook(redactor), StructlogEvents(logger, redactor=redactor)])


_BASE = {
    A.GEN_AI_OPERATION_NAME: A.OP_EXECUTE_TOOL,
    A.GEN_AI_TOOL_NAME: "echo",
    A.GEN_AI_TOOL_TYPE: A.TOOL_TYPE_FUNCTION,
    A.GEN_AI_TOOL_DESCRIPTION: "Return the text unchanged.",
}


def make_floor(
    provider: Any, redactor: Redactor, logger: Any, tool: Callable[..., Any] = echo
) -> Side:
    """The same work written by hand: 4 spans, same attributes and events, same log event, same
    redaction pass, around a bare function call."""
    tracer = trace.get_tracer("floor", tracer_provider=provider)

    async def floor(call: ToolCall) -> str:
        start = time.perf_counter()
        span = tracer.start_span(
            "execute_tool echo", None, SpanKind.INTERNAL, {**_BASE, A.GEN_AI_TOOL_CALL_ID: call.id}
        )
        ctx = trace.set_span_in_context(span)
        before = tracer.start_span("before", ctx)
        before.end()
        span.set_attribute(A.DECISION, "allow")
        run = tracer.start_span("run", ctx)
        token = otel_context.attach(trace.set_span_in_context(run, ctx))
        result = tool(**call.arguments)  # type: ignore[arg-type]
        if asyncio.iscoroutine(result):
            result = await result
        otel_context.detach(token)
        run.end()
        after = tracer.start_span("after", ctx)
        t0 = time.perf_counter()
        result, _ = redactor.redact(result, "result")
        after.add_event(
            A.EVENT_HOOK,
            {
                A.EVENT_HOOK_NAME: "redaction",
                A.EVENT_HOOK_DECISION: "keep",
                A.EVENT_HOOK_DURATION_MS: round((time.perf_counter() - t0) * 1000, 3),
            },
        )
        after.end()
        span.set_attribute(A.ARGUMENTS_REWRITTEN, False)
        span.set_attribute(A.RESULT_OVERRIDDEN, False)
        span.set_attribute(A.RESULT_IS_ERROR, False)
        token = otel_context.attach(ctx)
        sc = span.get_span_context()
        logger.info(
            "tool_call.completed",
            tool_name="echo",
            call_id=call.id,
            duration_ms=round((time.perf_counter() - start) * 1000, 3),
            is_error=False,
            result_size=len(result),
            arguments_rewritten=False,
            trace_id=trace.format_trace_id(sc.trace_id),
            span_id=trace.format_span_id(sc.span_id),
            decision="allow",
        )
        otel_context.detach(token)
        span.end()
        return str(result)

    return floor


# What a competent engineer writes by hand to hide the one secret format they worry about.
_MINIMAL_SECRET = re.compile(r"sk-[A-Za-z0-9_-]{20,}")


def make_minimal_floor(provider: Any, logger: Any, tool: Callable[..., Any] = echo) -> Side:
    """The minimal competent version: 4 spans with the same attributes and one hook event, one
    structlog JSON event with the trace ids, one compiled-regex redaction of the result."""
    tracer = trace.get_tracer("minimal", tracer_provider=provider)

    async def minimal(call: ToolCall) -> str:
        start = time.perf_counter()
        span = tracer.start_span(
            "execute_tool echo", None, SpanKind.INTERNAL, {**_BASE, A.GEN_AI_TOOL_CALL_ID: call.id}
        )
        ctx = trace.set_span_in_context(span)
        tracer.start_span("before", ctx).end()
        run = tracer.start_span("run", ctx)
        token = otel_context.attach(trace.set_span_in_context(run, ctx))
        result = tool(**call.arguments)  # type: ignore[arg-type]
        if asyncio.iscoroutine(result):
            result = await result
        otel_context.detach(token)
        run.end()
        after = tracer.start_span("after", ctx)
        result = _MINIMAL_SECRET.sub("[REDACTED]", result)
        after.add_event(
            A.EVENT_HOOK, {A.EVENT_HOOK_NAME: "redaction", A.EVENT_HOOK_DECISION: "keep"}
        )
        after.end()
        span.set_attributes(
            {A.DECISION: "allow", A.RESULT_IS_ERROR: False, A.ARGUMENTS_REWRITTEN: False}
        )
        sc = span.get_span_context()
        logger.info(
            "tool_call.completed",
            tool_name="echo",
            call_id=call.id,
            duration_ms=round((time.perf_counter() - start) * 1000, 3),
            trace_id=trace.format_trace_id(sc.trace_id),
            span_id=trace.format_span_id(sc.span_id),
        )
        span.end()
        return result

    return minimal


def make_spans_floor(provider: Any, tool: Callable[..., Any] = echo) -> Side:
    """The spans alone, by hand: what an executor with no hooks records (the call's span with
    its attributes and outcome, ``before``, ``run`` current around the tool, ``after``)."""
    tracer = trace.get_tracer("spans", tracer_provider=provider)
    outcome = {A.DECISION: "allow", A.RESULT_IS_ERROR: False, A.ARGUMENTS_REWRITTEN: False}

    async def spans(call: ToolCall) -> Any:
        attributes = {**_BASE, A.GEN_AI_TOOL_CALL_ID: call.id}
        span = tracer.start_span("execute_tool echo", None, SpanKind.INTERNAL, attributes)
        parent = trace.set_span_in_context(span)
        tracer.start_span("before", parent).end()
        with tracer.start_as_current_span("run", parent):
            value = tool(**call.arguments)  # type: ignore[arg-type]
            if asyncio.iscoroutine(value):
                value = await value
        tracer.start_span("after", parent).end()
        span.set_attributes(outcome)
        span.end()
        return value

    return spans
