"""7. Export to a real Jaeger over OTLP/gRPC without loss."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks.harness import ROOT, Report, child_json

NAME = "jaeger"
NUMBER = "7"
TITLE = "Export to a real Jaeger over OTLP/gRPC without loss"


def run(report: Report, quick: bool) -> None:
    from tests.jaeger_support import jaeger_binary, run_collector

    binary = jaeger_binary()
    if binary is None:
        report.row("Jaeger", "no binary", "run scripts/install-jaeger.sh")
        report.results["jaeger"] = None
        return
    n = 2_500 if quick else 25_000
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("otelhooks-defaults", "sdk-defaults"):
            extra = {"JAEGER_MAX_TRACES": "200000", "JAEGER_LOG_LEVEL": "warn"}
            with run_collector(
                binary, ROOT / "collector-config" / "jaeger.yaml", Path(tmp), extra
            ) as jaeger:
                stats = child_json(["benchmarks.export_child", jaeger.otlp_grpc, mode, str(n)])
                time.sleep(1)
                accepted = jaeger.metric("otelcol_receiver_accepted_spans_total")
                refused = jaeger.metric("otelcol_receiver_refused_spans_total")
            stats.update({"jaeger_accepted": accepted, "jaeger_refused": refused, "calls": n})
            out[mode] = stats
            lost = stats["ended"] - int(accepted)
            report.row(
                f"{mode}: {n:,} calls, spans created / accepted by Jaeger",
                f"{stats['ended']:,} / {int(accepted):,}",
                f"lost {lost:,} (SDK counted {stats['dropped']:,} dropped)",
            )
    report.results["jaeger"] = out
