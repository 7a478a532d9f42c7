"""Benchmark 7, in its own process: N tool calls (4 spans each) exported over OTLP/gRPC.

python -m benchmarks.export_child ENDPOINT otelhooks-defaults|sdk-defaults N
"""

from __future__ import annotations

import asyncio
import json
import sys

from benchmarks.floors import make_registry
from otelhooks import Hooks, ToolCall, ToolExecutor
from otelhooks.builtin import RedactionHook, Redactor
from otelhooks.telemetry.tracing import setup_tracing

from .burst_child import SDK_DEFAULTS


def main(endpoint: str, mode: str, n: int) -> None:
    setup = setup_tracing(
        "otlp",
        otlp_endpoint=endpoint,
        otlp_protocol="grpc",
        batch_options=SDK_DEFAULTS if mode == "sdk-defaults" else None,
        export_timeout=10,
    )
    redactor = Redactor()
    hooks = Hooks([RedactionHook(redactor)])  # an after-hook: 4 spans per call
    executor = ToolExecutor(
        make_registry(), hooks, tracer_provider=setup.provider, scrubber=redactor
    )

    async def calls() -> None:
        for i in range(n):
            await executor.execute(ToolCall(f"c{i}", "echo", {"text": "x"}))

    asyncio.run(calls())
    stats = setup.shutdown()
    print(
        json.dumps(
            {
                "ended": stats.ended,
                "exported": stats.exported,
                "failed": stats.failed,
                "dropped": stats.dropped,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
