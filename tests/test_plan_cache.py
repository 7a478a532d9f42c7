"""The per-tool plan cache (:mod:`otelhooks.core.plan`) is only a shortcut: over random tools,
hook chains, options and changes between calls, an executor that caches plans and one that works
every plan out afresh give the same results, error texts, span trees and metric points."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan

from otelhooks import (
    AfterOverride,
    CancelSignal,
    Hooks,
    ToolCall,
    ToolContext,
    ToolExecutor,
    ToolOutput,
    ToolRegistry,
    block,
    rewrite,
)
from otelhooks.core.plan import PlanCache
from otelhooks.telemetry import attributes as A
from otelhooks.telemetry.testing import InMemoryTracing, in_memory_tracing


def _echo(text: str) -> str:
    return text


async def _aecho(text: str) -> str:
    await asyncio.sleep(0)
    return text.lower()


def _fails(text: str) -> str:
    raise ValueError(f"no {text}")


def _output(text: str) -> ToolOutput:
    return ToolOutput(f"out {text}", {"n": len(text)}, is_error=text == "x")


def _progress(text: str, ctx: ToolContext) -> str:
    ctx.progress({"seen": text})
    return text * 2


def _items(text: str) -> Iterator[str]:
    yield from text


async def _aitems(text: str) -> AsyncIterator[str]:
    for c in text:
        yield c


def _bounded(text: str, timeout: float = 0.0) -> str:
    return f"{text}@{timeout}"


HANDLERS = {
    "echo": (_echo, {}),
    "aecho": (_aecho, {}),
    "fails": (_fails, {}),
    "output": (_output, {}),
    "progress": (_progress, {}),
    "items": (_items, {}),
    "aitems": (_aitems, {}),
    "bounded": (_bounded, {"timeout": 30}),
    "threaded": (_echo, {"blocking": True}),
    "schema": (
        lambda **kw: kw,
        {"parameters": {"type": "object", "properties": {"text": {"type": "string"}}}},
    ),
    "prepared": (_echo, {"prepare_arguments": lambda raw: {"text": raw.pop("t", "p"), **raw}}),
}


def _hook(kind: str, tools: list[str] | None, hooks: Hooks) -> None:
    name = f"{kind}-{'-'.join(tools or ['all'])}"
    if kind == "allow":
        hooks.add(before=lambda ctx: None, name=name, tools=tools)
    elif kind == "block":
        hooks.add(before=lambda ctx: block(f"no {ctx.tool_call.name}"), name=name, tools=tools)
    elif kind == "rewrite":
        hooks.add(before=lambda ctx: rewrite({**ctx.args, "text": "rw"}), name=name, tools=tools)
    elif kind == "raise_open":
        hooks.add(before=lambda ctx: 1 / 0, name=name, tools=tools, before_failure="fail_open")
    elif kind == "raise_closed":
        hooks.add(before=lambda ctx: 1 / 0, name=name, tools=tools)
    elif kind == "override":
        hooks.add(after=lambda ctx: f"[{ctx.result.content}]", name=name, tools=tools)
    elif kind == "keep":
        hooks.add(after=lambda ctx: AfterOverride(), name=name, tools=tools)
    elif kind == "after_closed":
        hooks.add(after=lambda ctx: {"bad": 1}, name=name, tools=tools, after_failure="fail_closed")
    elif kind == "observe":
        hooks.add(observe=lambda record: None, name=name, tools=tools)


HOOK_KINDS = (
    "allow",
    "block",
    "rewrite",
    "raise_open",
    "raise_closed",
    "override",
    "keep",
    "after_closed",
    "observe",
)
tool_names = st.sampled_from(sorted(HANDLERS))
hook_step = st.tuples(
    st.just("hook"),
    st.sampled_from(
        [
            "allow",
            "block",
            "rewrite",
            "raise_open",
            "raise_closed",
            "override",
            "keep",
            "after_closed",
            "observe",
        ]
    ),
    st.one_of(st.none(), st.lists(tool_names, min_size=1, max_size=2)),
)
call_step = st.tuples(
    st.just("call"),
    st.one_of(tool_names, st.just("missing")),
    st.sampled_from([{"text": "ab"}, {"text": "x"}, {"text": 1}, {}, '{"text": "j"}', {"t": "q"}]),
    st.fixed_dictionaries(
        {},
        optional={
            "timeout": st.sampled_from([None, 0, 30.0]),
            "signal": st.just(True),
        },
    ),
)
reregister_step = st.tuples(st.just("reregister"), tool_names)
default_step = st.tuples(st.just("default"), st.sampled_from([None, 20.0, 180.0]))
steps = st.lists(
    st.one_of(call_step, call_step, hook_step, reregister_step, default_step), max_size=14
)


def _tree(tracing: InMemoryTracing) -> list[Any]:
    """The tool spans as comparable data: names, attributes, events and status of each span and
    its children, without ids, times and durations."""

    def shape(span: ReadableSpan) -> Any:
        attrs = {
            k: v for k, v in (span.attributes or {}).items() if k not in (A.GEN_AI_TOOL_CALL_ID,)
        }
        events = [
            (
                e.name,
                {k: v for k, v in (e.attributes or {}).items() if k != A.EVENT_HOOK_DURATION_MS},
            )
            for e in span.events
            if e.name != "exception"
        ]
        return (span.name, attrs, events, span.status.status_code, span.status.description)

    return [(shape(s), [shape(c) for c in tracing.children(s)]) for s in tracing.tool_spans()]


def _points(reader: InMemoryMetricReader) -> dict[str, list[tuple[Any, ...]]]:
    """The metric points as comparable data: each metric's points by their attributes, with
    their counts (the calls counted), without times and durations."""
    data = reader.get_metrics_data()
    found: dict[str, list[tuple[Any, ...]]] = {}
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found[metric.name] = sorted(
                    (
                        tuple(sorted((point.attributes or {}).items())),
                        getattr(point, "count", None) or getattr(point, "value", None),
                    )
                    for point in metric.data.data_points
                )
    return found


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(plan=steps)
def test_plans_cached_or_not_give_the_same_results_and_span_trees(
    plan: list[tuple[Any, ...]],
) -> None:
    registry, hooks = ToolRegistry(), Hooks()
    for name in HANDLERS:
        fn, options = HANDLERS[name]
        registry.register(fn, name=name, **options)
    sides = {}
    readers = {}
    for cached in (True, False):
        tracing = in_memory_tracing()
        readers[cached] = InMemoryMetricReader()
        executor = ToolExecutor(
            registry,
            hooks,
            tracer_provider=tracing.provider,
            meter_provider=MeterProvider(metric_readers=[readers[cached]]),
            capture_content=True,
            plans=PlanCache(enabled=cached),
        )
        sides[cached] = (executor, tracing)

    async def main() -> None:
        for index, step in enumerate(plan):
            if step[0] == "hook":
                _hook(step[1], step[2], hooks)
                continue
            if step[0] == "reregister":
                fn, options = HANDLERS[step[1]]
                registry.register(fn, name=step[1], **options)
                continue
            if step[0] == "default":  # the executors' default timeout (part of a plan's key)
                for executor, _tracing in sides.values():
                    executor.tool_timeout = step[1]
                continue
            _, name, arguments, options = step
            results = []
            for executor, _tracing in sides.values():
                call = ToolCall(f"c{index}", name, arguments)
                signal = CancelSignal() if options.get("signal") else None
                results.append(
                    await executor.execute(call, timeout=options.get("timeout"), signal=signal)
                )
            assert results[0] == results[1], (step, results)

    asyncio.run(main())
    assert _tree(sides[True][1]) == _tree(sides[False][1])
    assert _points(readers[True]) == _points(readers[False])
