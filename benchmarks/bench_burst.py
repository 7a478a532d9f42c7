"""8. A burst of 10,000 tool calls, and 100,000 in a tight loop, with a logger printing to
stdout: spans dropped."""

from __future__ import annotations

from benchmarks.harness import Report, child_json

NAME = "burst"
NUMBER = "8"
TITLE = "10,000 calls at once and 100,000 in a tight loop, logging to stdout: spans dropped"


def run(report: Report, quick: bool) -> None:
    n = 2000 if quick else 10_000
    out = {}
    for mode in ("otelhooks-defaults", "sdk-defaults"):
        data = child_json(["benchmarks.burst_child", mode, str(n)], from_stderr=True, timeout=600)
        out[mode] = data
        target = "target 0 ✓" if data["dropped"] == 0 else "target 0"
        report.row(
            f"{mode}: {n:,} calls, spans ended / dropped",
            f"{data['ended']:,} / {data['dropped']:,}",
            target if mode == "otelhooks-defaults" else "why otelhooks has its own",
        )
    n = 20_000 if quick else 100_000
    data = child_json(
        ["benchmarks.burst_child", "sustained", str(n)], from_stderr=True, timeout=900
    )
    out["sustained"] = data
    report.row(
        f"sustained: {n:,} calls in a tight loop, spans ended / dropped",
        f"{data['ended']:,} / {data['dropped']:,}",
        "target 0 ✓" if data["dropped"] == 0 else "target 0",
    )
    report.row("sustained: calls per second", f"{n / data['seconds']:,.0f}", "with backpressure")
    report.results["burst"] = out
