"""The cost of observability per tool call, measured against hand-written floors in the same run.

    .venv/bin/python benchmarks/run.py                 # everything (Jaeger part if a binary exists)
    .venv/bin/python benchmarks/run.py --quick         # small counts: a smoke run
    .venv/bin/python benchmarks/run.py --only overhead,redactor

Prints a table and writes benchmarks/results/latest.json. Every figure that matters is a ratio
between two things measured side by side in this process; absolute numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import structlog
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import NoOpTracerProvider, SpanKind

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from otelhooks import Hooks, ToolCall, ToolExecutor, ToolRegistry  # noqa: E402
from otelhooks.builtin import (  # noqa: E402
    RedactingProcessor,
    RedactionHook,
    Redactor,
    StructlogEvents,
    add_trace_context,
)
from otelhooks.builtin.span_redaction import RedactingSpanProcessor  # noqa: E402
from otelhooks.telemetry import attributes as A  # noqa: E402

RESULTS: dict[str, Any] = {}
ROWS: list[tuple[str, str, str, str]] = []  # section, measurement, value, target/verdict


def row(section: str, what: str, value: str, note: str = "") -> None:
    ROWS.append((section, what, value, note))
    print(f"  {what:<58} {value:>16}  {note}", flush=True)


# -- shared fixtures ---------------------------------------------------------------------------


def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


def make_registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(echo)
    return registry


class SinkExporter(SpanExporter):
    """Counts spans and drops them: an exporter with no cost of its own."""

    def __init__(self) -> None:
        self.count = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.count += len(spans)
        return SpanExportResult.SUCCESS


EXPORTERS: list[InMemorySpanExporter] = []


def sdk_provider(redactor: Redactor, exporter: SpanExporter | None = None) -> TracerProvider:
    """TracerProvider -> RedactingSpanProcessor -> BatchSpanProcessor -> in-memory exporter."""
    if exporter is None:
        exporter = InMemorySpanExporter()
        EXPORTERS.append(exporter)
    provider = TracerProvider()
    batch = BatchSpanProcessor(exporter, max_queue_size=65536)
    provider.add_span_processor(RedactingSpanProcessor(redactor, batch))
    return provider


def make_logger(redactor: Redactor) -> Any:
    return structlog.wrap_logger(
        structlog.ReturnLogger(),
        processors=[
            structlog.processors.add_log_level,
            add_trace_context,
            RedactingProcessor(redactor),
            structlog.processors.JSONRenderer(),
        ],
    )


def default_hooks(redactor: Redactor, logger: Any) -> Hooks:
    """What the demo turns on: redaction of results and one structlog event per call."""
    return Hooks([RedactionHook(redactor), StructlogEvents(logger)])


def make_floor(
    provider: Any, redactor: Redactor, logger: Any, tool: Callable[..., Any] = echo
) -> Callable[[ToolCall], Awaitable[str]]:
    """The same work written by hand: 4 spans, same attributes and events, same log event, same
    redaction pass, around a bare function call."""
    tracer = trace.get_tracer("floor", tracer_provider=provider)
    base = {
        A.GEN_AI_OPERATION_NAME: A.OP_EXECUTE_TOOL,
        A.GEN_AI_TOOL_NAME: "echo",
        A.GEN_AI_TOOL_TYPE: A.TOOL_TYPE_FUNCTION,
        A.GEN_AI_TOOL_DESCRIPTION: "Return the text unchanged.",
    }

    async def floor(call: ToolCall) -> str:
        start = time.perf_counter()
        span = tracer.start_span(
            "execute_tool echo", None, SpanKind.INTERNAL, {**base, A.GEN_AI_TOOL_CALL_ID: call.id}
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


def plain_provider(exporter: SpanExporter | None = None) -> TracerProvider:
    """TracerProvider -> BatchSpanProcessor -> in-memory exporter: no span redaction."""
    if exporter is None:
        exporter = InMemorySpanExporter()
        EXPORTERS.append(exporter)
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=65536))
    return provider


def plain_logger() -> Any:
    """structlog with the level, the trace ids and JSON: no log redaction."""
    return structlog.wrap_logger(
        structlog.ReturnLogger(),
        processors=[
            structlog.processors.add_log_level,
            add_trace_context,
            structlog.processors.JSONRenderer(),
        ],
    )


# What a competent engineer writes by hand to hide the one secret format they worry about.
_MINIMAL_SECRET = re.compile(r"sk-[A-Za-z0-9_-]{20,}")


def make_minimal_floor(
    provider: Any, logger: Any, tool: Callable[..., Any] = echo
) -> Callable[[ToolCall], Awaitable[str]]:
    """The minimal competent version: 4 spans with the same attributes and one hook event, one
    structlog JSON event with the trace ids, one compiled-regex redaction of the result."""
    tracer = trace.get_tracer("minimal", tracer_provider=provider)
    base = {
        A.GEN_AI_OPERATION_NAME: A.OP_EXECUTE_TOOL,
        A.GEN_AI_TOOL_NAME: "echo",
        A.GEN_AI_TOOL_TYPE: A.TOOL_TYPE_FUNCTION,
        A.GEN_AI_TOOL_DESCRIPTION: "Return the text unchanged.",
    }

    async def minimal(call: ToolCall) -> str:
        start = time.perf_counter()
        span = tracer.start_span(
            "execute_tool echo", None, SpanKind.INTERNAL, {**base, A.GEN_AI_TOOL_CALL_ID: call.id}
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


async def _sequential(fn: Callable[[ToolCall], Awaitable[Any]], calls: list[ToolCall]) -> float:
    start = time.perf_counter()
    for call in calls:
        await fn(call)
    return time.perf_counter() - start


def compare(
    sides: dict[str, Callable[[ToolCall], Awaitable[Any]]], n: int, repeats: int
) -> dict[str, float]:
    """Median µs per call of each side. The sides take turns in short rounds (``repeats`` of
    them, ``n`` calls each), so drift in the machine's speed hits all sides alike."""
    calls = [ToolCall(f"call-{i}", "echo", {"text": f"hello {i}"}) for i in range(n)]
    samples: dict[str, list[float]] = {name: [] for name in sides}

    async def main() -> None:
        for fn in sides.values():  # warm up caches
            await _sequential(fn, calls[: min(200, n)])
        for round_ in range(repeats):
            order = list(sides.items())
            if round_ % 2:
                order.reverse()
            for name, fn in order:
                for exporter in EXPORTERS:  # keep memory flat between rounds
                    exporter.clear()
                gc.collect()
                samples[name].append(await _sequential(fn, calls) / n * 1e6)

    asyncio.run(main())
    PAIRED.update({name: values for name, values in samples.items()})
    return {name: statistics.median(values) for name, values in samples.items()}


PAIRED: dict[str, list[float]] = {}


def paired_ratio(a: str, b: str) -> float:
    """Median over rounds of a's time over b's time in the same round."""
    return statistics.median(x / y for x, y in zip(PAIRED[a], PAIRED[b], strict=True))


# -- 1. overhead over the floor ----------------------------------------------------------------


def bench_overhead(quick: bool) -> None:
    print("\n1. Overhead per tool call against two hand-written floors (full tracing)")
    redactor = Redactor()
    provider = sdk_provider(redactor)
    logger = make_logger(redactor)
    readme = ToolExecutor(
        make_registry(), default_hooks(redactor, logger), tracer_provider=provider
    )
    same_work = make_floor(provider, redactor, logger)
    bare_provider, bare_logger = plain_provider(), plain_logger()
    defaults_only = ToolExecutor(
        make_registry(), default_hooks(redactor, bare_logger), tracer_provider=bare_provider
    )
    minimal = make_minimal_floor(bare_provider, bare_logger)
    n, repeats = (300, 3) if quick else (500, 41)
    result = compare(
        {
            "readme set-up": readme.execute,
            "same-work floor": same_work,
            "default hooks, no span/log redaction": defaults_only.execute,
            "minimal floor": minimal,
        },
        n,
        repeats,
    )
    provider.shutdown()
    bare_provider.shutdown()
    ratios = {
        "readme / same-work floor": (paired_ratio("readme set-up", "same-work floor"), 1.0),
        "readme / minimal floor": (paired_ratio("readme set-up", "minimal floor"), 1.3),
        "defaults without span/log redaction / minimal floor": (
            paired_ratio("default hooks, no span/log redaction", "minimal floor"),
            1.0,
        ),
    }
    RESULTS["overhead"] = {
        "us_per_call": result,
        "ratios": {k: v for k, (v, _) in ratios.items()},
        "targets": {k: t for k, (_, t) in ratios.items()},
    }
    for name, value in result.items():
        row("1", name, f"{value:.1f} µs")
    for name, (value, target) in ratios.items():
        verdict = "✓" if value <= target else "missed"
        row("1", name, f"{value:.3f}×", f"target ≤ {target}× {verdict}")
    instructions = instructions_per_call(quick)
    if instructions is not None:
        RESULTS["overhead"]["instructions_per_call"] = instructions
        for side, count in instructions.items():
            row("1", f"{side}: instructions per call (callgrind)", f"{count:,.0f}")
        for a, b in (("readme", "same-work"), ("readme", "minimal"), ("defaults", "minimal")):
            ratio_ir = instructions[a] / instructions[b]
            RESULTS["overhead"][f"instructions_ratio_{a}_{b}"] = ratio_ir
            row("1", f"instructions {a} / {b}", f"{ratio_ir:.3f}×")


def instructions_per_call(quick: bool) -> dict[str, float] | None:
    """Instructions per call of each side of benchmark 1, counted by valgrind's callgrind: the
    difference between runs of ``small`` and ``large`` calls, divided by the extra calls."""
    if quick:
        row("1", "instructions (callgrind)", "skipped", "not in --quick")
        return None
    if shutil.which("valgrind") is None:
        row("1", "instructions (callgrind)", "no valgrind", "apt-get install valgrind")
        return None
    small, large = 50, 250

    def count(side: str, n: int) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [
                "valgrind",
                "--tool=callgrind",
                "--callgrind-out-file=/dev/null",
                sys.executable,
                "-m",
                "benchmarks.instructions_child",
                side,
                str(n),
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    sides = ("readme", "same-work", "defaults", "minimal")
    totals: dict[tuple[str, int], int] = {}
    for side in sides:  # two at a time: one per core
        procs = {n: count(side, n) for n in (small, large)}
        for n, proc in procs.items():
            _, err = proc.communicate(timeout=1800)
            found = [line for line in err.splitlines() if "Collected :" in line]
            if proc.returncode != 0 or not found:
                row("1", "instructions (callgrind)", "failed", err[-200:])
                return None
            totals[(side, n)] = int(found[-1].rsplit(":", 1)[1])
    return {
        side: (totals[(side, large)] - totals[(side, small)]) / (large - small) for side in sides
    }


# -- 2. tracing off ----------------------------------------------------------------------------


def bench_tracing_off(quick: bool) -> None:
    print("\n2. Tracing off (no hooks): API no-op and a non-recording sampler")
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

        result = compare(
            {"otelhooks": executor.execute, "4 spans": four_noop_spans, "bare": bare}, n, repeats
        )
        ratio = paired_ratio("otelhooks", "4 spans")
        out[label] = {"us_per_call": result, "ratio_to_4_spans": ratio, "target": 1.5}
        row("2", f"{label}: bare call", f"{result['bare']:.2f} µs")
        row("2", f"{label}: 4 spans by hand", f"{result['4 spans']:.2f} µs")
        row("2", f"{label}: otelhooks", f"{result['otelhooks']:.2f} µs")
        row("2", f"{label}: ratio otelhooks / 4 spans", f"{ratio:.2f}×", "target ≤ 1.5×")
    RESULTS["tracing_off"] = out


# -- 3. against opentelemetry-util-genai -------------------------------------------------------


def bench_util_genai(quick: bool) -> None:
    print("\n3. Against opentelemetry-util-genai's tool invocation (one span, no hooks)")
    try:
        from opentelemetry.util.genai.handler import TelemetryHandler
    except ImportError:
        row(
            "3", "opentelemetry-util-genai", "not installed", "pip install opentelemetry-util-genai"
        )
        RESULTS["util_genai"] = None
        return
    redactor = Redactor()
    provider = sdk_provider(redactor)
    handler = TelemetryHandler(tracer_provider=provider)
    executor = ToolExecutor(make_registry(), Hooks(), tracer_provider=provider)

    async def util_genai(call: ToolCall) -> str:
        with handler.tool("echo", tool_type="function") as invocation:
            invocation.tool_call_id = call.id
            return echo(**call.arguments)  # type: ignore[arg-type]

    n, repeats = (300, 3) if quick else (3000, 9)
    result = compare(
        {"otelhooks (4 spans)": executor.execute, "util-genai (1 span)": util_genai}, n, repeats
    )
    provider.shutdown()
    RESULTS["util_genai"] = {"us_per_call": result}
    for name, value in result.items():
        row("3", name, f"{value:.1f} µs")
    row(
        "3",
        "ratio",
        f"{result['otelhooks (4 spans)'] / result['util-genai (1 span)']:.2f}×",
        "the 3 phase spans",
    )


# -- 4. cost per call as concurrency grows -------------------------------------------------------


def bench_concurrency(quick: bool) -> None:
    print("\n4. Cost per call from 1 to 10,000 concurrent async tool calls (README set-up)")
    levels = [1, 100, 1000] if quick else [1, 100, 1000, 10_000]
    total = 1000 if quick else 10_000
    redactor = Redactor()
    logger = make_logger(redactor)
    registry = ToolRegistry()

    async def fetch(text: str) -> str:
        await asyncio.sleep(0)
        return text

    registry.register(fetch)

    async def run(label: str, level: int) -> float:
        provider = sdk_provider(redactor)
        calls = [ToolCall(f"c{i}", "fetch", {"text": f"t{i}"}) for i in range(total)]
        if label == "otelhooks":
            executor = ToolExecutor(
                registry, default_hooks(redactor, logger), tracer_provider=provider
            )
            fn: Callable[[ToolCall], Awaitable[Any]] = executor.execute
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
                samples.setdefault((label, level), []).append(asyncio.run(run(label, level)))
    result = {f"{label} x{level}": statistics.median(v) for (label, level), v in samples.items()}
    out: dict[str, Any] = {"us_per_call": result}
    for label in ("otelhooks", "same-work floor"):
        costs = [result[f"{label} x{level}"] for level in levels]
        spread = max(costs) / min(costs)
        out[f"{label} spread"] = spread
        for level, cost in zip(levels, costs, strict=True):
            row("4", f"{label}: {level:,} concurrent", f"{cost:.1f} µs/call")
        target = "target ≤ 1.1×" if label == "otelhooks" else "the runtime's own drift"
        row("4", f"{label}: most over least costly level", f"{spread:.3f}×", target)
    out["target"] = 1.1
    RESULTS["concurrency"] = out


# -- 5. redactor -------------------------------------------------------------------------------


def _time(fn: Callable[[], Any], min_time: float = 0.2) -> float:
    n, elapsed = 1, 0.0
    while elapsed < min_time:
        n *= 2
        start = time.perf_counter()
        for _ in range(n):
            fn()
        elapsed = time.perf_counter() - start
    return elapsed / n * 1e6


def realistic_inputs() -> dict[str, str]:
    """Tool outputs as they come: a 100 KB JSON API response, a YAML document, a log file."""
    import random

    rng = random.Random(7)
    words = [
        "agent",
        "tool",
        "call",
        "result",
        "status",
        "value",
        "items",
        "list",
        "name",
        "created",
        "updated",
        "user",
        "order",
        "payment",
        "invoice",
        "shipment",
        "region",
        "cluster",
        "node",
        "deployment",
        "service",
        "request",
        "response",
    ]

    def sentence(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n))

    items = []
    api = ""
    i = 0
    while len(api) < 100_000:
        items.append(
            {
                "id": f"ord_{rng.getrandbits(48):012x}",
                "customer": {"name": sentence(2).title(), "email": f"user{i}@example.com"},
                "status": rng.choice(["paid", "pending", "refunded"]),
                "amount": round(rng.random() * 500, 2),
                "created_at": "2026-11-30T12:34:56Z",
                "sha": f"{rng.getrandbits(160):040x}",
                "url": f"https://api.example.com/v1/orders/{i}",
                "notes": sentence(12),
            }
        )
        i += 1
        api = json.dumps({"data": items, "has_more": True})
    yaml_doc = "".join(
        f"  - name: service-{k}\n    image: ghcr.io/acme/service-{k}:1.{k}.0\n"
        f"    replicas: {k % 5 + 1}\n    env:\n      LOG_LEVEL: info\n"
        f"      REGION: eu-west-{k % 3 + 1}\n    description: {sentence(10)}\n"
        for k in range(400)
    )
    yaml_doc = "services:\n" + yaml_doc[:60_000]
    log = "".join(
        f"2026-11-30T12:{k // 60 % 60:02d}:{k % 60:02d}Z INFO "
        f"request_id={rng.getrandbits(64):016x} method=GET path=/api/items/{k} status=200 "
        f'duration_ms={rng.randint(2, 900)} user_agent=curl/8.4.0 msg="{sentence(6)}"\n'
        for k in range(700)
    )
    return {"json_api_100kb": api[:100_000], "yaml_doc": yaml_doc, "log_file": log}


def bench_redactor(quick: bool) -> None:
    print("\n5. Redactor cost: realistic tool outputs, per KB, side by side")
    from benchmarks.baseline_redactor import Redactor as BaselineRedactor

    current, baseline = Redactor(), BaselineRedactor()
    scrubbers: dict[str, Callable[[str], Any]] = {
        "otelhooks": lambda text: current.redact(text, "result"),
        "otelhooks 0.1.0 (today's)": lambda text: baseline.redact(text, "result"),
    }
    try:
        from logfire._internal.scrubbing import Scrubber

        logfire_scrubber = Scrubber(None)
        scrubbers["logfire scrubber"] = lambda text: logfire_scrubber.scrub_value(
            ("attributes", "result"), text
        )
    except ImportError:
        row("5", "logfire scrubber", "not installed", "pip install logfire (benchmark extra)")
    min_time = 0.05 if quick else 0.5
    out: dict[str, Any] = {}
    for label, text in realistic_inputs().items():
        kb = len(text) / 1000
        for name, scrub in scrubbers.items():
            # each round scans anew: the redactor would recognise text it has seen
            cost = _time(
                lambda scrub=scrub, text=text: (current._known.clear(), scrub(text)), min_time
            )
            out[f"{label} {name}"] = cost / kb
            row("5", f"{label} ({kb:.0f} KB): {name}", f"{cost / kb:.1f} µs/KB")
    for label in realistic_inputs():
        ratio = out[f"{label} otelhooks"] / out[f"{label} otelhooks 0.1.0 (today's)"]
        out[f"{label} ratio to 0.1.0"] = ratio
        row("5", f"{label}: otelhooks over 0.1.0", f"{ratio:.2f}×", "target ≤ 1.0×")
    clean = {f"field_{i}": f"ordinary value number {i} with some words" for i in range(10)}
    out["10_fields_clean_us"] = _time(lambda: current.redact(clean), min_time)
    row("5", "10 string fields, clean", f"{out['10_fields_clean_us']:.1f} µs")
    RESULTS["redactor"] = out


# -- 6. memory ---------------------------------------------------------------------------------


def bench_memory(quick: bool) -> None:
    print("\n6. Memory: peak RSS while making tool calls (separate processes)")
    n = 10_000 if quick else 100_000
    out = {}
    for mode in ("sink", "dead-otlp"):
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.memory_child", mode, str(n)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
            check=True,
        )
        data = json.loads(done.stdout.strip().splitlines()[-1])
        out[mode] = data
        first, last = (data["rss_mib"][k] for k in sorted(data["rss_mib"], key=int))
        row(
            "6",
            f"{mode}: peak RSS after {n // 10:,} / {n:,} calls",
            f"{first} / {last} MiB",
            f"exported {data['exported']:,}, failed {data['failed']:,}, "
            f"dropped {data['dropped']:,}",
        )
    RESULTS["memory"] = out


# -- 7. export to Jaeger -----------------------------------------------------------------------


def bench_jaeger(quick: bool) -> None:
    print("\n7. Export to a real Jaeger over OTLP/gRPC without loss")
    sys.path.insert(0, str(ROOT))
    from tests.jaeger_support import jaeger_binary, run_collector

    binary = jaeger_binary()
    if binary is None:
        row("7", "Jaeger", "no binary", "run scripts/install-jaeger.sh")
        RESULTS["jaeger"] = None
        return
    import tempfile

    n = 2_500 if quick else 25_000
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("otelhooks-defaults", "sdk-defaults"):
            extra = {"JAEGER_MAX_TRACES": "200000", "JAEGER_LOG_LEVEL": "warn"}
            with run_collector(
                binary, ROOT / "collector-config" / "jaeger.yaml", Path(tmp), extra
            ) as jaeger:
                done = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "benchmarks.export_child",
                        jaeger.otlp_grpc,
                        mode,
                        str(n),
                    ],
                    capture_output=True,
                    text=True,
                    timeout=900,
                    check=True,
                )
                stats = json.loads(done.stdout.strip().splitlines()[-1])
                time.sleep(1)
                accepted = jaeger.metric("otelcol_receiver_accepted_spans_total")
                refused = jaeger.metric("otelcol_receiver_refused_spans_total")
            stats.update({"jaeger_accepted": accepted, "jaeger_refused": refused, "calls": n})
            out[mode] = stats
            lost = stats["ended"] - int(accepted)
            row(
                "7",
                f"{mode}: {n:,} calls, spans created / accepted by Jaeger",
                f"{stats['ended']:,} / {int(accepted):,}",
                f"lost {lost:,} (SDK counted {stats['dropped']:,} dropped)",
            )
    RESULTS["jaeger"] = out


# -- 8. a burst of tool calls, nothing lost ---------------------------------------------------


def bench_burst(quick: bool) -> None:
    print("\n8. A burst of 10,000 tool calls with a logger printing to stdout: spans dropped")
    n = 2000 if quick else 10_000
    out = {}
    for mode in ("otelhooks-defaults", "sdk-defaults"):
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.burst_child", mode, str(n)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            timeout=600,
            check=True,
        )
        data = json.loads(done.stderr.strip().splitlines()[-1])
        out[mode] = data
        target = "target 0 ✓" if data["dropped"] == 0 else "target 0"
        row(
            "8",
            f"{mode}: {n:,} calls, spans ended / dropped",
            f"{data['ended']:,} / {data['dropped']:,}",
            target if mode == "otelhooks-defaults" else "why otelhooks has its own",
        )
    RESULTS["burst"] = out


# -- 9. shutdown with an endpoint that is down or silent --------------------------------------


def bench_shutdown(quick: bool) -> None:
    print("\n9. Shutdown with a full queue and an endpoint that is down or silent")
    import socket

    from otelhooks.telemetry.tracing import setup_tracing

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)  # accepts connections, never answers
    refused = socket.socket()
    refused.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
    endpoints = {
        "down (connection refused)": f"http://127.0.0.1:{refused.getsockname()[1]}",
        "silent (accepts, never answers)": f"http://127.0.0.1:{silent.getsockname()[1]}",
    }
    spans = 5_000 if quick else 60_000
    out = {}
    try:
        for label, endpoint in endpoints.items():
            setup = setup_tracing("otlp", otlp_endpoint=endpoint)
            tracer = setup.provider.get_tracer("bench")
            for _ in range(spans):
                tracer.start_span("s").end()
            start = time.perf_counter()
            stats = setup.shutdown()
            seconds = time.perf_counter() - start
            out[label] = {"seconds": seconds, "ended": stats.ended, "lost": stats.lost}
            verdict = "✓" if seconds <= 3.0 else "missed"
            row(
                "9",
                f"{label}: shutdown with {spans:,} spans queued",
                f"{seconds:.2f} s",
                f"target ≤ 3 s {verdict}; {stats.lost:,} lost, all counted",
            )
    finally:
        silent.close()
        refused.close()
    RESULTS["shutdown"] = out


# -- 10. start-up cost ------------------------------------------------------------------------


def _wall(
    command: list[str],
    cwd: Path | None = None,
    rounds: int = 15,
    env: dict[str, str] | None = None,
) -> list[float]:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        subprocess.run(command, cwd=cwd, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - start)
    return times


def bench_startup(quick: bool) -> None:
    print("\n10. Start-up: importing the package, and the pytest plugin in every pytest session")
    import tempfile

    rounds = 5 if quick else 31
    python = sys.executable
    samples: dict[str, list[float]] = {"bare": [], "import otelhooks": []}
    for _ in range(rounds):  # interleaved, so drift hits both alike
        samples["bare"] += _wall([python, "-c", "pass"], rounds=1)
        samples["import otelhooks"] += _wall([python, "-c", "import otelhooks"], rounds=1)
    first = [python, "-c", "from otelhooks import ToolExecutor, Hooks, ToolRegistry"]
    samples["first call's imports"] = _wall(first, rounds=rounds)
    bare = statistics.median(samples["bare"])
    out: dict[str, Any] = {k: statistics.median(v) * 1000 for k, v in samples.items()}
    added = out["import otelhooks"] - bare * 1000
    row("10", "import otelhooks, over a bare interpreter", f"{added:.1f} ms", "target ≤ 60 ms")
    row(
        "10",
        "imports of a first call (ToolExecutor, Hooks, ToolRegistry)",
        f"{out['first call' + chr(39) + 's imports'] - bare * 1000:.1f} ms",
        "report",
    )
    with tempfile.TemporaryDirectory() as tmp:
        # Other installed plugins (hypothesis, logfire...) are kept out: only otelhooks' is
        # loaded, or none, so the difference is its own cost.
        Path(tmp, "test_x.py").write_text("def test_x():\n    assert True\n")
        base = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        plugin: list[float] = []
        no_plugin: list[float] = []
        for _ in range(rounds):
            with_it = [*base, "-p", "otelhooks.telemetry.pytest_plugin"]
            plugin += _wall(with_it, cwd=Path(tmp), rounds=1, env=env)
            no_plugin += _wall(base, cwd=Path(tmp), rounds=1, env=env)
    cost = (statistics.median(plugin) - statistics.median(no_plugin)) * 1000
    out["pytest plugin ms"] = cost
    row("10", "pytest session: added by the otelhooks plugin", f"{cost:.1f} ms", "target ≤ 5 ms")
    out["import added ms"] = added
    RESULTS["startup"] = out


# -- 11. peers: the marginal cost of a tool call inside an agent run -------------------------


STRANDS_VERSION = "1.62.0"


def strands_python(build: bool) -> Path | None:
    """The interpreter of a venv with Strands (it pins an older mcp than otelhooks' extra)."""
    venv = ROOT / ".cache" / "peers" / f"strands-{STRANDS_VERSION}"
    python = venv / "bin" / "python"
    if python.exists() or not build:
        return python if python.exists() else None
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", f"strands-agents=={STRANDS_VERSION}"]
    if subprocess.run(pip, capture_output=True).returncode != 0:
        shutil.rmtree(venv, ignore_errors=True)
        return None
    return python


def bench_peers(quick: bool) -> None:
    print("\n11. Marginal cost of one tool call inside an agent run, against peer frameworks")
    args = [sys.executable, "-m", "benchmarks.peers"] + (["--quick"] if quick else [])
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    results: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    strands = strands_python(build=not quick)
    if strands is not None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        extra = subprocess.run(
            [str(strands), "-m", "benchmarks.peers", "--only", "Strands"]
            + (["--quick"] if quick else []),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=1800,
            env=env,
        )
        if extra.returncode == 0:
            results.update(json.loads(extra.stdout.strip().splitlines()[-1]))
    ours = results.get("otelhooks (README set-up)")
    peers = {
        k: v
        for k, v in results.items()
        if isinstance(v, float) and not k.startswith("otel") and "otelhooks" not in k
    }
    for name, value in results.items():
        if name == "calls_per_run":
            continue
        shown = f"{value:.0f} µs/call" if isinstance(value, float) else str(value)
        row("11", name, shown)
    if isinstance(ours, float) and peers:
        cheapest = min(peers, key=lambda k: peers[k])
        ratio = peers[cheapest] / ours
        results["cheapest peer over otelhooks"] = ratio
        verdict = "✓" if ratio >= 2 else "missed"
        row(
            "11",
            f"{cheapest} (cheapest peer) / otelhooks",
            f"{ratio:.2f}×",
            f"target ≥ 2× {verdict}",
        )
    from benchmarks.peers import FRAMEWORKS

    print("  inside each framework's own run, with otelhooks' boundary around its tools:")
    for framework in FRAMEWORKS:
        bare, guarded = results.get(framework), results.get(f"{framework} + otelhooks")
        if isinstance(bare, float) and isinstance(guarded, float):
            results[f"{framework} + otelhooks / {framework}"] = guarded / bare
            row(
                "11",
                f"{framework}: added by otelhooks per tool call",
                f"{guarded - bare:.0f} µs",
                f"{guarded / bare:.2f}× the framework alone",
            )
    RESULTS["peers"] = results


def bench_mcp(quick: bool) -> None:
    print("\n12. MCP: the proxy and the client adapter per tools/call on mcp-server-time")
    args = [sys.executable, "-m", "benchmarks.mcp_bench"] + (["--quick"] if quick else [])
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        row("12", "mcp benchmark", "failed", done.stderr.strip().splitlines()[-1][:80])
        RESULTS["mcp"] = {"error": done.stderr[-2000:]}
        return
    results: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    proxy, adapter = results["proxy"], results["adapter"]
    row("12", "official client -> mcp-server-time (direct)", f"{proxy['direct_us']:.0f} µs/call")
    row(
        "12", "official client -> otelhooks mcp proxy -> server", f"{proxy['proxy_us']:.0f} µs/call"
    )
    ratio = proxy["proxy_over_direct"]
    verdict = "✓" if ratio <= 1.10 else "missed"
    row("12", "proxy / direct", f"{ratio:.2f}×", f"target ≤ 1.10× {verdict}")
    row("12", "mcp.Client.call_tool", f"{adapter['client_us']:.0f} µs/call")
    row(
        "12",
        "MCPServerTools tool, tracing off (added)",
        f"{adapter['adapter_added_us']:.0f} µs/call",
        f"{adapter['adapter_over_client']:.2f}× the client",
    )
    row(
        "12",
        "... with spans and redaction (added)",
        f"{adapter['boundary_added_us']:.0f} µs/call",
        f"{adapter['boundary_over_client']:.2f}× the client",
    )
    RESULTS["mcp"] = results


SECTIONS: dict[str, Callable[[bool], None]] = {
    "overhead": bench_overhead,
    "tracing_off": bench_tracing_off,
    "util_genai": bench_util_genai,
    "concurrency": bench_concurrency,
    "redactor": bench_redactor,
    "memory": bench_memory,
    "jaeger": bench_jaeger,
    "burst": bench_burst,
    "shutdown": bench_shutdown,
    "startup": bench_startup,
    "peers": bench_peers,
    "mcp": bench_mcp,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small counts, for a smoke run")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "latest.json"))
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(chosen) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    machine = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
    }
    print(
        f"otelhooks benchmarks on {machine['platform']}, {machine['cpus']} CPUs, "
        f"Python {machine['python']}"
    )
    started = time.perf_counter()
    for name in chosen:
        SECTIONS[name](args.quick)
    RESULTS["machine"] = machine
    RESULTS["quick"] = args.quick
    RESULTS["seconds"] = round(time.perf_counter() - started, 1)
    RESULTS["max_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(RESULTS, indent=2, default=str))
    print(f"\nwrote {out} in {RESULTS['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
