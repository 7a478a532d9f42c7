"""The evented loop, the scripted provider and the spans of a run."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import structlog
from opentelemetry.trace import SpanKind, StatusCode

from otelhooks import (
    AssistantMessage,
    BeforeToolCallContext,
    Hooks,
    ToolCall,
    ToolRegistry,
    ToolResult,
    UserMessage,
    block,
)
from otelhooks.builtin import add_trace_context
from otelhooks.core.events import AgentEvent
from otelhooks.core.loop import SKIPPED_FOR_STEERING, Agent, AgentStateError
from otelhooks.providers import (
    ProviderRequest,
    ScriptedProvider,
    StreamEvent,
    TextChunk,
    quote_last_tool_result,
)
from otelhooks.telemetry import attributes as A
from otelhooks.telemetry.spantree import render_tree
from otelhooks.telemetry.testing import InMemoryTracing


def calls(*items: tuple[str, str, dict[str, Any]]) -> AssistantMessage:
    return AssistantMessage(tool_calls=tuple(ToolCall(i, n, a) for i, n, a in items))


def make_agent(
    tracing: InMemoryTracing,
    steps: list[Any],
    registry: ToolRegistry,
    hooks: Hooks | None = None,
    **options: Any,
) -> tuple[Agent, list[AgentEvent]]:
    agent = Agent(
        ScriptedProvider(steps),
        tools=registry,
        hooks=hooks,
        model="scripted",
        name="test",
        tracer_provider=tracing.provider,
        **options,
    )
    events: list[AgentEvent] = []
    agent.subscribe(events.append)
    return agent, events


async def test_allowed_case_end_to_end(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry, hooks: Hooks
) -> None:
    hooks.add(after=lambda ctx: f"checked: {ctx.result.content}")
    agent, events = make_agent(
        otelhooks_tracing,
        [calls(("call_1", "echo", {"text": "hi"})), quote_last_tool_result()],
        registry,
        hooks,
    )
    final = await agent.run("repeat: hi")
    assert final.text == "The tool result is: checked: hi"
    assert final.stop_reason == "stop"
    assert [e.type for e in events] == [
        "agent_start",
        "message_start",
        "message_end",
        "turn_start",
        "message_start",
        "tool_call",
        "message_end",
        "tool_execution_start",
        "tool_execution_end",
        "tool_result",
        "turn_end",
        "turn_start",
        "message_start",
        "text_delta",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    assert [type(m).__name__ for m in agent.messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResult",
        "AssistantMessage",
    ]
    (run,) = otelhooks_tracing.find("invoke_agent test")
    assert run.attributes[A.GEN_AI_OPERATION_NAME] == "invoke_agent"  # type: ignore[index]
    assert run.attributes[A.GEN_AI_AGENT_NAME] == "test"  # type: ignore[index]
    names = otelhooks_tracing.child_names(run)
    assert names == ["chat scripted", "execute_tool echo", "chat scripted"]
    chat = otelhooks_tracing.children(run)[0]
    assert chat.kind == SpanKind.CLIENT
    assert chat.attributes[A.GEN_AI_OPERATION_NAME] == "chat"  # type: ignore[index]
    assert chat.attributes[A.GEN_AI_REQUEST_MODEL] == "scripted"  # type: ignore[index]
    assert chat.attributes[A.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_call",)  # type: ignore[index]
    assert chat.attributes[A.GEN_AI_USAGE_INPUT_TOKENS] == 2  # type: ignore[index]
    tool = otelhooks_tracing.tool_span(call_id="call_1")
    otelhooks_tracing.assert_children(tool, ["before", "run", "after"])
    assert tool.links[0].context.span_id == chat.context.span_id  # type: ignore[union-attr]
    assert tool.links[0].attributes[A.TURN_INDEX] == 1  # type: ignore[index]


async def test_blocked_case_end_to_end(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry, hooks: Hooks
) -> None:
    ran: list[bool] = []

    @registry.tool
    def dangerous() -> str:
        ran.append(True)
        return "boom"

    hooks.add(before=lambda ctx: block("disabled in the demo"))
    agent, _ = make_agent(
        otelhooks_tracing,
        [calls(("call_1", "dangerous", {})), quote_last_tool_result()],
        registry,
        hooks,
    )
    final = await agent.run("run it")
    assert ran == []
    assert final.text == "The tool result is: blocked: disabled in the demo"
    otelhooks_tracing.assert_children(otelhooks_tracing.tool_span(call_id="call_1"), ["before"])
    assert "run" not in render_tree(otelhooks_tracing.spans()).split()


async def test_parallel_tools_overlap_and_results_keep_source_order(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    order: list[str] = []

    @registry.tool
    async def nap(name: str, seconds: float) -> str:
        await asyncio.sleep(seconds)
        order.append(name)
        return name

    agent, events = make_agent(
        otelhooks_tracing,
        [
            calls(
                ("a", "nap", {"name": "slow", "seconds": 0.15}),
                ("b", "nap", {"name": "mid", "seconds": 0.08}),
                ("c", "nap", {"name": "fast", "seconds": 0.01}),
            ),
            quote_last_tool_result("{content}"),
        ],
        registry,
    )
    final = await agent.run("go")
    assert order == ["fast", "mid", "slow"]  # they finished in reverse order...
    assert final.text == "slow; mid; fast"  # ...but results are in source order
    results = [e.result.tool_call_id for e in events if e.type == "tool_result"]  # type: ignore[attr-defined]
    assert results == ["a", "b", "c"]
    ends = [e.tool_call.id for e in events if e.type == "tool_execution_end"]  # type: ignore[attr-defined]
    assert ends == ["c", "b", "a"]
    runs = sorted(otelhooks_tracing.find("run"), key=lambda s: s.start_time or 0)
    assert len(runs) == 3
    latest_start = max(s.start_time or 0 for s in runs)
    earliest_end = min(s.end_time or 0 for s in runs)
    assert latest_start < earliest_end  # all three ran at the same time


async def test_sequential_tools_do_not_overlap(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    @registry.tool
    async def nap(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "ok"

    agent, _ = make_agent(
        otelhooks_tracing,
        [
            calls(("a", "nap", {"seconds": 0.03}), ("b", "nap", {"seconds": 0.01})),
            AssistantMessage(),
        ],
        registry,
        tool_execution="sequential",
    )
    await agent.run("go")
    first, second = sorted(otelhooks_tracing.find("run"), key=lambda s: s.start_time or 0)
    assert (first.end_time or 0) <= (second.start_time or 0)


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_steering_skips_the_remaining_calls(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry, mode: str
) -> None:
    ran: list[str] = []
    provider = ScriptedProvider(
        [
            calls(("a", "work", {"n": 1}), ("b", "work", {"n": 2})),
            AssistantMessage(text="changed course"),
        ]
    )
    agent = Agent(
        provider,
        tools=registry,
        tracer_provider=otelhooks_tracing.provider,
        tool_execution=mode,  # type: ignore[arg-type]
    )

    @registry.tool
    def work(n: int) -> str:
        ran.append(f"work {n}")
        if mode == "sequential":
            agent.steer("stop, do something else")  # the user types while the tool runs
        return f"did {n}"

    if mode == "parallel":  # the message arrives while the first call is being prepared

        def steer_once(ctx: BeforeToolCallContext) -> None:
            if ctx.tool_call.id == "a":
                agent.steer("stop, do something else")

        agent.hooks.add(before=steer_once)

    final = await agent.run("work twice")
    # sequential: the first call ran; parallel: the message arrived while the batch was being
    # prepared, so the call already prepared is skipped too (Pi's behaviour)
    assert ran == (["work 1"] if mode == "sequential" else [])
    assert final.text == "changed course"
    skipped = next(m for m in agent.messages if isinstance(m, ToolResult) and m.tool_call_id == "b")
    assert skipped.content == SKIPPED_FOR_STEERING and skipped.is_error
    span = otelhooks_tracing.tool_span(call_id="b")
    assert span.attributes[A.DECISION] == "skip"  # type: ignore[index]
    assert otelhooks_tracing.children(span) == []
    if mode == "parallel":
        prepared = otelhooks_tracing.tool_span(call_id="a")
        assert prepared.attributes[A.DECISION] == "skip"  # type: ignore[index]
        otelhooks_tracing.assert_children(prepared, ["before"])  # prepared, never run
    second_request = provider.requests[1].messages
    assert second_request[-1] == UserMessage("stop, do something else")
    assert [type(m).__name__ for m in second_request] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResult",
        "ToolResult",
        "UserMessage",
    ]


async def test_follow_up_starts_another_turn(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    agent, _ = make_agent(
        otelhooks_tracing,
        [AssistantMessage(text="first answer"), AssistantMessage(text="second answer")],
        registry,
    )
    agent.follow_up("and then?")
    final = await agent.run("hello")
    assert final.text == "second answer"
    assert [getattr(m, "content", getattr(m, "text", None)) for m in agent.messages] == [
        "hello",
        "first answer",
        "and then?",
        "second answer",
    ]


async def test_continue_from_existing_context_without_resending(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    provider = ScriptedProvider([AssistantMessage(text="retried")])
    agent = Agent(
        provider,
        tools=registry,
        tracer_provider=otelhooks_tracing.provider,
        messages=[UserMessage("the question")],
    )
    final = await agent.run()
    assert final.text == "retried"
    assert provider.requests[0].messages == (UserMessage("the question"),)
    assert [m for m in agent.messages if isinstance(m, UserMessage)] == [
        UserMessage("the question")
    ]
    with pytest.raises(AgentStateError, match="no messages"):
        await Agent(provider).run()


async def test_turn_snapshot_holds_for_the_whole_turn(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    provider = ScriptedProvider(
        [calls(("a", "grow", {}), ("b", "late", {})), AssistantMessage(text="done")]
    )
    agent = Agent(provider, tools=registry, tracer_provider=otelhooks_tracing.provider)

    @registry.tool
    def grow() -> str:
        registry.register(lambda: "late tool ran", name="late")
        agent.model = "changed"
        return "grew"

    await agent.run("go")
    late = next(m for m in agent.messages if isinstance(m, ToolResult) and m.tool_call_id == "b")
    assert late.is_error and "unknown tool 'late'" in late.content  # not part of this turn
    assert [t.name for t in provider.requests[0].tools] == ["echo", "grow"]
    assert [t.name for t in provider.requests[1].tools] == ["echo", "grow", "late"]
    assert provider.requests[1].model == "changed"


async def start_two_endless_tools(
    tracing: InMemoryTracing, registry: ToolRegistry
) -> tuple[Agent, list[AgentEvent], asyncio.Task[AssistantMessage]]:
    """A run whose two parallel tools never return, once both are running."""
    started = asyncio.Event()

    @registry.tool
    async def forever() -> str:
        started.set()
        await asyncio.sleep(60)
        return "never"

    agent, events = make_agent(
        tracing, [calls(("a", "forever", {}), ("b", "forever", {}))], registry
    )
    task = asyncio.create_task(agent.run("go"))
    await started.wait()
    return agent, events, task


async def test_abort_mid_tool_ends_every_span(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    agent, events, task = await start_two_endless_tools(otelhooks_tracing, registry)
    agent.abort("user pressed stop")
    final = await asyncio.wait_for(task, 60)
    assert final.stop_reason == "aborted"
    results = [m for m in agent.messages if isinstance(m, ToolResult)]
    assert [r.content for r in results] == ["error: cancelled: user pressed stop"] * 2
    assert events[-1].type == "agent_end"
    for span in otelhooks_tracing.tool_spans():
        assert span.attributes[A.CANCELLED] is True  # type: ignore[index]
    (run,) = otelhooks_tracing.find("invoke_agent test")
    assert run.status.status_code == StatusCode.ERROR
    assert not agent.running


async def test_asyncio_cancellation_of_the_run_ends_every_span(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    _, events, task = await start_two_endless_tools(otelhooks_tracing, registry)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    names = sorted(s.name for s in otelhooks_tracing.spans())
    assert names.count("execute_tool forever") == 2  # both ended, hence exported
    assert "invoke_agent test" in names
    assert events[-1].type == "agent_end"


async def test_provider_error_and_abort_stop_reasons(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    class Broken:
        async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
            yield TextChunk("partial ")
            raise ConnectionError("provider unreachable")

    agent = Agent(Broken(), tools=registry, tracer_provider=otelhooks_tracing.provider, model="m")
    final = await agent.run("hi")
    assert final.stop_reason == "error"
    assert final.text == "partial "
    assert final.error_message == "ConnectionError: provider unreachable"
    (chat,) = otelhooks_tracing.find("chat m")
    assert chat.status.status_code == StatusCode.ERROR
    assert chat.attributes[A.ERROR_TYPE] == "ConnectionError"  # type: ignore[index]

    class Truncated:
        async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
            yield TextChunk("cut")

    final = await Agent(Truncated(), tracer_provider=otelhooks_tracing.provider).run("hi")
    assert final.stop_reason == "error"
    assert "ended without a final message" in (final.error_message or "")

    slow = ScriptedProvider([AssistantMessage(text="a b c d e f")], chunk_size=1, delay=0.05)
    agent = Agent(slow, tracer_provider=otelhooks_tracing.provider)
    task = asyncio.create_task(agent.run("hi"))
    await asyncio.sleep(0.12)
    agent.abort()
    final = await asyncio.wait_for(task, 60)
    assert final.stop_reason == "aborted"
    assert 0 < len(final.text) < len("a b c d e f")


async def test_missing_and_duplicate_tool_call_ids_are_made_unique(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    agent, _ = make_agent(
        otelhooks_tracing,
        [
            calls(
                ("", "echo", {"text": "1"}),
                ("x", "echo", {"text": "2"}),
                ("x", "echo", {"text": "3"}),
            ),
            AssistantMessage(),
        ],
        registry,
    )
    await agent.run("go")
    ids = [m.tool_call_id for m in agent.messages if isinstance(m, ToolResult)]
    assert len(set(ids)) == 3 and ids[1] == "x"


async def test_stream_iterates_events_and_done_provider_results(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    agent, _ = make_agent(
        otelhooks_tracing,
        [calls(("a", "echo", {"text": "hi"})), quote_last_tool_result("{content}")],
        registry,
    )
    seen = [event.type async for event in agent.stream("go")]
    assert seen[0] == "agent_start" and seen[-1] == "agent_end"
    assert "tool_result" in seen


async def test_structlog_events_in_a_run_carry_the_current_trace(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    captured: list[dict[str, Any]] = []

    def capture(logger: Any, method: str, event_dict: Any) -> Any:
        captured.append(dict(event_dict))
        raise structlog.DropEvent

    log = structlog.wrap_logger(structlog.ReturnLogger(), processors=[add_trace_context, capture])

    @registry.tool
    def noisy() -> str:
        log.info("inside the tool")
        return "ok"

    agent, _ = make_agent(
        otelhooks_tracing, [calls(("a", "noisy", {})), AssistantMessage()], registry
    )
    await agent.run("go")
    (event,) = captured
    run = otelhooks_tracing.child(otelhooks_tracing.tool_span(call_id="a"), "run")
    assert event["trace_id"] == format(run.context.trace_id, "032x")  # type: ignore[union-attr]
    assert event["span_id"] == format(run.context.span_id, "016x")  # type: ignore[union-attr]


async def test_subscriber_that_raises_does_not_stop_the_agent(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    agent, events = make_agent(otelhooks_tracing, [AssistantMessage(text="fine")], registry)

    def broken(event: AgentEvent) -> None:
        raise RuntimeError("consumer bug")

    agent.subscribe(broken)
    assert (await agent.run("hi")).text == "fine"
    assert events[-1].type == "agent_end"


async def test_span_tree_printer_shows_the_blocked_call_without_run(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry, hooks: Hooks
) -> None:
    hooks.add(before=lambda ctx: block("no"), name="deny", tools="echo")
    agent, _ = make_agent(
        otelhooks_tracing,
        [calls(("a", "echo", {"text": "x"})), AssistantMessage()],
        registry,
        hooks,
    )
    await agent.run("go")
    lines = render_tree(otelhooks_tracing.spans()).splitlines()
    assert lines[0].startswith("invoke_agent test  ")
    assert lines[1].startswith("  chat scripted  ")
    assert lines[2].startswith("  execute_tool echo  ")
    assert "decision=block by=deny reason=no" in lines[2]
    assert lines[3].startswith("    before  ") and "hooks=deny:block" in lines[3]
    assert lines[4].startswith("  chat scripted  ")
    assert len(lines) == 5
