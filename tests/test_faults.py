"""Faults on purpose: every call ends with a result, every span ends, nothing hangs or leaks."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import math
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from otelhooks import (
    AfterToolCallContext,
    AssistantMessage,
    BeforeToolCallContext,
    Hooks,
    ToolCall,
    ToolContext,
    ToolExecutor,
    ToolRegistry,
    ToolResult,
    make_tool,
)
from otelhooks.builtin import CallLimit, RedactingProcessor, RedactionHook, Redactor
from otelhooks.core.loop import Agent
from otelhooks.providers import Done, ProviderRequest, ScriptedProvider, StreamEvent, TextChunk
from otelhooks.telemetry import attributes as A
from otelhooks.telemetry.testing import InMemoryTracing, in_memory_tracing
from otelhooks.telemetry.tracing import setup_tracing

from .test_redaction import SECRETS


class OpenSpans(SpanProcessor):
    """Tracks spans started and not ended."""

    def __init__(self) -> None:
        self.open: dict[int, str] = {}
        self.lock = threading.Lock()

    def on_start(self, span: Span, parent_context: otel_context.Context | None = None) -> None:
        with self.lock:
            self.open[span.context.span_id] = span.name

    def on_end(self, span: ReadableSpan) -> None:
        with self.lock:
            self.open.pop(span.context.span_id, None)  # type: ignore[union-attr]


@pytest.fixture
def tracked() -> Iterator[tuple[InMemoryTracing, OpenSpans]]:
    open_spans = OpenSpans()
    tracing = in_memory_tracing(open_spans, redactor=Redactor())
    yield tracing, open_spans
    tracing.shutdown()


def agent_for(
    tracing: InMemoryTracing, registry: ToolRegistry, steps: list[Any], **kw: Any
) -> Agent:
    return Agent(ScriptedProvider(steps), tools=registry, tracer_provider=tracing.provider, **kw)


def one_call(name: str, args: Any = None) -> AssistantMessage:
    return AssistantMessage(tool_calls=(ToolCall("c1", name, args if args is not None else {}),))


class Weird:
    def __repr__(self) -> str:
        return "<Weird>"


def _gen() -> Iterator[int]:
    yield from (1, 2, 3)


async def _agen() -> AsyncIterator[str]:
    for item in ("a", "b"):
        await asyncio.sleep(0)
        yield item


TOOL_FAULTS = {
    "raises": (lambda: 1 / 0, "error: division by zero", "ZeroDivisionError"),
    "non_json": (lambda: {"obj": Weird(), "set": {1}}, '{"obj": "<Weird>", "set": "{1}"}', None),
    "generator": (_gen, "[1, 2, 3]", None),
    "async_generator": (_agen, '["a", "b"]', None),
}


@pytest.mark.parametrize("fault", sorted(TOOL_FAULTS))
async def test_tool_faults_end_with_a_result_and_closed_spans(
    tracked: tuple[InMemoryTracing, OpenSpans], fault: str
) -> None:
    tracing, open_spans = tracked
    handler, content, error_type = TOOL_FAULTS[fault]
    registry = ToolRegistry()
    registry.register(handler, name="t")
    agent = agent_for(tracing, registry, [one_call("t"), AssistantMessage(text="done")])
    final = await agent.run("go")
    result = next(m for m in agent.messages if isinstance(m, ToolResult))
    assert result.content == content
    assert final.text == "done"
    assert open_spans.open == {}
    span = tracing.tool_span(call_id="c1")
    assert (span.attributes or {}).get(A.ERROR_TYPE) == error_type


async def test_tool_that_never_returns_is_timed_out(
    tracked: tuple[InMemoryTracing, OpenSpans],
) -> None:
    tracing, open_spans = tracked
    registry = ToolRegistry()

    @registry.tool
    async def hang() -> str:
        await asyncio.Event().wait()
        return "never"

    release = threading.Event()

    @registry.tool(timeout=0.05)
    def spin() -> str:  # a sync tool that blocks: it runs in a thread, so the timeout fires
        release.wait(60)
        return "late"

    agent = agent_for(
        tracing,
        registry,
        [
            AssistantMessage(tool_calls=(ToolCall("a", "hang"), ToolCall("b", "spin"))),
            AssistantMessage(),
        ],
        tool_timeout=0.05,
    )
    started = time.monotonic()
    try:
        await agent.run("go")
    finally:
        release.set()
    assert time.monotonic() - started < 10  # about 0.1 s: it did not wait for the thread (60 s)
    results = [m.content for m in agent.messages if isinstance(m, ToolResult)]
    assert results == [
        "error: tool 'hang' timed out after 0.05s",
        "error: tool 'spin' timed out after 0.05s",
    ]
    assert open_spans.open == {}
    assert tracing.tool_span(call_id="a").attributes[A.ERROR_TYPE] == "tool_timeout"  # type: ignore[index]


async def test_huge_result_is_capped_on_spans_with_its_size(
    tracked: tuple[InMemoryTracing, OpenSpans],
) -> None:
    tracing, _ = tracked
    registry = ToolRegistry()
    registry.register(lambda: "x" * 5_000_000, name="big")
    executor = ToolExecutor(registry, tracer_provider=tracing.provider, capture_content=True)
    result = await executor.execute(ToolCall("c1", "big", {}))
    assert len(result.content) == 5_000_000  # the model gets it all; the span does not
    captured = tracing.tool_span(call_id="c1").attributes[A.GEN_AI_TOOL_CALL_RESULT]  # type: ignore[index]
    assert len(captured) < 5000  # type: ignore[arg-type]
    assert captured.endswith("…[truncated: 5000000 chars in all]")  # type: ignore[union-attr]


@pytest.mark.parametrize("phase", ["before", "after"])
@pytest.mark.parametrize("fault", ["raises", "hangs", "garbage", "mutates"])
async def test_hook_faults_through_the_loop(
    tracked: tuple[InMemoryTracing, OpenSpans], registry: ToolRegistry, phase: str, fault: str
) -> None:
    tracing, open_spans = tracked

    @registry.tool
    def count(items: list[int]) -> int:
        return len(items)

    async def hook(ctx: Any) -> Any:
        if fault == "raises":
            raise KeyError("boom")
        if fault == "hangs":
            await asyncio.Event().wait()
        if fault == "garbage":
            return object()
        ctx.args["items"].append(4)  # mutates a copy
        return None

    hooks = Hooks()
    hooks.add(**{phase: hook}, name="faulty", timeout=0.05)  # type: ignore[arg-type]
    agent = agent_for(
        tracing,
        registry,
        [one_call("count", {"items": [1, 2, 3]}), AssistantMessage(text="ok")],
        hooks=hooks,
    )
    final = await asyncio.wait_for(agent.run("go"), 5)
    assert final.text == "ok"
    result = next(m for m in agent.messages if isinstance(m, ToolResult))
    if fault == "mutates" or phase == "after":
        assert result.content == "3"  # fail open (after), or no fault at all (mutation of a copy)
    else:
        assert result.content.startswith("blocked: hook 'faulty'")  # before-hooks fail closed
    assert open_spans.open == {}


STAGES = ["provider", "before_hook", "tool", "after_hook", "parallel_tools"]


@pytest.mark.parametrize("how", ["abort", "asyncio"])
@pytest.mark.parametrize("stage", STAGES)
async def test_cancellation_at_every_stage(
    tracked: tuple[InMemoryTracing, OpenSpans],
    registry: ToolRegistry,
    caplog: pytest.LogCaptureFixture,
    stage: str,
    how: str,
) -> None:
    tracing, open_spans = tracked
    reached = asyncio.Event()

    async def wait_here(*_: Any) -> str:
        reached.set()
        await asyncio.Event().wait()
        return "never"

    registry.register(wait_here, name="slow")
    hooks = Hooks()
    if stage == "before_hook":
        hooks.add(before=wait_here, name="waits")
    if stage == "after_hook":
        hooks.add(after=wait_here, name="waits")
    tool = "echo" if stage in ("before_hook", "after_hook") else "slow"
    calls = tuple(
        ToolCall(f"c{i}", tool, {"text": "x"} if tool == "echo" else {})
        for i in range(3 if stage == "parallel_tools" else 1)
    )
    if stage == "provider":
        provider: Any = ScriptedProvider(
            [AssistantMessage(text="a long answer")], chunk_size=1, delay=0.01
        )

        async def delayed_reach() -> None:
            await asyncio.sleep(0.03)
            reached.set()

        asyncio.get_running_loop().create_task(delayed_reach())
    else:
        provider = ScriptedProvider([AssistantMessage(tool_calls=calls), AssistantMessage()])
    agent = Agent(provider, tools=registry, hooks=hooks, tracer_provider=tracing.provider)
    caplog.set_level(logging.WARNING, logger="asyncio")
    task = asyncio.create_task(agent.run("go"))
    await asyncio.wait_for(reached.wait(), 5)
    if how == "abort":
        agent.abort("stop")
        final = await asyncio.wait_for(task, 60)
        assert final.stop_reason == "aborted"
        results = [m for m in agent.messages if isinstance(m, ToolResult)]
        assert len(results) == len(calls) if stage != "provider" else results == []
    else:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 60)
    await asyncio.sleep(0)
    assert open_spans.open == {}
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
    assert "Task was destroyed" not in caplog.text


async def test_malformed_provider_output(
    tracked: tuple[InMemoryTracing, OpenSpans], registry: ToolRegistry
) -> None:
    tracing, open_spans = tracked
    bad = AssistantMessage(
        tool_calls=(
            ToolCall("", "echo", '{"text": "no id"}'),
            ToolCall("dup", "echo", "{not json"),
            ToolCall("dup", "echo", '["a", "list"]'),
            ToolCall("x", 42, {}),  # type: ignore[arg-type]
        )
    )
    agent = agent_for(tracing, registry, [bad, AssistantMessage(text="recovered")])
    assert (await agent.run("go")).text == "recovered"
    results = [m for m in agent.messages if isinstance(m, ToolResult)]
    assert [r.content for r in results] == [
        "no id",
        "error: invalid arguments for tool 'echo': arguments are not valid JSON: "
        "Expecting property name enclosed in double quotes",
        "error: invalid arguments for tool 'echo': arguments must be a JSON object, got list",
        "error: unknown tool '42'; available tools: echo",
    ]
    assert len({r.tool_call_id for r in results}) == 4
    assert open_spans.open == {}


async def test_fifty_concurrent_runs_do_not_cross_talk(
    tracked: tuple[InMemoryTracing, OpenSpans],
) -> None:
    tracing, open_spans = tracked
    logged: list[dict[str, Any]] = []

    def capture(logger: Any, method: str, event_dict: Any) -> Any:
        logged.append(dict(event_dict))
        raise structlog.DropEvent

    log = structlog.wrap_logger(
        structlog.ReturnLogger(), processors=[structlog.contextvars.merge_contextvars, capture]
    )
    registry = ToolRegistry()

    @registry.tool
    async def work(run: int, part: int) -> str:
        structlog.contextvars.bind_contextvars(run=run)
        await asyncio.sleep(0.001 * (part % 3))
        log.info("working", expected=run)
        return f"{run}:{part}"

    hooks = Hooks([CallLimit(2, tools=["work"])])  # per run: the third call of each run is blocked

    async def one(run: int) -> Agent:
        calls = tuple(ToolCall(f"r{run}-{p}", "work", {"run": run, "part": p}) for p in range(3))
        agent = Agent(
            ScriptedProvider([AssistantMessage(tool_calls=calls), AssistantMessage(text=str(run))]),
            tools=registry,
            hooks=hooks,
            name=f"run{run}",
            tracer_provider=tracing.provider,
        )
        await agent.run("go")
        return agent

    agents = await asyncio.gather(*(one(r) for r in range(50)))
    for run, agent in enumerate(agents):
        results = [m.content for m in agent.messages if isinstance(m, ToolResult)]
        assert results[:2] == [f"{run}:0", f"{run}:1"]
        assert results[2] == "blocked: limit of 2 calls of 'work' per run reached"
        (root,) = tracing.find(f"invoke_agent run{run}")
        trace_id = root.context.trace_id  # type: ignore[union-attr]
        for p in range(3):
            span = tracing.tool_span(call_id=f"r{run}-{p}")
            assert span.context.trace_id == trace_id  # type: ignore[union-attr]
            assert span.parent.span_id == root.context.span_id  # type: ignore[union-attr]
    assert len({s.context.trace_id for s in tracing.spans()}) == 50  # type: ignore[union-attr]
    assert all(e["run"] == e["expected"] for e in logged) and len(logged) == 100
    assert open_spans.open == {}


# -- bad input, fuzzed -------------------------------------------------------------------------

_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=50),
    st.binary(max_size=20),
    st.just("\x00\ud7ff\ufffe𝕏" * 3),
    st.just("y" * 200_000),
)
_values = st.recursive(
    _leaf,
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4)
    ),
    max_leaves=30,
)


def _deep(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"d": value}
    return value


_arguments = st.one_of(
    st.dictionaries(st.text(max_size=10), _values, max_size=5),
    st.builds(lambda d: {"text": _deep(d)}, st.integers(30, 2000)),
    st.text(max_size=40),
    _values,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.one_of(st.sampled_from(["echo", "add", "any"]), st.text(max_size=300)),
    arguments=_arguments,
)
def test_fuzz_every_input_ends_as_a_result(name: str, arguments: Any) -> None:
    registry = ToolRegistry()
    registry.register(lambda text: text, name="echo")
    registry.register(
        lambda a, b=0: a + b,
        name="add",
        parameters={
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a"],
        },
    )

    def anything(**kwargs: Any) -> Any:
        return kwargs

    registry.register(anything, name="any", parameters={"type": "object"})
    tracing = in_memory_tracing(redactor=Redactor())
    redactor = Redactor()
    hooks = Hooks([RedactionHook(redactor)])
    executor = ToolExecutor(
        registry, hooks, tracer_provider=tracing.provider, capture_content=True, scrubber=redactor
    )
    result = asyncio.run(executor.execute(ToolCall("c1", name, arguments)))
    assert isinstance(result, ToolResult) and isinstance(result.content, str)
    (span,) = tracing.tool_spans()
    assert span.name in (
        "execute_tool echo",
        "execute_tool add",
        "execute_tool any",
        "execute_tool unknown",
    )
    if span.name == "execute_tool unknown":
        assert result.is_error and result.content.startswith("error: unknown tool")
    json.dumps(span.to_json())  # exportable


_schema_types = st.sampled_from(
    ["string", "integer", "number", "boolean", "array", "object", "null"]
)
_schemas = st.recursive(
    st.builds(lambda t: {"type": t}, _schema_types),
    lambda kids: (
        st.builds(
            lambda props, req: {
                "type": "object",
                "properties": props,
                "required": [k for k in props if req],
            },
            st.dictionaries(st.text(min_size=1, max_size=5), kids, max_size=3),
            st.booleans(),
        )
        | st.builds(lambda items: {"type": "array", "items": items}, kids)
    ),
    max_leaves=8,
)


@settings(max_examples=80, deadline=None)
@given(schema=_schemas, arguments=st.dictionaries(st.text(max_size=5), _values, max_size=3))
def test_fuzz_schema_shapes(schema: dict[str, Any], arguments: dict[str, Any]) -> None:
    tool_schema = (
        schema
        if schema.get("type") == "object"
        else {"type": "object", "properties": {"v": schema}}
    )
    registry = ToolRegistry([make_tool(lambda **kw: kw, name="t", parameters=tool_schema)])
    executor = ToolExecutor(registry, tracer_provider=in_memory_tracing().provider)
    result = asyncio.run(executor.execute(ToolCall("c", "t", arguments)))
    assert isinstance(result, ToolResult)
    assert result.is_error == result.content.startswith("error: invalid arguments")


def test_deeply_nested_arguments_are_refused_clearly() -> None:
    registry = ToolRegistry()
    registry.register(lambda data: "ok", name="t", parameters={"type": "object"})
    executor = ToolExecutor(registry)
    result = asyncio.run(executor.execute(ToolCall("c", "t", {"data": _deep(5000)})))
    assert (
        result.content
        == "error: invalid arguments for tool 't': arguments are nested deeper than 32 levels"
    )
    deep_json = '{"a": ' * 100_000 + "1" + "}" * 100_000
    result = asyncio.run(executor.execute(ToolCall("c", "t", deep_json)))
    assert (
        result.content == "error: invalid arguments for tool 't': arguments are nested too deeply"
    )


def test_nan_and_bytes_survive_to_a_result() -> None:
    registry = ToolRegistry()
    registry.register(lambda x: x, name="t", parameters={"type": "object", "properties": {"x": {}}})
    tracing = in_memory_tracing()
    executor = ToolExecutor(registry, tracer_provider=tracing.provider, capture_content=True)
    result = asyncio.run(executor.execute(ToolCall("c", "t", {"x": [math.nan, b"\xff\x00"]})))
    assert result.content == "[NaN, \"b'\\\\xff\\\\x00'\"]"


# -- secrets on fault paths ----------------------------------------------------------------------

SECRET = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"


async def test_secrets_on_fault_paths_never_reach_spans(
    tracked: tuple[InMemoryTracing, OpenSpans],
) -> None:
    tracing, _ = tracked
    registry = ToolRegistry()

    @registry.tool(timeout=0.05)
    async def leaky_timeout(token_hint: str) -> str:
        await asyncio.sleep(1)
        return token_hint

    def hook_raises(ctx: BeforeToolCallContext) -> None:
        raise TimeoutError(f"approval service said: key={SECRET}")

    def after_raises(ctx: AfterToolCallContext) -> None:
        raise ValueError(f"cannot parse {ctx.result.content} with {SECRET}")

    hooks = Hooks()
    hooks.add(before=hook_raises, name="approval", before_failure="fail_open")
    hooks.add(after=after_raises, name="parser")

    class LeakyProvider:
        calls = 0

        async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
            LeakyProvider.calls += 1
            if LeakyProvider.calls == 1:
                yield TextChunk("thinking")

                yield Done(
                    AssistantMessage(
                        tool_calls=(ToolCall("c1", "leaky_timeout", {"token_hint": SECRET}),)
                    )
                )
            else:
                raise ConnectionError(f"upstream rejected Authorization: Bearer {SECRET}")

    agent = Agent(
        LeakyProvider(),
        tools=registry,
        hooks=hooks,
        tracer_provider=tracing.provider,
        capture_content=True,
    )
    final = await agent.run(f"my key is {SECRET}")
    assert final.stop_reason == "error"
    exported = "\n".join(s.to_json() for s in tracing.spans())
    assert SECRET not in exported
    assert "[REDACTED:" in exported


# -- exporter faults ---------------------------------------------------------------------------


async def _scripted_results(provider: Any) -> list[str]:
    registry = ToolRegistry()
    registry.register(lambda text: text.upper(), name="shout")
    calls = tuple(ToolCall(f"c{i}", "shout", {"text": f"t{i}"}) for i in range(5))
    agent = Agent(
        ScriptedProvider([AssistantMessage(tool_calls=calls), AssistantMessage(text="done")]),
        tools=registry,
        tracer_provider=provider,
    )
    await agent.run("go")
    return [getattr(m, "content", getattr(m, "text", "")) for m in agent.messages]


@pytest.mark.slow
def test_endpoint_down_from_the_start() -> None:
    baseline = asyncio.run(_scripted_results(None))
    setup = setup_tracing("otlp", otlp_endpoint="http://127.0.0.1:9", export_timeout=0.5)
    assert asyncio.run(_scripted_results(setup.provider)) == baseline
    started = time.monotonic()
    stats = setup.shutdown()
    assert time.monotonic() - started < 10  # about 0.5 s; the SDK's defaults take 30 s
    assert stats.ended == 23 and stats.exported == 0 and stats.failed + stats.dropped == 23


class _SlowHandler(BaseHTTPRequestHandler):
    release = threading.Event()  # set when the test is over

    def do_POST(self) -> None:
        self.release.wait(60)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.slow
def test_slow_endpoint_cannot_stall_shutdown() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        baseline = asyncio.run(_scripted_results(None))
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        setup = setup_tracing("otlp", otlp_endpoint=endpoint, export_timeout=0.5)
        started = time.monotonic()
        assert asyncio.run(_scripted_results(setup.provider)) == baseline
        stats = setup.shutdown()
        # About 1.5 s (the runs, then one 0.5 s export timeout); the endpoint answers in 60 s.
        assert time.monotonic() - started < 15
        assert stats.exported == 0 and stats.lost == stats.ended == 23
        assert "23 failed to export" in stats.summary() or "dropped" in stats.summary()
    finally:
        _SlowHandler.release.set()
        server.shutdown()


_FAULT_PATHS = [
    "tool_raises",
    "before_hook_raises",
    "after_hook_raises",
    "hook_times_out",
    "provider_raises",
    "progress",
    "huge_result",
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(sorted(SECRETS)),
    path=st.sampled_from(_FAULT_PATHS),
)
def test_property_planted_secrets_never_leave_through_a_fault_path(kind: str, path: str) -> None:
    text, secret = SECRETS[kind]
    planted = f"context {text} more"
    tracing = in_memory_tracing(redactor=Redactor())
    log_out = io.StringIO()
    logger = structlog.wrap_logger(
        structlog.PrintLogger(log_out),
        processors=[
            RedactingProcessor(Redactor()),
            structlog.processors.JSONRenderer(),
        ],
    )
    registry = ToolRegistry()

    @registry.tool
    async def work(data: str, ctx: ToolContext) -> str:
        if path == "tool_raises":
            raise RuntimeError(f"failed on {data}")
        if path == "progress":
            ctx.progress({"partial": data})
        if path == "huge_result":
            return ("x" * 10_000) + data
        return "ok"

    def failing_hook(ctx: Any) -> None:
        logger.error("hook failing", detail=planted)
        raise ValueError(f"hook saw {planted}")

    async def slow_hook(ctx: Any) -> None:
        await asyncio.sleep(30)

    redactor = Redactor()
    hooks = Hooks([RedactionHook(redactor)])
    if path == "before_hook_raises":
        hooks.add(before=failing_hook, name="b", before_failure="fail_open")
    if path == "after_hook_raises":
        hooks.add(after=failing_hook, name="a")
    if path == "hook_times_out":
        hooks.add(before=slow_hook, name=f"approval {planted}", timeout=0.01)

    class Provider:
        calls = 0

        async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
            Provider.calls += 1
            if Provider.calls == 1:
                yield Done(
                    AssistantMessage(tool_calls=(ToolCall("c1", "work", {"data": planted}),))
                )
            elif path == "provider_raises":
                raise ConnectionError(f"upstream said {planted}")
            else:
                yield Done(AssistantMessage(text="done"))

    agent = Agent(
        Provider(),
        tools=registry,
        hooks=hooks,
        tracer_provider=tracing.provider,
        capture_content=True,
        scrubber=redactor,
    )
    asyncio.run(agent.run(f"please use {planted}"))
    exported = "\n".join(span.to_json() for span in tracing.spans())
    assert secret not in exported
    assert secret not in log_out.getvalue()
    results = [m.content for m in agent.messages if isinstance(m, ToolResult)]
    # The redaction hook ran on every result that reached the after phase; a block reason goes to
    # the model as its hook wrote it (documented in the threat model).
    assert all(secret not in r for r in results if not r.startswith("blocked:"))
