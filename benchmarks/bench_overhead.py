"""1. Overhead per tool call against two hand-written floors (full tracing)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks.baseline import CORE_BEFORE_ONE_PATH, README_SETUP_DAY, core_at, tree_at
from benchmarks.floors import (
    default_hooks,
    make_floor,
    make_logger,
    make_minimal_floor,
    make_registry,
    plain_provider,
    sdk_provider,
)
from benchmarks.harness import ROOT, Report, compare
from otelhooks import ToolExecutor
from otelhooks.builtin import Redactor

NAME = "overhead"
NUMBER = "1"
TITLE = "Overhead per tool call against two hand-written floors (full tracing)"


def run(report: Report, quick: bool) -> None:
    redactor = Redactor()
    provider = sdk_provider(redactor)
    logger = make_logger(redactor)
    readme = ToolExecutor(
        make_registry(),
        default_hooks(redactor, logger),
        tracer_provider=provider,
        scrubber=redactor,
    )
    same_work = make_floor(provider, redactor, logger)
    bare_provider, bare_logger = plain_provider(), make_logger(None)
    defaults_only = ToolExecutor(
        make_registry(),
        default_hooks(redactor, bare_logger),
        tracer_provider=bare_provider,
        scrubber=redactor,
    )
    minimal = make_minimal_floor(bare_provider, bare_logger)
    n, repeats = (300, 3) if quick else (500, 41)
    sides = {
        "readme set-up": readme.execute,
        "same-work floor": same_work,
        "default hooks, no span/log redaction": defaults_only.execute,
        "minimal floor": minimal,
    }
    before = None if quick else core_at(CORE_BEFORE_ONE_PATH)
    if before is not None:  # its redaction hook scrubbed the runtime's text itself
        builtin = __import__(f"{before.__name__}.builtin", fromlist=["RedactionHook"])
        old_hooks = before.Hooks([builtin.RedactionHook(redactor), builtin.StructlogEvents(logger)])
        old_registry = before.ToolRegistry()
        old_registry.register(make_registry().get("echo").handler, name="echo")  # type: ignore[union-attr]
        sides["readme set-up before one path"] = before.ToolExecutor(
            old_registry, old_hooks, tracer_provider=provider
        ).execute
    comparison = compare(sides, n, repeats)
    provider.shutdown()
    bare_provider.shutdown()
    pairs = {
        "readme / same-work floor": ("readme set-up", "same-work floor", 1.25),
        "readme / minimal floor": ("readme set-up", "minimal floor", 1.3),
        "defaults without span/log redaction / minimal floor": (
            "default hooks, no span/log redaction",
            "minimal floor",
            1.0,
        ),
    }
    if before is not None:
        pairs[f"readme before one path ({CORE_BEFORE_ONE_PATH}) / same-work floor"] = (
            "readme set-up before one path",
            "same-work floor",
            1.25,
        )
    result = comparison.medians
    ratios = {name: comparison.ratio(a, b) for name, (a, b, _) in pairs.items()}
    report.results["overhead"] = {
        "us_per_call": result,
        "ratios": ratios,
        "spread": {name: comparison.spread(a, b) for name, (a, b, _) in pairs.items()},
        "targets": {name: target for name, (_, _, target) in pairs.items()},
    }
    for name, value in result.items():
        report.row(name, f"{value:.1f} µs")
    for name, (a, b, target) in pairs.items():
        report.verdict(name, ratios[name], target)
        low, high = comparison.spread(a, b)
        report.row("  per-round spread", f"{low:.2f}–{high:.2f}×")
    instructions = instructions_per_call(report, quick)
    if instructions is not None:
        report.results["overhead"]["instructions_per_call"] = instructions
        for side, count in instructions.items():
            report.row(f"{side}: instructions per call (callgrind)", f"{count:,.0f}")
        for a, b in (
            ("readme", "same-work"),
            ("readme", "minimal"),
            ("defaults", "minimal"),
            ("no-hooks", "spans"),
        ):
            ratio_ir = instructions[a] / instructions[b]
            report.results["overhead"][f"instructions_ratio_{a}_{b}"] = ratio_ir
            report.row(f"instructions {a} / {b}", f"{ratio_ir:.3f}×")
        then = f"readme of {README_SETUP_DAY}"
        if then in instructions:  # growth since that day: with the redactor held, and in all
            held = instructions["readme-held"] / instructions[then]
            report.results["overhead"]["instructions_ratio_readme_held_then"] = held
            report.verdict(
                f"instructions readme, {README_SETUP_DAY}'s redactor / {then}", held, 1.05
            )
            grown = instructions["readme"] / instructions[then]
            report.results["overhead"]["instructions_ratio_readme_then"] = grown
            report.row(f"instructions readme / {then}", f"{grown:.3f}×", "the redactor's growth in")


def instructions_per_call(report: Report, quick: bool) -> dict[str, float] | None:
    """Instructions per call of each side of benchmark 1, counted by valgrind's callgrind: the
    difference between runs of ``small`` and ``large`` calls, divided by the extra calls."""
    if quick:
        report.row("instructions (callgrind)", "skipped", "not in --quick")
        return None
    if shutil.which("valgrind") is None:
        report.row("instructions (callgrind)", "no valgrind", "apt-get install valgrind")
        return None
    small, large = 50, 250

    def count(side: str, n: int, cwd: Path = ROOT) -> subprocess.Popen[str]:
        # the garbage collector off: its passes would make the count vary between runs
        code = (
            "import gc, runpy, sys; gc.disable(); "
            f"sys.argv = ['instructions_child', {side!r}, '{n}']; "
            "runpy.run_module('benchmarks.instructions_child', run_name='__main__')"
        )
        return subprocess.Popen(
            [
                "valgrind",
                "--tool=callgrind",
                "--callgrind-out-file=/dev/null",
                sys.executable,
                "-c",
                code,
            ],
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    then = tree_at(README_SETUP_DAY)
    runs: dict[str, tuple[str, Path]] = {
        side: (side, ROOT)
        for side in ("readme", "same-work", "defaults", "minimal", "no-hooks", "spans")
    }
    if then is not None:  # the README set-up of that day, and today's with its redactor
        runs[f"readme of {README_SETUP_DAY}"] = ("readme", then)
        runs["readme-held"] = ("readme-held", ROOT)
    totals: dict[tuple[str, int], int] = {}
    for name, (side, cwd) in runs.items():  # two at a time: one per core
        procs = {n: count(side, n, cwd) for n in (small, large)}
        for n, proc in procs.items():
            _, err = proc.communicate(timeout=1800)
            found = [line for line in err.splitlines() if "Collected :" in line]
            if proc.returncode != 0 or not found:
                report.row("instructions (callgrind)", "failed", err[-200:])
                return None
            totals[(name, n)] = int(found[-1].rsplit(":", 1)[1])
    return {
        name: (totals[(name, large)] - totals[(name, small)]) / (large - small) for name in runs
    }
