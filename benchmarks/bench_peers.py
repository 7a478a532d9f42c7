"""11. Marginal cost of one tool call inside an agent run, against peer frameworks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT, Report, child_json
from benchmarks.peers_child import FRAMEWORKS

STRANDS_VERSION = "1.62.0"

NAME = "peers"
NUMBER = "11"
TITLE = "Marginal cost of one tool call inside an agent run, against peer frameworks"


def run(report: Report, quick: bool) -> None:
    quick_flag = ["--quick"] if quick else []
    results: dict[str, Any] = child_json(["benchmarks.peers_child", *quick_flag], timeout=1800)
    strands = strands_python(build=not quick)
    if strands is not None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        try:
            results.update(
                child_json(
                    ["benchmarks.peers_child", "--only", "Strands", *quick_flag],
                    python=str(strands),
                    timeout=1800,
                    env=env,
                )
            )
        except RuntimeError as exc:
            report.row("Strands", "failed", str(exc)[-80:])
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
        report.row(name, shown)
    if isinstance(ours, float) and peers:
        cheapest = min(peers, key=lambda k: peers[k])
        ratio = peers[cheapest] / ours
        results["cheapest peer over otelhooks"] = ratio
        verdict = "✓" if ratio >= 2 else "missed"
        report.row(
            f"{cheapest} (cheapest peer) / otelhooks",
            f"{ratio:.2f}×",
            f"target ≥ 2× {verdict}",
        )
    print("  inside each framework's own run, with otelhooks' boundary around its tools:")
    for framework in FRAMEWORKS:
        bare, guarded = results.get(framework), results.get(f"{framework} + otelhooks")
        if isinstance(bare, float) and isinstance(guarded, float):
            results[f"{framework} + otelhooks / {framework}"] = guarded / bare
            report.row(
                f"{framework}: added by otelhooks per tool call",
                f"{guarded - bare:.0f} µs",
                f"{guarded / bare:.2f}× the framework alone",
            )
    report.results["peers"] = results


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
