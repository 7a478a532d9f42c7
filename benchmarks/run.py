"""The cost of observability per tool call, measured against hand-written floors in the same run.

    .venv/bin/python benchmarks/run.py                 # everything (Jaeger part if a binary exists)
    .venv/bin/python benchmarks/run.py --quick         # small counts: a smoke run
    .venv/bin/python benchmarks/run.py --only overhead,redactor

Prints a table and writes benchmarks/results/latest.json. Each benchmark is a module of its own
(``benchmarks/bench_*.py``) on the shared harness (``benchmarks/harness.py``); the floors it is
held against are in ``benchmarks/floors.py``. Every figure that matters is a ratio between two
things measured side by side in this process; absolute numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.harness import Report  # noqa: E402

# In the order they run and are numbered.
BENCHMARKS = (
    "overhead",
    "tracing_off",
    "util_genai",
    "concurrency",
    "redactor",
    "memory",
    "jaeger",
    "burst",
    "shutdown",
    "startup",
    "peers",
    "mcp",
    "recall",
    "fleet",
    "gateway",
    "hooks",
    "cedar",
)


def load(name: str) -> ModuleType:
    """The module of one benchmark."""
    return importlib.import_module(f"benchmarks.bench_{name}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small counts, for a smoke run")
    parser.add_argument("--only", default=",".join(BENCHMARKS), help="comma-separated sections")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "latest.json"))
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(chosen) - set(BENCHMARKS)
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    machine = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
    }
    print(
        f"otelhooks benchmarks on {machine['platform']}, {machine['cpus']} CPUs, "
        f"Python {machine['python']}"
    )
    report = Report()
    started = time.perf_counter()
    for name in chosen:
        module = load(name)
        report.start(module.NUMBER, module.TITLE)
        module.run(report, args.quick)
    results = report.results
    results["machine"] = machine
    results["quick"] = args.quick
    results["seconds"] = round(time.perf_counter() - started, 1)
    results["max_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=str))
    print(f"\nwrote {out} in {results['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
