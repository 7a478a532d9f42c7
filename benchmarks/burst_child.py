"""Benchmark 8, in its own process: a burst of tool calls with a logger writing to stdout.

python -m benchmarks.burst_child otelhooks-defaults|sdk-defaults|sustained N  > /dev/null

The spans go through ``setup_tracing`` to an exporter that is reachable but, like a network, takes
a millisecond per batch; the structlog events of every call are printed to stdout as JSON through
the redacting processor, competing with the batch worker for the GIL. The burst modes start all
N calls at once; ``sustained`` makes them one after another in a tight loop (the process makes
spans for as long as it runs, so no queue size is enough by itself) to an exporter that takes
no time at all. Prints (to stderr) how many spans ended, were exported and dropped.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Sequence

import structlog
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from benchmarks.floors import make_registry
from otelhooks import Hooks, ToolCall, ToolExecutor
from otelhooks.builtin import RedactingProcessor, RedactionHook, Redactor, StructlogEvents
from otelhooks.builtin.structlog_events import add_trace_context
from otelhooks.telemetry.tracing import setup_tracing

# The SDK's own BatchSpanProcessor defaults (before otelhooks chose its own).
SDK_DEFAULTS = {"max_queue_size": 2048, "schedule_delay_millis": 5000, "max_export_batch_size": 512}


class NullExporter(SpanExporter):
    """Accepts every batch at once."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class NetworkLikeExporter(SpanExporter):
    """Accepts every batch after a millisecond, as a collector on the same network would."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        time.sleep(0.001)
        return SpanExportResult.SUCCESS


def main(mode: str, n: int) -> None:
    redactor = Redactor()
    setup = setup_tracing(
        NullExporter() if mode == "sustained" else NetworkLikeExporter(),
        redactor=redactor,
        batch_options=SDK_DEFAULTS if mode == "sdk-defaults" else None,
    )
    logger = structlog.wrap_logger(
        structlog.PrintLogger(sys.stdout),
        processors=[
            add_trace_context,
            RedactingProcessor(redactor),
            structlog.processors.JSONRenderer(),
        ],
    )
    hooks = Hooks([RedactionHook(redactor), StructlogEvents(logger)])
    executor = ToolExecutor(
        make_registry(), hooks, tracer_provider=setup.provider, scrubber=redactor
    )

    async def burst() -> None:
        if mode == "sustained":
            for i in range(n):
                await executor.execute(ToolCall(f"c{i}", "echo", {"text": f"t{i}"}))
            return
        await asyncio.gather(
            *(executor.execute(ToolCall(f"c{i}", "echo", {"text": f"t{i}"})) for i in range(n))
        )

    started = time.perf_counter()
    asyncio.run(burst())
    elapsed = time.perf_counter() - started
    stats = setup.shutdown()
    print(
        json.dumps(
            {
                "ended": stats.ended,
                "exported": stats.exported,
                "failed": stats.failed,
                "dropped": stats.dropped,
                "seconds": round(elapsed, 2),
            }
        ),
        file=sys.stderr,
    )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
