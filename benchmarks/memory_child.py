"""Benchmark 6, in its own process: peak RSS while making tool calls.

python -m benchmarks.memory_child sink|dead-otlp N
"""

from __future__ import annotations

import asyncio
import json
import sys

from benchmarks.floors import default_hooks, make_logger, make_registry
from benchmarks.harness import SinkExporter
from otelhooks import ToolCall, ToolExecutor
from otelhooks.builtin import Redactor
from otelhooks.telemetry.tracing import setup_tracing


def peak_rss_mib() -> int:
    """This process's peak RSS (VmHWM). Not ru_maxrss: Linux carries that over an exec, so a
    child would report its parent's peak."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    return -1


def main(mode: str, n: int) -> None:
    redactor = Redactor()
    if mode == "sink":
        setup = setup_tracing(SinkExporter(), redactor=redactor)
    else:
        setup = setup_tracing(
            "otlp", otlp_endpoint="http://127.0.0.1:9", export_timeout=0.5, redactor=redactor
        )
    hooks = default_hooks(redactor, make_logger(redactor))
    executor = ToolExecutor(
        make_registry(), hooks, tracer_provider=setup.provider, scrubber=redactor
    )
    marks: dict[int, int] = {}

    async def calls() -> None:
        for i in range(n):
            await executor.execute(ToolCall(f"c{i}", "echo", {"text": "x" * 64}))
            if i + 1 in (n // 10, n):
                marks[i + 1] = peak_rss_mib()

    asyncio.run(calls())
    stats = setup.shutdown()
    print(
        json.dumps(
            {
                "rss_mib": marks,
                "ended": stats.ended,
                "exported": stats.exported,
                "failed": stats.failed,
                "dropped": stats.dropped,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
