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
from otelhooks import attributes as A  # noqa: E402
from otelhooks.builtin import (  # noqa: E402
    RedactingProcessor,
    RedactionHook,
    Redactor,
    StructlogEvents,
    add_trace_context,
)
from otelhooks.builtin.span_redaction import RedactingSpanProcessor  # noqa: E402

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

    totals: dict[tuple[str, int], int] = {}
    for side in ("floor", "otelhooks"):  # two at a time: one per core
        procs = {n: count(side, n) for n in (small, large)}
        for n, proc in procs.items():
            _, err = proc.communicate(timeout=1800)
            found = [line for line in err.splitlines() if "Collected :" in line]
            if proc.returncode != 0 or not found:
                row("1", "instructions (callgrind)", "failed", err[-200:])
                return None
            totals[(side, n)] = int(found[-1].rsplit(":", 1)[1])
    return {
        side: (totals[(side, large)] - totals[(side, small)]) / (large - small)
        for side in ("floor", "otelhooks")
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


# -- 4. parallel throughput --------------------------------------------------------------------


def bench_parallel(quick: bool) -> None:
    print("\n4. Parallel throughput: concurrent async tool calls in one event loop")
    n = 1000 if quick else 10_000
    redactor = Redactor()
    logger = make_logger(redactor)
    registry = ToolRegistry()

    async def fetch(text: str) -> str:
        await asyncio.sleep(0)
        return text

    registry.register(fetch)

    async def run(label: str) -> float:
        provider = sdk_provider(redactor)
        calls = [ToolCall(f"c{i}", "fetch", {"text": f"t{i}"}) for i in range(n)]
        if label == "otelhooks":
            executor = ToolExecutor(
                registry, default_hooks(redactor, logger), tracer_provider=provider
            )
            fn: Callable[[ToolCall], Awaitable[Any]] = executor.execute
        else:
            fn = make_floor(provider, redactor, logger, fetch)

        gc.collect()
        start = time.perf_counter()
        await asyncio.gather(*(fn(c) for c in calls))
        elapsed = time.perf_counter() - start
        provider.shutdown()
        for exporter in EXPORTERS:
            exporter.clear()
        EXPORTERS.clear()
        return n / elapsed

    samples: dict[str, list[float]] = {"otelhooks": [], "floor": []}
    for round_ in range(1 if quick else 9):
        labels = list(samples) if round_ % 2 else list(reversed(samples))
        for label in labels:
            samples[label].append(asyncio.run(run(label)))
    result = {k: statistics.median(v) for k, v in samples.items()}
    ratio = statistics.median(
        a / b for a, b in zip(samples["otelhooks"], samples["floor"], strict=True)
    )
    RESULTS["parallel"] = {"calls_per_second": result, "ratio": ratio, "n": n, "target": 0.9}
    row("4", f"floor: {n} concurrent calls", f"{result['floor']:,.0f} calls/s")
    row("4", f"otelhooks: {n} concurrent calls", f"{result['otelhooks']:,.0f} calls/s")
    row("4", "ratio otelhooks / floor", f"{ratio:.3f}×", "target ≥ 0.9×")


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


def bench_redactor(quick: bool) -> None:
    print("\n5. Redactor cost")
    redactor = Redactor()
    clean = {f"field_{i}": f"ordinary value number {i} with some words" for i in range(10)}
    laden = dict(clean)
    laden["field_1"] = "Authorization: Bearer abcDEF123456ghiJKLmno"
    laden["api_key"] = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
    laden["field_3"] = "postgres://app:S3cretPassw0rd@db.internal:5432/prod"
    min_time = 0.05 if quick else 0.3
    out: dict[str, Any] = {
        "10_fields_clean_us": _time(lambda: redactor.redact(clean), min_time),
        "10_fields_secrets_us": _time(lambda: redactor.redact(laden), min_time),
    }
    row("5", "10 fields, clean", f"{out['10_fields_clean_us']:.1f} µs")
    row("5", "10 fields, 3 secrets", f"{out['10_fields_secrets_us']:.1f} µs")
    line = "2024-05-01 12:00:00 INFO request handled path=/api/items status=200 bytes=5120\n"
    sizes = [1_000, 10_000, 100_000] + ([] if quick else [1_000_000])
    scaling = {}
    for size in sizes:
        text = (line * (size // len(line) + 1))[:size]
        scaling[size] = _time(lambda text=text: redactor.redact_text(text), min_time)
        row(
            "5",
            f"{size // 1000} KB tool result, clean",
            f"{scaling[size]:.0f} µs",
            f"{scaling[size] / (size / 1000):.2f} µs/KB",
        )
    secret_100k = (line * 1300)[:99_000] + " key sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 "
    out["100kb_with_secret_us"] = _time(lambda: redactor.redact_text(secret_100k), min_time)
    row("5", "100 KB tool result with a secret", f"{out['100kb_with_secret_us']:.0f} µs")
    out["scaling_us"] = {str(k): v for k, v in scaling.items()}
    per_kb = [v / (k / 1000) for k, v in scaling.items()]
    out["per_kb_spread"] = max(per_kb) / min(per_kb)
    row("5", "µs/KB, largest over smallest", f"{out['per_kb_spread']:.2f}×", "linear ≈ 1×")
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
        for mode in ("recommended", "sdk-defaults"):
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


SECTIONS: dict[str, Callable[[bool], None]] = {
    "overhead": bench_overhead,
    "tracing_off": bench_tracing_off,
    "util_genai": bench_util_genai,
    "parallel": bench_parallel,
    "redactor": bench_redactor,
    "memory": bench_memory,
    "jaeger": bench_jaeger,
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
