"""The suites' time budgets: each test's phases add to its suite, builds count, and a suite over
its budget is reported as such (the test command then fails)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .suite_budgets import Budgets, Suite, build_times, load


def _report(nodeid: str, duration: float) -> pytest.TestReport:
    return pytest.TestReport(nodeid, ("", 0, ""), {}, "passed", None, "call", duration=duration)


def test_every_budget_in_the_file_loads_with_files_and_seconds() -> None:
    suites = load()
    assert {s.name for s in suites} >= {
        "gateway-boundary",
        "gateway-hardening",
        "approvals",
        "secret-corpora",
        "guide-runner",
    }
    assert all(s.files and s.seconds > 0 for s in suites)


def test_a_suite_over_its_budget_is_reported_and_one_within_is_not(tmp_path: Path) -> None:
    fast = Suite("fast", "", ("tests/test_a*.py",), (), 10)
    slow = Suite("slow", "", ("tests/test_b.py",), ("corpus",), 10)
    budgets = Budgets([fast, slow])
    budgets.add(_report("tests/test_a1.py::t", 3.0))
    budgets.add(_report("tests/test_a2.py::t", 3.0))
    budgets.add(_report("tests/test_b.py::t", 4.0))
    budgets.add(_report("tests/test_other.py::t", 100.0))  # in no suite
    timings = tmp_path / "timings"
    timings.write_text("install: corpus 7\ninstall: Python packages 50\nlint 3\n")
    assert build_times(str(timings)) == {"corpus": 7.0, "Python packages": 50.0}
    lines, over = budgets.verdict(build_times(str(timings)))
    assert lines[0] == "fast: 6.0 s of 10 s (2 tests)"
    assert over == ["slow: 11.0 s of 10 s (1 tests, builds 7 s)"]
