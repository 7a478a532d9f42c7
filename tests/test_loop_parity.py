"""The span contract and the loop behaviours of Pi's agent loop (``packages/agent``), in the style
of Pi's own tests: a scripted provider, the order of events, what each provider request held, and
the span tree."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from otelhooks import (
    AfterOverride,
    AssistantMessage,
    Hooks,
    ToolCall,
    ToolExecutor,
    ToolOutput,
    ToolRegistry,
    ToolResult,
    UserMessage,
    block,
)
from otelhooks.core.events import AgentEnd, AgentEvent
from otelhooks.core.loop import Agent, AgentStateError, truncated_call_message
from otelhooks.core.messages import AgentMessage, CustomMessage, Message
from otelhooks.providers import ScriptedProvider
from otelhooks.telemetry import attributes as A
from otelhooks.telemetry.testing import InMemoryTracing


def calls(*items: tuple[str, str, dict[str, Any]], stop: str = "toolUse") -> AssistantMessage:
    return AssistantMessage(
        tool_calls=tuple(ToolCall(i, n, a) for i, n, a in items),
        stop_reason=stop,  # type: ignore[arg-type]
    )


def agent_for(
    tracing: InMemoryTracing,
    steps: list[Any],
    registry: ToolRegistry,
    hooks: Hooks | None = None,
    **options: Any,
) -> tuple[Agent, ScriptedProvider, list[AgentEvent]]:
    provider = ScriptedProvider(steps)
    agent = Agent(
        provider,
        tools=registry,
        hooks=hooks,
        model="scripted",
        name="pi",
        tracer_provider=tracing.provider,
        **options,
    )
    events: list[AgentEvent] = []
    agent.subscribe(events.append)
    return agent, provider, events


def user_texts(messages: Sequence[Any]) -> list[str]:
    return [m.content for m in messages if isinstance(m, UserMessage)]


# -- the span contract ---------------------------------------------------------------------------


async def test_every_allowed_call_has_before_run_after_even_without_hooks(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    executor = ToolExecutor(registry, tracer_provider=otelhooks_tracing.provider)
    await executor.execute(ToolCall("ok", "echo", {"text": "hi"}))
    await executor.execute(ToolCall("unknown", "nope", {}))
    await executor.execute(ToolCall("invalid", "echo", {"text": 3}))
    t = otelhooks_tracing
    t.assert_children(t.tool_span(call_id="ok"), ["before", "run", "after"])
    for call_id, error in (("unknown", "tool_not_found"), ("invalid", "invalid_arguments")):
        span = t.tool_span(call_id=call_id)
        t.assert_children(span, ["before"])
        before = t.child(span, "before")
        assert before.status.status_code == StatusCode.ERROR
        assert before.attributes[A.ERROR_TYPE] == error  # type: ignore[index]


async def test_a_blocked_call_has_before_only_and_a_tool_error_result_sets_error_status(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry, hooks: Hooks
) -> None:
    @registry.tool
    def fails_softly() -> ToolOutput:
        return ToolOutput("the disk is full", is_error=True)

    hooks.add(before=lambda ctx: block("no"), tools="echo")
    executor = ToolExecutor(registry, hooks, tracer_provider=otelhooks_tracing.provider)
    await executor.execute(ToolCall("b", "echo", {"text": "hi"}))
    soft = await executor.execute(ToolCall("s", "fails_softly", {}))
    t = otelhooks_tracing
    blocked = t.tool_span(call_id="b")
    t.assert_children(blocked, ["before"])
    assert blocked.status.status_code == StatusCode.UNSET  # a decision, not a fault
    assert soft.is_error
    span = t.tool_span(call_id="s")
    t.assert_children(span, ["before", "run", "after"])
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes[A.ERROR_TYPE] == "tool_error"  # type: ignore[index]


# -- steering and follow-up modes ----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["one-at-a-time", "all"])
async def test_follow_up_mode_says_how_many_queued_messages_enter_a_turn(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry, mode: str
) -> None:
    agent, provider, _ = agent_for(
        otelhooks_tracing,
        [AssistantMessage(text=f"answer {i}") for i in range(4)],
        registry,
        follow_up_mode=mode,
    )
    agent.follow_up("first")
    agent.follow_up("second")
    result = await agent.run("hello")
    sent = [user_texts(r.messages) for r in provider.requests]
    if mode == "one-at-a-time":  # Pi's default: one queued message per turn
        assert sent == [["hello"], ["hello", "first"], ["hello", "first", "second"]]
    else:
        assert sent == [["hello"], ["hello", "first", "second"]]
    assert result.text == f"answer {len(sent) - 1}"


async def test_steering_mode_can_change_while_the_agent_runs(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    agent_ref: list[Agent] = []

    @registry.tool
    def busy() -> str:
        agent = agent_ref[0]
        for text in ("s1", "s2", "s3"):
            agent.steer(text)
        agent.steering_mode = "all"  # changed at run time: the rest enter together
        return "done"

    agent, provider, _ = agent_for(
        otelhooks_tracing,
        [calls(("a", "busy", {})), AssistantMessage(text="ok")],
        registry,
        tool_execution="sequential",
    )
    agent_ref.append(agent)
    assert agent.steering_mode == "one-at-a-time"
    await agent.run("go")
    assert user_texts(provider.requests[1].messages) == ["go", "s1", "s2", "s3"]
    with pytest.raises(ValueError, match="steering_mode"):
        agent.steering_mode = "some"  # type: ignore[assignment]


# -- a message cut by the token limit ------------------------------------------------------------


async def test_tool_calls_of_a_truncated_message_are_not_executed(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    ran: list[str] = []

    @registry.tool
    def write(path: str) -> str:
        ran.append(path)
        return "written"

    agent, provider, events = agent_for(
        otelhooks_tracing,
        [
            calls(("a", "write", {"path": "/tmp/x"}), ("b", "echo", {"text": "y"}), stop="length"),
            AssistantMessage(text="I will retry"),
        ],
        registry,
    )
    result = await agent.run("write it")
    assert ran == []
    results = [m for m in result.messages if isinstance(m, ToolResult)]
    assert [r.content for r in results] == [
        truncated_call_message("write"),
        truncated_call_message("echo"),
    ]
    assert all(r.is_error for r in results)
    assert result.text == "I will retry"  # the run went on: the model saw the errors
    assert provider.requests[1].messages[-2:] == tuple(results)
    assert [e.type for e in events].count("tool_execution_start") == 2
    span = otelhooks_tracing.tool_span(call_id="a")
    assert span.attributes[A.DECISION] == "skip"  # type: ignore[index]
    assert otelhooks_tracing.children(span) == []


# -- continue ------------------------------------------------------------------------------------


async def test_continue_from_an_assistant_message_with_nothing_queued_is_an_error(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    agent, provider, _ = agent_for(
        otelhooks_tracing,
        [AssistantMessage(text="never")],
        registry,
        messages=[UserMessage("q"), AssistantMessage(text="a")],
    )
    with pytest.raises(AgentStateError, match="assistant message with nothing queued"):
        await agent.run()
    assert provider.requests == []
    assert not agent.running


async def test_continue_sends_queued_follow_ups_first_and_returns_only_new_messages(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    history: list[AgentMessage] = [UserMessage("q"), AssistantMessage(text="a")]
    agent, provider, events = agent_for(
        otelhooks_tracing, [AssistantMessage(text="more")], registry, messages=history
    )
    agent.follow_up("and then?")
    result = await agent.run()
    assert user_texts(provider.requests[0].messages) == ["q", "and then?"]
    assert result.messages == (UserMessage("and then?"), result.final)
    (end,) = [e for e in events if isinstance(e, AgentEnd)]
    assert end.messages == result.messages
    assert len(agent.messages) == 4


async def test_continue_with_two_steering_messages_delivers_one_per_turn(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    # Pi's default one-at-a-time mode: continue() takes one steering message and skips the first
    # turn's poll of the queue, so the second one waits for the next turn.
    history: list[AgentMessage] = [UserMessage("q"), AssistantMessage(text="a")]
    agent, provider, _ = agent_for(
        otelhooks_tracing,
        [AssistantMessage(text="first"), AssistantMessage(text="second")],
        registry,
        messages=history,
    )
    agent.steer("s1")
    agent.steer("s2")
    result = await agent.run()
    assert [user_texts(r.messages) for r in provider.requests] == [
        ["q", "s1"],
        ["q", "s1", "s2"],
    ]
    roles = [type(m).__name__ for m in agent.messages]
    assert roles[-4:] == ["UserMessage", "AssistantMessage", "UserMessage", "AssistantMessage"]
    assert result.messages == (
        UserMessage("s1"),
        agent.messages[3],
        UserMessage("s2"),
        result.final,
    )
    assert result.text == "second"


async def test_continue_with_all_mode_sends_every_queued_steering_message_at_once(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    history: list[AgentMessage] = [UserMessage("q"), AssistantMessage(text="a")]
    agent, provider, _ = agent_for(
        otelhooks_tracing, [AssistantMessage(text="both")], registry, messages=history
    )
    agent.steering_mode = "all"
    agent.steer("s1")
    agent.steer("s2")
    await agent.run()
    assert [user_texts(r.messages) for r in provider.requests] == [["q", "s1", "s2"]]


# -- terminate -----------------------------------------------------------------------------------


@dataclass
class Terminator:
    """A tool, a before-hook and an after-hook, each able to end the run."""

    where: str

    def hooks(self) -> Hooks:
        hooks = Hooks()
        if self.where == "before":
            hooks.add(before=lambda ctx: block("enough", terminate=True), tools="echo")
        if self.where == "after":
            hooks.add(after=lambda ctx: AfterOverride(terminate=True), tools="echo")
        return hooks


@pytest.mark.parametrize("where", ["tool", "before", "after"])
async def test_terminate_ends_the_run_after_the_batch(
    otelhooks_tracing: InMemoryTracing, where: str
) -> None:
    registry = ToolRegistry()

    @registry.tool
    def echo(text: str) -> ToolOutput:
        return ToolOutput(text, terminate=where == "tool")

    agent, provider, _ = agent_for(
        otelhooks_tracing,
        [calls(("a", "echo", {"text": "x"})), AssistantMessage(text="never asked")],
        registry,
        Terminator(where).hooks(),
    )
    result = await agent.run("go")
    assert len(provider.requests) == 1  # no second provider call
    assert result.stop_reason == "toolUse"
    (tool_result,) = [m for m in result.messages if isinstance(m, ToolResult)]
    assert tool_result.terminate
    span = otelhooks_tracing.tool_span(call_id="a")
    assert span.attributes[A.TERMINATE] is True  # type: ignore[index]


async def test_a_batch_ends_the_run_only_when_every_result_terminates(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    @registry.tool
    def stop() -> ToolOutput:
        return ToolOutput("stopping", terminate=True)

    agent, provider, _ = agent_for(
        otelhooks_tracing,
        [calls(("a", "stop", {}), ("b", "echo", {"text": "x"})), AssistantMessage(text="next")],
        registry,
    )
    result = await agent.run("go")
    assert len(provider.requests) == 2 and result.text == "next"  # Pi's rule: every result


# -- prepare_arguments ---------------------------------------------------------------------------


async def test_prepare_arguments_normalises_raw_arguments_before_validation(
    otelhooks_tracing: InMemoryTracing,
) -> None:
    registry = ToolRegistry()

    def accept_old_shape(raw: dict[str, Any]) -> dict[str, Any]:
        if "file" in raw:  # an older argument name the model still sends
            raw = {"path": raw.pop("file"), **raw}
        return raw

    def broken(raw: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("boom")

    @registry.tool(prepare_arguments=accept_old_shape)
    def read(path: str) -> str:
        return f"read {path}"

    @registry.tool(prepare_arguments=broken)
    def other(path: str) -> str:
        return path

    seen: list[Any] = []
    hooks = Hooks()
    hooks.add(before=lambda ctx: seen.append((ctx.tool_call.arguments, dict(ctx.args))))
    executor = ToolExecutor(registry, hooks, tracer_provider=otelhooks_tracing.provider)
    result = await executor.execute(ToolCall("a", "read", '{"file": "notes.txt"}'))
    assert result.content == "read notes.txt"
    assert seen == [('{"file": "notes.txt"}', {"path": "notes.txt"})]  # raw call, prepared args
    before = otelhooks_tracing.child(otelhooks_tracing.tool_span(call_id="a"), "before")
    (event,) = otelhooks_tracing.events(before, A.EVENT_PREPARE_ARGUMENTS)
    assert event[A.ARGUMENTS_PREPARED] is True
    failed = await executor.execute(ToolCall("b", "other", {"path": "x"}))
    assert failed.is_error and "prepare_arguments failed (KeyError" in failed.content
    span = otelhooks_tracing.tool_span(call_id="b")
    assert span.attributes[A.ERROR_TYPE] == "invalid_arguments"  # type: ignore[index]


# -- per-tool execution mode ---------------------------------------------------------------------


async def test_a_sequential_tool_runs_alone_inside_a_parallel_batch(
    otelhooks_tracing: InMemoryTracing,
) -> None:
    registry = ToolRegistry()
    active: set[str] = set()
    overlaps: dict[str, set[str]] = {}

    async def work(call_id: str) -> str:
        active.add(call_id)
        overlaps.setdefault(call_id, set()).update(active - {call_id})
        await asyncio.sleep(0.05)
        overlaps[call_id].update(active - {call_id})
        active.discard(call_id)
        return call_id

    @registry.tool
    async def fetch(id: str) -> str:
        return await work(id)

    @registry.tool(execution="sequential")
    async def migrate(id: str) -> str:
        return await work(id)

    agent, _, _ = agent_for(
        otelhooks_tracing,
        [
            calls(
                ("a", "fetch", {"id": "a"}),
                ("b", "fetch", {"id": "b"}),
                ("m", "migrate", {"id": "m"}),
                ("c", "fetch", {"id": "c"}),
                ("d", "fetch", {"id": "d"}),
            ),
            AssistantMessage(text="done"),
        ],
        registry,
    )
    result = await agent.run("go")
    assert overlaps["m"] == set()  # nothing ran beside the sequential tool
    assert overlaps["a"] == {"b"} and overlaps["c"] == {"d"}  # the others stay parallel
    contents = [m.content for m in result.messages if isinstance(m, ToolResult)]
    assert contents == ["a", "b", "m", "c", "d"]  # source order


# -- timeouts ------------------------------------------------------------------------------------


async def test_default_tool_timeout_and_per_call_overrides(
    otelhooks_tracing: InMemoryTracing,
) -> None:
    registry = ToolRegistry()

    @registry.tool
    async def slow() -> str:
        await asyncio.sleep(0.3)
        return "finished"

    @registry.tool
    async def shell(command: str, timeout: float = 0.05) -> str:
        await asyncio.sleep(0.2)
        return f"ran {command}"

    executor = ToolExecutor(registry, tracer_provider=otelhooks_tracing.provider, tool_timeout=0.1)
    assert (await executor.execute(ToolCall("1", "slow", {}))).content == (
        "error: tool 'slow' timed out after 0.1s"
    )
    assert (await executor.execute(ToolCall("2", "slow", {}), timeout=10)).content == "finished"
    assert (await executor.execute(ToolCall("3", "slow", {}), timeout=0)).content == "finished"
    # a tool with a numeric `timeout` parameter lets the model ask for a shorter bound (Pi);
    # never a longer one than the executor's
    assert (await executor.execute(ToolCall("4", "shell", {"command": "ls"}))).is_error
    wider = await executor.execute(ToolCall("5", "shell", {"command": "ls", "timeout": 1}))
    assert wider.content == "error: tool 'shell' timed out after 0.1s"
    no_limit = ToolExecutor(registry, tracer_provider=otelhooks_tracing.provider, tool_timeout=None)
    assert (await no_limit.execute(ToolCall("6", "slow", {}))).content == "finished"
    assert ToolExecutor(registry).tool_timeout == 180.0  # Pi's default


# -- what hooks see ------------------------------------------------------------------------------


async def test_hook_context_messages_include_the_assistant_message_that_asked(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    seen: list[tuple[Any, ...]] = []
    hooks = Hooks()
    hooks.add(before=lambda ctx: seen.append(ctx.context.messages))
    asking = calls(("a", "echo", {"text": "x"}))
    agent, _, _ = agent_for(
        otelhooks_tracing, [asking, AssistantMessage(text="ok")], registry, hooks
    )
    await agent.run("go")
    (messages,) = seen
    assert messages[0] == UserMessage("go")
    assert isinstance(messages[-1], AssistantMessage) and messages[-1].tool_calls[0].id == "a"


# -- transform_context and custom messages -------------------------------------------------------


@dataclass(frozen=True)
class Note(CustomMessage):
    text: str
    role: str = "note"


async def test_custom_messages_are_dropped_or_converted_before_the_provider(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    history: list[AgentMessage] = [UserMessage("q"), Note("remember: be brief")]
    plain, provider, _ = agent_for(
        otelhooks_tracing, [AssistantMessage(text="a")], registry, messages=history
    )
    await plain.run()
    assert provider.requests[0].messages == (UserMessage("q"),)  # the default drops it
    assert isinstance(plain.messages[1], Note)  # and the history keeps it

    def convert(messages: Sequence[AgentMessage]) -> list[Message]:
        return [
            UserMessage(f"(note) {m.text}") if isinstance(m, Note) else m  # type: ignore[misc]
            for m in messages
        ]

    converting, provider2, _ = agent_for(
        otelhooks_tracing,
        [AssistantMessage(text="a")],
        registry,
        messages=history,
        convert_messages=convert,
    )
    await converting.run()
    assert user_texts(provider2.requests[0].messages) == ["q", "(note) remember: be brief"]


async def test_transform_context_prunes_what_the_provider_sees_not_the_history(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    seen_signals: list[Any] = []

    async def keep_last_two(messages: list[AgentMessage], signal: Any) -> list[AgentMessage]:
        seen_signals.append(signal)
        return messages[-2:]

    history: list[AgentMessage] = [
        UserMessage("old 1"),
        AssistantMessage(text="r1"),
        UserMessage("old 2"),
        AssistantMessage(text="r2"),
    ]
    agent, provider, _ = agent_for(
        otelhooks_tracing,
        [AssistantMessage(text="fresh")],
        registry,
        messages=history,
        transform_context=keep_last_two,
    )
    await agent.run("new")
    assert provider.requests[0].messages == (AssistantMessage(text="r2"), UserMessage("new"))
    assert len(agent.messages) == 6 and seen_signals[0] is not None


# -- content capture -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "on_span"),
    [
        ("SPAN_ONLY", True),
        ("span_and_event", True),
        ("true", True),
        ("EVENT_ONLY", False),
        ("NO_CONTENT", False),
        ("false", False),
    ],
)
async def test_capture_content_accepts_the_genai_utility_values(
    otelhooks_tracing: InMemoryTracing,
    registry: ToolRegistry,
    monkeypatch: pytest.MonkeyPatch,
    value: str,
    on_span: bool,
) -> None:
    monkeypatch.setenv(A.CAPTURE_CONTENT_ENV, value)
    executor = ToolExecutor(registry, tracer_provider=otelhooks_tracing.provider)
    await executor.execute(ToolCall("c", "echo", {"text": "hello"}))
    attrs = otelhooks_tracing.tool_span(call_id="c").attributes or {}
    assert (attrs.get(A.GEN_AI_TOOL_CALL_RESULT) == "hello") is on_span


async def test_invalid_capture_value_is_warned_about_and_captures_nothing(
    otelhooks_tracing: InMemoryTracing,
    registry: ToolRegistry,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv(A.CAPTURE_CONTENT_ENV, "loud")
    with caplog.at_level(logging.WARNING, logger="otelhooks.telemetry.content"):
        executor = ToolExecutor(registry, tracer_provider=otelhooks_tracing.provider)
    assert "is not valid" in caplog.text
    await executor.execute(ToolCall("c", "echo", {"text": "hello"}))
    assert A.GEN_AI_TOOL_CALL_RESULT not in (
        otelhooks_tracing.tool_span(call_id="c").attributes or {}
    )


async def test_the_result_attribute_is_written_for_successful_calls_only(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    @registry.tool
    def explode() -> str:
        raise ValueError("bad input")

    executor = ToolExecutor(
        registry, tracer_provider=otelhooks_tracing.provider, capture_content=True
    )
    await executor.execute(ToolCall("ok", "echo", {"text": "fine"}))
    await executor.execute(ToolCall("err", "explode", {}))
    ok = otelhooks_tracing.tool_span(call_id="ok").attributes or {}
    err = otelhooks_tracing.tool_span(call_id="err")
    assert ok[A.GEN_AI_TOOL_CALL_RESULT] == "fine"
    assert A.GEN_AI_TOOL_CALL_RESULT not in (err.attributes or {})
    assert err.attributes[A.GEN_AI_TOOL_CALL_ARGUMENTS] == "{}"  # type: ignore[index]
    assert err.status.status_code == StatusCode.ERROR
    assert err.attributes[A.ERROR_TYPE] == "ValueError"  # type: ignore[index]


async def test_run_result_sums_usage_and_the_agent_span_records_it(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    agent, _, _ = agent_for(
        otelhooks_tracing,
        [calls(("a", "echo", {"text": "x"})), AssistantMessage(text="one two three")],
        registry,
        conversation_id="conv-42",
    )
    result = await agent.run("say it")
    per_message = [m.usage for m in result.messages if isinstance(m, AssistantMessage)]
    assert result.usage.output_tokens == sum(u.output_tokens for u in per_message if u)
    assert result.usage.input_tokens == sum(u.input_tokens for u in per_message if u)
    (run,) = otelhooks_tracing.find("invoke_agent pi")
    attrs = run.attributes or {}
    assert attrs[A.GEN_AI_CONVERSATION_ID] == "conv-42"
    assert attrs[A.GEN_AI_USAGE_OUTPUT_TOKENS] == result.usage.output_tokens
    assert attrs[A.GEN_AI_USAGE_INPUT_TOKENS] == result.usage.input_tokens
