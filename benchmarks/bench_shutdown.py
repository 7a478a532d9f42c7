"""9. Shutdown with a full queue and an endpoint that is down or silent; the demo's exit with
its collector down."""

from __future__ import annotations

import statistics
import sys
import time

from benchmarks.harness import Report, wall

NAME = "shutdown"
DOWN = "down (connection refused)"
NUMBER = "9"
TITLE = "Shutdown with a full queue and an endpoint that is down or silent"


def run(report: Report, quick: bool) -> None:
    import socket

    from otelhooks.telemetry.tracing import setup_tracing

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)  # accepts connections, never answers
    refused = socket.socket()
    refused.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
    endpoints = {
        DOWN: f"http://127.0.0.1:{refused.getsockname()[1]}",
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
            report.row(
                f"{label}: shutdown with {spans:,} spans queued",
                f"{seconds:.2f} s",
                f"target ≤ 3 s {verdict}; {stats.lost:,} lost, all counted",
            )
        # The whole demo, a process of its own, with its collector down and with no exporter.
        demo = [sys.executable, "-m", "otelhooks", "demo", "--no-tree"]
        rounds = 3 if quick else 7
        down = wall([*demo, "--exporter", "otlp", "--otlp-endpoint", endpoints[DOWN]], None, rounds)
        none = wall([*demo, "--exporter", "none"], None, rounds)
        out["demo"] = {"collector down": down, "no exporter": none}
        median_down, median_none = statistics.median(down), statistics.median(none)
        report.row(
            "the demo's exit, collector down / no exporter (median)",
            f"{median_down:.2f} / {median_none:.2f} s",
            f"target < 2 s {'✓' if median_down < 2 else 'missed'}; spread {min(down):.2f}–"
            f"{max(down):.2f} s over {rounds} runs",
        )
    finally:
        silent.close()
        refused.close()
    report.results["shutdown"] = out
