"""2. Tracing off (no hooks): API no-op and a non-recording sampler."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import NoOpTracerProvider

from benchmarks.floors import echo, make_registry
from benchmarks.harness import Report, compare
from otelhooks import Hooks, ToolCall, ToolExecutor

NAME = "tracing_off"
NUMBER = "2"
TITLE = "Tracing off (no hooks): API no-op and a non-recording sampler"


def run(report: Report, quick: bool) -> None:
    n, repeats = (500, 3) if quick else (1000, 31)
    out: dict[str, Any] = {}
    for label, provider in (
        ("no-op API", NoOpTracerProvider()),
        ("sampler off", TracerProvider(sampler=ALWAYS_OFF)),
    ):
        tracer = trace.get_tracer("floor", tracer_provider=provider)
        executor = ToolExecutor(make_registry(), Hooks(), tracer_provider=provider)

        async def bare(call: ToolCall) -> str:
            return echo(**call.arguments)  # type: ignore[arg-type]

        async def four_noop_spans(call: ToolCall, tracer: Any = tracer) -> str:
            span = tracer.start_span("execute_tool echo")
            ctx = trace.set_span_in_context(span)
            for name in ("before", "run", "after"):
                child = tracer.start_span(name, ctx)
                if name == "run":
                    result = echo(**call.arguments)  # type: ignore[arg-type]
                child.end()
            span.end()
            return result

        comparison = compare(
            {"otelhooks": executor.execute, "4 spans": four_noop_spans, "bare": bare}, n, repeats
        )
        result = comparison.medians
        ratio = comparison.ratio("otelhooks", "4 spans")
        out[label] = {"us_per_call": result, "ratio_to_4_spans": ratio, "target": 1.5}
        report.row(f"{label}: bare call", f"{result['bare']:.2f} µs")
        report.row(f"{label}: 4 spans by hand", f"{result['4 spans']:.2f} µs")
        report.row(f"{label}: otelhooks", f"{result['otelhooks']:.2f} µs")
        report.row(f"{label}: ratio otelhooks / 4 spans", f"{ratio:.2f}×", "target ≤ 1.5×")
    report.results["tracing_off"] = out
