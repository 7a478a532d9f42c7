"""A tiny run of the benchmark script: it runs and writes its results (no timing is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def quick_run(only: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``benchmarks/run.py --quick --only ONLY``, its results written under ``tmp_path``."""
    out = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--only", only,
         "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,  # a hang guard: the quick run takes a minute or two at rest
    )  # fmt: skip
    return done, out


def test_benchmark_script_runs_and_writes_json(tmp_path: Path) -> None:
    done, out = quick_run("overhead,tracing_off,util_genai,redactor,burst,startup,mcp", tmp_path)
    assert done.returncode == 0, done.stderr
    results = json.loads(out.read_text())
    assert results["quick"] is True
    assert set(results["overhead"]["us_per_call"]) == {
        "readme set-up",
        "same-work floor",
        "default hooks, no span/log redaction",
        "minimal floor",
    }
    assert all(r > 0 for r in results["overhead"]["ratios"].values())
    assert set(results["tracing_off"]) == {"no-op API", "no-op API, async tool", "sampler off"}
    assert results["tracing_off"]["no-op API, async tool"]["ratio_to_4_spans_with_timeout"] > 0
    assert results["redactor"]["json_api_100kb otelhooks"] > 0
    assert results["mcp"]["proxy"]["proxy_over_direct"] > 0, results["mcp"]
    assert results["mcp"]["adapter"]["client_us"] > 0
    assert results["burst"]["otelhooks-defaults"]["dropped"] == 0  # a count, not a timing
    assert results["startup"]["import otelhooks"] > 0  # a difference of two timings may be < 0
    assert "readme / minimal floor" in done.stdout


def test_benchmark_script_rejects_unknown_sections() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--only", "nope"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    assert "unknown sections: nope" in done.stderr


def test_every_benchmark_module_is_run_and_numbered_once() -> None:
    sys.path.insert(0, str(ROOT))
    from benchmarks import run

    modules = sorted(
        p.stem.removeprefix("bench_") for p in (ROOT / "benchmarks").glob("bench_*.py")
    )
    assert sorted(run.BENCHMARKS) == modules
    numbers = [run.load(name).NUMBER for name in run.BENCHMARKS]
    assert numbers == [str(i) for i in range(1, len(numbers) + 1)]
    assert all(callable(run.load(name).run) for name in run.BENCHMARKS)


@pytest.mark.parametrize(
    "side", ["readme", "same-work", "defaults", "minimal", "no-hooks", "spans"]
)
def test_each_side_counted_under_callgrind_runs(side: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.instructions_child", side, "3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr


async def test_spans_floor_records_what_an_executor_without_hooks_records() -> None:
    from benchmarks.floors import make_registry, make_spans_floor
    from otelhooks import Hooks, ToolCall, ToolExecutor
    from otelhooks.telemetry.testing import in_memory_tracing

    trees = []
    for make in (
        make_spans_floor,
        lambda p: ToolExecutor(make_registry(), Hooks(), tracer_provider=p).execute,
    ):
        tracing = in_memory_tracing()
        await make(tracing.provider)(ToolCall("c1", "echo", {"text": "hi"}))
        spans = tracing.spans()
        names = {s.context.span_id: s.name for s in spans if s.context is not None}
        trees.append(
            sorted(
                (
                    s.name,
                    names.get(s.parent.span_id) if s.parent else None,
                    dict(s.attributes or {}),
                )
                for s in spans
            )
        )
    assert trees[0] == trees[1]
    assert [name for name, _, _ in trees[0]] == ["after", "before", "execute_tool echo", "run"]


def test_the_gateway_benchmark_runs_otelhooks_sides(tmp_path: Path) -> None:
    """Benchmark 15 with small counts and otelhooks' sides only (peers are installed and run
    by a full ``run.py``)."""
    out = tmp_path / "gateway.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--only", "gateway",
         "--out", str(out)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = json.loads(out.read_text())["gateway"]
    assert set(results["latency"]) == {"direct", "floor", "otelhooks", "relay", "bare relay"}
    assert all(value > 0 for value in results["ratios"].values())
    assert all(f["calls_per_s"] > 0 for f in results["load"].values())


def test_the_cedar_benchmark_runs_quick_and_reports_cache_and_sides(tmp_path: Path) -> None:
    pytest.importorskip("cedarpy")
    done, out = quick_run("cedar", tmp_path)
    assert done.returncode == 0, done.stderr
    cedar = json.loads(out.read_text())["cedar"]
    sides = cedar["us_per_call"]
    assert {
        "otelhooks Cedar hook (cache)",
        "otelhooks Cedar hook (no cache)",
        "cedarpy.is_authorized, direct",
        "Python deny-list hook",
    } <= set(sides)
    assert all(value > 0 for value in sides.values())
    assert set(cedar["cpu_us_per_call"]) == set(sides)
    assert all(value > 0 for value in cedar["cpu_us_per_call"].values())
    assert cedar["hit_us"] > 0 and "miss_us" in cedar and cedar["ratio_to_deny_list"] > 0
    assert 0 < cedar["hit_rate"] < 1  # a count: the first sight of each set is a miss
    assert "a Cedar decision per call, with the cache" in done.stdout
