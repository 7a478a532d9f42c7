"""The OpenAI Agents SDK's function tools through the hook boundary
(the ``openai-agents`` extra).

::

    agent = with_boundary(Agent(name="helper", tools=[get_weather]), hooks)
    # or one tool at a time: tools=[wrap_tool(get_weather, boundary)]

Each ``FunctionTool``'s ``on_invoke_tool`` runs through before -> run -> after as an
``execute_tool`` span (nested under the SDK's own spans when an OpenTelemetry bridge for its
traces is installed). Hooks see the arguments the model sent, as an object, and
``ctx.context.framework``, the SDK's ``ToolContext`` (the run context, the tool call id, the
agent). A blocked call returns ``blocked: <reason>`` as the tool's output: the model reads it and
the run goes on; a tool that raises answers ``error: <message>`` the same way (the SDK's
``failure_error_function`` is not used). The wrapped tool keeps its name, description, schema,
guardrails and approval settings. Each call's state lives in its own context: concurrent runs
share nothing but the hooks themselves. Tools of other kinds (hosted tools, handoffs) are left
as they are.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from typing import Any

from agents import Agent, FunctionTool
from agents.exceptions import AgentsException
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider

from ..core.execute import DEFAULT_TOOL_TIMEOUT
from ..core.hooks import Hooks
from ..core.scrub import Scrubber
from ._boundary import FrameworkBoundary


def boundary_for(
    hooks: Hooks | None = None,
    *,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    capture_content: Any = None,
    tool_timeout: float | None = DEFAULT_TOOL_TIMEOUT,
    scrubber: Scrubber | None = None,
) -> FrameworkBoundary:
    """The boundary the wrapped tools share (one per set of hooks)."""
    return FrameworkBoundary(
        hooks,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        capture_content=capture_content,
        tool_timeout=tool_timeout,
        passthrough=(AgentsException,),
        scrubber=scrubber,
    )


def wrap_tool(tool: FunctionTool, boundary: FrameworkBoundary) -> FunctionTool:
    """A copy of ``tool`` whose invocations run through ``boundary``. The run is the tool's own
    invocation without the SDK's failure handler, so that an exception reaches the boundary: the
    model then reads ``error: <message>`` and the span records the error."""
    original = getattr(tool.on_invoke_tool, "_invoke_tool_impl", tool.on_invoke_tool)
    boundary.ensure_tool(tool.name, tool.description or "", tool.params_json_schema)

    async def on_invoke_tool(ctx: Any, input: str) -> Any:
        try:
            parsed = json.loads(input) if input.strip() else {}
        except ValueError:
            parsed = input  # not JSON: the boundary answers with invalid arguments
        arguments = parsed if isinstance(parsed, dict) else {}

        async def invoke(given: dict[str, Any], rewritten: bool) -> Any:
            return await original(ctx, json.dumps(given) if rewritten else input)

        if not isinstance(parsed, dict):
            return f"error: invalid arguments for tool {tool.name!r}: not a JSON object"
        agent = getattr(ctx, "agent", None)
        result, invocation = await boundary.call(
            str(getattr(ctx, "tool_call_id", "") or tool.name),
            tool.name,
            arguments,
            invoke,
            framework=ctx,
            agent_name=str(getattr(agent, "name", "") or ""),
        )
        return invocation.native(result)

    return dataclasses.replace(tool, on_invoke_tool=on_invoke_tool)


def wrap_tools(tools: Iterable[Any], boundary: FrameworkBoundary) -> list[Any]:
    """``tools`` with every ``FunctionTool`` wrapped (other tools unchanged)."""
    return [wrap_tool(t, boundary) if isinstance(t, FunctionTool) else t for t in tools]


def with_boundary(agent: Agent[Any], hooks: Hooks | None = None, **options: Any) -> Agent[Any]:
    """A clone of ``agent`` whose function tools run through the hooks (``options`` as for
    :func:`boundary_for`). Handoff agents are cloned the same way."""
    boundary = boundary_for(hooks, **options)
    return _clone(agent, boundary, {})


def _clone(
    agent: Agent[Any], boundary: FrameworkBoundary, seen: dict[int, Agent[Any]]
) -> Agent[Any]:
    if id(agent) in seen:
        return seen[id(agent)]
    clone = agent.clone(tools=wrap_tools(agent.tools, boundary))
    seen[id(agent)] = clone
    handoffs = [_clone(h, boundary, seen) if isinstance(h, Agent) else h for h in agent.handoffs]
    if handoffs:
        clone.handoffs = handoffs
    return clone
