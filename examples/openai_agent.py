"""An agent on OpenAI (Chat Completions, or the Responses API with --responses).

    OPENAI_API_KEY=sk-... python examples/openai_agent.py [--responses]

``OPENAI_BASE_URL`` points it elsewhere; ``OTELHOOKS_EXAMPLE_MODEL`` picks the model
(default ``gpt-4.1-mini``). Prints the answer, the usage and the span tree.
"""

import asyncio
import os
import sys

from _weather import PROMPT, REDACTOR, default_hooks, tools

from otelhooks.core.loop import Agent
from otelhooks.providers import ModelParams
from otelhooks.providers.openai import OpenAIChat, OpenAIResponses
from otelhooks.telemetry.spantree import render_tree
from otelhooks.telemetry.testing import in_memory_tracing


async def main() -> None:
    if not os.environ.get("OPENAI_API_KEY"):
        sys.exit("set OPENAI_API_KEY (and OPENAI_BASE_URL for another endpoint)")
    tracing = in_memory_tracing()
    provider = OpenAIResponses() if "--responses" in sys.argv else OpenAIChat()
    agent = Agent(
        provider,
        tools=tools,
        hooks=default_hooks(),
        scrubber=REDACTOR,
        model=os.environ.get("OTELHOOKS_EXAMPLE_MODEL", "gpt-4.1-mini"),
        name="weather",
        params=ModelParams(temperature=0.2, max_tokens=300),
        tracer_provider=tracing.provider,
    )
    result = await agent.run(PROMPT)
    if result.stop_reason == "error":  # a refused key, no server, an API error: say so, fail
        print(render_tree(tracing.spans()))
        sys.exit(f"the run failed: {result.error_message}")
    print(result.text)
    print(f"usage: {result.usage.input_tokens} in, {result.usage.output_tokens} out")
    print(render_tree(tracing.spans()))


asyncio.run(main())
