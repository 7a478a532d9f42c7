"""One tool call through before -> run -> after, and its span tree."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.trace import StatusCode

from otelhooks import (
    AfterOverride,
    AfterToolCallContext,
    BeforeToolCallContext,
    CancelSignal,
    Hooks,
    ToolCall,
    ToolCallRecord,
    ToolContext,
    ToolExecutor,
    ToolRegistry,
    block,
    rewrite,
)
from otelhooks.telemetry import attributes as A
from otelhooks.telemetry.testing import InMemoryTracing


async def test_allowed_path_has_before_run_after_and_after_hook_rewrites(
    executor: ToolExecutor, hooks: Hooks, otelhooks_tracing: InMemoryTracing
) -> None:
    seen: list[str] = []

    @hooks.before
    def log_before(ctx: BeforeToolCallContext) -> None:
        seen.append(f"before {ctx.tool_call.name} {dict(ctx.args)}")

    @hooks.after
    def checked(ctx: AfterToolCallContext) -> AfterOverride:
        seen.append(f"after {ctx.result.content}")
        return AfterOverride(content=f"checked: {ctx.result.content}")

    result = await executor.execute(ToolCall("call-1", "echo", {"text": "hi"}))

    assert result.content == "checked: hi"
    assert not result.is_error and result.tool_call_id == "call-1"
    assert seen == ["before echo {'text': 'hi'}", "after hi"]
    span = otelhooks_tracing.tool_span(call_id="call-1")
    assert span.name == "execute_tool echo"
    assert span.kind == trace.SpanKind.INTERNAL
    otelhooks_tracing.assert_children(span, ["before", "run", "after"])
    attrs = dict(span.attributes or {})
    assert attrs[A.GEN_AI_OPERATION_NAME] == "execute_tool"
    assert attrs[A.GEN_AI_TOOL_NAME] == "echo"
    assert attrs[A.GEN_AI_TOOL_CALL_ID] == "call-1"
    assert attrs[A.GEN_AI_TOOL_DESCRIPTION] == "Echo the text back."
    assert attrs[A.GEN_AI_TOOL_TYPE] == "function"
    assert attrs[A.DECISION] == "allow"
    assert attrs[A.ARGUMENTS_REWRITTEN] is False
    assert attrs[A.RESULT_OVERRIDDEN] is True
    assert span.status.status_code == StatusCode.UNSET
    before_events = otelhooks_tracing.events(otelhooks_tracing.child(span, "before"), A.EVENT_HOOK)
    assert before_events[0][A.EVENT_HOOK_NAME] == "log_before"
    assert before_events[0][A.EVENT_HOOK_DECISION] == "allow"
    assert before_events[0][A.EVENT_HOOK_DURATION_MS] >= 0
    after_events = otelhooks_tracing.events(otelhooks_tracing.child(span, "after"), A.EVENT_HOOK)
    assert [e[A.EVENT_HOOK_DECISION] for e in after_events] == ["override"]


async def test_blocked_call_never_runs_and_has_no_run_or_after_span(
    registry: ToolRegistry, hooks: Hooks, otelhooks_tracing: InMemoryTracing
) -> None:
    ran: list[str] = []
    after_calls: list[str] = []

    @registry.tool
    def dangerous() -> str:
        ran.append("handler")
        return "should never get here"

    @hooks.before
    def guard(ctx: BeforeToolCallContext) -> Any:
        return block("disabled in the demo") if ctx.tool_call.name == "dangerous" else None

    @hooks.after
    def after(ctx: AfterToolCallContext) -> None:
        after_calls.append(ctx.tool_call.id)

    executor = ToolExecutor(registry, hooks, tracer_provider=otelhooks_tracing.provider)
    result = await executor.execute(ToolCall("c9", "dangerous", {}))

    assert ran == [] and after_calls == []
    assert result.content == "blocked: disabled in the demo" and result.is_error
    span = otelhooks_tracing.tool_span(call_id="c9")
    otelhooks_tracing.assert_children(span, ["before"])
    attrs = dict(span.attributes or {})
    assert attrs[A.DECISION] == "block"
    assert attrs[A.BLOCK_REASON] == "disabled in the demo"
    assert attrs[A.DECISION_HOOK] == "guard"
    assert span.status.status_code == StatusCode.UNSET  # a block is a decision, not a fault
    assert A.ERROR_TYPE not in attrs


async def test_handler_exception_becomes_error_result(
    registry: ToolRegistry, executor: ToolExecutor, otelhooks_tracing: InMemoryTracing
) -> None:
    @registry.tool
    def explode() -> str:
        raise ValueError("disk on fire")

    result = await executor.execute(ToolCall("c1", "explode", {}))
    assert result.content == "error: disk on fire" and result.is_error
    span = otelhooks_tracing.tool_span(call_id="c1")
    otelhooks_tracing.assert_children(span, ["before", "run", "after"])  # the contract holds
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes[A.ERROR_TYPE] == "ValueError"  # type: ignore[index]
    run = otelhooks_tracing.child(span, "run")
    (exc_event,) = otelhooks_tracing.events(run, "exception")
    assert exc_event["exception.type"] == "ValueError"
    assert exc_event["exception.message"] == "disk on fire"


async def test_unknown_tool_is_an_error_result_with_bounded_span_name(
    executor: ToolExecutor, otelhooks_tracing: InMemoryTracing
) -> None:
    result = await executor.execute(ToolCall("c1", "rm -rf /" * 100, {}))
    assert result.is_error
    assert result.content.startswith("error: unknown tool 'rm -rf /")
    assert result.content.endswith("available tools: echo")
    span = otelhooks_tracing.tool_spans()[0]
    assert span.name == "execute_tool unknown"
    assert span.attributes[A.ERROR_TYPE] == "tool_not_found"  # type: ignore[index]
    assert len(span.attributes[A.GEN_AI_TOOL_NAME]) <= 256  # type: ignore[index, arg-type]
    otelhooks_tracing.assert_children(span, ["before"])


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "text: Field required"),
        ({"text": 5}, "text: Input should be a valid string"),
        ('{"text": ', "arguments are not valid JSON"),
    ],
)
async def test_invalid_arguments_never_reach_hooks_or_handler(
    executor: ToolExecutor,
    hooks: Hooks,
    otelhooks_tracing: InMemoryTracing,
    arguments: Any,
    message: str,
) -> None:
    hook_calls: list[str] = []
    hooks.add(before=lambda ctx: hook_calls.append("before"))
    result = await executor.execute(ToolCall("c1", "echo", arguments))
    assert result.is_error
    assert result.content.startswith("error: invalid arguments for tool 'echo': ")
    assert message in result.content
    assert hook_calls == []
    span = otelhooks_tracing.tool_span(call_id="c1")
    assert span.attributes[A.ERROR_TYPE] == "invalid_arguments"  # type: ignore[index]
    assert span.status.status_code == StatusCode.ERROR
    otelhooks_tracing.assert_children(span, ["before"])


async def test_chain_of_two_hooks_rewrites_arguments_in_order(
    registry: ToolRegistry, hooks: Hooks, otelhooks_tracing: InMemoryTracing
) -> None:
    seen: list[dict[str, Any]] = []

    @hooks.before
    def lower(ctx: BeforeToolCallContext) -> Any:
        seen.append(dict(ctx.args))
        return rewrite({"text": ctx.args["text"].lower()})

    @hooks.before
    async def suffix(ctx: BeforeToolCallContext) -> Any:
        seen.append(dict(ctx.args))
        return rewrite({"text": ctx.args["text"] + "!"})

    executor = ToolExecutor(registry, hooks, tracer_provider=otelhooks_tracing.provider)
    result = await executor.execute(ToolCall("c1", "echo", {"text": "HI"}))
    assert result.content == "hi!"
    # lower sees the arguments suffix made too: every hook that let the call through saw what
    # the handler gets (lowercasing "hi!" changes nothing, so the hooks agree)
    assert seen == [{"text": "HI"}, {"text": "hi"}, {"text": "hi!"}]
    span = otelhooks_tracing.tool_span(call_id="c1")
    assert span.attributes[A.ARGUMENTS_REWRITTEN] is True  # type: ignore[index]
    assert span.attributes[A.DECISION_HOOK] == "suffix"  # type: ignore[index]
    before = otelhooks_tracing.child(span, "before")
    events = otelhooks_tracing.events(before, A.EVENT_HOOK)
    assert [e[A.EVENT_HOOK_DECISION] for e in events] == ["rewrite", "rewrite", "allow"]
    assert [e.get(A.EVENT_HOOK_RECHECK, False) for e in events] == [False, False, True]


async def test_rewrite_is_validated_again(
    executor: ToolExecutor, hooks: Hooks, otelhooks_tracing: InMemoryTracing
) -> None:
    hooks.add(before=lambda ctx: rewrite({"text": 42}), name="breaker")
    result = await executor.execute(ToolCall("c1", "echo", {"text": "hi"}))
    assert result.is_error
    assert result.content == "blocked: hook 'breaker' rewrote the arguments into invalid ones"
    span = otelhooks_tracing.tool_span(call_id="c1")
    otelhooks_tracing.assert_children(span, ["before"])


async def test_first_block_wins_and_stops_the_chain(executor: ToolExecutor, hooks: Hooks) -> None:
    calls: list[str] = []
    hooks.add(before=lambda ctx: calls.append("a") or block("first"), name="a")
    hooks.add(before=lambda ctx: calls.append("b") or block("second"), name="b")
    result = await executor.execute(ToolCall("c1", "echo", {"text": "x"}))
    assert result.content == "blocked: first"
    assert calls == ["a"]


async def test_after_hooks_see_previous_override_and_fields_are_kept(
    executor: ToolExecutor, hooks: Hooks
) -> None:
    seen: list[tuple[str, bool]] = []

    def first(ctx: AfterToolCallContext) -> AfterOverride:
        seen.append((ctx.result.content, ctx.is_error))
        return AfterOverride(details={"n": 1})

    def second(ctx: AfterToolCallContext) -> AfterOverride:
        seen.append((ctx.result.content, ctx.is_error))
        return AfterOverride(is_error=True)

    hooks.add(after=first)
    hooks.add(after=second)
    result = await executor.execute(ToolCall("c1", "echo", {"text": "ok"}))
    assert result.content == "ok"  # omitted fields keep their values
    assert result.details == {"n": 1}
    assert result.is_error is True
    assert seen == [("ok", False), ("ok", False)]


def _raising(ctx: Any) -> Any:
    raise RuntimeError("hook bug with password=hunter2")


@pytest.mark.parametrize("policy", [None, "fail_closed", "fail_open"])
async def test_before_hook_that_raises_follows_its_policy(
    registry: ToolRegistry, otelhooks_tracing: InMemoryTracing, policy: str | None
) -> None:
    hooks = Hooks()
    hooks.add(before=_raising, name="buggy", before_failure=policy)  # type: ignore[arg-type]
    executor = ToolExecutor(registry, hooks, tracer_provider=otelhooks_tracing.provider)
    result = await executor.execute(ToolCall("c1", "echo", {"text": "hi"}))
    span = otelhooks_tracing.tool_span(call_id="c1")
    before = otelhooks_tracing.child(span, "before")
    (event,) = otelhooks_tracing.events(before, A.EVENT_HOOK)
    assert event[A.EVENT_HOOK_DECISION] == "failed"
    assert "RuntimeError" in event[A.EVENT_HOOK_ERROR]
    assert otelhooks_tracing.events(before, "exception")[0]["exception.type"] == "RuntimeError"
    assert before.status.status_code == StatusCode.ERROR
    if policy == "fail_open":
        assert result.content == "hi" and not result.is_error
        otelhooks_tracing.assert_children(span, ["before", "run", "after"])
        assert span.status.status_code == StatusCode.UNSET
    else:  # fail closed is the default for before-hooks
        assert result.is_error
        assert result.content == "blocked: hook 'buggy' failed (RuntimeError)"
        assert "hunter2" not in result.content  # the model gets the type, not the message
        otelhooks_tracing.assert_children(span, ["before"])
        assert span.attributes[A.ERROR_TYPE] == "hook_failed"  # type: ignore[index]
        assert span.attributes[A.DECISION] == "block"  # type: ignore[index]
        assert span.status.status_code == StatusCode.ERROR


@pytest.mark.parametrize("policy", [None, "fail_closed", "fail_open"])
async def test_after_hook_that_raises_follows_its_policy(
    registry: ToolRegistry, otelhooks_tracing: InMemoryTracing, policy: str | None
) -> None:
    hooks = Hooks()
    hooks.add(after=_raising, name="buggy", after_failure=policy)  # type: ignore[arg-type]
    executor = ToolExecutor(registry, hooks, tracer_provider=otelhooks_tracing.provider)
    result = await executor.execute(ToolCall("c1", "echo", {"text": "hi"}))
    span = otelhooks_tracing.tool_span(call_id="c1")
    otelhooks_tracing.assert_children(span, ["before", "run", "after"])
    after = otelhooks_tracing.child(span, "after")
    assert otelhooks_tracing.events(after, A.EVENT_HOOK)[0][A.EVENT_HOOK_DECISION] == "failed"
    if policy == "fail_closed":
        assert result.is_error
        assert result.content == (
            "error: hook 'buggy' failed (RuntimeError); the result was withheld"
        )
        assert span.attributes[A.ERROR_TYPE] == "hook_failed"  # type: ignore[index]
    else:  # fail open is the default for after-hooks
        assert result.content == "hi" and not result.is_error
        assert A.ERROR_TYPE not in (span.attributes or {})


@pytest.mark.parametrize("policy", ["fail_closed", "fail_open"])
@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_hook_timeout_follows_its_policy(
    registry: ToolRegistry, otelhooks_tracing: InMemoryTracing, policy: str, kind: str
) -> None:
    release = threading.Event()

    async def slow_async(ctx: Any) -> None:
        await asyncio.sleep(30)

    def slow_sync(ctx: Any) -> None:
        release.wait(60)

    hooks = Hooks()
    fn = slow_async if kind == "async" else slow_sync
    hooks.add(before=fn, name="slow", timeout=0.05, before_failure=policy)  # type: ignore[arg-type]
    executor = ToolExecutor(registry, hooks, tracer_provider=otelhooks_tracing.provider)
    started = time.monotonic()
    result = await executor.execute(ToolCall("c1", "echo", {"text": "hi"}))
    release.set()
    assert time.monotonic() - started < 10  # about 0.05 s; a call that waited would take 30-60 s
    span = otelhooks_tracing.tool_span(call_id="c1")
    before = otelhooks_tracing.child(span, "before")
    (event,) = otelhooks_tracing.events(before, A.EVENT_HOOK)
    assert event[A.EVENT_HOOK_DECISION] == "timeout"
    assert before.attributes[A.ERROR_TYPE] == "hook_timeout"  # type: ignore[index]
    if policy == "fail_closed":
        assert result.content == "blocked: hook 'slow' timed out after 0.05s"
        assert span.attributes[A.ERROR_TYPE] == "hook_timeout"  # type: ignore[index]
    else:
        assert result.content == "hi"


async def test_hook_returning_garbage_is_a_hook_failure(
    executor: ToolExecutor, hooks: Hooks, otelhooks_tracing: InMemoryTracing
) -> None:
    hooks.add(before=lambda ctx: 42, name="garbage")
    result = await executor.execute(ToolCall("c1", "echo", {"text": "hi"}))
    assert result.content == "blocked: hook 'garbage' failed (a wrong return type)"
    before = otelhooks_tracing.child(otelhooks_tracing.tool_span(call_id="c1"), "before")
    assert "returned int" in otelhooks_tracing.events(before, A.EVENT_HOOK)[0][A.EVENT_HOOK_ERROR]


async def test_hooks_apply_to_named_and_globbed_tools_only(
    registry: ToolRegistry, otelhooks_tracing: InMemoryTracing
) -> None:
    registry.register(lambda path: path, name="fs_read")
    registry.register(lambda path: path, name="fs_write")
    hooks = Hooks()
    hooks.add(before=lambda ctx: block("read-only"), name="ro", tools="fs_write")
    hooks.add(after=lambda ctx: f"[fs] {ctx.result.content}", name="tag", tools=["fs_*"])
    executor = ToolExecutor(registry, hooks, tracer_provider=otelhooks_tracing.provider)
    assert (await executor.execute(ToolCall("1", "fs_read", {"path": "a"}))).content == "[fs] a"
    assert (await executor.execute(ToolCall("2", "fs_write", {"path": "a"}))).content == (
        "blocked: read-only"
    )
    assert (await executor.execute(ToolCall("3", "echo", {"text": "a"}))).content == "a"
    otelhooks_tracing.assert_children(
        otelhooks_tracing.tool_span(call_id="3"), ["before", "run", "after"]
    )


async def test_one_hook_object_takes_part_in_both_phases(
    executor: ToolExecutor, hooks: Hooks
) -> None:
    class Audit:
        name = "audit"

        def __init__(self) -> None:
            self.log: list[str] = []

        async def before_tool_call(self, ctx: BeforeToolCallContext) -> None:
            self.log.append(f"before {ctx.tool_call.id}")

        def after_tool_call(self, ctx: AfterToolCallContext) -> str:
            self.log.append(f"after {ctx.tool_call.id}")
            return ctx.result.content.upper()

        def on_tool_call_end(self, record: ToolCallRecord) -> None:
            self.log.append(f"end {record.decision} {record.result.content}")

    audit = Audit()
    registered = hooks.add(audit)
    assert registered.name == "audit"
    assert len(hooks) == 1
    result = await executor.execute(ToolCall("c1", "echo", {"text": "hi"}))
    assert result.content == "HI"
    assert audit.log == ["before c1", "after c1", "end allow HI"]


async def test_sync_and_async_tools(registry: ToolRegistry, executor: ToolExecutor) -> None:
    @registry.tool
    async def add(a: int, b: int) -> int:
        await asyncio.sleep(0)
        return a + b

    @registry.tool(blocking=True)
    def thread_name() -> str:
        return threading.current_thread().name

    result = await executor.execute(ToolCall("c1", "add", {"a": 2, "b": 3}))
    assert result.content == "5" and result.details == 5
    other = await executor.execute(ToolCall("c2", "thread_name", {}))
    assert other.content != threading.current_thread().name  # ran in a worker thread


async def test_tool_timeout(
    registry: ToolRegistry, executor: ToolExecutor, otelhooks_tracing: InMemoryTracing
) -> None:
    @registry.tool(timeout=0.05)
    async def hang() -> str:
        await asyncio.sleep(30)
        return "never"

    result = await executor.execute(ToolCall("c1", "hang", {}))
    assert result.content == "error: tool 'hang' timed out after 0.05s"
    span = otelhooks_tracing.tool_span(call_id="c1")
    assert span.attributes[A.ERROR_TYPE] == "tool_timeout"  # type: ignore[index]
    assert otelhooks_tracing.child(span, "run").status.status_code == StatusCode.ERROR


async def test_asyncio_cancellation_mid_tool_ends_every_span(
    registry: ToolRegistry, executor: ToolExecutor, otelhooks_tracing: InMemoryTracing
) -> None:
    started = asyncio.Event()

    @registry.tool
    async def slow() -> str:
        started.set()
        await asyncio.sleep(30)
        return "never"

    task = asyncio.create_task(executor.execute(ToolCall("c1", "slow", {})))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    span = otelhooks_tracing.tool_span(call_id="c1")  # ended, hence exported
    assert span.attributes[A.CANCELLED] is True  # type: ignore[index]
    assert span.status.status_code == StatusCode.ERROR
    otelhooks_tracing.assert_children(span, ["before", "run"])  # cancelled from outside mid-run


async def test_signal_cancels_a_waiting_hook_and_the_call_ends_with_a_result(
    executor: ToolExecutor, hooks: Hooks, otelhooks_tracing: InMemoryTracing
) -> None:
    entered = asyncio.Event()

    async def waits_forever(ctx: BeforeToolCallContext) -> None:
        entered.set()
        await asyncio.Event().wait()

    hooks.add(before=waits_forever, name="approval")
    signal = CancelSignal()
    task = asyncio.create_task(
        executor.execute(ToolCall("c1", "echo", {"text": "hi"}), signal=signal)
    )
    await entered.wait()
    signal.cancel("user pressed stop")
    result = await asyncio.wait_for(task, 60)
    assert result.is_error and result.content == "error: cancelled: user pressed stop"
    span = otelhooks_tracing.tool_span(call_id="c1")
    assert span.attributes[A.CANCELLED] is True  # type: ignore[index]
    assert span.attributes[A.ERROR_TYPE] == "cancelled"  # type: ignore[index]
    otelhooks_tracing.assert_children(span, ["before"])


async def test_signal_stops_a_running_tool(
    registry: ToolRegistry, executor: ToolExecutor, otelhooks_tracing: InMemoryTracing
) -> None:
    started = asyncio.Event()

    @registry.tool
    async def crawl(ctx: ToolContext) -> str:
        started.set()
        await asyncio.sleep(30)
        return "never"

    signal = CancelSignal()
    task = asyncio.create_task(executor.execute(ToolCall("c1", "crawl", {}), signal=signal))
    await started.wait()
    signal.cancel()
    result = await asyncio.wait_for(task, 60)
    assert result.content == "error: cancelled: cancelled"
    span = otelhooks_tracing.tool_span(call_id="c1")
    assert otelhooks_tracing.child(span, "run").attributes[A.CANCELLED] is True  # type: ignore[index]


async def test_hundred_concurrent_calls_each_get_their_own_tree(
    registry: ToolRegistry, otelhooks_tracing: InMemoryTracing, hooks: Hooks
) -> None:
    @registry.tool
    async def nap(n: int) -> int:
        await asyncio.sleep(0.001 * (n % 5))
        return n

    hooks.add(after=lambda ctx: None, name="noop")
    executor = ToolExecutor(registry, hooks, tracer_provider=otelhooks_tracing.provider)
    tracer = otelhooks_tracing.provider.get_tracer("test")
    with tracer.start_as_current_span("agent") as agent:
        results = await asyncio.gather(
            *(executor.execute(ToolCall(f"c{n}", "nap", {"n": n})) for n in range(100))
        )
    assert [r.content for r in results] == [str(n) for n in range(100)]
    agent_id = agent.get_span_context().span_id
    for n in range(100):
        span = otelhooks_tracing.tool_span(call_id=f"c{n}")
        assert span.parent is not None and span.parent.span_id == agent_id
        kids = otelhooks_tracing.children(span)
        assert [k.name for k in kids] == ["before", "run", "after"]
        assert all(k.context.trace_id == span.context.trace_id for k in kids)  # type: ignore[union-attr]


async def test_progress_updates_become_span_events_and_callbacks(
    registry: ToolRegistry, executor: ToolExecutor, otelhooks_tracing: InMemoryTracing
) -> None:
    @registry.tool
    async def download(ctx: ToolContext) -> str:
        for pct in (25, 50, 100):
            ctx.progress({"percent": pct})
        return "done"

    updates: list[Any] = []
    result = await executor.execute(
        ToolCall("c1", "download", {}), on_update=lambda call, u: updates.append((call.id, u))
    )
    assert result.content == "done"
    assert updates == [("c1", {"percent": p}) for p in (25, 50, 100)]
    run = otelhooks_tracing.child(otelhooks_tracing.tool_span(call_id="c1"), "run")
    events = otelhooks_tracing.events(run, A.EVENT_PROGRESS)
    assert [e[A.EVENT_PROGRESS_INDEX] for e in events] == [1, 2, 3]
    assert all(A.EVENT_PROGRESS_CONTENT not in e for e in events)  # content is opt-in


async def test_progress_is_a_span_event_with_no_callback_and_heard_by_nobody_untraced(
    registry: ToolRegistry, executor: ToolExecutor, otelhooks_tracing: InMemoryTracing
) -> None:
    @registry.tool
    def steps(ctx: ToolContext) -> str:
        for pct in (50, 100):
            ctx.progress({"percent": pct})
        return "done"

    result = await executor.execute(ToolCall("c1", "steps", {}))  # no on_update
    assert result.content == "done"
    run = otelhooks_tracing.child(otelhooks_tracing.tool_span(call_id="c1"), "run")
    assert [e[A.EVENT_PROGRESS_INDEX] for e in otelhooks_tracing.events(run, A.EVENT_PROGRESS)] == [
        1,
        2,
    ]
    untraced = ToolExecutor(registry, tracer_provider=trace.NoOpTracerProvider())
    updates: list[Any] = []
    assert (await untraced.execute(ToolCall("c2", "steps", {}))).content == "done"
    heard = await untraced.execute(
        ToolCall("c3", "steps", {}), on_update=lambda call, u: updates.append((call.id, u))
    )
    assert heard.content == "done"
    assert updates == [("c3", {"percent": 50}), ("c3", {"percent": 100})]


def test_a_hooks_chain_is_made_anew_by_each_change_and_kept_in_between() -> None:
    def deny(ctx: BeforeToolCallContext) -> None:
        return None

    hooks = Hooks()
    empty = hooks.chain
    assert hooks.snapshot() is empty and empty.hooks == ()
    added = hooks.add(before=deny, name="deny")
    first = hooks.chain
    assert first is not empty and hooks.snapshot() is first and hooks.chain is first
    assert [h.name for h in first.hooks] == [added.name]
    hooks.remove(added)
    assert hooks.chain is not first and hooks.chain.hooks == ()
    assert [h.name for h in first.hooks] == [added.name]  # a chain taken before stays as it was


async def test_content_capture_is_off_by_default(
    executor: ToolExecutor, otelhooks_tracing: InMemoryTracing, monkeypatch: pytest.MonkeyPatch
) -> None:
    await executor.execute(ToolCall("c1", "echo", {"text": "private words"}))
    attrs = dict(otelhooks_tracing.tool_span(call_id="c1").attributes or {})
    assert A.GEN_AI_TOOL_CALL_ARGUMENTS not in attrs
    assert A.GEN_AI_TOOL_CALL_RESULT not in attrs
    assert not any("private words" in str(v) for v in attrs.values())


async def test_content_capture_opt_in_by_env_and_capped(
    registry: ToolRegistry, otelhooks_tracing: InMemoryTracing, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    executor = ToolExecutor(
        registry, tracer_provider=otelhooks_tracing.provider, max_content_length=20
    )
    await executor.execute(ToolCall("c1", "echo", {"text": "hi"}))
    await executor.execute(ToolCall("c2", "echo", {"text": "word " * 20}))
    await executor.execute(ToolCall("c3", "echo", {"text": "1234 " + "k" * 95}))
    attrs = dict(otelhooks_tracing.tool_span(call_id="c1").attributes or {})
    assert attrs[A.GEN_AI_TOOL_CALL_ARGUMENTS] == '{"text": "hi"}'
    assert attrs[A.GEN_AI_TOOL_CALL_RESULT] == "hi"
    big = dict(otelhooks_tracing.tool_span(call_id="c2").attributes or {})
    assert big[A.GEN_AI_TOOL_CALL_RESULT] == "word word word word …[truncated: 100 chars in all]"
    # a token the limit falls in is dropped whole, never kept in part
    cut = dict(otelhooks_tracing.tool_span(call_id="c3").attributes or {})
    assert cut[A.GEN_AI_TOOL_CALL_RESULT] == "1234 …[truncated: 100 chars in all]"


async def test_hooks_receive_message_context_and_a_readonly_copy_of_arguments(
    registry: ToolRegistry, hooks: Hooks, otelhooks_tracing: InMemoryTracing
) -> None:
    from otelhooks import AgentContext, AssistantMessage

    @registry.tool
    def count(items: list[int]) -> int:
        return len(items)

    seen: list[Any] = []

    def meddle(ctx: BeforeToolCallContext) -> None:
        seen.append((ctx.assistant_message, ctx.context.run_id, ctx.tool.name))
        ctx.args["items"].append(99)  # nested containers are copies
        with pytest.raises(TypeError):
            ctx.args["items"] = []  # type: ignore[index]

    hooks.add(before=meddle)
    executor = ToolExecutor(registry, hooks, tracer_provider=otelhooks_tracing.provider)
    call = ToolCall("c1", "count", {"items": [1, 2]})
    message = AssistantMessage(tool_calls=(call,), stop_reason="toolUse")
    result = await executor.execute(
        call, assistant_message=message, context=AgentContext(run_id="r1")
    )
    assert result.content == "2"
    assert seen == [(message, "r1", "count")]
    assert call.arguments == {"items": [1, 2]}


def test_attribute_names_match_the_semantic_conventions() -> None:
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as g
    from opentelemetry.semconv.attributes import error_attributes

    assert A.GEN_AI_OPERATION_NAME == g.GEN_AI_OPERATION_NAME
    assert A.GEN_AI_TOOL_NAME == g.GEN_AI_TOOL_NAME
    assert A.GEN_AI_TOOL_CALL_ID == g.GEN_AI_TOOL_CALL_ID
    assert A.GEN_AI_TOOL_DESCRIPTION == g.GEN_AI_TOOL_DESCRIPTION
    assert A.GEN_AI_TOOL_TYPE == g.GEN_AI_TOOL_TYPE
    assert A.GEN_AI_TOOL_CALL_ARGUMENTS == g.GEN_AI_TOOL_CALL_ARGUMENTS
    assert A.GEN_AI_TOOL_CALL_RESULT == g.GEN_AI_TOOL_CALL_RESULT
    assert A.GEN_AI_AGENT_NAME == g.GEN_AI_AGENT_NAME
    assert A.GEN_AI_REQUEST_MODEL == g.GEN_AI_REQUEST_MODEL
    assert A.GEN_AI_RESPONSE_FINISH_REASONS == g.GEN_AI_RESPONSE_FINISH_REASONS
    assert A.GEN_AI_USAGE_INPUT_TOKENS == g.GEN_AI_USAGE_INPUT_TOKENS
    assert A.GEN_AI_USAGE_OUTPUT_TOKENS == g.GEN_AI_USAGE_OUTPUT_TOKENS
    assert g.GenAiOperationNameValues.EXECUTE_TOOL.value == A.OP_EXECUTE_TOOL
    assert g.GenAiOperationNameValues.INVOKE_AGENT.value == A.OP_INVOKE_AGENT
    assert g.GenAiOperationNameValues.CHAT.value == A.OP_CHAT
    assert A.ERROR_TYPE == error_attributes.ERROR_TYPE


async def test_no_global_provider_is_touched(executor: ToolExecutor) -> None:
    await executor.execute(ToolCall("c1", "echo", {"text": "hi"}))
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def _untraced_and_traced(
    registry: ToolRegistry, hooks: Hooks, tracing: InMemoryTracing
) -> tuple[ToolExecutor, ToolExecutor]:
    untraced = ToolExecutor(registry, hooks, tracer_provider=trace.NoOpTracerProvider())
    return untraced, ToolExecutor(registry, hooks, tracer_provider=tracing.provider)


async def test_a_call_nothing_records_has_the_outcomes_of_a_traced_one(
    otelhooks_tracing: InMemoryTracing,
) -> None:
    registry = ToolRegistry()

    @registry.tool
    async def at_once(text: str) -> str:
        return text.upper()

    @registry.tool
    async def waits(text: str) -> dict[str, str]:
        await asyncio.sleep(0)
        return {"text": text}

    @registry.tool(timeout=0.05)
    async def hangs(text: str) -> str:
        await asyncio.sleep(5)
        return text

    @registry.tool
    async def fails(text: str) -> str:
        raise ValueError(f"no {text}")

    @registry.tool
    def counts(text: str, timeout: float = 0.0) -> list[int]:
        return [len(text)]

    calls = [
        ToolCall("1", "at_once", {"text": "a"}),
        ToolCall("2", "waits", {"text": "b"}),
        ToolCall("3", "hangs", {"text": "c"}),
        ToolCall("4", "fails", {"text": "d"}),
        ToolCall("5", "counts", '{"text": "eee"}'),
        ToolCall("6", "at_once", {"text": 1}),
        ToolCall("7", "at_once", {"text": "a", "extra": 1}),
        ToolCall("8", "missing", {}),
    ]
    untraced, traced = _untraced_and_traced(registry, Hooks(), otelhooks_tracing)
    for call in calls:
        plain, recorded = await untraced.execute(call), await traced.execute(call)
        assert plain == recorded, call
    assert [s for s in otelhooks_tracing.spans() if s.name.startswith("execute_tool")]


async def test_a_call_nothing_records_sees_hooks_and_tools_that_changed_since_the_last(
    otelhooks_tracing: InMemoryTracing,
) -> None:
    registry, hooks = ToolRegistry(), Hooks()

    def one(text: str) -> str:
        return f"one {text}"

    def two(text: str) -> str:
        return f"two {text}"

    registry.register(one, name="echo")
    untraced = ToolExecutor(registry, hooks, tracer_provider=trace.NoOpTracerProvider())
    call = ToolCall("c", "echo", {"text": "x"})
    assert (await untraced.execute(call)).content == "one x"
    assert (await untraced.execute(call)).content == "one x"  # now from the executor's cache

    registry.register(two, name="echo")
    assert (await untraced.execute(call)).content == "two x"

    blocker = hooks.add(before=lambda ctx: block("not now"))
    result = await untraced.execute(call)
    assert result.is_error and result.content == "blocked: not now"
    hooks.remove(blocker)
    assert (await untraced.execute(call)).content == "two x"

    registry.remove("echo")
    result = await untraced.execute(call)
    assert result.is_error and "echo" in result.content


async def test_a_registry_of_its_own_class_is_asked_for_every_call() -> None:
    class Counting(ToolRegistry):
        asked = 0

        def get(self, name: str) -> Any:
            Counting.asked += 1
            return super().get(name)

    def echo(text: str) -> str:
        return text

    registry = Counting()
    registry.register(echo)
    untraced = ToolExecutor(registry, Hooks(), tracer_provider=trace.NoOpTracerProvider())
    for _ in range(3):
        assert (await untraced.execute(ToolCall("c", "echo", {"text": "x"}))).content == "x"
    assert Counting.asked == 3


async def test_spans_of_hooks_handler_and_observers_nest_under_their_phase(
    registry: ToolRegistry, hooks: Hooks, otelhooks_tracing: InMemoryTracing
) -> None:
    tracer = otelhooks_tracing.provider.get_tracer("test")

    @registry.tool
    def traced(text: str) -> str:
        with tracer.start_as_current_span("handler work"):
            return text

    @hooks.before
    def look(ctx: BeforeToolCallContext) -> None:
        tracer.start_span("before-hook work").end()

    @hooks.after
    def check(ctx: AfterToolCallContext) -> None:
        tracer.start_span("after-hook work").end()

    def observe(record: ToolCallRecord) -> None:
        tracer.start_span("observer work").end()

    hooks.add(observe=observe, name="observe")

    executor = ToolExecutor(registry, hooks, tracer_provider=otelhooks_tracing.provider)
    outside = trace.get_current_span()
    await executor.execute(ToolCall("n1", "traced", {"text": "hi"}))

    assert trace.get_current_span() is outside  # every phase's context was detached again
    span = otelhooks_tracing.tool_span(call_id="n1")
    before, run, after = (otelhooks_tracing.child(span, n) for n in ("before", "run", "after"))
    assert [c.name for c in otelhooks_tracing.children(before)] == ["before-hook work"]
    assert [c.name for c in otelhooks_tracing.children(run)] == ["handler work"]
    assert [c.name for c in otelhooks_tracing.children(after)] == ["after-hook work"]
    assert {c.name for c in otelhooks_tracing.children(span)} == {
        "before",
        "run",
        "after",
        "observer work",
    }


async def test_phases_without_hooks_leave_the_current_context_alone(
    registry: ToolRegistry, otelhooks_tracing: InMemoryTracing
) -> None:
    tracer = otelhooks_tracing.provider.get_tracer("test")
    executor = ToolExecutor(registry, Hooks(), tracer_provider=otelhooks_tracing.provider)
    with tracer.start_as_current_span("agent") as agent:
        await executor.execute(ToolCall("n2", "echo", {"text": "hi"}))
        assert trace.get_current_span() is agent
    span = otelhooks_tracing.tool_span(call_id="n2")
    otelhooks_tracing.assert_children(span, ["before", "run", "after"])
    assert span.parent is not None and span.parent.span_id == agent.get_span_context().span_id


def test_the_values_the_path_makes_without_their_constructors_have_every_field() -> None:
    """``execute`` makes ``Allowed`` and a run call's ``Outcome`` from all of their fields in
    order, without the named tuples' ``__new__``: a field added to either is added there too."""
    from otelhooks.core.hooks import Outcome
    from otelhooks.core.outcome import Allowed

    assert Allowed._fields == (
        "state",
        "tool",
        "arguments",
        "rewritten",
        "deciding_hook",
        "approval",
    )
    assert Outcome._fields == (
        "result",
        "decision",
        "error_type",
        "deciding_hook",
        "block_reason",
        "rewritten",
        "arguments",
        "overridden",
        "failure",
        "verdict",
        "policies",
        "approval",
    )


def test_an_instruments_subclass_overriding_the_removed_record_tool_call_is_refused() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from otelhooks.telemetry import Instruments

    with pytest.raises(TypeError, match="record_tool_call is never called"):

        class Counting(Instruments):  # an override the runtime would never call
            def record_tool_call(self, attributes: Any, seconds: float) -> None:
                pass

    class Named(Instruments):  # other subclasses are fine, and their points recorded
        pass

    reader = InMemoryMetricReader()
    registry = ToolRegistry()
    registry.register(lambda text: text, name="echo")
    executor = ToolExecutor(
        registry,
        tracer_provider=trace.NoOpTracerProvider(),
        instruments=Named(MeterProvider(metric_readers=[reader])),
    )
    asyncio.run(executor.execute(ToolCall("c1", "echo", {"text": "hi"})))
    names = {
        m.name: sum(p.value if hasattr(p, "value") else p.count for p in m.data.data_points)
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    assert names["otelhooks.tool.calls"] == 1 and names["otelhooks.tool.duration"] == 1


def test_a_hooks_subclass_overriding_snapshot_is_refused() -> None:
    with pytest.raises(TypeError, match=r"Hooks\.chain"):

        class Filtered(Hooks):  # the runtime reads chain: this override would be skipped
            def snapshot(self) -> Any:
                return super().snapshot()
