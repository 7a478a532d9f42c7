"""Telemetry: the vocabulary the core records in, and the set-up that sends it somewhere.

Vocabulary (OpenTelemetry API only; the core uses it): :mod:`~otelhooks.telemetry.attributes`
(span and attribute names), :mod:`~otelhooks.telemetry.content` (content capture and cuts),
:mod:`~otelhooks.telemetry.genai` (GenAI attribute values) and
:mod:`~otelhooks.telemetry.instruments` (metric instruments).

Set-up (needs ``otelhooks[sdk]``; nothing in the core imports it):
:mod:`~otelhooks.telemetry.tracing` and :mod:`~otelhooks.telemetry.meters` (exporters, the
standard ``OTEL_*`` variables of :mod:`~otelhooks.telemetry.environment`, bounded shutdown),
:mod:`~otelhooks.telemetry.testing` (in-memory spans for tests and the pytest plugin),
:mod:`~otelhooks.telemetry.spantree` (span trees as text) and
:mod:`~otelhooks.telemetry.jaeger_query` (reading traces back from Jaeger).
The names below are imported on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from .content import Capture, capture_from_env, parse_capture
    from .environment import ConfigurationError
    from .instruments import Instruments
    from .jaeger_query import JaegerQuery, QueryError, Trace
    from .spantree import TreeSpan, render_tree
    from .testing import InMemoryTracing, in_memory_tracing
    from .tracing import (
        DEFAULT_BATCH,
        ExportStats,
        RedactingOTLPSpanExporter,
        TracingSetup,
        make_otlp_exporter,
        setup_tracing,
    )

__getattr__, __dir__ = lazy_names(
    __name__,
    globals(),
    {
        "content": "Capture capture_from_env parse_capture",
        "environment": "ConfigurationError",
        "instruments": "Instruments",
        "jaeger_query": "JaegerQuery QueryError Trace",
        "spantree": "TreeSpan render_tree",
        "testing": "InMemoryTracing in_memory_tracing",
        "tracing": (
            "DEFAULT_BATCH ExportStats RedactingOTLPSpanExporter TracingSetup make_otlp_exporter "
            "setup_tracing"
        ),
    },
)

__all__ = [
    "DEFAULT_BATCH",
    "Capture",
    "ConfigurationError",
    "ExportStats",
    "InMemoryTracing",
    "Instruments",
    "JaegerQuery",
    "QueryError",
    "RedactingOTLPSpanExporter",
    "Trace",
    "TracingSetup",
    "TreeSpan",
    "capture_from_env",
    "in_memory_tracing",
    "make_otlp_exporter",
    "parse_capture",
    "render_tree",
    "setup_tracing",
]
