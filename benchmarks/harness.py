"""What every benchmark shares: the report it writes to, sides measured in paired interleaved
rounds, timers, and child processes that print one JSON object.

A benchmark module has ``NAME`` (its ``--only`` name), ``TITLE`` and ``run(report, quick)``. The
figures that matter are ratios between things measured side by side in one run; absolute numbers
depend on the machine.
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from otelhooks import ToolCall  # noqa: E402

# In-memory exporters the sides export to: emptied between rounds, so memory stays flat.
EXPORTERS: list[InMemorySpanExporter] = []


@dataclass
class Report:
    """The table a run prints and the JSON it writes."""

    results: dict[str, Any] = field(default_factory=dict)
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)
    section: str = ""

    def start(self, section: str, title: str) -> None:
        """Begin a section (its number and title)."""
        self.section = section
        print(f"\n{section}. {title}", flush=True)

    def row(self, what: str, value: str, note: str = "") -> None:
        """One line of the table: what was measured, the figure, the target or a note."""
        self.rows.append((self.section, what, value, note))
        print(f"  {what:<58} {value:>16}  {note}", flush=True)

    def verdict(self, what: str, value: float, target: float, *, most: bool = True) -> None:
        """A ratio against its target (``most``: at most the target, else at least)."""
        met = value <= target if most else value >= target
        sign = "≤" if most else "≥"
        self.row(what, f"{value:.3f}×", f"target {sign} {target}× {'✓' if met else 'missed'}")


class SinkExporter(SpanExporter):
    """Counts spans and drops them: an exporter with no cost of its own."""

    def __init__(self) -> None:
        self.count = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.count += len(spans)
        return SpanExportResult.SUCCESS


Side = Callable[[ToolCall], Awaitable[Any]]


@dataclass
class Comparison:
    """Microseconds per call of each side, one sample per round."""

    samples: dict[str, list[float]]

    @property
    def medians(self) -> dict[str, float]:
        """The median µs per call of each side."""
        return {name: statistics.median(values) for name, values in self.samples.items()}

    def ratio(self, a: str, b: str) -> float:
        """Median over rounds of a's time over b's time in the same round."""
        return statistics.median(
            x / y for x, y in zip(self.samples[a], self.samples[b], strict=True)
        )

    def spread(self, a: str, b: str) -> tuple[float, float]:
        """The lowest and highest per-round ratio of a over b."""
        ratios = [x / y for x, y in zip(self.samples[a], self.samples[b], strict=True)]
        return min(ratios), max(ratios)


async def _sequential(fn: Side, calls: list[ToolCall]) -> float:
    start = time.perf_counter()
    for call in calls:
        await fn(call)
    return time.perf_counter() - start


def compare(sides: dict[str, Side], n: int, repeats: int, tool: str = "echo") -> Comparison:
    """Each side makes ``n`` calls per round, ``repeats`` rounds; the sides take turns (the order
    reversed every other round), so drift in the machine's speed hits all sides alike."""
    calls = [ToolCall(f"call-{i}", tool, {"text": f"hello {i}"}) for i in range(n)]
    samples: dict[str, list[float]] = {name: [] for name in sides}

    async def main() -> None:
        for fn in sides.values():  # warm up caches
            await _sequential(fn, calls[: min(200, n)])
        for round_ in range(repeats):
            order = list(sides.items())
            if round_ % 2:
                order.reverse()
            for name, fn in order:
                for exporter in EXPORTERS:
                    exporter.clear()
                gc.collect()
                samples[name].append(await _sequential(fn, calls) / n * 1e6)

    asyncio.run(main())
    return Comparison(samples)


def time_per_call(fn: Callable[[], Any], min_time: float = 0.2) -> float:
    """Microseconds per call of ``fn``, doubling the count until it runs ``min_time`` seconds."""
    n, elapsed = 1, 0.0
    while elapsed < min_time:
        n *= 2
        start = time.perf_counter()
        for _ in range(n):
            fn()
        elapsed = time.perf_counter() - start
    return elapsed / n * 1e6


def interleaved(
    fns: dict[str, Callable[[], Any]], rounds: int = 7, min_time: float = 0.05
) -> dict[str, float]:
    """Microseconds per call of each of ``fns``: the median over ``rounds`` rounds in which
    every function runs once in turn, so a slow moment of the machine falls on all of them."""
    counts = {}
    for name, fn in fns.items():  # calls per round: about ``min_time`` seconds of each
        n, elapsed = 1, 0.0
        while elapsed < min_time / 4:
            n *= 2
            start = time.perf_counter()
            for _ in range(n):
                fn()
            elapsed = time.perf_counter() - start
        counts[name] = max(1, int(n * min_time / elapsed))
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            n = counts[name]
            start = time.perf_counter()
            for _ in range(n):
                fn()
            samples[name].append((time.perf_counter() - start) / n * 1e6)
    return {name: statistics.median(times) for name, times in samples.items()}


def wall(
    command: list[str],
    cwd: Path | None = None,
    rounds: int = 15,
    env: dict[str, str] | None = None,
) -> list[float]:
    """Wall-clock seconds of each of ``rounds`` runs of a command."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        subprocess.run(command, cwd=cwd, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - start)
    return times


def child_json(
    args: Sequence[str],
    *,
    python: str | None = None,
    timeout: float = 900,
    from_stderr: bool = False,
    env: dict[str, str] | None = None,
) -> Any:
    """Run ``python -m <args>`` in the project and return the JSON object its last line
    prints (on stdout, or on stderr for children whose stdout is the thing measured)."""
    done = subprocess.run(
        [python or sys.executable, "-m", *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL if from_stderr else subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=timeout,
        env=env,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {done.stderr[-2000:]}")
    out = done.stderr if from_stderr else done.stdout
    return json.loads(out.strip().splitlines()[-1])
