"""Benchmark 17 under callgrind, in its own process: the first N calls of one side's sequence.

    valgrind --tool=callgrind python -m benchmarks.cedar_child SIDE N

SIDE is cache (the Cedar hook with its decision cache, from an empty cache), no-cache (the hook
without it) or deny-list (the Python deny-list hook). The instruction count of N calls minus
that of none is the cost of the calls: deterministic, unlike time on a shared machine.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from benchmarks.bench_cedar import CACHED, DENY_LIST, argument_sets, sides, zipf_sequence

SIDES = {"cache": CACHED, "no-cache": "otelhooks Cedar hook (no cache)", "deny-list": DENY_LIST}


def main(side: str, n: int) -> None:
    calls = argument_sets(1000)
    sequence = zipf_sequence(1000, 20000)[:n]
    with tempfile.TemporaryDirectory() as tmp:
        decide = sides(Path(tmp), calls, peers=False)[SIDES[side]]()
        for i in sequence:
            decide(i)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
