"""The suites' time budgets (``tests/budgets.toml``), checked when a pytest run ends.

Each test's setup, call and teardown times are added to the suite whose file patterns match its
file; with ``pytest-xdist`` the workers' reports reach the controller, which does the adding. The
install steps a suite names under ``builds`` add the times ``scripts/test.sh`` recorded in
``$OTELHOOKS_TIMINGS`` when they reused the machine's cache; a build from an empty cache (once per
pin and machine) is printed apart and counts against the whole run's time instead. At the end,
every suite that ran is printed with its figure and budget, and one over budget fails the run.

The budgets are for a machine doing nothing but this run. Work beside it (another build, a CPU
hog) stretches every test, so the budgets are stretched by the run's mean load average over what
the run itself can put on the machine (its cores plus its pytest workers), never shrunk:
``max(1, load / (cores + workers))``, printed with the figures.
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUDGETS = Path(__file__).with_name("budgets.toml")


@dataclass(frozen=True)
class Suite:
    name: str
    about: str
    files: tuple[str, ...]
    builds: tuple[str, ...]
    seconds: float

    def holds(self, path: str) -> bool:
        return any(fnmatch.fnmatch(path, pattern) for pattern in self.files)

    def present(self) -> bool:
        return any(any(ROOT.glob(pattern)) for pattern in self.files)


def load(path: Path = BUDGETS) -> list[Suite]:
    table = tomllib.loads(path.read_text())["suites"]
    return [
        Suite(
            name,
            entry["about"],
            tuple(entry["files"]),
            tuple(entry.get("builds", ())),
            float(entry["seconds"]),
        )
        for name, entry in table.items()
    ]


@dataclass(frozen=True)
class Build:
    seconds: float
    built: bool  # from an empty cache (else reused)


def build_times(path: str | None) -> dict[str, Build]:
    """``install: NAME SECONDS`` lines of the test command's timings file, and whether a
    ``built: NAME`` line says the install built from an empty cache."""
    if not path or not Path(path).is_file():
        return {}
    lines = Path(path).read_text().splitlines()
    built = {line.removeprefix("built: ") for line in lines if line.startswith("built: ")}
    found: dict[str, Build] = {}
    for line in lines:
        if line.startswith("install: "):
            name, _, seconds = line.removeprefix("install: ").rpartition(" ")
            found[name] = Build(float(seconds), name in built)
    return found


class Budgets:
    """Adds up each suite's test times; reports and enforces the budgets at the end."""

    def __init__(self, suites: list[Suite], workers: int = 1) -> None:
        self.suites = suites
        self.workers = max(1, workers)
        self.spent: dict[str, float] = defaultdict(float)
        self.tests: dict[str, set[str]] = defaultdict(set)
        self.loads: list[float] = []

    def stretch(self) -> float:
        """How much the budgets stretch for the work beside this run (see the module)."""
        if not self.loads:
            return 1.0
        mean = sum(self.loads) / len(self.loads)
        return max(1.0, mean / ((os.cpu_count() or 1) + self.workers))

    def add(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            self.loads.append(os.getloadavg()[0])
        path = report.nodeid.split("::", 1)[0]
        for suite in self.suites:
            if suite.holds(path):
                self.spent[suite.name] += report.duration
                self.tests[suite.name].add(report.nodeid)

    def verdict(self, builds: dict[str, Build]) -> tuple[list[str], list[str]]:
        """The report lines, and the lines of the suites over budget."""
        stretch = self.stretch()
        lines, over = [], []
        if stretch > 1.0:
            lines.append(f"budgets stretched x{stretch:.2f} for the work beside this run")
        for suite in self.suites:
            budget = suite.seconds * stretch
            if not self.tests[suite.name]:
                state = "did not run" if suite.present() else "absent (no file yet)"
                lines.append(f"{suite.name}: {state} (budget {budget:.0f} s)")
                continue
            mine = [builds[name] for name in suite.builds if name in builds]
            reused = sum(b.seconds for b in mine if not b.built)
            cold = sum(b.seconds for b in mine if b.built)
            total = self.spent[suite.name] + reused
            line = (
                f"{suite.name}: {total:.1f} s of {budget:.0f} s "
                f"({len(self.tests[suite.name])} tests"
                + (f", builds {reused:.0f} s" if suite.builds else "")
                + (f"; built from an empty cache in {cold:.0f} s, not counted" if cold else "")
                + ")"
            )
            lines.append(line)
            if total > budget:
                over.append(line)
        return lines, over


_budgets: Budgets | None = None


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    global _budgets
    if not _is_worker(config):
        workers = getattr(config.option, "numprocesses", None)
        _budgets = Budgets(load(), workers if isinstance(workers, int) else 1)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _budgets is not None:
        _budgets.add(report)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _budgets is None or _is_worker(session.config):
        return
    timings = os.environ.get("OTELHOOKS_TIMINGS")  # set by the test command
    lines, over = _budgets.verdict(build_times(timings))
    if not timings:  # a run by hand: only the suites it ran
        lines = [line for line in lines if " s of " in line]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and lines:
        reporter.write_sep("-", "suite budgets (tests/budgets.toml)")
        for line in lines:
            reporter.write_line(line)
        for line in over:
            reporter.write_line(f"OVER BUDGET: {line}", red=True)
    if over and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
