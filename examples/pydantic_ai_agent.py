"""A Pydantic AI agent whose tools run through otelhooks' hooks (the framework's test model).

    python examples/pydantic_ai_agent.py

Swap ``FunctionModel(...)`` for a real model (``"openai:gpt-4.1-mini"``) to run it for real.
"""

from _policy import REDACTOR, delete_file, read_file, shared_hooks
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from otelhooks.integrations.pydantic_ai import OtelhooksCapability
from otelhooks.telemetry.spantree import render_tree
from otelhooks.telemetry.testing import in_memory_tracing


def model(messages: list, info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:  # first turn: three calls at once
        return ModelResponse(
            parts=[
                ToolCallPart("read_file", {"path": "/srv/data/app.env"}, tool_call_id="c1"),
                ToolCallPart("read_file", {"path": "/etc/shadow"}, tool_call_id="c2"),
                ToolCallPart("delete_file", {"path": "/srv/data/app.env"}, tool_call_id="c3"),
            ]
        )
    return ModelResponse(parts=[TextPart("Read one file; the other two were refused.")])


tracing = in_memory_tracing()
agent = Agent(
    FunctionModel(model),
    tools=[read_file, delete_file],
    capabilities=[
        OtelhooksCapability(shared_hooks(), tracer_provider=tracing.provider, scrubber=REDACTOR)
    ],
)
result = agent.run_sync("Read and clean up the app config.")
for message in result.all_messages():
    for part in message.parts:
        if isinstance(part, ToolReturnPart):
            print(f"{part.tool_name}: {part.content}")
print(result.output)
print(render_tree(tracing.spans()))
