"""A custom policy: one hook object that takes part in both phases, plus built-in policies.

The hook asks for approval of writes (async, with a timeout; failing closed), and annotates
every result with how long it took. Built-in policies keep paths under a root and limit calls.

    python examples/custom_policy_hook.py
"""

import asyncio
import time

from otelhooks import (
    AfterOverride,
    AfterToolCallContext,
    AssistantMessage,
    BeforeToolCallContext,
    Hooks,
    ToolCall,
    ToolRegistry,
    block,
    rewrite,
)
from otelhooks.builtin import CallLimit, PathGuard
from otelhooks.core.loop import Agent
from otelhooks.providers import ScriptedProvider, quote_last_tool_result
from otelhooks.telemetry.testing import in_memory_tracing

tools = ToolRegistry()


@tools.tool
def write_file(path: str, text: str) -> str:
    """Write text to a file (pretend)."""
    return f"wrote {len(text)} bytes to {path}"


class WriteApproval:
    """Before: normalise the path and refuse overwriting anything under /srv/data/locked.
    After: say how long the call took."""

    name = "write_approval"
    tools = ("write_*",)
    timeout = 2.0  # an approval that hangs fails closed (blocks) after 2 s

    def __init__(self) -> None:
        self.started: dict[str, float] = {}

    async def before_tool_call(self, ctx: BeforeToolCallContext):
        self.started[ctx.tool_call.id] = time.perf_counter()
        if ctx.args["path"].startswith("locked/"):
            return block("files under locked/ are read-only")
        if ctx.args["path"] != ctx.args["path"].strip():
            return rewrite({**ctx.args, "path": ctx.args["path"].strip()})
        return None

    def after_tool_call(self, ctx: AfterToolCallContext):
        elapsed = (time.perf_counter() - self.started.pop(ctx.tool_call.id, 0.0)) * 1000
        return AfterOverride(details={"approved_in_ms": round(elapsed, 2)})


# The tool writes relative paths under /srv/data: the guard is told so (else it refuses them).
guard = PathGuard("path", "/srv/data", relative_to="/srv/data")
hooks = Hooks([guard, WriteApproval(), CallLimit(5)])


async def main() -> None:
    tracing = in_memory_tracing()
    calls = (
        ToolCall("c1", "write_file", {"path": " notes.txt ", "text": "hello"}),
        ToolCall("c2", "write_file", {"path": "locked/config", "text": "x"}),
        ToolCall("c3", "write_file", {"path": "../../etc/passwd", "text": "x"}),
    )
    provider = ScriptedProvider([AssistantMessage(tool_calls=calls), quote_last_tool_result()])
    agent = Agent(
        provider, tools=tools, hooks=hooks, name="policy", tracer_provider=tracing.provider
    )
    print((await agent.run("write some files")).text)
    print(tracing.render())


asyncio.run(main())
