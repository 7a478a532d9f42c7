"""Benchmark 10: the marginal cost of one tool call inside an agent run, otelhooks and its peers.

Each framework runs an agent whose test model asks for ``K`` calls of an ``echo`` tool in one
message and then answers; the same run with ``K = 0`` is the baseline, and the marginal cost is
the difference divided by ``K``. Every framework uses its own offline test model: Pydantic AI's
``FunctionModel``, a scripted ``agents.Model`` for the OpenAI Agents SDK, Strands' test model,
and otelhooks' ``ScriptedProvider`` with the README set-up (redaction in its three places and a
structlog event per call, spans into an in-memory exporter).

    python -m benchmarks.peers_child [--quick]     # prints one JSON object

A framework that is not installed is reported as such and skipped. Strands pins an older ``mcp``
than otelhooks' MCP extra needs, so it cannot share the project's environment: ``run.py`` gives it
a venv of its own in ``.cache/peers/strands`` and runs ``--only Strands`` there.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

Runner = Callable[[int], Awaitable[Any]]


def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


def otelhooks_runner() -> Runner:
    from benchmarks.floors import default_hooks, make_logger, sdk_provider
    from otelhooks import AssistantMessage, ToolCall, ToolRegistry
    from otelhooks.builtin import Redactor
    from otelhooks.core.loop import Agent
    from otelhooks.providers import ScriptedProvider

    redactor = Redactor()
    provider = sdk_provider(redactor)
    hooks = default_hooks(redactor, make_logger(redactor))
    tools = ToolRegistry()
    tools.register(echo)

    async def run(k: int) -> Any:
        calls = tuple(ToolCall(f"c{i}", "echo", {"text": f"t{i}"}) for i in range(k))
        model = ScriptedProvider([AssistantMessage(tool_calls=calls), AssistantMessage(text="ok")])
        agent = Agent(
            model, tools=tools, hooks=hooks, scrubber=redactor, model="m", tracer_provider=provider
        )
        return await agent.run("go")

    return run


def _boundary_setup() -> tuple[Any, dict[str, Any]]:
    """otelhooks as the README sets it up: redaction in its three places, a structlog event per
    call, spans into an in-memory exporter; the hooks, and the boundary's options."""
    from benchmarks.floors import default_hooks, make_logger, sdk_provider
    from otelhooks.builtin import Redactor

    redactor = Redactor()
    hooks = default_hooks(redactor, make_logger(redactor))
    return hooks, {"tracer_provider": sdk_provider(redactor), "scrubber": redactor}


def pydantic_ai_runner(guarded: bool = False) -> Runner:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def build(k: int) -> Any:
        def respond(messages: list[Any], info: AgentInfo) -> ModelResponse:
            if len(messages) == 1 and k:
                return ModelResponse(
                    parts=[ToolCallPart("echo", {"text": f"t{i}"}, f"c{i}") for i in range(k)]
                )
            return ModelResponse(parts=[TextPart("ok")])

        capabilities: list[Any] = []
        if guarded:
            from otelhooks.integrations.pydantic_ai import OtelhooksCapability

            hooks, options = _boundary_setup()
            capabilities.append(OtelhooksCapability(hooks, **options))
        agent = Agent(FunctionModel(respond), capabilities=capabilities)
        agent.tool_plain(echo)
        return agent

    agents = {}

    async def run(k: int) -> Any:
        agent = agents.get(k) or agents.setdefault(k, build(k))
        return await agent.run("go")

    return run


def openai_agents_runner(guarded: bool = False) -> Runner:
    from agents import Agent, ModelSettings, RunConfig, Runner, function_tool
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    class Scripted(Model):
        def __init__(self, k: int) -> None:
            self.k = k

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            items = args[1] if len(args) > 1 else kwargs["input"]
            answered = isinstance(items, list) and any(
                (i.get("type") if isinstance(i, dict) else None) == "function_call_output"
                for i in items
            )
            if self.k and not answered:
                output: list[Any] = [
                    ResponseFunctionToolCall(
                        type="function_call",
                        name="echo",
                        call_id=f"c{i}",
                        arguments=json.dumps({"text": f"t{i}"}),
                    )
                    for i in range(self.k)
                ]
            else:
                output = [
                    ResponseOutputMessage(
                        id="m",
                        type="message",
                        role="assistant",
                        status="completed",
                        content=[ResponseOutputText(type="output_text", text="ok", annotations=[])],
                    )
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    tool = function_tool(echo)
    config = RunConfig(tracing_disabled=True)
    if guarded:
        from otelhooks.integrations.openai_agents import boundary_for, wrap_tool

        hooks, options = _boundary_setup()
        tool = wrap_tool(tool, boundary_for(hooks, **options))

    async def run(k: int) -> Any:
        agent = Agent(
            name="bench",
            model=Scripted(k),
            tools=[tool],
            model_settings=ModelSettings(parallel_tool_calls=True),
        )
        return await Runner.run(agent, "go", run_config=config)

    return run


def strands_runner() -> Runner:
    from strands import Agent, tool  # type: ignore[import-not-found]
    from strands.models.model import Model  # type: ignore[import-not-found]

    class Scripted(Model):  # type: ignore[misc]
        """Answers in the Bedrock converse-stream events Strands' models produce."""

        def __init__(self, k: int) -> None:
            self.k = k

        def update_config(self, **config: Any) -> None:
            pass

        def get_config(self) -> Any:
            return {}

        async def structured_output(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError
            yield

        async def stream(self, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
            yield {"messageStart": {"role": "assistant"}}
            answered = any(
                "toolResult" in block for m in messages for block in m.get("content", [])
            )
            if self.k and not answered:
                for i in range(self.k):
                    start = {"toolUse": {"toolUseId": f"c{i}", "name": "echo"}}
                    yield {"contentBlockStart": {"start": start}}
                    delta = {"toolUse": {"input": json.dumps({"text": f"t{i}"})}}
                    yield {"contentBlockDelta": {"delta": delta}}
                    yield {"contentBlockStop": {}}
                yield {"messageStop": {"stopReason": "tool_use"}}
            else:
                yield {"contentBlockDelta": {"delta": {"text": "ok"}}}
                yield {"contentBlockStop": {}}
                yield {"messageStop": {"stopReason": "end_turn"}}

    echo_tool = tool(echo)

    async def run(k: int) -> Any:
        agent = Agent(model=Scripted(k), tools=[echo_tool], callback_handler=None)
        return await agent.invoke_async("go")

    return run


def langgraph_runner(guarded: bool = False) -> Runner:
    """A graph whose model node is scripted (it stands in for a chat model) and whose tools run
    in LangGraph's ``ToolNode``."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import StructuredTool
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    tools = [StructuredTool.from_function(echo)]
    if guarded:
        from otelhooks.integrations.langchain import with_boundary

        hooks, options = _boundary_setup()
        tools = with_boundary(tools, hooks, **options)
    node = ToolNode(tools)

    def build(k: int) -> Any:
        calls = [{"name": "echo", "args": {"text": f"t{i}"}, "id": f"c{i}"} for i in range(k)]

        def agent(state: MessagesState) -> dict[str, Any]:
            answered = len(state["messages"]) > 1
            reply = AIMessage("ok") if answered or not k else AIMessage("", tool_calls=calls)
            return {"messages": [reply]}

        graph = StateGraph(MessagesState)
        graph.add_node("agent", agent)
        graph.add_node("tools", node)
        graph.add_edge(START, "agent")
        graph.add_conditional_edges("agent", tools_condition, ["tools", END])
        graph.add_edge("tools", "agent")
        return graph.compile()

    graphs: dict[int, Any] = {}

    async def run(k: int) -> Any:
        graph = graphs.get(k) or graphs.setdefault(k, build(k))
        return await graph.ainvoke({"messages": [HumanMessage("go")]})

    return run


RUNNERS: dict[str, Callable[[], Runner]] = {
    "otelhooks (README set-up)": otelhooks_runner,
    "Pydantic AI": pydantic_ai_runner,
    "OpenAI Agents SDK": openai_agents_runner,
    "Strands": strands_runner,
    "LangGraph": langgraph_runner,
    "Pydantic AI + otelhooks": lambda: pydantic_ai_runner(guarded=True),
    "OpenAI Agents SDK + otelhooks": lambda: openai_agents_runner(guarded=True),
    "LangGraph + otelhooks": lambda: langgraph_runner(guarded=True),
}

FRAMEWORKS = ("Pydantic AI", "OpenAI Agents SDK", "LangGraph")
"""Frameworks measured with and without otelhooks' boundary around their tools."""


async def marginal(run: Runner, k: int, rounds: int) -> float:
    """µs per tool call: (a run with k calls - a run with none) / k, the median of rounds."""
    for _ in range(3):  # warm up
        await run(k)
        await run(0)
    samples = []
    for _ in range(rounds):
        gc.collect()
        start = time.perf_counter()
        await run(k)
        with_calls = time.perf_counter() - start
        start = time.perf_counter()
        await run(0)
        without = time.perf_counter() - start
        samples.append((with_calls - without) / k * 1e6)
    return statistics.median(samples)


def main(quick: bool, only: list[str] | None = None) -> dict[str, Any]:
    k, rounds = (20, 5) if quick else (50, 41)
    out: dict[str, Any] = {"calls_per_run": k}
    for name, factory in RUNNERS.items():
        if only and name not in only:
            continue
        try:
            runner = factory()
        except ImportError as exc:
            out[name] = f"not installed ({exc.name or exc})"
            continue
        out[name] = asyncio.run(marginal(runner, k, rounds))
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", action="append", default=None)
    args = parser.parse_args()
    print(json.dumps(main(args.quick, args.only)))
