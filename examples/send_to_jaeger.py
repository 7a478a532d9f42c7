"""Send an agent's traces to a local Jaeger (or a collector) over OTLP.

Start Jaeger first (see the README, "See your traces in Jaeger"), then:

    python examples/send_to_jaeger.py                      # OTLP/HTTP to localhost:4318
    OTEL_EXPORTER_OTLP_PROTOCOL=grpc python examples/send_to_jaeger.py
    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:14318 python examples/send_to_jaeger.py

and look for the service "otelhooks-example" at http://localhost:16686.
"""

import asyncio

import structlog

from otelhooks import AssistantMessage, Hooks, ToolCall, ToolRegistry
from otelhooks.builtin import (
    RedactingProcessor,
    RedactionHook,
    Redactor,
    StructlogEvents,
    add_trace_context,
)
from otelhooks.core.loop import Agent
from otelhooks.providers import ScriptedProvider, quote_last_tool_result
from otelhooks.telemetry.tracing import RECOMMENDED_BATCH, setup_tracing

redactor = Redactor()
structlog.configure(
    processors=[add_trace_context, RedactingProcessor(redactor), structlog.dev.ConsoleRenderer()]
)
setup = setup_tracing(
    "otlp", service_name="otelhooks-example", redactor=redactor, batch_options=RECOMMENDED_BATCH
)

tools = ToolRegistry()


@tools.tool
def lookup(key: str) -> str:
    """Look a key up in the configuration."""
    return {"region": "eu-west-1", "db_url": "postgres://app:s3cret@db:5432/app"}.get(key, "unset")


hooks = Hooks([RedactionHook(redactor), StructlogEvents(mirror_to_span=True)])


async def main() -> None:
    calls = (
        ToolCall("c1", "lookup", {"key": "region"}),
        ToolCall("c2", "lookup", {"key": "db_url"}),
    )
    provider = ScriptedProvider([AssistantMessage(tool_calls=calls), quote_last_tool_result()])
    agent = Agent(
        provider,
        tools=tools,
        hooks=hooks,
        scrubber=redactor,
        name="example",
        tracer_provider=setup.provider,
    )
    print((await agent.run("what is configured?")).text)


asyncio.run(main())
stats = setup.shutdown()
print(stats.summary())
