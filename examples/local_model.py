"""An agent on a local model behind an OpenAI-compatible server (Ollama, vLLM, llama.cpp's
server, LM Studio): the Chat Completions provider with a ``base_url``.

    ollama pull llama3.2 && ollama serve
    python examples/local_model.py

``LOCAL_MODEL_URL`` is the server's base URL (default Ollama's, http://localhost:11434/v1),
``LOCAL_MODEL`` the model (default ``llama3.2``), ``LOCAL_MODEL_PROVIDER`` the name the spans
give it (default ``ollama``: vllm, llama_cpp, lm_studio, ...).
"""

import asyncio
import os
import sys

from _weather import PROMPT, REDACTOR, default_hooks, tools

from otelhooks.core.loop import Agent
from otelhooks.providers import ModelParams
from otelhooks.providers.openai import OpenAIChat
from otelhooks.telemetry.spantree import render_tree
from otelhooks.telemetry.testing import in_memory_tracing


async def main() -> None:
    tracing = in_memory_tracing()
    url = os.environ.get("LOCAL_MODEL_URL", "http://localhost:11434/v1")
    provider = OpenAIChat(
        base_url=url,
        api_key="local",  # local servers accept any key
        provider_name=os.environ.get("LOCAL_MODEL_PROVIDER", "ollama"),
        timeout=300.0,  # a local model can be slow to load
    )
    agent = Agent(
        provider,
        tools=tools,
        hooks=default_hooks(),
        scrubber=REDACTOR,
        model=os.environ.get("LOCAL_MODEL", "llama3.2"),
        name="weather",
        params=ModelParams(temperature=0.0, max_tokens=300),
        tracer_provider=tracing.provider,
    )
    result = await agent.run(PROMPT)
    if result.stop_reason == "error":  # no server there, or it refused: say so, and fail
        print(render_tree(tracing.spans()))
        sys.exit(f"the run failed: {result.error_message} (is a model server running at {url}?)")
    print(result.text)
    print(render_tree(tracing.spans()))


asyncio.run(main())
