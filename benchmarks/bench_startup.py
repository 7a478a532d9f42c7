"""10. Start-up: importing the package, and the pytest plugin in every pytest session."""

from __future__ import annotations

import os
import statistics
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
        # Other installed plugins (hypothesis, logfire...) are kept out: only otelhooks' is
        # loaded, or none, so the difference is its own cost.
        Path(tmp, "test_x.py").write_text("def test_x():\n    assert True\n")
        base = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        plugin: list[float] = []
        no_plugin: list[float] = []
        for _ in range(rounds):
            with_it = [*base, "-p", "otelhooks.telemetry.pytest_plugin"]
            plugin += wall(with_it, cwd=Path(tmp), rounds=1, env=env)
            no_plugin += wall(base, cwd=Path(tmp), rounds=1, env=env)
    cost = (statistics.median(plugin) - statistics.median(no_plugin)) * 1000
    out["pytest plugin ms"] = cost
    report.row("pytest session: added by the otelhooks plugin", f"{cost:.1f} ms", "target ≤ 5 ms")
    out["import added ms"] = added
    report.results["startup"] = out
