"""10. Start-up: importing the package, and the pytest plugin in every pytest session."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.harness import Report, wall

NAME = "startup"
NUMBER = "10"
TITLE = "Start-up: importing the package, and the pytest plugin in every pytest session"


def run(report: Report, quick: bool) -> None:
    rounds = 5 if quick else 31
    python = sys.executable
    samples: dict[str, list[float]] = {"bare": [], "import otelhooks": []}
    for _ in range(rounds):  # interleaved, so drift hits both alike
        samples["bare"] += wall([python, "-c", "pass"], rounds=1)
        samples["import otelhooks"] += wall([python, "-c", "import otelhooks"], rounds=1)
    first = [python, "-c", "from otelhooks import ToolExecutor, Hooks, ToolRegistry"]
    samples["first call's imports"] = wall(first, rounds=rounds)
    bare = statistics.median(samples["bare"])
    out: dict[str, Any] = {k: statistics.median(v) * 1000 for k, v in samples.items()}
    added = out["import otelhooks"] - bare * 1000
    report.row("import otelhooks, over a bare interpreter", f"{added:.1f} ms", "target ≤ 60 ms")
    report.row(
        "imports of a first call (ToolExecutor, Hooks, ToolRegistry)",
        f"{out['first call' + chr(39) + 's imports'] - bare * 1000:.1f} ms",
        "report",
    )
    with tempfile.TemporaryDirectory() as tmp:
        # Other installed plugins (hypothesis, langsmith...) are kept out: only otelhooks' is
        # loaded (the module its pytest11 entry point names), an empty plugin module, or none,
        # so the difference is its own cost; the empty one is what pytest charges any plugin
        # named to it (it looks the name up among the installed entry points first, which a
        # session that loads plugins by entry point does anyway).
        Path(tmp, "test_x.py").write_text("def test_x():\n    assert True\n")
        Path(tmp, "empty_plugin.py").write_text('"""A plugin with nothing in it."""\n')
        base = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        env = {
            **os.environ,
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "PYTHONHASHSEED": "0",
            "PYTHONPATH": os.pathsep.join(filter(None, [tmp, os.environ.get("PYTHONPATH")])),
        }
        plugins = {"otelhooks": "_otelhooks_pytest", "empty": "empty_plugin", "none": ""}
        envs = {side: {**env, "PYTEST_PLUGINS": name} for side, name in plugins.items()}
        sessions: dict[str, list[float]] = {side: [] for side in plugins}
        for _ in range(rounds):
            for side in plugins:
                sessions[side] += wall(base, cwd=Path(tmp), rounds=1, env=envs[side])
        medians = {side: statistics.median(times) * 1000 for side, times in sessions.items()}
        counts = None if quick else _session_instructions(base, Path(tmp), envs)
    cost = medians["otelhooks"] - medians["none"]
    empty = medians["empty"] - medians["none"]
    out["pytest plugin ms"] = cost
    out["pytest empty plugin ms"] = empty
    report.row("pytest session: added by the otelhooks plugin", f"{cost:.1f} ms", "report")
    report.row("pytest session: added by an empty plugin module", f"{empty:.1f} ms", "report")
    if counts is not None:
        # Instructions are not subject to the machine's drift; the session without a plugin
        # gives the rate at which this machine runs them.
        per_ms = counts["none"] / medians["none"]
        own = counts["otelhooks"] - counts["empty"]
        out["pytest plugin instructions over an empty plugin"] = own
        out["pytest plugin ms over an empty plugin (instructions)"] = own / per_ms
        out["pytest empty plugin instructions"] = counts["empty"] - counts["none"]
        report.row(
            "pytest session: the plugin over an empty one (callgrind)",
            f"{own:,.0f} instr ≈ {own / per_ms:.2f} ms",
            "target ≤ 5 ms",
        )
        report.row(
            "pytest session: an empty plugin over none (callgrind)",
            f"{counts['empty'] - counts['none']:,.0f} instr",
            "report",
        )
    out["import added ms"] = added
    report.results["startup"] = out


def _session_instructions(
    command: list[str], cwd: Path, envs: dict[str, dict[str, str]]
) -> dict[str, int] | None:
    """Instructions of one pytest session per side, counted by valgrind's callgrind (the same
    hash seed on every side, so the counts repeat to within a few thousand)."""
    if shutil.which("valgrind") is None:
        return None
    counts = {}
    for side, env in envs.items():
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        found = [line for line in done.stderr.splitlines() if "Collected :" in line]
        if done.returncode != 0 or not found:
            return None
        counts[side] = int(found[-1].rsplit(":", 1)[1])
    return counts
