"""The in-process boundary under an adversary: each test tries to break one guarantee of the one
execution path (limits only narrow, every documented bound holds, outcomes are recorded once and
truly, arguments are read-only, guards see what the handler gets, typos are refused)."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from opentelemetry.trace import StatusCode

from otelhooks import (
    NO_SCRUBBING,
    AfterToolCallContext,
    AssistantMessage,
    BeforeToolCallContext,
    Hooks,
    ToolCall,
    ToolCallRecord,
    ToolExecutor,
    ToolHook,
    ToolRegistry,
    UnmatchedToolPatternError,
    block,
    rewrite,
)
from otelhooks.builtin import (
    ArgumentPattern,
    CallLimit,
    PathGuard,
    RedactionHook,
    Redactor,
    StructlogEvents,
    ToolAllowList,
    ToolDenyList,
    UrlHostGuard,
)
from otelhooks.builtin.audit import AuditLog
from otelhooks.core.loop import Agent
from otelhooks.providers import ScriptedProvider
from otelhooks.telemetry import attributes as A
from otelhooks.telemetry.testing import InMemoryTracing

ROOT = Path(__file__).resolve().parents[1]


# -- a model never widens a limit the developer or operator set ---------------------------------


@pytest.mark.parametrize("asked", [0, 1e9, -1, "5", None])
async def test_the_models_timeout_argument_cannot_widen_the_tools_bound(
    otelhooks_tracing: InMemoryTracing, asked: Any
) -> None:
    registry = ToolRegistry()
    never = asyncio.Event()

    @registry.tool(timeout=0.5)
    async def shell(command: str, timeout: Any = None) -> str:
        await never.wait()
        return "ran unbounded"

    executor = ToolExecutor(registry, tracer_provider=otelhooks_tracing.provider)
    result = await asyncio.wait_for(
        executor.execute(ToolCall("c", "shell", {"command": "sleep", "timeout": asked})), 10
    )
    assert result.content == "error: tool 'shell' timed out after 0.5s"


async def test_a_sync_tool_the_model_asks_to_unbound_still_runs_bounded_off_the_loop(
    otelhooks_tracing: InMemoryTracing,
) -> None:
    registry = ToolRegistry()
    release = threading.Event()
    ran_on: list[str] = []

    @registry.tool(timeout=0.5)
    def shell(command: str, timeout: float = 0.0) -> str:
        ran_on.append(threading.current_thread().name)
        release.wait(10)  # inline, this would hold the loop for 10 s
        return "ran unbounded"

    executor = ToolExecutor(registry, tracer_provider=otelhooks_tracing.provider)
    try:
        result = await executor.execute(ToolCall("c", "shell", {"command": "x", "timeout": 0}))
    finally:
        release.set()
    assert result.content == "error: tool 'shell' timed out after 0.5s"
    assert ran_on and ran_on[0] != threading.current_thread().name


async def test_a_model_may_narrow_a_bound(otelhooks_tracing: InMemoryTracing) -> None:
    registry = ToolRegistry()

    @registry.tool(timeout=30)
    async def shell(command: str, timeout: float | None = None) -> str:
        await asyncio.Event().wait()
        return "never"

    executor = ToolExecutor(registry, tracer_provider=otelhooks_tracing.provider)
    result = await asyncio.wait_for(
        executor.execute(ToolCall("c", "shell", {"command": "x", "timeout": 0.2})), 10
    )
    assert result.content == "error: tool 'shell' timed out after 0.2s"


# -- every call is bounded as documented ---------------------------------------------------------


async def test_a_sync_handler_that_runs_inline_is_the_one_call_the_executor_bound_skips(
    otelhooks_tracing: InMemoryTracing,
) -> None:
    registry = ToolRegistry()

    def hold(seconds: float) -> str:
        threading.Event().wait(seconds)
        return "finished"

    registry.register(hold, name="inline")
    registry.register(hold, name="threaded", blocking=True)
    executor = ToolExecutor(registry, tracer_provider=otelhooks_tracing.provider, tool_timeout=0.05)
    # inline, it holds the event loop: no timer can fire (the docs say so, and why)
    assert (await executor.execute(ToolCall("1", "inline", {"seconds": 0.3}))).content == (
        "finished"
    )
    threaded = await executor.execute(ToolCall("2", "threaded", {"seconds": 5}))
    assert threaded.content == "error: tool 'threaded' timed out after 0.05s"
    docs = (ROOT / "docs" / "concepts" / "tools.md").read_text()
    assert "runs inline" in docs and "not bounded" in docs


async def test_hung_sync_hooks_cannot_starve_the_healthy_ones(
    otelhooks_tracing: InMemoryTracing,
) -> None:
    registry = ToolRegistry()
    registry.register(lambda: "stuck", name="stuck")
    registry.register(lambda: "fine", name="fine")
    release = threading.Event()
    after_ran: list[str] = []
    hooks = Hooks()
    hooks.add(before=lambda ctx: release.wait(30), name="hangs", tools="stuck", timeout=0.1)
    hooks.add(before=lambda ctx: None, name="healthy", tools="fine", timeout=2.0)
    hooks.add(
        after=lambda ctx: after_ran.append(ctx.tool_call.id), name="audit", tools="fine", timeout=2
    )
    executor = ToolExecutor(registry, hooks, tracer_provider=otelhooks_tracing.provider)
    try:
        stuck = await asyncio.gather(
            *(executor.execute(ToolCall(f"s{i}", "stuck", {})) for i in range(12))
        )  # more hung threads than a default pool has
        fine = await executor.execute(ToolCall("f", "fine", {}))
    finally:
        release.set()
    assert all(r.content == "blocked: hook 'hangs' timed out after 0.1s" for r in stuck)
    assert fine.content == "fine" and not fine.is_error
    assert after_ran == ["f"]  # the fail-open after-hook ran, it was not skipped


# -- outcomes are recorded once and truly --------------------------------------------------------


async def test_cancelling_a_run_while_a_sync_tool_runs_in_a_thread_records_it_truly(
    otelhooks_tracing: InMemoryTracing, caplog: pytest.LogCaptureFixture
) -> None:
    registry = ToolRegistry()
    started, release = threading.Event(), threading.Event()
    side_effects: list[str] = []

    @registry.tool(blocking=True)
    def write(path: str) -> str:
        started.set()
        release.wait(10)
        side_effects.append(path)
        return "written"

    @registry.tool
    async def read(path: str) -> str:
        await asyncio.Event().wait()
        return "never"

    records: list[ToolCallRecord] = []
    hooks = Hooks()
    hooks.add(observe=records.append, name="audit")
    calls = (ToolCall("w", "write", {"path": "a"}), ToolCall("r", "read", {"path": "b"}))
    provider = ScriptedProvider([AssistantMessage(tool_calls=calls)])
    agent = Agent(provider, tools=registry, hooks=hooks, tracer_provider=otelhooks_tracing.provider)
    caplog.set_level(logging.WARNING, logger="opentelemetry.sdk.trace")
    task = asyncio.create_task(agent.run("go"))
    await asyncio.to_thread(started.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    by_call = {r.tool_call.id: r for r in records}
    assert len(records) == 2 and set(by_call) == {"w", "r"}  # once each
    assert by_call["w"].decision == "allow"  # the handler was asked to run: not "skip"
    assert by_call["w"].error_type == "cancelled"
    assert not [r for r in caplog.records if "ended span" in r.getMessage()]
    span = otelhooks_tracing.tool_span(call_id="w")
    assert span.attributes[A.DECISION] == "allow"  # type: ignore[index]
    assert span.attributes[A.CANCELLED] is True  # type: ignore[index]


async def test_an_abort_and_an_outside_cancellation_record_the_same_outcome(
    otelhooks_tracing: InMemoryTracing,
) -> None:
    registry = ToolRegistry()
    started = asyncio.Event()

    @registry.tool
    async def wait() -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    outcomes: dict[str, ToolCallRecord] = {}
    hooks = Hooks()
    hooks.add(observe=lambda r: outcomes.setdefault(r.tool_call.id, r), name="audit")
    for how in ("abort", "cancel"):
        started.clear()
        provider = ScriptedProvider([AssistantMessage(tool_calls=(ToolCall(how, "wait", {}),))])
        agent = Agent(provider, tools=registry, hooks=hooks)
        task = asyncio.create_task(agent.run("go"))
        await started.wait()
        if how == "abort":
            agent.abort("stop")
            await task
        else:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
    assert {k: (r.decision, r.error_type) for k, r in outcomes.items()} == {
        "abort": ("allow", "cancelled"),
        "cancel": ("allow", "cancelled"),
    }


async def test_a_hooks_own_cancelled_error_is_its_failure_not_the_end_of_the_run(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    hooks = Hooks()

    @hooks.before
    def confused(ctx: BeforeToolCallContext) -> None:
        raise asyncio.CancelledError()

    executor = ToolExecutor(registry, hooks, tracer_provider=otelhooks_tracing.provider)
    result = await executor.execute(ToolCall("c1", "echo", {"text": "hi"}))
    assert result.content == "blocked: hook 'confused' failed (CancelledError)"
    provider = ScriptedProvider(
        [
            AssistantMessage(tool_calls=(ToolCall("c2", "echo", {"text": "hi"}),)),
            AssistantMessage(text="carried on"),
        ]
    )
    run = await Agent(provider, tools=registry, hooks=hooks).run("go")
    assert run.text == "carried on"


async def test_a_handlers_own_cancelled_error_is_an_error_result(
    otelhooks_tracing: InMemoryTracing,
) -> None:
    registry = ToolRegistry()

    @registry.tool
    async def confused() -> str:
        raise asyncio.CancelledError()

    executor = ToolExecutor(registry, tracer_provider=otelhooks_tracing.provider)
    result = await executor.execute(ToolCall("c1", "confused", {}))
    assert result.is_error and "CancelledError" in result.content
    assert otelhooks_tracing.tool_span(call_id="c1").status.status_code == StatusCode.ERROR


async def test_a_call_finished_or_skipped_twice_keeps_its_first_outcome(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    records: list[ToolCallRecord] = []
    hooks = Hooks()
    hooks.add(observe=records.append, name="audit")
    executor = ToolExecutor(registry, hooks, tracer_provider=otelhooks_tracing.provider)
    prepared = await executor.prepare(ToolCall("c", "echo", {"text": "hi"}))
    first = await executor.finish(prepared)
    assert executor.skip_prepared(prepared, "too late") is first
    assert await executor.finish(prepared) is first
    assert [r.decision for r in records] == ["allow"]
    assert len(otelhooks_tracing.tool_spans()) == 1


# -- arguments are read-only, and guards see what the handler gets -------------------------------


async def test_a_hook_cannot_change_a_list_nested_in_a_tuple_behind_the_runtimes_back(
    otelhooks_tracing: InMemoryTracing,
) -> None:
    registry = ToolRegistry()
    got: list[Any] = []

    @registry.tool
    def count(pair: tuple[list[int], int]) -> int:
        got.append(pair)
        return len(pair[0])

    hooks = Hooks()

    @hooks.before
    def meddle(ctx: BeforeToolCallContext) -> None:
        ctx.args["pair"][0].append(99)

    @hooks.after
    def meddle_after(ctx: AfterToolCallContext) -> None:
        ctx.args["pair"][0].append(98)

    records: list[ToolCallRecord] = []
    hooks.add(observe=records.append, name="audit")
    executor = ToolExecutor(registry, hooks, tracer_provider=otelhooks_tracing.provider)
    result = await executor.execute(ToolCall("c", "count", {"pair": [[1, 2], 3]}))
    assert result.content == "2" and got == [([1, 2], 3)]
    assert records[0].arguments["pair"] == ([1, 2], 3)


async def test_a_guard_sees_the_arguments_a_later_hook_rewrote(
    otelhooks_tracing: InMemoryTracing,
) -> None:
    registry = ToolRegistry()
    opened: list[str] = []

    @registry.tool
    def read_file(path: str) -> str:
        opened.append(path)
        return "contents"

    hooks = Hooks([PathGuard("path", "/srv/data")])

    @hooks.before
    def url_decode(ctx: BeforeToolCallContext) -> Any:
        return rewrite({"path": unquote(ctx.args["path"])})

    executor = ToolExecutor(registry, hooks, tracer_provider=otelhooks_tracing.provider)
    result = await executor.execute(
        ToolCall("c", "read_file", {"path": "/srv/data/%2e%2e/%2e%2e/etc/passwd"})
    )
    assert opened == []
    assert result.content.startswith("blocked: argument 'path' of 'read_file' must not contain")
    span = otelhooks_tracing.tool_span(call_id="c")
    assert span.attributes[A.DECISION_HOOK] == "path_guard"  # type: ignore[index]
    events = otelhooks_tracing.events(otelhooks_tracing.child(span, "before"), A.EVENT_HOOK)
    assert events[-1][A.EVENT_HOOK_RECHECK] is True


async def test_hooks_that_keep_rewriting_each_others_arguments_block_the_call(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    hooks = Hooks()
    hooks.add(before=lambda ctx: rewrite({"text": ctx.args["text"] + "!"}), name="exclaim")
    hooks.add(before=lambda ctx: rewrite({"text": ctx.args["text"].upper()}), name="shout")
    executor = ToolExecutor(registry, hooks, tracer_provider=otelhooks_tracing.provider)
    result = await executor.execute(ToolCall("c", "echo", {"text": "hi"}))
    assert result.is_error and "do not agree" in result.content


async def test_a_call_limit_counts_a_rechecked_call_once(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    hooks = Hooks([CallLimit(2)])
    hooks.add(before=lambda ctx: rewrite({"text": ctx.args["text"].strip()}), name="strip")
    executor = ToolExecutor(registry, hooks, tracer_provider=otelhooks_tracing.provider)
    from otelhooks import AgentContext

    context = AgentContext(run_id="r")
    first = await executor.execute(ToolCall("1", "echo", {"text": " a "}), context=context)
    second = await executor.execute(ToolCall("2", "echo", {"text": " b "}), context=context)
    third = await executor.execute(ToolCall("3", "echo", {"text": " c "}), context=context)
    assert [first.content, second.content] == ["a", "b"]
    assert third.content == "blocked: limit of 2 calls of 'echo' per run reached"


async def test_an_explicit_schema_never_passes_undeclared_arguments_to_kwargs(
    otelhooks_tracing: InMemoryTracing,
) -> None:
    registry = ToolRegistry()
    got: list[dict[str, Any]] = []

    def run(**kwargs: Any) -> str:
        got.append(kwargs)
        return "ran"

    schema = {"type": "object", "properties": {"query": {"type": "string"}}}
    registry.register(run, name="search", parameters=schema)
    registry.register(
        run,
        name="open_ended",
        parameters={**schema, "additionalProperties": True},  # said: extras allowed
    )
    registry.register(
        run,
        name="composed",
        parameters={"allOf": [schema], "type": "object"},
    )
    executor = ToolExecutor(registry, tracer_provider=otelhooks_tracing.provider)
    sneaky = {"query": "x", "shell": "rm -rf /"}
    refused = await executor.execute(ToolCall("1", "search", sneaky))
    composed = await executor.execute(ToolCall("2", "composed", sneaky))
    allowed = await executor.execute(ToolCall("3", "open_ended", sneaky))
    assert refused.is_error and "'shell' was unexpected" in refused.content
    assert composed.is_error and "shell" in composed.content
    assert allowed.content == "ran" and got == [sneaky]
    assert registry.get("search").parameters == schema  # type: ignore[union-attr]


# -- typos are refused ---------------------------------------------------------------------------


class Misspelt:
    name = "audit"

    def before_tool_call(self, ctx: BeforeToolCallContext) -> None:
        return None

    def after_tool_cal(self, ctx: AfterToolCallContext) -> str:
        return "redacted"


class MisspeltSubclass(ToolHook):
    def on_tool_call_ended(self, record: ToolCallRecord) -> None:
        return None


class Transposed:
    def befroe_tool_call(self, ctx: BeforeToolCallContext) -> None:
        return None


class OldScrubber:
    def after_tool_call(self, ctx: AfterToolCallContext) -> None:
        return None

    def scrub_text(self, text: str) -> str:
        return text


@pytest.mark.parametrize(
    ("hook", "meant"),
    [
        (Misspelt(), "after_tool_call"),
        (MisspeltSubclass(), "on_tool_call_end"),
        (Transposed(), "before_tool_call"),
    ],
    ids=["after_tool_cal", "on_tool_call_ended", "befroe_tool_call"],
)
def test_a_hook_object_with_a_misspelt_method_is_refused(hook: Any, meant: str) -> None:
    hooks = Hooks()
    with pytest.raises(TypeError, match=f"did you mean '{meant}'"):
        hooks.add(hook)
    assert len(hooks) == 0


def test_a_hook_that_still_offers_scrub_text_is_refused_with_the_way_to_say_it() -> None:
    with pytest.raises(TypeError, match="scrubber="):
        Hooks().add(OldScrubber())


def test_every_built_in_hook_meets_the_contract(tmp_path: Path) -> None:
    hooks = Hooks()
    for hook in (
        ToolAllowList(["*"]),
        ToolDenyList(["x"]),
        PathGuard("path", "/srv"),
        UrlHostGuard("url", ["example.com"]),
        ArgumentPattern("id", r"\d+"),
        CallLimit(3),
        RedactionHook(Redactor()),
        StructlogEvents(),
        AuditLog(tmp_path / "audit.jsonl"),
    ):
        hooks.add(hook)
    assert len(hooks) == 9


def test_a_subclass_takes_part_only_in_the_phases_it_overrides() -> None:
    class OnlyAfter(ToolHook):
        def after_tool_call(self, ctx: AfterToolCallContext) -> str:
            return "x"

    registered = Hooks().add(OnlyAfter())
    assert registered.after is not None
    assert registered.before is None and registered.observe is None
    assert registered.name == "OnlyAfter"


async def test_a_tool_pattern_typo_never_lets_the_tool_it_meant_run() -> None:
    registry = ToolRegistry()
    ran: list[str] = []
    registry.register(lambda: ran.append("rm -rf") or "done", name="dangerous")
    hooks = Hooks(registry=registry)
    with pytest.raises(UnmatchedToolPatternError, match="did you mean 'dangerous'"):

        @hooks.before(tools="dangerus")
        def forbid(ctx: BeforeToolCallContext) -> Any:
            return block("disabled")

    agent = Agent(
        ScriptedProvider(
            [
                AssistantMessage(tool_calls=(ToolCall("c", "dangerous", {}),)),
                AssistantMessage(text="ok"),
            ]
        ),
        tools=registry,
        hooks=Hooks([], registry=registry),
    )
    unguarded = Hooks()  # patterns checked when the agent starts: the run never begins
    unguarded.add(before=lambda ctx: block("disabled"), tools="dangerus")
    agent.hooks = unguarded
    with pytest.raises(UnmatchedToolPatternError):
        await agent.run("go")
    assert ran == []


async def test_a_redaction_hook_without_a_scrubber_is_refused(registry: ToolRegistry) -> None:
    hooks = Hooks([RedactionHook(Redactor())])
    executor = ToolExecutor(registry, hooks, scrubber=NO_SCRUBBING)  # scrubbing turned off
    with pytest.raises(ValueError, match="scrubber="):
        await executor.execute(ToolCall("c", "echo", {"text": "hi"}))
    agent = Agent(
        ScriptedProvider([AssistantMessage(text="ok")]), hooks=hooks, scrubber=NO_SCRUBBING
    )
    with pytest.raises(ValueError, match="scrubber="):
        await agent.run("go")
    for default_or_given in (None, Redactor()):  # a runtime given none has the default
        assert (
            await ToolExecutor(registry, hooks, scrubber=default_or_given).execute(
                ToolCall("c", "echo", {"text": "hi"})
            )
        ).content == "hi"
    redactor = Redactor()
    assert (
        await ToolExecutor(registry, hooks, scrubber=redactor).execute(
            ToolCall("c", "echo", {"text": "hi"})
        )
    ).content == "hi"


# -- tracing configured after the runtime was built ----------------------------------------------

LATE_TRACING = """
import asyncio, json
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otelhooks import AssistantMessage, ToolCall, ToolExecutor, ToolRegistry
from otelhooks.core.loop import Agent
from otelhooks.integrations._boundary import FrameworkBoundary
from otelhooks.providers import ScriptedProvider

registry = ToolRegistry()

@registry.tool
def sync_echo(text: str) -> str:
    return text

@registry.tool
async def async_echo(text: str) -> str:
    return text

# built at import, before tracing is configured (the usual OpenTelemetry order)
executor = ToolExecutor(registry)
agent = Agent(ScriptedProvider([
    AssistantMessage(tool_calls=(ToolCall("a1", "sync_echo", {"text": "x"}),
                                 ToolCall("a2", "async_echo", {"text": "y"}))),
    AssistantMessage(text="done"),
]), tools=registry)
boundary = FrameworkBoundary()
boundary.ensure_tool("framework_echo", "echo", {"type": "object",
                     "properties": {"text": {"type": "string"}}})

async def invoke(arguments, rewritten):
    return arguments["text"]

async def main():
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    for tool in ("sync_echo", "async_echo"):
        await executor.execute(ToolCall(f"e-{tool}", tool, {"text": "hi"}))
    await agent.run("go")
    await boundary.call("b1", "framework_echo", {"text": "hi"}, invoke)
    spans = [
        (s.name, s.attributes.get("gen_ai.tool.call.id")) for s in exporter.get_finished_spans()
    ]
    points = {}
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == "otelhooks.tool.calls":
                    for point in metric.data.data_points:
                        tool = point.attributes["gen_ai.tool.name"]
                        points[tool] = points.get(tool, 0) + point.value
    print(json.dumps({"spans": spans, "calls": points}))

asyncio.run(main())
"""


def test_a_runtime_built_before_tracing_is_configured_traces_and_counts_every_call() -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(LATE_TRACING)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    spans = [tuple(s) for s in found["spans"]]
    for call_id, tool in (
        ("e-sync_echo", "sync_echo"),
        ("e-async_echo", "async_echo"),
        ("a1", "sync_echo"),
        ("a2", "async_echo"),
        ("b1", "framework_echo"),
    ):
        assert (f"execute_tool {tool}", call_id) in spans, (call_id, spans)
    names = [name for name, _ in spans]
    assert names.count("before") == names.count("run") == names.count("after") == 5
    assert any(name.startswith("invoke_agent") for name in names)
    assert found["calls"] == {"sync_echo": 2, "async_echo": 2, "framework_echo": 1}
