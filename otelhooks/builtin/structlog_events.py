"""structlog events for tool calls, correlated with their traces.

:class:`StructlogEvents` is an observer hook: when a call ends it logs ``tool_call.blocked``,
``tool_call.completed`` or ``tool_call.failed`` with the tool span's ``trace_id`` and ``span_id``
(hex, as Jaeger shows them). :func:`add_trace_context` is a structlog processor that adds the
current span's ids to any event, for what you log inside tools and hooks. Nothing here configures
structlog globally.
"""

from __future__ import annotations

from typing import Any

import structlog
from opentelemetry import trace
from opentelemetry.trace import format_span_id, format_trace_id

from ..core.hooks import ToolCallRecord
from ..telemetry import attributes as A
from .redaction import RedactingProcessor, Redactor, resolve

_EVENT_ATTR_TYPES = (str, bool, int, float)


def trace_ids() -> dict[str, str]:
    """``trace_id`` and ``span_id`` of the current span in hex; empty when there is none."""
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return {}
    return {"trace_id": format_trace_id(ctx.trace_id), "span_id": format_span_id(ctx.span_id)}


def add_trace_context(logger: Any, method_name: str, event_dict: Any) -> Any:
    """structlog processor: add the current span's ``trace_id`` and ``span_id`` (unless the
    event carries them already)."""
    if "trace_id" in event_dict:
        return event_dict
    ids = trace_ids()
    if ids:
        event_dict.setdefault("trace_id", ids["trace_id"])
        event_dict.setdefault("span_id", ids["span_id"])
    return event_dict


def json_logger(stream: Any, redactor: Redactor | bool | None = None) -> Any:
    """A structlog logger that writes one JSON line per event to ``stream`` (a file-like
    object), scrubbed by ``redactor`` first (by default the default redactor; ``False`` for
    none); nothing is configured globally."""
    chosen = resolve(redactor)
    processors: list[Any] = [] if chosen is None else [RedactingProcessor(chosen)]
    return structlog.wrap_logger(
        structlog.PrintLogger(stream), processors=[*processors, structlog.processors.JSONRenderer()]
    )


class StructlogEvents:
    """Observer hook that logs one event per tool call outcome.

    ``logger`` defaults to ``structlog.get_logger("otelhooks")``. With ``mirror_to_span`` each
    event is also added to the tool span as a span event of the same name, so the log line shows
    in the trace. The event's fields (the tool's name and the call's id come from the model) are
    redacted before they are logged, whoever configured structlog: by ``redactor``, by default
    the default one (``False`` turns that off).
    """

    name = "structlog_events"

    def __init__(
        self,
        logger: Any = None,
        *,
        mirror_to_span: bool = False,
        redactor: Redactor | bool | None = None,
    ) -> None:
        self.logger = logger if logger is not None else structlog.get_logger("otelhooks")
        self.mirror_to_span = mirror_to_span
        self.redactor = resolve(redactor)

    def on_tool_call_end(self, record: ToolCallRecord) -> None:
        """Log the call's outcome (completed, blocked or failed) with the trace ids."""
        fields: dict[str, Any] = {
            "tool_name": record.tool_name,
            "call_id": record.tool_call.id,
            "duration_ms": round(record.duration_ms, 3),
            "is_error": record.result.is_error,
            "result_size": len(record.result.content),
            "arguments_rewritten": record.arguments_rewritten,
            **trace_ids(),
        }
        if record.decision == A.DECISION_BLOCK:
            event, level = "tool_call.blocked", "warning"
            fields["reason"] = record.block_reason
            fields["hook"] = record.deciding_hook
        elif record.result.is_error:
            event, level = "tool_call.failed", "error"
        else:
            event, level = "tool_call.completed", "info"
        if record.error_type is not None:
            fields["error_type"] = record.error_type
        if record.decision is not None:
            fields["decision"] = record.decision
        if self.redactor is not None:  # the fields that carry text from outside
            fields["tool_name"] = self.redactor.scrub_identifier(record.tool_name)
            fields["call_id"] = self.redactor.redact_identifier(record.tool_call.id, "call_id")[0]
            if "reason" in fields and isinstance(fields["reason"], str):
                fields["reason"] = self.redactor.scrub_text(fields["reason"])
        getattr(self.logger, level)(event, **fields)
        if self.mirror_to_span:
            span = trace.get_current_span()
            if span.is_recording():
                span.add_event(
                    event,
                    {
                        f"{A.LOG_PREFIX}{k}": v
                        for k, v in fields.items()
                        if isinstance(v, _EVENT_ATTR_TYPES) and k not in ("trace_id", "span_id")
                    }
                    | {A.LOG_LEVEL: level},
                )
