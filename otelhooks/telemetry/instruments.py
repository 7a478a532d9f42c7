"""Metrics through the OpenTelemetry metrics API: the GenAI client metrics and otelhooks' own.

* ``gen_ai.client.operation.duration`` (histogram, s) per ``chat`` request, and
  ``gen_ai.client.token.usage`` (histogram, ``{token}``, ``gen_ai.token.type`` = ``input`` /
  ``output``), with the attributes the GenAI conventions give them (operation, provider, request
  and response model, server address, ``error.type``);
* ``otelhooks.tool.calls`` (counter) and ``otelhooks.tool.duration`` (histogram, s) per tool
  call, by ``gen_ai.tool.name`` and ``otelhooks.tool.outcome`` (``allow``, ``block`` or
  ``error``; ``error.type`` with an error), so a dashboard shows block and error rates without
  reading traces.

With no meter provider configured (the API's default) every instrument is a no-op.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from opentelemetry import metrics
from opentelemetry.metrics import MeterProvider

from ..version import __version__
from . import attributes as A

# The bucket boundaries the GenAI conventions advise for these histograms.
DURATION_BUCKETS: Final = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
TOKEN_BUCKETS: Final = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)  # fmt: skip

TOOL_OUTCOME: Final = A.TOOL_OUTCOME
GEN_AI_TOKEN_TYPE: Final = A.GEN_AI_TOKEN_TYPE


class Instruments:
    """The instruments of one meter provider (the global one by default). A tool call's points
    go to :attr:`tool_calls` and :attr:`tool_duration` (one ``add`` and one ``record`` with the
    same attributes, a mapping the SDK's aggregation keeps: never changed afterwards)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "record_tool_call" in vars(cls):  # an override nothing would call
            raise TypeError(
                f"{cls.__name__}.record_tool_call is never called: a tool call's points are "
                "recorded on tool_calls and tool_duration; give instruments of your own there"
            )

    def __init__(self, meter_provider: MeterProvider | None = None) -> None:
        meter = metrics.get_meter("otelhooks", __version__, meter_provider=meter_provider)
        self.operation_duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
        )
        self.token_usage = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=list(TOKEN_BUCKETS),
        )
        self.tool_calls = meter.create_counter(
            "otelhooks.tool.calls", unit="{call}", description="Tool calls by tool and outcome"
        )
        self.tool_duration = meter.create_histogram(
            "otelhooks.tool.duration",
            unit="s",
            description="Tool call duration, hooks included",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
        )

    def record_chat(
        self,
        seconds: float,
        attributes: Mapping[str, Any],
        input_tokens: int | None,
        output_tokens: int | None,
    ) -> None:
        """One ``chat`` request: its duration, and its tokens when the provider reported them."""
        self.operation_duration.record(seconds, attributes)
        if input_tokens is not None:
            self.token_usage.record(input_tokens, {**attributes, GEN_AI_TOKEN_TYPE: "input"})
        if output_tokens is not None:
            self.token_usage.record(output_tokens, {**attributes, GEN_AI_TOKEN_TYPE: "output"})


def tool_call_attributes(tool: str, decision: str | None, error_type: str | None) -> dict[str, Any]:
    """The attributes of one tool call's metric points: the tool, the outcome (``allow``,
    ``block``, ``skip`` or ``error``) and the error type when it failed."""
    if decision == A.DECISION_BLOCK:
        outcome = A.DECISION_BLOCK
    elif error_type is not None:
        outcome = "error"
    else:
        outcome = decision or "error"
    attrs: dict[str, Any] = {A.GEN_AI_TOOL_NAME: tool, TOOL_OUTCOME: outcome}
    if error_type is not None:
        attrs[A.ERROR_TYPE] = error_type
    return attrs


CHAT_METRIC_KEYS: Final = (
    A.GEN_AI_OPERATION_NAME,
    A.GEN_AI_PROVIDER_NAME,
    A.GEN_AI_REQUEST_MODEL,
    A.GEN_AI_RESPONSE_MODEL,
    A.SERVER_ADDRESS,
    A.SERVER_PORT,
    A.ERROR_TYPE,
)
"""The span attributes a ``chat`` metric point carries (low cardinality only)."""
