"""Adapters between otelhooks and the tools, servers and frameworks agents use.

Each module needs its own extra (``otelhooks[mcp]``, ``otelhooks[pydantic-ai]``,
``otelhooks[openai-agents]``, ``otelhooks[langchain]``) and imports only the public core. Nothing in
the core imports these modules.
"""
