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
        # Other installed plugins (hypothesis, langsmith...) are kept out: only otelhooks' is
        # loaded (the module its pytest11 entry point names), an empty plugin module, or none,
        # so the difference is its own cost; the empty one is what pytest charges any plugin.
        Path(tmp, "test_x.py").write_text("def test_x():\n    assert True\n")
        Path(tmp, "empty_plugin.py").write_text('"""A plugin with nothing in it."""\n')
        base = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        env = {
            **os.environ,
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [tmp, os.environ.get("PYTHONPATH")])),
        }
        sessions: dict[str, list[float]] = {"otelhooks": [], "empty": [], "none": []}
        for _ in range(rounds):
            for side, extra in (
                ("otelhooks", ["-p", "_otelhooks_pytest"]),
                ("empty", ["-p", "empty_plugin"]),
                ("none", []),
            ):
                sessions[side] += wall([*base, *extra], cwd=Path(tmp), rounds=1, env=env)
    medians = {side: statistics.median(times) * 1000 for side, times in sessions.items()}
    cost = medians["otelhooks"] - medians["none"]
    empty = medians["empty"] - medians["none"]
    out["pytest plugin ms"] = cost
    out["pytest empty plugin ms"] = empty
    report.row("pytest session: added by the otelhooks plugin", f"{cost:.1f} ms", "target ≤ 5 ms")
    report.row("pytest session: added by an empty plugin module", f"{empty:.1f} ms", "report")
    out["import added ms"] = added
    report.results["startup"] = out
