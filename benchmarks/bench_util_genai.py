"""3. Against opentelemetry-util-genai's tool invocation (one span, no hooks)."""

from __future__ import annotations

from benchmarks.floors import echo, make_registry, sdk_provider
from benchmarks.harness import Report, compare
from otelhooks import NO_SCRUBBING, Hooks, ToolCall, ToolExecutor
from otelhooks.builtin import Redactor

NAME = "util_genai"
NUMBER = "3"
TITLE = "Against opentelemetry-util-genai's tool invocation (one span, no hooks)"


def run(report: Report, quick: bool) -> None:
    try:
        from opentelemetry.util.genai.handler import TelemetryHandler
    except ImportError:
        report.row(
            "opentelemetry-util-genai", "not installed", "pip install opentelemetry-util-genai"
        )
        report.results["util_genai"] = None
        return
    redactor = Redactor()
    provider = sdk_provider(redactor)
    handler = TelemetryHandler(tracer_provider=provider)
    executor = ToolExecutor(  # util-genai scrubs nothing of its own either
        make_registry(), Hooks(), tracer_provider=provider, scrubber=NO_SCRUBBING
    )

    async def util_genai(call: ToolCall) -> str:
        with handler.tool("echo", tool_type="function") as invocation:
            invocation.tool_call_id = call.id
            return echo(**call.arguments)  # type: ignore[arg-type]

    n, repeats = (300, 3) if quick else (3000, 9)
    result = compare(
        {"otelhooks (4 spans)": executor.execute, "util-genai (1 span)": util_genai}, n, repeats
    ).medians
    provider.shutdown()
    report.results["util_genai"] = {"us_per_call": result}
    for name, value in result.items():
        report.row(name, f"{value:.1f} µs")
    report.row(
        "ratio",
        f"{result['otelhooks (4 spans)'] / result['util-genai (1 span)']:.2f}×",
        "the 3 phase spans",
    )
