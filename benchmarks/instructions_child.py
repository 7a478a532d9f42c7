"""Benchmark 1 under callgrind, in its own process: N calls of one side, nothing else.

    valgrind --tool=callgrind python -m benchmarks.instructions_child SIDE N

SIDE is readme (the README set-up), readme-held (the same with the redactor of
:data:`benchmarks.baseline.README_SETUP_DAY` in place of today's: the core's growth without the
redactor's), same-work (the same-work floor), defaults (default hooks
without span or log redaction), minimal (the minimal competent floor), no-hooks (an executor with
no hooks and no scrubber: the bare machinery) or spans (the spans such an executor records, by
hand).

The instruction count of N calls minus that of a smaller N is the cost of the extra calls:
deterministic, unlike wall-clock time on a shared machine.
"""

from __future__ import annotations

import asyncio
import sys

from benchmarks.baseline import README_SETUP_DAY, held_redactor
from benchmarks.floors import (
    default_hooks,
    make_floor,
    make_logger,
    make_minimal_floor,
    make_registry,
    make_spans_floor,
    plain_provider,
    sdk_provider,
)
from otelhooks import NO_SCRUBBING, Hooks, ToolCall, ToolExecutor
from otelhooks.builtin import Redactor


def main(side: str, n: int) -> None:
    redactor = Redactor()
    if side == "readme-held":
        redactor = held_redactor(README_SETUP_DAY)
        if redactor is None:
            raise SystemExit(f"no commit {README_SETUP_DAY} in this clone")
    if side in ("readme", "readme-held", "same-work"):
        provider, logger = sdk_provider(redactor), make_logger(redactor)
    else:
        provider, logger = plain_provider(), make_logger(None)
    if side == "same-work":
        fn = make_floor(provider, redactor, logger)
    elif side == "minimal":
        fn = make_minimal_floor(provider, logger)
    elif side == "spans":
        fn = make_spans_floor(provider)
    elif side == "no-hooks":
        bare = ToolExecutor(
            make_registry(), Hooks(), tracer_provider=provider, scrubber=NO_SCRUBBING
        )
        fn = bare.execute
    else:
        hooks = default_hooks(redactor, logger)
        executor = ToolExecutor(make_registry(), hooks, tracer_provider=provider, scrubber=redactor)
        fn = executor.execute
    calls = [ToolCall(f"call-{i}", "echo", {"text": f"hello {i}"}) for i in range(n)]

    async def run() -> None:
        for call in calls:
            await fn(call)

    asyncio.run(run())
    provider.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
