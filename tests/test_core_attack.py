"""Attacks on the cheaper tool-call path: frozen results filled as a writable twin, named tuples
made without their ``__new__``, one null trace per recorder, the call's timing and outcome on
its state, an empty after phase, strings made into results directly, and the validator that
picks the field values. Each test states a guarantee that would fail were it broken."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import inspect
import pickle
import sys
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pydantic
import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.trace import StatusCode

from otelhooks import (
    ApprovalRequest,
    Approve,
    CancelSignal,
    Deny,
    Hooks,
    ToolCall,
    ToolCallRecord,
    ToolExecutor,
    ToolOutput,
    ToolRegistry,
    ToolResult,
    ask,
    block,
    defer,
    rewrite,
)
from otelhooks.core import execute as execute_module
from otelhooks.core.frozen import quick_init
from otelhooks.core.handler import as_result
from otelhooks.core.hooks import AfterToolCallContext, BeforeToolCallContext, Outcome
from otelhooks.core.outcome import Allowed, Deferred, Ended
from otelhooks.core.tools import fields_validator
from otelhooks.telemetry import attributes as A
from otelhooks.telemetry.testing import InMemoryTracing

from .test_approvals import tools as pay_tools

# -- frozen results filled as a writable twin ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tagged(ToolResult):
    """A user's frozen, slotted result with a field of its own and a ``__post_init__``."""

    tag: str = "t"

    def __post_init__(self) -> None:
        if not isinstance(self.tag, str):
            raise TypeError("tag must be text")
        object.__setattr__(self, "tag", self.tag.upper())


@dataclass(frozen=True)
class Loose(ToolResult):
    """A user's frozen result subclass without slots (it has a ``__dict__``)."""

    note: Any = None


class SameLayout(ToolResult):
    """A subclass with the very layout of ToolResult (no slot of its own)."""

    __slots__ = ()


class Wrapped(ToolResult):
    """A subclass whose ``__init__`` calls the quick one."""

    __slots__ = ("seen",)
    seen: str

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        object.__setattr__(self, "seen", type(self).__name__)


def _same(made: ToolResult, other: ToolResult) -> None:
    assert type(made) is type(other) and made == other and hash(made) == hash(other)


@pytest.mark.parametrize(
    "made",
    [
        ToolResult("c", "t", "x", ("k", 1), True, True),
        Tagged("c", "t", "x", None, False, False, (), tag="a"),
        Loose("c", "t", "x", note=("n", 1)),
        SameLayout("c", "t", "x", (1,)),
    ],
    ids=["tool-result", "slotted-subclass", "dict-subclass", "same-layout"],
)
def test_results_and_subclasses_copy_pickle_replace_and_stay_frozen(made: ToolResult) -> None:
    assert type(made).__name__ in {"ToolResult", "Tagged", "Loose", "SameLayout"}
    copies = [copy.copy(made), copy.deepcopy(made)]
    copies += [pickle.loads(pickle.dumps(made, protocol)) for protocol in range(6)]
    for other in copies:
        _same(other, made)
    replaced = dataclasses.replace(made, content="y")
    assert type(replaced) is type(made) and replaced.content == "y"
    assert dataclasses.replace(replaced, content="x") == made
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.content = "z"  # type: ignore[misc]
    assert made.content == "x"


def test_a_user_subclass_runs_its_own_init_and_post_init() -> None:
    tagged = Tagged("c", "t", "x", tag="low")
    assert type(tagged) is Tagged and tagged.tag == "LOW" and tagged.content == "x"
    assert dataclasses.replace(tagged, tag="again").tag == "AGAIN"
    with pytest.raises(TypeError):
        Tagged("c", "t", "x", tag=1)  # type: ignore[arg-type]
    wrapped = Wrapped("c", "t", "x")
    assert type(wrapped) is Wrapped and wrapped.seen == "Wrapped"
    assert (wrapped.tool_call_id, wrapped.content, wrapped.is_error) == ("c", "x", False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        wrapped.content = "y"  # type: ignore[misc]
    same = SameLayout("c", "t", "x")
    assert type(same) is SameLayout and same != ToolResult("c", "t", "x")  # eq keeps the class


def test_a_result_has_no_weakref_slot_as_the_dataclass_has_none() -> None:
    with pytest.raises(TypeError):
        weakref.ref(ToolResult("c", "t", "x"))

    @dataclass(frozen=True, slots=True, weakref_slot=True)
    class Weak(ToolResult):
        pass

    weak = Weak("c", "t", "x")
    assert weakref.ref(weak)() is weak and type(weak) is Weak


def test_a_failed_init_leaves_nothing_made_and_the_class_unchanged() -> None:
    with pytest.raises(TypeError):
        ToolResult("c", "t")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ToolResult("c", "t", "x", nope=1)  # type: ignore[call-arg]
    made = ToolResult("c", "t", "x")
    assert type(made) is ToolResult and made.__class__ is ToolResult


def test_an_instance_made_under_a_tracer_is_of_its_class_and_frozen() -> None:
    """A tracer (a debugger, a coverage tool) sees the instance while ``__init__`` fills it (as
    the writable twin); once made, the instance is of its class and frozen."""
    seen: list[str] = []

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_name == "__init__" and "self" in frame.f_locals:
            seen.append(type(frame.f_locals["self"]).__name__)
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        made = ToolResult("c", "t", "x")
    finally:
        sys.settrace(previous)
    assert seen  # the tracer saw the instance while it was filled
    assert type(made) is ToolResult and made == ToolResult("c", "t", "x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.content = "y"  # type: ignore[misc]


def test_results_made_in_many_threads_at_once_are_each_whole() -> None:
    made: list[list[ToolResult]] = [[] for _ in range(8)]
    start = threading.Barrier(8)

    def build(index: int) -> None:
        start.wait()
        for n in range(3000):
            made[index].append(ToolResult(f"{index}", "t", f"{n}", n, bool(n % 2)))

    threads = [threading.Thread(target=build, args=(i,)) for i in range(8)]
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as CPython allows
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(previous)
    for index, results in enumerate(made):
        for n, result in enumerate(results):
            assert type(result) is ToolResult
            assert (result.tool_call_id, result.content, result.details, result.is_error) == (
                f"{index}",
                f"{n}",
                n,
                bool(n % 2),
            )


def test_hook_contexts_are_made_of_their_class_with_every_field() -> None:
    call = ToolCall("c", "t", {"a": 1})
    contexts: tuple[Any, ...] = (BeforeToolCallContext, AfterToolCallContext)
    for cls in contexts:
        names = [f.name for f in dataclasses.fields(cls)]
        values = {name: f"v-{name}" for name in names}
        made = cls(**values)
        assert type(made) is cls
        assert {name: getattr(made, name) for name in names} == values
        assert made == cls(*values.values()) and pickle.loads(pickle.dumps(made)) == made
    assert call.name == "t"


# -- named tuples made without their __new__ ----------------------------------------------------


def _checked_made(monkeypatch: pytest.MonkeyPatch) -> list[tuple[type, tuple[Any, ...]]]:
    """Every tuple the path makes without a constructor, checked against the constructor."""
    made: list[tuple[type, tuple[Any, ...]]] = []
    real = execute_module._made

    def checked(cls: Any, values: Any) -> Any:
        values = tuple(values)
        assert len(values) == len(cls._fields), (cls, values)
        value = real(cls, values)
        assert value == cls(*values) and type(value) is cls
        made.append((cls, values))
        return value

    monkeypatch.setattr(execute_module, "_made", checked)
    return made


async def test_every_tuple_made_without_new_has_each_field_in_its_place(
    monkeypatch: pytest.MonkeyPatch, otelhooks_tracing: InMemoryTracing
) -> None:
    made = _checked_made(monkeypatch)
    registry, hooks = ToolRegistry(), Hooks()

    @registry.tool
    def pay(to: str, amount: int) -> str:
        return f"paid {amount} to {to}"

    hooks.add(
        before=lambda ctx: rewrite({**ctx.args, "amount": 5}) if ctx.args["to"] == "r" else None,
        name="rewriter",
    )
    seen: list[ToolCallRecord] = []
    hooks.add(observe=seen.append, name="seen")
    for provider in (trace.NoOpTracerProvider(), otelhooks_tracing.provider):
        executor = ToolExecutor(registry, hooks, tracer_provider=provider)
        prepared = await executor.prepare(ToolCall("c1", "pay", {"to": "a", "amount": 1}))
        assert isinstance(prepared, Allowed)
        assert (prepared.tool.name, dict(prepared.arguments)) == ("pay", {"to": "a", "amount": 1})
        assert (prepared.rewritten, prepared.approval) == (False, None)
        assert (await executor.finish(prepared)).content == "paid 1 to a"
        await executor.execute(ToolCall("c2", "pay", {"to": "r", "amount": 1}))
    assert {cls for cls, _ in made} == {Allowed, Outcome}
    first, rewritten = seen[0], seen[1]
    assert (first.decision, first.error_type, first.arguments_rewritten) == ("allow", None, False)
    assert dict(first.arguments) == {"to": "a", "amount": 1} and first.block_reason is None
    assert (rewritten.arguments_rewritten, rewritten.deciding_hook) == (True, "rewriter")
    assert dict(rewritten.arguments) == {"to": "r", "amount": 5}
    assert rewritten.result.content == "paid 5 to r"
    assert seen[:2] == [
        dataclasses.replace(r, duration_ms=seen[i].duration_ms) for i, r in enumerate(seen[2:])
    ]


# -- one null trace shared by concurrent calls --------------------------------------------------


def _points(reader: InMemoryMetricReader) -> dict[str, dict[tuple[Any, ...], Any]]:
    data = reader.get_metrics_data()
    found: dict[str, dict[tuple[Any, ...], Any]] = {}
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found[metric.name] = {
                    tuple(sorted((point.attributes or {}).items())): (
                        getattr(point, "count", None) or getattr(point, "value", None),
                        getattr(point, "sum", None),
                    )
                    for point in metric.data.data_points
                }
    return found


def _mixed_registry(release: asyncio.Event) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    async def ok(n: int) -> str:
        await release.wait()
        return f"ok {n}"

    @registry.tool
    async def fails(n: int) -> str:
        await release.wait()
        raise ValueError(f"bad {n}")

    @registry.tool(timeout=0.01)
    async def hangs(n: int) -> str:
        await asyncio.sleep(60)
        return "never"

    @registry.tool
    async def waits(n: int) -> str:
        await asyncio.sleep(60)
        return "never"

    @registry.tool(blocking=True)
    def threaded(n: int) -> str:
        return f"threaded {n}"

    @registry.tool
    def plain(n: int) -> str:
        return f"plain {n}"

    return registry


_KINDS = ("ok", "fails", "hangs", "waits", "threaded", "plain", "blocked", "missing")


@pytest.mark.parametrize("traced", [False, True], ids=["null-trace", "recording"])
async def test_fifty_concurrent_calls_each_keep_their_own_outcome_duration_and_count(
    traced: bool, otelhooks_tracing: InMemoryTracing
) -> None:
    release = asyncio.Event()
    hooks = Hooks()
    hooks.add(before=lambda ctx: block("no") if ctx.args.get("n") == 7 else None, name="gate")
    records: list[ToolCallRecord] = []
    hooks.add(observe=records.append, name="records")
    reader = InMemoryMetricReader()
    executor = ToolExecutor(
        _mixed_registry(release),
        hooks,
        tracer_provider=otelhooks_tracing.provider if traced else trace.NoOpTracerProvider(),
        meter_provider=MeterProvider(metric_readers=[reader]),
    )
    if not traced:
        assert executor.recorder.start(ToolCall("x", "ok", {}), None, None, None) is (
            executor.recorder.null
        )
    signals = [CancelSignal() for _ in range(50)]
    calls = []
    for index in range(50):
        kind = _KINDS[index % len(_KINDS)]
        n = 7 if kind == "blocked" else index
        calls.append(ToolCall(f"c{index}", "ok" if kind == "blocked" else kind, {"n": n}))
    tasks = [
        asyncio.create_task(executor.execute(call, signal=signal))
        for call, signal in zip(calls, signals, strict=True)
    ]
    await asyncio.sleep(0.05)  # every call is in its tool (the hanging ones timed out)
    for index, call in enumerate(calls):
        if call.name == "waits":
            signals[index].cancel(f"stop {index}")
    outside = [t for i, t in enumerate(tasks) if _KINDS[i % len(_KINDS)] == "ok"][:2]
    for task in outside:
        task.cancel()  # a cancellation from outside the call
    release.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)

    by_id = {record.tool_call.id: record for record in records}
    assert len(records) == 50 and len(by_id) == 50  # each call observed once
    expected_errors: dict[str, str | None] = {}
    for index, (call, result) in enumerate(zip(calls, results, strict=True)):
        record = by_id[call.id]
        kind = _KINDS[index % len(_KINDS)]
        assert record.duration_ms > 0.0
        if tasks[index] in outside:  # the call ended as cancelled, and the task is
            assert record.error_type == A.ERR_CANCELLED
            assert isinstance(result, asyncio.CancelledError)
        elif kind == "ok":
            assert isinstance(result, ToolResult) and result.content == f"ok {index}"
            assert record.error_type is None and record.decision == "allow"
        elif kind == "fails":
            assert isinstance(result, ToolResult) and result.content == f"error: bad {index}"
            assert record.error_type == "ValueError"
        elif kind == "hangs":
            assert record.error_type == A.ERR_TOOL_TIMEOUT
        elif kind == "waits":
            assert isinstance(result, ToolResult) and f"stop {index}" in result.content
            assert record.error_type == A.ERR_CANCELLED
        elif kind in ("threaded", "plain"):
            assert isinstance(result, ToolResult) and result.content == f"{kind} {index}"
            assert record.error_type is None
        elif kind == "blocked":
            assert record.decision == "block" and record.result.content == "blocked: no"
        else:
            assert record.error_type == A.ERR_TOOL_NOT_FOUND and record.decision is None
        assert record.result.tool_call_id == call.id
        expected_errors[call.id] = record.error_type
        if kind == "hangs":  # a timed-out call took at least its bound, whatever the load
            assert record.duration_ms >= 10.0
    totals = {name: sum(v[0] for v in metric.values()) for name, metric in _points(reader).items()}
    assert len(totals) == 2 and set(totals.values()) == {50}, totals  # each call counted once
    histogram = _points(reader)["otelhooks.tool.duration"]
    seconds = sum(point[1] for point in histogram.values())
    assert seconds == pytest.approx(sum(r.duration_ms for r in records) / 1000.0, rel=1e-9)
    if traced:
        spans = otelhooks_tracing.tool_spans()
        assert len(spans) == 50
        for span in spans:
            call_id = (span.attributes or {})[A.GEN_AI_TOOL_CALL_ID]
            assert (span.attributes or {}).get(A.ERROR_TYPE) == expected_errors[str(call_id)]


async def test_a_provider_installed_while_calls_run_records_the_next_calls(
    monkeypatch: pytest.MonkeyPatch, otelhooks_tracing: InMemoryTracing
) -> None:
    """Calls started with no provider share the null trace; one installed while they run is
    used from the next call on, and the calls in flight end as they would have."""
    release = asyncio.Event()
    executor = ToolExecutor(_mixed_registry(release), Hooks())
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    early = [
        asyncio.create_task(executor.execute(ToolCall(f"e{i}", "ok", {"n": i}))) for i in range(10)
    ]
    await asyncio.sleep(0)
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", otelhooks_tracing.provider)
    late = [
        asyncio.create_task(executor.execute(ToolCall(f"l{i}", "fails", {"n": i})))
        for i in range(10)
    ]
    release.set()
    early_results = await asyncio.gather(*early)
    late_results = await asyncio.gather(*late)
    assert [r.content for r in early_results] == [f"ok {i}" for i in range(10)]
    assert [r.content for r in late_results] == [f"error: bad {i}" for i in range(10)]
    spans = otelhooks_tracing.tool_spans()
    assert sorted(str((s.attributes or {})[A.GEN_AI_TOOL_CALL_ID]) for s in spans) == sorted(
        f"l{i}" for i in range(10)
    )
    assert all(s.status.status_code is StatusCode.ERROR for s in spans)
    for span in spans:
        otelhooks_tracing.assert_children(span, ["before", "run", "after"])


# -- a call ended twice -------------------------------------------------------------------------


async def test_a_call_ends_once_whatever_ends_it_again(otelhooks_tracing: InMemoryTracing) -> None:
    ran: list[int] = []
    registry = ToolRegistry()

    @registry.tool
    def echo(n: int) -> str:
        ran.append(n)
        return f"echo {n}"

    hooks = Hooks()
    records: list[ToolCallRecord] = []
    hooks.add(observe=records.append, name="records")
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    for provider in (trace.NoOpTracerProvider(), otelhooks_tracing.provider):
        executor = ToolExecutor(registry, hooks, tracer_provider=provider, meter_provider=meters)
        prepared = await executor.prepare(ToolCall("c1", "echo", {"n": 1}))
        assert isinstance(prepared, Allowed)
        first = await executor.finish(prepared)
        assert await executor.finish(prepared) is first  # finish twice: the first result
        assert executor.skip_prepared(prepared, "late") is first  # skip after finish
        assert prepared.state.ended is not None and prepared.state.ended.result is first
        duration = prepared.state.duration_ms
        skipped = await executor.prepare(ToolCall("c2", "echo", {"n": 2}))
        assert isinstance(skipped, Allowed)
        gone = executor.skip_prepared(skipped, "user stopped")
        assert executor.skip_prepared(skipped, "again") is gone
        assert await executor.finish(skipped) is gone  # finish after skip: not run
        assert gone.is_error and "user stopped" in gone.content
        assert prepared.state.duration_ms == duration  # the first end's duration stays
    assert ran == [1, 1]
    assert [(r.tool_call.id, r.decision) for r in records] == [
        ("c1", "allow"),
        ("c2", "skip"),
    ] * 2
    totals = {name: sum(v[0] for v in metric.values()) for name, metric in _points(reader).items()}
    assert set(totals.values()) == {4}, totals
    assert len(otelhooks_tracing.tool_spans()) == 2


# -- results made from strings directly, and every other value through as_result ----------------


class Text(str):
    """A string subclass a handler may return."""

    def __str__(self) -> str:
        return "as str"


_VALUES: list[Any] = [
    "plain",
    "",
    Text("sub"),
    b"bytes",
    None,
    0,
    {"k": [1, "v"]},
    ["a"],
    ToolOutput("out", {"d": 1}, True, True),
]


@pytest.mark.parametrize("scrubbing", [False, True])
@pytest.mark.parametrize("value", _VALUES, ids=[repr(v)[:20] for v in _VALUES])
async def test_every_value_a_handler_returns_is_the_result_as_result_makes(
    value: Any, scrubbing: bool
) -> None:
    from otelhooks.builtin import Redactor

    registry = ToolRegistry()

    @registry.tool
    def give() -> Any:
        return value

    @registry.tool
    async def give_later() -> Any:
        return value

    executor = ToolExecutor(registry, Hooks(), scrubber=Redactor() if scrubbing else None)
    for name in ("give", "give_later"):
        call = ToolCall("c", name, {})
        result = await executor.execute(call)
        expected = as_result(call, value)
        assert result == expected
        assert type(result.content) is type(expected.content)  # a subclass stays a subclass


# -- the approval and defer paths with the call's state -----------------------------------------


class _Approver:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.asked: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> Any:
        self.asked.append(request)
        await asyncio.sleep(0)
        return self.answer


@pytest.mark.parametrize("traced", [False, True])
async def test_asked_and_deferred_calls_end_once_with_their_state(
    traced: bool, otelhooks_tracing: InMemoryTracing
) -> None:
    ran: list[Mapping[str, Any]] = []
    hooks = Hooks()
    hooks.add(
        before=lambda ctx: defer("later") if ctx.args["amount"] > 100 else ask("check"),
        name="gate",
    )
    records: list[ToolCallRecord] = []
    hooks.add(observe=records.append, name="records")
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    provider = otelhooks_tracing.provider if traced else trace.NoOpTracerProvider()

    def executor(answer: Any) -> ToolExecutor:
        return ToolExecutor(
            pay_tools(ran),
            hooks,
            tracer_provider=provider,
            meter_provider=meters,
            approver=_Approver(answer),
        )

    approved = await executor(Approve("carol")).prepare(
        ToolCall("a", "pay", {"to": "x", "amount": 1})
    )
    assert isinstance(approved, Allowed) and approved.approval is not None
    assert approved.state.ended is None
    approving = executor(Approve("carol"))
    assert (await approving.finish(approved)).content == "paid 1 to x"
    assert approved.state.ended is not None and approved.state.duration_ms > 0.0

    denied = await executor(Deny("no way")).prepare(ToolCall("d", "pay", {"to": "x", "amount": 2}))
    assert isinstance(denied, Ended) and denied.outcome.decision == "block"
    assert denied.duration_ms > 0.0

    held = await executor(Approve("carol")).prepare(
        ToolCall("h", "pay", {"to": "x", "amount": 500}), deferrable=True
    )
    assert isinstance(held, Deferred) and held.outcome.decision == "defer"
    assert held.duration_ms > 0.0 and "later" in held.result.content
    assert await executor(Approve("carol")).finish(held) == held.result
    assert executor(Approve("carol")).skip_prepared(held, "x") == held.result

    assert ran == [{"to": "x", "amount": 1}]
    decisions = {r.tool_call.id: (r.decision, r.approval is not None) for r in records}
    assert decisions == {"a": ("allow", True), "d": ("block", True), "h": ("defer", True)}
    for record in records:
        assert record.duration_ms > 0.0
    by_id = {record.tool_call.id: record for record in records}
    assert (by_id["h"].duration_ms, by_id["d"].duration_ms) == (
        held.duration_ms,
        denied.duration_ms,
    )
    totals = {name: sum(v[0] for v in metric.values()) for name, metric in _points(reader).items()}
    assert set(totals.values()) == {3}, totals


# -- prepare and finish used apart, as the loop and the gateway do ------------------------------


async def test_prepared_calls_finished_together_keep_their_own_timing_and_results(
    otelhooks_tracing: InMemoryTracing,
) -> None:
    release = asyncio.Event()
    executor = ToolExecutor(
        _mixed_registry(release), Hooks(), tracer_provider=trace.NoOpTracerProvider()
    )
    prepared = [await executor.prepare(ToolCall(f"p{i}", "ok", {"n": i})) for i in range(20)]
    assert all(isinstance(p, Allowed) for p in prepared)
    states = [p.state for p in prepared if isinstance(p, Allowed)]
    assert len({id(s.trace) for s in states}) == 1  # the one null trace
    assert len({s.started for s in states}) > 1 or len(states) == 1
    finishing = asyncio.gather(*(executor.finish(p) for p in prepared))
    await asyncio.sleep(0)
    skipped = executor.skip_prepared(prepared[3], "stopped")  # while it waits in its tool
    release.set()
    results = await finishing
    assert results[3] is skipped or results[3].content == "ok 3"
    for i, (state, result) in enumerate(zip(states, results, strict=True)):
        assert state.ended is not None and state.ended.result is result
        assert result.tool_call_id == f"p{i}"


async def test_hooks_see_the_context_and_message_the_call_was_given(
    otelhooks_tracing: InMemoryTracing,
) -> None:
    from otelhooks import AgentContext, AssistantMessage

    seen: list[tuple[Any, Any]] = []
    hooks = Hooks()
    hooks.add(before=lambda ctx: seen.append((ctx.context, ctx.assistant_message)), name="b")
    hooks.add(after=lambda ctx: seen.append((ctx.context, ctx.assistant_message)), name="a")
    registry = ToolRegistry()

    @registry.tool
    async def echo(text: str) -> str:
        await asyncio.sleep(0)
        return text

    executor = ToolExecutor(registry, hooks, tracer_provider=otelhooks_tracing.provider)
    contexts = [AgentContext(agent_name=f"agent{i}", run_id=f"run{i}") for i in range(5)]
    messages = [AssistantMessage(text=f"m{i}") for i in range(5)]
    await asyncio.gather(
        *(
            executor.execute(
                ToolCall(f"c{i}", "echo", {"text": "x"}),
                context=contexts[i],
                assistant_message=messages[i],
            )
            for i in range(5)
        )
    )
    assert len(seen) == 10
    for context, message in seen:
        index = contexts.index(context)
        assert message is messages[index]
    await executor.execute(ToolCall("n", "echo", {"text": "x"}))
    assert seen[-1][1] is None and seen[-1][0].agent_name == AgentContext().agent_name


# -- validation picks the field values ----------------------------------------------------------


class _Plain(pydantic.BaseModel):
    a: int
    b: str = "x"


class _Forbid(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", str_strip_whitespace=True)
    name: str
    n: int = pydantic.Field(ge=0)


class _Alias(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(populate_by_name=True, strict=True)
    value: int = pydantic.Field(alias="v")


class _Extra(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    a: int


@pytest.mark.parametrize(
    ("model", "args"),
    [
        (_Plain, {"a": "1"}),
        (_Plain, {"a": "x"}),
        (_Plain, {}),
        (_Forbid, {"name": "  n  ", "n": 1}),
        (_Forbid, {"name": "n", "n": -1, "z": 1}),
        (_Alias, {"v": 1}),
        (_Alias, {"value": 1}),
        (_Alias, {"v": "1"}),
        (_Extra, {"a": 1, "b": 2}),
        (_Plain, [1]),
    ],
)
def test_the_field_values_and_errors_are_the_models(
    model: type[pydantic.BaseModel], args: Any
) -> None:
    validate = fields_validator(model)

    def through_model() -> Any:
        return model.model_validate(args).__dict__

    try:
        expected = through_model()
    except pydantic.ValidationError as exc:
        with pytest.raises(pydantic.ValidationError) as got:
            validate(args)
        assert got.value.errors(include_url=False) == exc.errors(include_url=False)
        assert got.value.title == exc.title
        return
    values = validate(args)
    assert values == expected and type(values) is dict
    assert values is not validate(args)  # a fresh dict every time


# -- quick_init keeps the dataclass's parameters, or refuses the class --------------------------


def _keyword_only_after() -> type:
    @dataclass(frozen=True, slots=True)
    class KeywordOnly:
        a: int
        b: int = dataclasses.field(kw_only=True, default=0)
        c: int = 1

    return KeywordOnly


def _keyword_only_class() -> type:
    @dataclass(frozen=True, slots=True, kw_only=True)
    class AllKeywords:
        a: int = 0
        b: int = 1

    return AllKeywords


def _keyword_only_marker() -> type:
    @dataclass(frozen=True, slots=True)
    class Marked:
        a: int
        _: dataclasses.KW_ONLY
        b: int = 5
        c: int = 1

    return Marked


@pytest.mark.parametrize("make", [_keyword_only_after, _keyword_only_class, _keyword_only_marker])
def test_quick_init_keeps_keyword_only_fields_keyword_only(make: Any) -> None:
    """A keyword-only field stays one: no positional value lands in it, and the signature is
    the dataclass's own (parameters, their kinds and defaults)."""
    plain, quick = make(), quick_init(make())
    assert inspect.signature(quick.__init__) == inspect.signature(plain.__init__)
    for args, kwargs in (((1,), {}), ((1, 2), {}), ((), {"a": 1, "b": 2}), ((1,), {"c": 3})):
        try:
            expected = dataclasses.astuple(plain(*args, **kwargs))
        except TypeError:
            with pytest.raises(TypeError):
                quick(*args, **kwargs)
        else:
            made = quick(*args, **kwargs)
            assert dataclasses.astuple(made) == expected and type(made) is quick


def _init_var() -> type:
    @dataclass(frozen=True, slots=True)
    class WithInitVar:
        a: int
        b: dataclasses.InitVar[int] = 0

    return WithInitVar


def _named(name: str) -> type:
    return dataclasses.make_dataclass(
        "Named", [("a", int), (name, int, 0)], frozen=True, slots=True
    )


@pytest.mark.parametrize(
    "make",
    [_init_var]
    + [
        functools.partial(_named, name)
        for name in ("_cls", "_twin", "_become", "_set0", "_default1", "self", "type")
    ],
    ids=["init-var", "_cls", "_twin", "_become", "_set0", "_default1", "self", "type"],
)
def test_quick_init_refuses_what_it_cannot_give_the_dataclass_parameters_of(make: Any) -> None:
    """An init-only field (a parameter with no slot) and a field named as a name the quick
    ``__init__`` uses itself are refused when the class is made, not misplaced later."""
    with pytest.raises(TypeError):
        quick_init(make())


def test_quick_init_keeps_a_default_that_is_not_equal_to_itself() -> None:
    nan = float("nan")

    @quick_init
    @dataclass(frozen=True, slots=True)
    class Odd:
        a: float = nan

    assert Odd().a is nan and Odd(1.0).a == 1.0


async def test_sampled_out_calls_at_once_each_run_in_their_own_span_context() -> None:
    """A sampled-out call's trace is its own (only the null trace is shared): fifty at once each
    run their handler with their own span current, and nothing records."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    registry = ToolRegistry()

    @registry.tool
    async def where(n: int) -> str:
        await asyncio.sleep(0)
        inside = trace.get_current_span().get_span_context()
        await asyncio.sleep(0)
        after = trace.get_current_span().get_span_context()
        assert inside == after and not inside.trace_flags.sampled
        return f"{inside.span_id:x}"

    executor = ToolExecutor(registry, Hooks(), tracer_provider=TracerProvider(sampler=ALWAYS_OFF))
    results = await asyncio.gather(
        *(executor.execute(ToolCall(f"s{i}", "where", {"n": i})) for i in range(50))
    )
    ids = {result.content for result in results}
    assert len(ids) == 50 and "0" not in ids


@pytest.mark.parametrize("kind", ["null", "sampled-out", "recording"])
async def test_a_sync_call_with_no_after_hook_leaves_the_callers_context_as_it_found_it(
    kind: str,
) -> None:
    """The run phase of a sync call that no after-hook follows is closed by the trace's
    ``end_run``: the handler runs in the call's context (when it has one), and the caller's
    context is current again afterwards, the handler returning or raising."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    exporter = InMemorySpanExporter()
    provider: Any
    if kind == "null":
        provider = trace.NoOpTracerProvider()
    elif kind == "sampled-out":
        provider = TracerProvider(sampler=ALWAYS_OFF)
    else:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    registry = ToolRegistry()
    seen: list[Any] = []

    @registry.tool
    def where(fail: bool) -> str:
        seen.append(trace.get_current_span().get_span_context())
        if fail:
            raise RuntimeError("no")
        return "here"

    executor = ToolExecutor(registry, Hooks(), tracer_provider=provider)
    caller = TracerProvider().get_tracer("caller")
    with caller.start_as_current_span("caller") as outer:
        for fail in (False, True, False):
            result = await executor.execute(ToolCall(f"w{fail}", "where", {"fail": fail}))
            assert result.is_error is fail
            assert trace.get_current_span() is outer  # the run phase's context has left
    assert trace.get_current_span() is not outer
    inside = {context.span_id for context in seen}
    if kind == "null":  # no span of its own: the handler runs in the caller's context
        assert inside == {outer.get_span_context().span_id}
    else:  # its own span's context each time
        assert len(inside) == 3 and outer.get_span_context().span_id not in inside
    if kind == "recording":
        names = [span.name for span in exporter.get_finished_spans()]
        assert names.count("run") == names.count("after") == 3
