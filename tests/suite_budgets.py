"""The suites' time budgets (``tests/budgets.toml``), checked when a pytest run ends.

Each test's setup, call and teardown times are added to the suite whose file patterns match its
file; with ``pytest-xdist`` the workers' reports reach the controller, which does the adding. The
install steps a suite names under ``builds`` add the times ``scripts/test.sh`` recorded in
``$OTELHOOKS_TIMINGS``. At the end, every suite that ran is printed with its figure and budget,
and one over budget fails the run.
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


def build_times(path: str | None) -> dict[str, float]:
    """``install: NAME SECONDS`` lines of the test command's timings file."""
    found: dict[str, float] = {}
    if not path or not Path(path).is_file():
        return found
    for line in Path(path).read_text().splitlines():
        if line.startswith("install: "):
            name, _, seconds = line.removeprefix("install: ").rpartition(" ")
            found[name] = float(seconds)
    return found


class Budgets:
    """Adds up each suite's test times; reports and enforces the budgets at the end."""

    def __init__(self, suites: list[Suite]) -> None:
        self.suites = suites
        self.spent: dict[str, float] = defaultdict(float)
        self.tests: dict[str, set[str]] = defaultdict(set)

    def add(self, report: pytest.TestReport) -> None:
        path = report.nodeid.split("::", 1)[0]
        for suite in self.suites:
            if suite.holds(path):
                self.spent[suite.name] += report.duration
                self.tests[suite.name].add(report.nodeid)

    def verdict(self, builds: dict[str, float]) -> tuple[list[str], list[str]]:
        """The report lines, and the lines of the suites over budget."""
        lines, over = [], []
        for suite in self.suites:
            if not self.tests[suite.name]:
                state = "did not run" if suite.present() else "absent (no file yet)"
                lines.append(f"{suite.name}: {state} (budget {suite.seconds:.0f} s)")
                continue
            built = sum(builds.get(name, 0.0) for name in suite.builds)
            total = self.spent[suite.name] + built
            line = (
                f"{suite.name}: {total:.1f} s of {suite.seconds:.0f} s "
                f"({len(self.tests[suite.name])} tests"
                + (f", builds {built:.0f} s" if suite.builds else "")
                + ")"
            )
            lines.append(line)
            if total > suite.seconds:
                over.append(line)
        return lines, over


_budgets: Budgets | None = None


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    global _budgets
    if not _is_worker(config):
        _budgets = Budgets(load())


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
