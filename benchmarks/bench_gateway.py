"""15. The MCP gateway with everything on, against a floor of its own, the direct call and
peers (see ``benchmarks/gateway_child.py``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks.harness import ROOT, Report, child_json

NAME = "gateway"
NUMBER = "15"
TITLE = "MCP gateway (HTTP, everything on) and the stdio relay, against a floor and peers"
FASTMCP_VERSION = "4.1.6"


def run(report: Report, quick: bool) -> None:
    peers = None if quick else fastmcp_python()
    args = ["benchmarks.gateway_child", *(["--quick"] if quick else [])]
    if peers is not None:
        args += ["--peers", str(peers)]
    try:
        results = child_json(args, timeout=3600)
    except RuntimeError as exc:
        report.row("gateway benchmark", "failed", str(exc).strip().splitlines()[-1][:80])
        report.results["gateway"] = {"error": str(exc)}
        return
    latency, ratios, load = results["latency"], results["ratios"], results["load"]
    for name, figures in latency.items():
        report.row(
            f"{name}: p50 / p99 at one client",
            f"{figures['p50_us']:.0f} / {figures['p99_us']:.0f} µs",
        )
    floor = ratios["otelhooks / floor"]
    report.row("otelhooks / floor", f"{floor:.2f}×", "target ≤ 1.3× " + _ok(floor <= 1.3))
    direct = ratios["otelhooks / direct"]
    report.row("otelhooks / direct", f"{direct:.2f}×", "stretch ≤ 2× " + _ok(direct <= 2))
    relay = ratios["relay / direct"]
    report.row("stdio relay / direct", f"{relay:.2f}×", "target ≤ 1.3× " + _ok(relay <= 1.3))
    for name, value in ratios.items():
        if name not in ("otelhooks / floor", "otelhooks / direct", "relay / direct"):
            report.row(name, f"{value:.2f}×")
    for name, figures in load.items():
        cpu = figures["cpu_us_per_call"]
        report.row(
            f"{name} clients",
            f"{figures['calls_per_s']:.0f} calls/s",
            f"p99 {figures['p99_us'] / 1000:.0f} ms"
            + (f", CPU {cpu / 1000:.2f} ms/call" if cpu == cpu else ""),
        )
    report.results["gateway"] = results


def _ok(met: bool) -> str:
    return "✓" if met else "missed"


def fastmcp_python() -> Path | None:
    """The interpreter of a venv with fastmcp and mcp-server-time, made on first use (peers are
    installed here only, each in a venv of its own)."""
    venv = ROOT / ".cache" / "peers" / f"fastmcp-{FASTMCP_VERSION}"
    python = venv / "bin" / "python"
    if python.exists():
        return python
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [
        str(python),
        "-m",
        "pip",
        "install",
        "-q",
        f"fastmcp=={FASTMCP_VERSION}",
        "mcp-server-time",
    ]
    if subprocess.run(pip, capture_output=True).returncode != 0:
        shutil.rmtree(venv, ignore_errors=True)
        return None
    return python
