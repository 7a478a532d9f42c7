"""5. Redactor cost: realistic tool outputs, per KB, side by side with the redactors it started
from; the cost of each detector; 1 MB of high-entropy text; and what redacting such a result
does to another caller of the same event loop (its p99 with and without it)."""

from __future__ import annotations

import asyncio
import base64
import random
import time
from collections.abc import Callable
from typing import Any

from benchmarks.baseline import REDACTOR_0_1_0, REDACTOR_BEFORE_REWORK, redactor_at
from benchmarks.harness import Report, interleaved, time_per_call
from benchmarks.inputs import realistic_inputs
from otelhooks.builtin import Redactor, TextView

NAME = "redactor"
NUMBER = "5"
TITLE = "Redactor cost: realistic tool outputs, per KB, side by side"


def _fresh(redactor: Any) -> None:
    """Forget the texts a redactor has seen (it would recognise them): each round scans anew."""
    cache = getattr(redactor, "cache", None)
    if cache is not None:
        cache.clear()
    known = getattr(redactor, "_known", None)  # the redactors of earlier commits
    if known is not None:
        known.clear()


def detector_costs(redactor: Redactor, text: str, min_time: float) -> dict[str, float]:
    """Microseconds each detector of ``redactor`` spends on ``text`` (the text's view and the
    gate over it, once, under ``view``; nested scans of decoded text included in the detector
    that asked for them)."""
    pipeline = redactor.pipeline

    def view() -> tuple[TextView, dict[str, list[int]]]:
        made = TextView(text, 0, pipeline)
        _ = made.long_tokens
        return made, pipeline.gate_hits(made)

    costs = {"view and gate": time_per_call(view, min_time)}
    prepared, found = view()
    for index, detector in enumerate(pipeline.detectors):
        hits = pipeline.hits_of(index, found)
        if not hits and not detector.always:
            costs[detector.name] = 0.0
            continue

        def one(detector: Any = detector, hits: Any = hits) -> None:
            prepared.findings.clear()
            list(detector.find(prepared, hits))

        costs[detector.name] = time_per_call(one, min_time)
    return costs


def run(report: Report, quick: bool) -> None:
    current = Redactor()
    redactors: dict[str, Any] = {"otelhooks": current}
    for label, commit in (
        ("before the rework", REDACTOR_BEFORE_REWORK),
        ("0.1.0", REDACTOR_0_1_0),
    ):
        baseline = redactor_at(commit)
        if baseline is None:
            report.row(
                f"otelhooks {label} ({commit})", "not in this clone", "git fetch --unshallow"
            )
        else:
            redactors[f"otelhooks {label}"] = baseline
    scrubbers: dict[str, Callable[[str], Any]] = {
        name: (lambda text, r=r: (_fresh(r), r.redact(text, "result")))
        for name, r in redactors.items()
    }
    try:
        from logfire._internal.scrubbing import Scrubber

        logfire_scrubber = Scrubber(None)
        scrubbers["logfire scrubber"] = lambda text: logfire_scrubber.scrub_value(
            ("attributes", "result"), text
        )
    except ImportError:
        report.row("logfire scrubber", "not installed", "pip install logfire (benchmark extra)")
    min_time = 0.05 if quick else 0.5
    out: dict[str, Any] = {}
    inputs = realistic_inputs()
    for label, text in inputs.items():
        kb = len(text) / 1000
        costs = interleaved(
            {
                name: (lambda scrub=scrub, text=text: scrub(text))
                for name, scrub in scrubbers.items()
            },
            rounds=3 if quick else 9,
            min_time=min_time / 5,
        )
        for name, cost in costs.items():
            out[f"{label} {name}"] = cost / kb
            report.row(f"{label} ({kb:.0f} KB): {name}", f"{cost / kb:.1f} µs/KB")
    targets = {"otelhooks before the rework": 1.2, "otelhooks 0.1.0": None}
    for label in inputs:
        for baseline, target in targets.items():
            if f"{label} {baseline}" not in out:
                continue
            ratio = out[f"{label} otelhooks"] / out[f"{label} {baseline}"]
            out[f"{label} ratio to {baseline.removeprefix('otelhooks ')}"] = ratio
            if target is None:
                report.row(f"{label}: otelhooks over {baseline}", f"{ratio:.2f}×")
            else:
                report.verdict(f"{label}: otelhooks over {baseline}", ratio, target)
    for label, text in inputs.items():
        for name, cost in detector_costs(current, text, min_time / 5).items():
            out[f"{label} detector {name}"] = cost
            report.row(f"{label}: {name}", f"{cost:.0f} µs")
    hostile = random_tokens(100_000)
    without = Redactor(exclude=["unlabelled"])
    for label, redactor in (("otelhooks", current), ("without the unlabelled detector", without)):
        out[f"100kb random tokens {label}_ms"] = (
            time_per_call(lambda r=redactor: (_fresh(r), r.redact(hostile)), min_time) / 1000
        )
        report.row(
            f"100 KB of random tokens in prose: {label}",
            f"{out[f'100kb random tokens {label}_ms']:.0f} ms",
            "hostile input: every token judged",
        )
    clean = {f"field_{i}": f"ordinary value number {i} with some words" for i in range(10)}
    out["10_fields_clean_us"] = time_per_call(lambda: current.redact(clean), min_time)
    report.row("10 string fields, clean", f"{out['10_fields_clean_us']:.1f} µs")
    big = high_entropy_text(1_000_000)
    rounds = [
        time_per_call(lambda: (_fresh(current), current.redact(big)), min_time) for _ in range(3)
    ]
    out["1mb_high_entropy_ms"] = min(rounds) / 1000
    met = "✓" if out["1mb_high_entropy_ms"] < 100 else "missed"
    report.row(
        "1 MB of high-entropy text",
        f"{out['1mb_high_entropy_ms']:.0f} ms",
        f"target < 100 ms {met}",
    )
    for name, cost in detector_costs(current, big, min_time).items():
        out[f"1mb detector {name}"] = cost
        report.row(f"1 MB: {name}", f"{cost / 1000:.1f} ms")
    quiet, busy = asyncio.run(stall(big, 2.0 if quick else 6.0))
    out["stall_p99_ms"] = {"alone": quiet, "beside a 1 MB result": busy}
    grown = busy - quiet
    report.row(
        "another caller's p99, alone / beside 1 MB results redacted",
        f"{quiet:.1f} / {busy:.1f} ms",
        f"grows {grown:.1f} ms: target ≤ 20 ms {'✓' if grown <= 20 else 'missed'}",
    )
    report.results["redactor"] = out


def random_tokens(size: int) -> str:
    """``size`` characters of prose made of generated tokens (``use <token> now``, one a line):
    what a tool that returns attacker-chosen text can make the redactor judge, token by
    token."""
    rng = random.Random(13)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    lines = []
    while sum(map(len, lines)) < size:
        lines.append("use " + "".join(rng.choice(alphabet) for _ in range(24)) + " now")
    return "\n".join(lines)[:size]


def high_entropy_text(size: int) -> str:
    """``size`` characters of base64 lines of random bytes (an attachment, a blob, a key
    store as a tool returns it)."""
    rng = random.Random(11)
    raw = bytes(rng.getrandbits(8) for _ in range(size * 3 // 4 + 64))
    encoded = base64.b64encode(raw).decode()
    return "\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76))[:size]


async def stall(big: str, seconds: float) -> tuple[float, float]:
    """p99 (ms) of small tool calls made one after the other by one caller, alone and while
    another caller's tool returns ``big`` over and over, through the same executor and event
    loop with the redaction hook."""
    from otelhooks import Hooks, ToolCall, ToolExecutor, ToolRegistry
    from otelhooks.builtin import RedactionHook

    registry = ToolRegistry()

    @registry.tool
    def dump() -> str:
        """A large result."""
        return big

    @registry.tool
    def ping() -> str:
        """A small one."""
        return "pong"

    executor = ToolExecutor(registry, Hooks([RedactionHook()]))

    async def pings(until: float) -> float:
        latencies = []
        while time.perf_counter() < until:
            started = time.perf_counter()
            await executor.execute(ToolCall("p", "ping", {}))
            latencies.append(time.perf_counter() - started)
            await asyncio.sleep(0.001)
        latencies.sort()
        return 1000 * latencies[max(0, int(len(latencies) * 0.99) - 1)]

    async def dumps(until: float) -> None:
        while time.perf_counter() < until:
            await executor.execute(ToolCall("d", "dump", {}))

    quiet = await pings(time.perf_counter() + seconds / 2)
    until = time.perf_counter() + seconds / 2
    busy, _ = await asyncio.gather(pings(until), dumps(until))
    return quiet, busy
