"""The suites' time budgets: each test's phases add to its suite, builds count, and a suite over
its budget is reported as such (the test command then fails)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .suite_budgets import Budgets, Build, Suite, build_times, load


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
    assert build_times(str(timings)) == {
        "corpus": Build(7.0, built=False),
        "Python packages": Build(50.0, built=False),
    }
    budgets.loads = [0.5]  # a machine doing nothing else
    lines, over = budgets.verdict(build_times(str(timings)))
    assert lines[0] == "fast: 6.0 s of 10 s (2 tests)"
    assert over == ["slow: 11.0 s of 10 s (1 tests, builds 7 s)"]


def test_a_build_from_an_empty_cache_is_shown_apart_and_not_counted(tmp_path: Path) -> None:
    slow = Suite("slow", "", ("tests/test_b.py",), ("corpus",), 10)
    budgets = Budgets([slow])
    budgets.add(_report("tests/test_b.py::t", 4.0))
    budgets.loads = [0.5]
    timings = tmp_path / "timings"
    timings.write_text("install: corpus 600\nbuilt: corpus\n")
    lines, over = budgets.verdict(build_times(str(timings)))
    assert lines == [
        "slow: 4.0 s of 10 s (1 tests, builds 0 s; built from an empty cache in 600 s, not counted)"
    ]
    assert over == []


def test_work_beside_the_run_stretches_the_budgets_and_never_shrinks_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    suite = Suite("s", "", ("tests/test_b.py",), (), 10)
    budgets = Budgets([suite], workers=2)
    budgets.add(_report("tests/test_b.py::t", 15.0))
    budgets.loads = [8.0, 8.0]  # two hogs and more beside two cores and two workers
    lines, over = budgets.verdict({})
    assert lines == [
        "budgets stretched x2.00 for the work beside this run",
        "s: 15.0 s of 20 s (1 tests)",
    ]
    assert over == []
    budgets.loads = [1.0]
    lines, over = budgets.verdict({})
    assert over == ["s: 15.0 s of 10 s (1 tests)"]
