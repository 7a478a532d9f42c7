"""A user's script, type-checked with ``mypy --strict`` by tests/test_typing.py: decorated tools
and hooks keep their signatures, and the public API needs no ``type: ignore``."""

from __future__ import annotations

import asyncio

from otelhooks import (
    AfterOverride,
    AfterToolCallContext,
    AssistantMessage,
    BeforeDecision,
    BeforeToolCallContext,
    Hooks,
    ToolCall,
    ToolExecutor,
    ToolRegistry,
    block,
)
from otelhooks.core.loop import Agent, RunResult
from otelhooks.providers import ScriptedProvider

tools = ToolRegistry()
hooks = Hooks()


@tools.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tools.tool(name="multiply", timeout=5)
async def mul(a: int, b: int = 2) -> int:
    """Multiply."""
    return a * b


@hooks.before(tools="add")
def no_negatives(ctx: BeforeToolCallContext) -> BeforeDecision | None:
    if any(isinstance(v, int) and v < 0 for v in ctx.args.values()):
        return block("no negative numbers")
    return None


@hooks.after
async def annotate(ctx: AfterToolCallContext) -> AfterOverride:
    return AfterOverride(content=f"{ctx.result.content} (checked)")


total: int = add(1, 2)  # still a plain function with its own signature


async def main() -> str:
    product: int = await mul(3)
    executor = ToolExecutor(tools, hooks)
    result = await executor.execute(ToolCall("c1", "add", {"a": total, "b": product}))
    agent = Agent(
        ScriptedProvider([AssistantMessage(text="done")]), tools=tools, hooks=hooks, model="m"
    )
    run: RunResult = await agent.run("go")
    return result.content + run.text


print(asyncio.run(main()))
