"""Benchmark 2 under callgrind, in its own process: N calls of one side with tracing off.

    valgrind --tool=callgrind python -m benchmarks.tracing_off_child SIDE KIND N

SIDE is otelhooks (the bare machinery: ``scrubber=NO_SCRUBBING``), scrubbed (the same executor
with the default scrubber a runtime given none gets), before (the otelhooks of
:data:`benchmarks.baseline.CORE_BEFORE_ONE_PATH`), spans (four no-op spans by hand around the
call) or bare; KIND is sync or async. The
instruction count of N calls minus that of a smaller N is the cost of the extra calls:
deterministic, unlike wall-clock time on a shared machine.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import NoOpTracerProvider

from benchmarks.baseline import CORE_BEFORE_ONE_PATH, core_at
from benchmarks.floors import echo
from otelhooks import NO_SCRUBBING, Hooks, ToolCall, ToolExecutor, ToolRegistry


async def aecho(text: str) -> str:
    """Return the text unchanged (an async tool)."""
    return text


def side_of(name: str, handler: Callable[..., Any]) -> Callable[[ToolCall], Awaitable[Any]]:
    """The function one side calls per tool call."""
    provider = NoOpTracerProvider()
    is_async = handler is aecho
    if name == "otelhooks" or name == "scrubbed":
        registry = ToolRegistry()
        registry.register(handler, name="echo")
        scrubber = NO_SCRUBBING if name == "otelhooks" else None  # None: the default one
        executor = ToolExecutor(registry, Hooks(), tracer_provider=provider, scrubber=scrubber)
        return executor.execute
    if name == "before":
        package: Any = core_at(CORE_BEFORE_ONE_PATH)
        old = package.ToolRegistry()
        old.register(handler, name="echo")
        return package.ToolExecutor(old, package.Hooks(), tracer_provider=provider).execute  # type: ignore[no-any-return]
    tracer = trace.get_tracer("floor", tracer_provider=provider)

    async def spans(call: ToolCall) -> Any:
        span = tracer.start_span("execute_tool echo")
        ctx = trace.set_span_in_context(span)
        result = None
        for phase in ("before", "run", "after"):
            child = tracer.start_span(phase, ctx)
            if phase == "run":
                result = handler(**call.arguments)
                if is_async:
                    result = await result
            child.end()
        span.end()
        return result

    async def bare(call: ToolCall) -> Any:
        result = handler(**call.arguments)
        return (await result) if is_async else result

    return spans if name == "spans" else bare


def main(side: str, kind: str, n: int) -> None:
    fn = side_of(side, aecho if kind == "async" else echo)
    calls = [ToolCall(f"call-{i}", "echo", {"text": f"hello {i}"}) for i in range(n)]

    async def run() -> None:
        for call in calls:
            await fn(call)

    asyncio.run(run())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
