"""Benchmark 16 under callgrind, in its own process: N calls of one side with tracing off.

    valgrind --tool=callgrind python -m benchmarks.hooks_child SIDE N

SIDE is two-hooks (an executor with the deny-list before-hook and the after-hook that keeps the
result, scrubbing nothing), no-hooks (the same executor without them), by-hand (the two hooks
called around the function), bare (the function alone) or toolkit (the Agent Governance
Toolkit's ``govern(..., audit=False)``, with the ``bench`` extra). The hook machinery is
two-hooks minus no-hooks minus (by-hand minus bare), per call; the instruction count of N calls
minus that of a smaller N is the cost of the extra calls: deterministic, unlike wall-clock time
on a shared machine.
"""

from __future__ import annotations

import asyncio
import sys

import otelhooks
import otelhooks.builtin
from benchmarks.bench_hooks import bare, by_hand, executor_side, toolkit
from benchmarks.harness import Side
from otelhooks import ToolCall


def side_of(name: str) -> Side:
    """The function one side calls per tool call."""
    if name in ("two-hooks", "no-hooks"):
        return executor_side(otelhooks, name == "two-hooks")
    if name == "by-hand":
        return by_hand()
    if name == "toolkit":
        governed = toolkit()
        if governed is None:
            raise SystemExit("the Agent Governance Toolkit is not installed (the bench extra)")
        return governed
    return bare


def main(side: str, n: int) -> None:
    fn = side_of(side)
    calls = [ToolCall(f"call-{i}", "echo", {"text": f"hello {i}"}) for i in range(n)]

    async def run() -> None:
        for call in calls:
            await fn(call)

    asyncio.run(run())


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
