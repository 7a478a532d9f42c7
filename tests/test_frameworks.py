"""The same hooks inside Pydantic AI, the OpenAI Agents SDK and LangGraph, each driven by its
own offline test model: Pydantic AI's ``FunctionModel``, a scripted ``agents.Model`` (the SDK's
model interface), LangChain's ``FakeMessagesListChatModel`` in a LangGraph graph with a
``ToolNode``."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from otelhooks import AfterToolCallContext, BeforeToolCallContext, Hooks, block, rewrite
from otelhooks.builtin import RedactionHook, Redactor
from otelhooks.telemetry.testing import InMemoryTracing

REDACTOR = Redactor()  # the scrubber and the redaction hook of every framework here

SECRET = "ghp_Zq8RkT2mWx9LpN4vB7cY1dF6hJ3sA5eG0uIo"
Call = tuple[str, str, dict[str, Any]]  # id, tool, arguments
RunCalls = Callable[[list[Call], Hooks, Any], Awaitable[dict[str, str]]]


class Log:
    """What the tools saw: the proof that a blocked handler never ran."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, Any]] = []


def weather(log: Log, city: str) -> str:
    log.ran.append(("weather", city))
    return {"Paris": "rain, 11°C", "Rome": "sun, 19°C"}.get(city, f"no data for {city}")


def delete(log: Log, path: str) -> str:
    log.ran.append(("delete", path))
    return f"deleted {path}"


def explode(log: Log, reason: str) -> str:
    log.ran.append(("explode", reason))
    raise RuntimeError(f"disk failure: {reason}")


def leak(log: Log, service: str) -> str:
    log.ran.append(("leak", service))
    return f"{service} token: {SECRET}"


TOOLS = {"weather": weather, "delete": delete, "explode": explode, "leak": leak}
DOCS = {
    "weather": "Today's weather in a city.",
    "delete": "Delete a file.",
    "explode": "Fail on purpose.",
    "leak": "Show a service's credentials.",
}


# -- the three frameworks -------------------------------------------------------------------------


def pydantic_ai_runner(log: Log) -> RunCalls:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from otelhooks.integrations.pydantic_ai import OtelhooksCapability

    async def run(calls: list[Call], hooks: Hooks, provider: Any) -> dict[str, str]:
        def respond(messages: list[Any], info: AgentInfo) -> ModelResponse:
            if len(messages) == 1:
                return ModelResponse(
                    parts=[ToolCallPart(name, args, tool_call_id=cid) for cid, name, args in calls]
                )
            return ModelResponse(parts=[TextPart("done")])

        agent = Agent(
            FunctionModel(respond),
            capabilities=[OtelhooksCapability(hooks, tracer_provider=provider, scrubber=REDACTOR)],
        )
        for name, fn in TOOLS.items():

            def bound(*, _fn: Any = fn, **kwargs: Any) -> str:
                return str(_fn(log, **kwargs))

            agent.tool_plain(name=name, description=DOCS[name])(_typed(name, bound))
        result = await agent.run("go")
        return {
            p.tool_call_id: str(p.content)
            for m in result.all_messages()
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        }

    return run


def _typed(name: str, bound: Callable[..., str]) -> Callable[..., str]:
    """A function with the tool's real signature (the frameworks read it for the schema)."""
    arg = {"weather": "city", "delete": "path", "explode": "reason", "leak": "service"}[name]
    namespace: dict[str, Any] = {"bound": bound}
    exec(f"def {name}({arg}: str) -> str:\n    return bound({arg}={arg})\n", namespace)
    fn = namespace[name]
    fn.__doc__ = DOCS[name]
    return fn  # type: ignore[no-any-return]


def openai_agents_runner(log: Log) -> RunCalls:
    from agents import Agent, ModelSettings, RunConfig, Runner, function_tool
    from agents.items import ModelResponse, ToolCallOutputItem
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    from otelhooks.integrations.openai_agents import with_boundary

    class Scripted(Model):
        def __init__(self, calls: list[Call]) -> None:
            self.calls, self.turn = calls, 0

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            self.turn += 1
            if self.turn == 1:
                output: list[Any] = [
                    ResponseFunctionToolCall(
                        type="function_call", name=name, call_id=cid, arguments=json.dumps(args)
                    )
                    for cid, name, args in self.calls
                ]
            else:
                text = ResponseOutputText(type="output_text", text="done", annotations=[])
                output = [
                    ResponseOutputMessage(
                        id="m", type="message", role="assistant", status="completed", content=[text]
                    )
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    async def run(calls: list[Call], hooks: Hooks, provider: Any) -> dict[str, str]:
        tools = [
            function_tool(_typed(name, lambda _fn=fn, **kw: str(_fn(log, **kw))))
            for name, fn in TOOLS.items()
        ]
        agent = Agent(
            name="helper",
            model=Scripted(calls),
            tools=tools,
            model_settings=ModelSettings(parallel_tool_calls=True),
        )
        guarded = with_boundary(agent, hooks, tracer_provider=provider, scrubber=REDACTOR)
        result = await Runner.run(guarded, "go", run_config=RunConfig(tracing_disabled=True))
        return {
            item.raw_item["call_id"]: str(item.output)
            for item in result.new_items
            if isinstance(item, ToolCallOutputItem)
        }

    return run


def langgraph_runner(log: Log) -> RunCalls:
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.tools import StructuredTool
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    from otelhooks.integrations.langchain import with_boundary

    async def run(calls: list[Call], hooks: Hooks, provider: Any) -> dict[str, str]:
        tools = [
            StructuredTool.from_function(
                _typed(name, lambda _fn=fn, **kw: str(_fn(log, **kw))), name=name
            )
            for name, fn in TOOLS.items()
        ]
        model = FakeMessagesListChatModel(
            responses=[
                AIMessage(
                    "",
                    tool_calls=[{"name": n, "args": a, "id": c} for c, n, a in calls],
                ),
                AIMessage("done"),
            ]
        )

        def agent(state: MessagesState) -> dict[str, Any]:
            return {"messages": [model.invoke(state["messages"])]}

        graph = StateGraph(MessagesState)
        graph.add_node("agent", agent)
        wrapped = with_boundary(tools, hooks, tracer_provider=provider, scrubber=REDACTOR)
        graph.add_node("tools", ToolNode(wrapped))
        graph.add_edge(START, "agent")
        graph.add_conditional_edges("agent", tools_condition, ["tools", END])
        graph.add_edge("tools", "agent")
        out = await graph.compile().ainvoke({"messages": [HumanMessage("go")]})
        return {
            m.tool_call_id: str(m.content) for m in out["messages"] if isinstance(m, ToolMessage)
        }

    return run


FRAMEWORKS = {
    "pydantic_ai": pydantic_ai_runner,
    "openai_agents": openai_agents_runner,
    "langgraph": langgraph_runner,
}


@pytest.fixture(params=list(FRAMEWORKS))
def framework(request: pytest.FixtureRequest) -> tuple[str, RunCalls, Log]:
    log = Log()
    return request.param, FRAMEWORKS[request.param](log), log


def shared_hooks(seen: list[Any] | None = None) -> Hooks:
    """One hooks object, the same for every framework: redaction, a block, a rewrite, an
    after-hook override."""
    hooks = Hooks([RedactionHook(REDACTOR)])

    @hooks.before
    def policy(ctx: BeforeToolCallContext) -> Any:
        if seen is not None:
            seen.append(ctx.context.framework)
        if ctx.tool_call.name == "delete":
            return block("deleting is not allowed")
        if ctx.tool_call.name == "weather" and ctx.args["city"].islower():
            return rewrite({"city": ctx.args["city"].title()})
        return None

    @hooks.after(tools="weather")
    def checked(ctx: AfterToolCallContext) -> str | None:
        return f"checked: {ctx.result.content}" if "rain" in ctx.result.content else None

    return hooks


# -- the behaviours, for each framework ------------------------------------------------------------


async def test_allowed_rewritten_and_parallel_calls(
    framework: tuple[str, RunCalls, Log], otelhooks_tracing: InMemoryTracing
) -> None:
    _name, run, log = framework
    seen: list[Any] = []
    answers = await run(
        [("c1", "weather", {"city": "paris"}), ("c2", "weather", {"city": "Rome"})],
        shared_hooks(seen),
        otelhooks_tracing.provider,
    )
    assert answers == {"c1": "checked: rain, 11°C", "c2": "sun, 19°C"}
    assert sorted(log.ran) == [("weather", "Paris"), ("weather", "Rome")]  # rewritten, both ran
    assert all(s is not None for s in seen) and len(seen) == 2  # hooks saw the framework's context
    spans = otelhooks_tracing.tool_spans("weather")
    assert len(spans) == 2
    for span in spans:
        otelhooks_tracing.assert_children(span, ["before", "run", "after"])
    rewritten = otelhooks_tracing.tool_span(call_id="c1")
    assert rewritten.attributes["otelhooks.arguments.rewritten"] is True  # type: ignore[index]


async def test_blocked_call_never_runs_and_the_run_goes_on(
    framework: tuple[str, RunCalls, Log], otelhooks_tracing: InMemoryTracing
) -> None:
    _name, run, log = framework
    answers = await run(
        [("c1", "delete", {"path": "/etc/passwd"}), ("c2", "weather", {"city": "Rome"})],
        shared_hooks(),
        otelhooks_tracing.provider,
    )
    assert answers["c1"] == "blocked: deleting is not allowed"
    assert answers["c2"] == "sun, 19°C"
    assert ("delete", "/etc/passwd") not in log.ran
    blocked = otelhooks_tracing.tool_span(call_id="c1")
    assert otelhooks_tracing.child_names(blocked) == ["before"]
    assert blocked.attributes["otelhooks.decision"] == "block"  # type: ignore[index]


async def test_a_raising_handler_is_an_error_result(
    framework: tuple[str, RunCalls, Log], otelhooks_tracing: InMemoryTracing
) -> None:
    _name, run, _log = framework
    answers = await run(
        [("c1", "explode", {"reason": "sector 7"})], shared_hooks(), otelhooks_tracing.provider
    )
    assert answers["c1"].startswith("error:") and "disk failure: sector 7" in answers["c1"]
    span = otelhooks_tracing.tool_span(call_id="c1")
    assert span.status.status_code is StatusCode.ERROR


async def test_a_secret_returned_by_a_tool_is_redacted_everywhere(
    framework: tuple[str, RunCalls, Log], otelhooks_tracing: InMemoryTracing
) -> None:
    _name, run, log = framework
    answers = await run(
        [("c1", "leak", {"service": "billing"})], shared_hooks(), otelhooks_tracing.provider
    )
    assert SECRET not in answers["c1"] and "[REDACTED:github_token]" in answers["c1"]
    assert ("leak", "billing") in log.ran
    for span in otelhooks_tracing.spans():
        assert SECRET not in json.dumps(dict(span.attributes or {}), default=str)


async def test_unexpected_arguments_are_refused_in_a_tool_node(
    otelhooks_tracing: InMemoryTracing,
) -> None:
    """Pydantic AI and the Agents SDK refuse them before the boundary; a LangGraph ToolNode
    passes whatever the model sent, and the boundary refuses it."""
    log = Log()
    answers = await langgraph_runner(log)(
        [("c1", "weather", {"city": "Rome", "units": "kelvin"})],
        shared_hooks(),
        otelhooks_tracing.provider,
    )
    assert "invalid arguments" in answers["c1"] and "units" in answers["c1"]
    assert log.ran == []


async def test_spans_nest_under_an_instrumented_framework(
    otelhooks_tracing: InMemoryTracing,
) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import Instrumentation
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.test import TestModel

    from otelhooks.integrations.pydantic_ai import OtelhooksCapability

    log = Log()
    agent = Agent(
        TestModel(),
        name="weather-agent",
        capabilities=[
            Instrumentation(InstrumentationSettings(tracer_provider=otelhooks_tracing.provider)),
            OtelhooksCapability(
                shared_hooks(), tracer_provider=otelhooks_tracing.provider, scrubber=REDACTOR
            ),
        ],
    )
    agent.tool_plain(_typed("weather", lambda **kw: weather(log, **kw)))
    await agent.run("go")
    execute = otelhooks_tracing.tool_spans("weather")[0]
    parent = next(
        s for s in otelhooks_tracing.spans() if s.context.span_id == execute.parent.span_id
    )  # type: ignore[union-attr]
    assert parent.instrumentation_scope.name.startswith("pydantic-ai")  # type: ignore[union-attr]
    trace_ids = {s.context.trace_id for s in otelhooks_tracing.spans()}  # type: ignore[union-attr]
    assert len(trace_ids) == 1


def test_a_langchain_tool_as_an_otelhooks_tool() -> None:
    import asyncio

    from langchain_core.tools import tool

    from otelhooks import ToolCall, ToolExecutor, ToolRegistry
    from otelhooks.integrations.langchain import from_langchain

    @tool
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    registry = ToolRegistry()
    registry.add(from_langchain(shout))
    executor = ToolExecutor(registry)
    ok = asyncio.run(executor.execute(ToolCall("1", "shout", {"text": "hi"})))
    extra = asyncio.run(executor.execute(ToolCall("2", "shout", {"text": "hi", "x": 1})))
    assert ok.content == "HI"
    assert extra.is_error and "Additional properties" in extra.content
    assert registry.get("shout").parameters["required"] == ["text"]  # type: ignore[union-attr]
