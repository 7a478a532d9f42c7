"""4. Cost per call from 1 to 10,000 concurrent async tool calls (README set-up)."""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from typing import Any

from benchmarks.floors import default_hooks, make_floor, make_logger, sdk_provider
from benchmarks.harness import EXPORTERS, Report, Side
from otelhooks import ToolCall, ToolExecutor, ToolRegistry
from otelhooks.builtin import Redactor

NAME = "concurrency"
NUMBER = "4"
TITLE = "Cost per call from 1 to 10,000 concurrent async tool calls (README set-up)"


def run(report: Report, quick: bool) -> None:
    levels = [1, 100, 1000] if quick else [1, 100, 1000, 10_000]
    total = 1000 if quick else 10_000
    redactor = Redactor()
    logger = make_logger(redactor)
    registry = ToolRegistry()

    async def fetch(text: str) -> str:
        await asyncio.sleep(0)
        return text

    registry.register(fetch)

    async def measure(label: str, level: int) -> float:
        provider = sdk_provider(redactor)
        calls = [ToolCall(f"c{i}", "fetch", {"text": f"t{i}"}) for i in range(total)]
        if label == "otelhooks":
            executor = ToolExecutor(
                registry,
                default_hooks(redactor, logger),
                tracer_provider=provider,
                scrubber=redactor,
            )
            fn: Side = executor.execute
        else:
            fn = make_floor(provider, redactor, logger, fetch)
        gc.collect()
        start = time.perf_counter()
        if level == 1:  # one at a time
            for call in calls:
                await fn(call)
        else:
            for i in range(0, total, level):
                await asyncio.gather(*(fn(c) for c in calls[i : i + level]))
        elapsed = time.perf_counter() - start
        provider.shutdown()
        for exporter in EXPORTERS:
            exporter.clear()
        EXPORTERS.clear()
        return elapsed / total * 1e6

    samples: dict[tuple[str, int], list[float]] = {}
    for round_ in range(1 if quick else 5):
        for level in levels if round_ % 2 else list(reversed(levels)):
            for label in ("otelhooks", "same-work floor"):
                samples.setdefault((label, level), []).append(asyncio.run(measure(label, level)))
    result = {f"{label} x{level}": statistics.median(v) for (label, level), v in samples.items()}
    out: dict[str, Any] = {"us_per_call": result}
    for label in ("otelhooks", "same-work floor"):
        costs = [result[f"{label} x{level}"] for level in levels]
        spread = max(costs) / min(costs)
        out[f"{label} spread"] = spread
        for level, cost in zip(levels, costs, strict=True):
            report.row(f"{label}: {level:,} concurrent", f"{cost:.1f} µs/call")
        target = "target ≤ 1.1×" if label == "otelhooks" else "the runtime's own drift"
        report.row(f"{label}: most over least costly level", f"{spread:.3f}×", target)
    out["target"] = 1.1
    report.results["concurrency"] = out
