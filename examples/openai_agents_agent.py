"""An OpenAI Agents SDK agent whose function tools run through otelhooks' hooks, driven by a
scripted model (the SDK's ``Model`` interface), so it runs offline.

    python examples/openai_agents_agent.py

Drop ``model=Scripted()`` (and set OPENAI_API_KEY) to run it against OpenAI.
"""

import asyncio
import json

from _policy import REDACTOR, delete_file, read_file, shared_hooks
from agents import Agent, RunConfig, Runner, function_tool
from agents.items import ModelResponse, ToolCallOutputItem
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from otelhooks.integrations.openai_agents import with_boundary
from otelhooks.telemetry.spantree import render_tree
from otelhooks.telemetry.testing import in_memory_tracing


class Scripted(Model):
    def __init__(self) -> None:
        self.turn = 0

    async def get_response(self, *args, **kwargs) -> ModelResponse:
        self.turn += 1
        if self.turn == 1:
            calls = [
                ("c1", "read_file", {"path": "/srv/data/app.env"}),
                ("c2", "delete_file", {"path": "/srv/data/app.env"}),
            ]
            output = [
                ResponseFunctionToolCall(
                    type="function_call", call_id=c, name=n, arguments=json.dumps(a)
                )
                for c, n, a in calls
            ]
        else:
            text = ResponseOutputText(type="output_text", text="Done.", annotations=[])
            output = [
                ResponseOutputMessage(
                    id="m", type="message", role="assistant", status="completed", content=[text]
                )
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError


async def main() -> None:
    tracing = in_memory_tracing()
    agent = Agent(
        name="ops",
        model=Scripted(),
        tools=[function_tool(read_file), function_tool(delete_file)],
    )
    guarded = with_boundary(
        agent, shared_hooks(), tracer_provider=tracing.provider, scrubber=REDACTOR
    )
    result = await Runner.run(guarded, "Clean up", run_config=RunConfig(tracing_disabled=True))
    for item in result.new_items:
        if isinstance(item, ToolCallOutputItem):
            print(f"{item.raw_item['call_id']}: {item.output}")
    print(result.final_output)
    print(render_tree(tracing.spans()))


asyncio.run(main())
