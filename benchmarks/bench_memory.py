"""6. Memory: peak RSS while making tool calls (separate processes)."""

from __future__ import annotations

from benchmarks.harness import Report, child_json

NAME = "memory"
NUMBER = "6"
TITLE = "Memory: peak RSS while making tool calls (separate processes)"


def run(report: Report, quick: bool) -> None:
    n = 10_000 if quick else 100_000
    out = {}
    for mode in ("sink", "dead-otlp"):
        data = child_json(["benchmarks.memory_child", mode, str(n)])
        out[mode] = data
        first, last = (data["rss_mib"][k] for k in sorted(data["rss_mib"], key=int))
        report.row(
            f"{mode}: peak RSS after {n // 10:,} / {n:,} calls",
            f"{first} / {last} MiB",
            f"exported {data['exported']:,}, failed {data['failed']:,}, "
            f"dropped {data['dropped']:,}",
        )
    report.results["memory"] = out
