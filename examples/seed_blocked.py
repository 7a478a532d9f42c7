"""The seed chapter's blocked path: a before-hook blocks `dangerous`; its handler never runs.

python examples/seed_blocked.py
"""

import asyncio

from otelhooks import AssistantMessage, BeforeToolCallContext, Hooks, ToolCall, ToolRegistry, block
from otelhooks.core.loop import Agent
from otelhooks.providers import ScriptedProvider, quote_last_tool_result
from otelhooks.telemetry.testing import in_memory_tracing

tools = ToolRegistry()


@tools.tool
def dangerous() -> str:
    """Something the policy forbids."""
    raise AssertionError("never reached: the before-hook blocks this tool")


hooks = Hooks()


@hooks.before(tools="dangerous")
def forbid(ctx: BeforeToolCallContext):
    return block("this tool is disabled in the demo")


async def main() -> None:
    tracing = in_memory_tracing()
    provider = ScriptedProvider(
        [
            AssistantMessage(tool_calls=(ToolCall("call_1", "dangerous", {}),)),
            quote_last_tool_result(),
        ]
    )
    agent = Agent(provider, tools=tools, hooks=hooks, name="seed", tracer_provider=tracing.provider)
    final = await agent.run("Run the dangerous tool")
    print(final.text)
    span = tracing.tool_span(call_id="call_1")
    tracing.assert_children(span, ["before"])  # no run span: the handler never ran
    print(tracing.render())


asyncio.run(main())
