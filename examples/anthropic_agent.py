"""An agent on Claude (the Messages API), with extended thinking kept across tool use.

    ANTHROPIC_API_KEY=sk-ant-... python examples/anthropic_agent.py

``ANTHROPIC_BASE_URL`` points it elsewhere; ``OTELHOOKS_EXAMPLE_MODEL`` picks the model
(default ``claude-sonnet-5-5``). Prints the answer, the usage and the span tree.
"""

import asyncio
import os
import sys

from _weather import PROMPT, REDACTOR, default_hooks, tools

from otelhooks.core.loop import Agent
from otelhooks.providers import ModelParams
from otelhooks.providers.anthropic import AnthropicMessages
from otelhooks.telemetry.spantree import render_tree
from otelhooks.telemetry.testing import in_memory_tracing


async def main() -> None:
    if not os.environ.get("ANTHROPIC_API_KEY"):
        sys.exit("set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for another endpoint)")
    tracing = in_memory_tracing()
    agent = Agent(
        AnthropicMessages(thinking={"type": "enabled", "budget_tokens": 1024}),
        tools=tools,
        hooks=default_hooks(),
        scrubber=REDACTOR,
        model=os.environ.get("OTELHOOKS_EXAMPLE_MODEL", "claude-sonnet-5-5"),
        name="weather",
        params=ModelParams(max_tokens=2048),
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
