"""Parallel tool calls: before-hooks in source order, tools concurrently, results in order.

python examples/parallel_tools.py
"""

import asyncio

from otelhooks import AssistantMessage, ToolCall, ToolContext, ToolRegistry
from otelhooks.core.events import ToolExecutionEnd, ToolExecutionUpdate
from otelhooks.core.loop import Agent
from otelhooks.providers import ScriptedProvider, quote_last_tool_result
from otelhooks.telemetry.testing import in_memory_tracing

tools = ToolRegistry()


@tools.tool
async def fetch(url: str, seconds: float, ctx: ToolContext) -> str:
    """Fetch a URL (pretend), reporting progress."""
    for step in range(3):
        await asyncio.sleep(seconds / 3)
        ctx.progress(f"{url}: {step + 1}/3")
    return f"{url}: 200 OK"


async def main() -> None:
    tracing = in_memory_tracing()
    calls = tuple(
        ToolCall(f"c{i}", "fetch", {"url": url, "seconds": s})
        for i, (url, s) in enumerate([("a.example", 0.3), ("b.example", 0.2), ("c.example", 0.1)])
    )
    provider = ScriptedProvider(
        [AssistantMessage(tool_calls=calls), quote_last_tool_result("{content}")]
    )
    agent = Agent(provider, tools=tools, name="parallel", tracer_provider=tracing.provider)
    async for event in agent.stream("fetch three pages"):
        if isinstance(event, ToolExecutionUpdate):
            print("progress:", event.update)
        elif isinstance(event, ToolExecutionEnd):
            print("finished:", event.tool_call.id)
    print("answer:", agent.messages[-1].text)
    print(tracing.render())


asyncio.run(main())
