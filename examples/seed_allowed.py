"""The seed chapter's allowed path: echo runs, an after-hook rewrites its result.

python examples/seed_allowed.py
"""

import asyncio

from otelhooks import AfterToolCallContext, AssistantMessage, Hooks, ToolCall, ToolRegistry
from otelhooks.core.loop import Agent
from otelhooks.providers import ScriptedProvider, quote_last_tool_result
from otelhooks.telemetry.testing import in_memory_tracing

tools = ToolRegistry()


@tools.tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


hooks = Hooks()


@hooks.after
def checked(ctx: AfterToolCallContext) -> str:
    return f"checked: {ctx.result.content}"


async def main() -> None:
    tracing = in_memory_tracing()  # real SDK, spans kept in memory
    provider = ScriptedProvider(
        [
            AssistantMessage(tool_calls=(ToolCall("call_1", "echo", {"text": "hi"}),)),
            quote_last_tool_result(),
        ]
    )
    agent = Agent(provider, tools=tools, hooks=hooks, name="seed", tracer_provider=tracing.provider)
    final = await agent.run("Repeat after me: hi")
    print(final.text)
    print(tracing.render())


asyncio.run(main())
