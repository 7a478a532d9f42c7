"""A meter provider next to the tracer provider (``setup_tracing(metrics=...)``; needs the SDK).

The exporter is ``"console"``, ``"otlp"``, ``"none"`` or an SDK ``MetricExporter``; ``None``
means ``OTEL_METRICS_EXPORTER`` (no metrics when it is unset or ``none``). OTLP follows the same
``OTEL_EXPORTER_OTLP_[METRICS_]*`` variables and protocol as the traces; the export interval is
``OTEL_METRIC_EXPORT_INTERVAL`` (default 60 s), and shutdown exports what is left.
"""

from __future__ import annotations

import os
from typing import IO, Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricExporter,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource

from .environment import ConfigurationError, otlp_exporter

METRIC_KINDS = ("console", "otlp", "none")


def metrics_kind_from_env() -> str | None:
    """``OTEL_METRICS_EXPORTER``'s first value, or ``None`` when unset."""
    value = os.environ.get("OTEL_METRICS_EXPORTER", "").strip()
    return value.split(",")[0].strip() or None if value else None


def make_meter_provider(
    kind: str | MetricExporter,
    resource: Resource,
    *,
    endpoint: str | None,
    protocol: str,
    timeout: float,
    console_out: IO[str] | None = None,
    interval_millis: float | None = None,
) -> tuple[MeterProvider | None, str]:
    """The meter provider for ``kind`` and where its metrics go (``None`` for ``"none"``)."""
    if isinstance(kind, MetricExporter):
        exporter, where = kind, type(kind).__name__
    elif kind == "none":
        return None, "nowhere"
    elif kind == "console":
        options: dict[str, Any] = {"out": console_out} if console_out is not None else {}
        exporter, where = ConsoleMetricExporter(**options), "the console"
    elif kind == "otlp":
        exporter, where = otlp_exporter("metrics", endpoint, protocol, timeout)
    else:
        raise ConfigurationError(
            f"unknown metrics exporter {kind!r}: use console, otlp, none or a MetricExporter"
        )
    if interval_millis is None:
        interval_millis = float(os.environ.get("OTEL_METRIC_EXPORT_INTERVAL", "60000") or 60000)
    reader = PeriodicExportingMetricReader(
        exporter,
        export_interval_millis=interval_millis,
        export_timeout_millis=timeout * 1000,
    )
    return MeterProvider(resource=resource, metric_readers=[reader]), where
