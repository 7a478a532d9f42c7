"""The tools and hooks the model examples share: a weather tool, redaction, the span tree."""

from __future__ import annotations

from otelhooks import Hooks, ToolRegistry
from otelhooks.builtin import RedactionHook, Redactor, StructlogEvents

tools = ToolRegistry()
REDACTOR = Redactor()  # the redaction hook and the runtime's scrubber


@tools.tool
def get_weather(city: str) -> str:
    """Today's weather in a city."""
    return {"Paris": "light rain, 11°C", "Tokyo": "clear, 18°C"}.get(city, "no data")


def default_hooks() -> Hooks:
    """Redaction first (results reach the model and the spans scrubbed), then a log event;
    the agent gets ``scrubber=REDACTOR`` too."""
    return Hooks([RedactionHook(REDACTOR), StructlogEvents()])


PROMPT = "What is the weather in Paris and in Tokyo? Use the tool, then answer in one sentence."
