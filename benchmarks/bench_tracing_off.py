"""2. Tracing off (no hooks): API no-op and a non-recording sampler.

The otelhooks side is the bare machinery (``scrubber=NO_SCRUBBING``: four no-op spans scrub
nothing either); the same executor with the default scrubber a runtime given none gets runs
beside it and is reported as its own row (what safe-by-default scrubbing costs a call).
Besides four no-op spans by hand and the bare call, the otelhooks of
:data:`benchmarks.baseline.CORE_BEFORE_ONE_PATH` (read from git history) runs side by side when the
clone has that commit: the figures before and after one execution path replaced the second."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import NoOpTracerProvider

from benchmarks.baseline import CORE_BEFORE_ONE_PATH, core_at
from benchmarks.floors import echo
from benchmarks.harness import Report, compare
from otelhooks import NO_SCRUBBING, Hooks, ToolCall, ToolExecutor, ToolRegistry

NAME = "tracing_off"
NUMBER = "2"
TITLE = "Tracing off (no hooks): API no-op and a non-recording sampler"


async def aecho(text: str) -> str:
    """Return the text unchanged (an async tool)."""
    return text


def run(report: Report, quick: bool) -> None:
    n, repeats = (500, 3) if quick else (1000, 31)
    out: dict[str, Any] = {}
    handler: Any
    before = None if quick else core_at(CORE_BEFORE_ONE_PATH)
    for label, provider, handler in (
        ("no-op API", NoOpTracerProvider(), echo),
        ("no-op API, async tool", NoOpTracerProvider(), aecho),
        ("sampler off", TracerProvider(sampler=ALWAYS_OFF), echo),
    ):
        tracer = trace.get_tracer("floor", tracer_provider=provider)
        registry = ToolRegistry()
        registry.register(handler, name="echo")
        executor = ToolExecutor(registry, Hooks(), tracer_provider=provider, scrubber=NO_SCRUBBING)
        scrubbed = ToolExecutor(registry, Hooks(), tracer_provider=provider)  # the default one

        if handler is aecho:

            async def run_handler(call: ToolCall) -> str:
                return await aecho(**call.arguments)  # type: ignore[arg-type]

        else:

            async def run_handler(call: ToolCall) -> str:
                return echo(**call.arguments)  # type: ignore[arg-type]

        async def four_noop_spans(
            call: ToolCall,
            tracer: Any = tracer,
            is_async: bool = handler is aecho,
            timed: bool = False,
        ) -> str:
            span = tracer.start_span("execute_tool echo")
            ctx = trace.set_span_in_context(span)
            for name in ("before", "run", "after"):
                child = tracer.start_span(name, ctx)
                if name == "run":
                    if timed:  # the bound otelhooks puts on every async call (180 s)
                        async with asyncio.timeout(180.0):
                            result = await aecho(**call.arguments)  # type: ignore[arg-type]
                    elif is_async:
                        result = await aecho(**call.arguments)  # type: ignore[arg-type]
                    else:
                        result = echo(**call.arguments)  # type: ignore[arg-type]
                child.end()
            span.end()
            return result

        sides = {
            "otelhooks": executor.execute,
            "4 spans": four_noop_spans,
            "bare": run_handler,
            "otelhooks, default scrubber": scrubbed.execute,
        }
        if before is not None:  # the same executor before one execution path
            old_registry = before.ToolRegistry()
            old_registry.register(handler, name="echo")
            old = before.ToolExecutor(old_registry, before.Hooks(), tracer_provider=provider)
            sides["otelhooks before"] = old.execute
        if handler is aecho:
            sides["4 spans, timeout"] = functools.partial(four_noop_spans, timed=True)
        comparison = compare(sides, n, repeats)
        result = comparison.medians
        ratio = comparison.ratio("otelhooks", "4 spans")
        out[label] = {"us_per_call": result, "ratio_to_4_spans": ratio, "target": 1.5}
        if before is not None:
            out[label]["before"] = {
                "commit": CORE_BEFORE_ONE_PATH,
                "ratio_to_4_spans": comparison.ratio("otelhooks before", "4 spans"),
                "spread": comparison.spread("otelhooks", "4 spans"),
            }
        if handler is aecho:
            timed_ratio = comparison.ratio("otelhooks", "4 spans, timeout")
            out[label]["ratio_to_4_spans_with_timeout"] = timed_ratio
        report.row(f"{label}: bare call", f"{result['bare']:.2f} µs")
        report.row(f"{label}: 4 spans by hand", f"{result['4 spans']:.2f} µs")
        report.row(f"{label}: otelhooks", f"{result['otelhooks']:.2f} µs")
        report.row(f"{label}: ratio otelhooks / 4 spans", f"{ratio:.2f}×", "target ≤ 1.5×")
        scrubbed_ratio = comparison.ratio("otelhooks, default scrubber", "4 spans")
        out[label]["default_scrubber"] = {
            "us_per_call": result["otelhooks, default scrubber"],
            "ratio_to_4_spans": scrubbed_ratio,
        }
        report.row(
            f"{label}: otelhooks with the default scrubber / 4 spans",
            f"{scrubbed_ratio:.2f}×",
            f"{result['otelhooks, default scrubber']:.2f} µs: what scrubbing by default costs",
        )
        if before is not None:
            report.row(
                f"{label}: before one path ({CORE_BEFORE_ONE_PATH}) / 4 spans",
                f"{out[label]['before']['ratio_to_4_spans']:.2f}×",
                f"{result['otelhooks before']:.2f} µs",
            )
        if handler is aecho:
            report.row(
                f"{label}: 4 spans and asyncio.timeout by hand",
                f"{result['4 spans, timeout']:.2f} µs",
            )
            report.row(f"{label}: ratio otelhooks / that", f"{timed_ratio:.2f}×", "report")
    report.results["tracing_off"] = out
