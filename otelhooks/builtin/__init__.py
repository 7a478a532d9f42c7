"""Built-in hooks: structlog events, redaction, and policies."""

from typing import Any

from .policy import (
    ArgumentPattern,
    CallLimit,
    PathGuard,
    ToolAllowList,
    ToolDenyList,
    UrlHostGuard,
)
from .redaction import RedactingProcessor, RedactionHook, Redactor, SecretPattern
from .secret_detectors import Detector, Field, Finding, TextView
from .structlog_events import StructlogEvents, add_trace_context, json_logger, trace_ids


def __getattr__(name: str) -> Any:
    # RedactingSpanProcessor needs opentelemetry-sdk: imported on first use only.
    if name == "RedactingSpanProcessor":
        from .span_redaction import RedactingSpanProcessor

        return RedactingSpanProcessor
    raise AttributeError(name)


__all__ = [
    "ArgumentPattern",
    "CallLimit",
    "Detector",
    "Field",
    "Finding",
    "PathGuard",
    "RedactingProcessor",
    "RedactingSpanProcessor",
    "RedactionHook",
    "Redactor",
    "SecretPattern",
    "StructlogEvents",
    "TextView",
    "ToolAllowList",
    "ToolDenyList",
    "UrlHostGuard",
    "add_trace_context",
    "json_logger",
    "trace_ids",
]
