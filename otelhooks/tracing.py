"""Tracing set-up: console, OTLP (HTTP or gRPC) or in-memory, with bounded shutdown.

This is the one module of the package that needs ``opentelemetry-sdk`` (``pip install
otelhooks[sdk]``). It returns the provider instead of hiding it; pass ``setup.provider`` to the
runtime. It sets the global provider only when asked, and never silently replaces one.

The path of a span::

    span end -> EndCounter -> [RedactingSpanProcessor ->] BatchSpanProcessor -> CountingExporter
             -> console | OTLP | in-memory
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Literal

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

ExporterKind = Literal["console", "otlp", "memory", "none"]
OtlpProtocol = Literal["http/protobuf", "grpc"]

logger = logging.getLogger("otelhooks.tracing")

DEFAULT_EXPORT_TIMEOUT_S = 2.0

# Batch settings that export 100,000 spans to a local Jaeger without a drop (see benchmarks/):
# a larger queue absorbs bursts, larger batches and a short delay drain it faster.
RECOMMENDED_BATCH = {
    "max_queue_size": 65536,
    "schedule_delay_millis": 200,
    "max_export_batch_size": 2048,
}


@dataclass
class ExportStats:
    """What happened to the spans of a set-up: ended, exported, failed, and the rest dropped."""

    ended: int = 0
    exported: int = 0
    failed: int = 0
    failed_batches: int = 0
    destination: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def dropped(self) -> int:
        """Spans that ended but were neither exported nor failed: dropped by a full queue, or
        still queued at a shutdown that ran out of time."""
        return max(0, self.ended - self.exported - self.failed)

    @property
    def lost(self) -> int:
        return self.failed + self.dropped

    def summary(self) -> str:
        text = f"{self.exported} of {self.ended} spans exported to {self.destination}"
        if self.failed:
            text += f"; {self.failed} failed to export (is anything listening there?)"
        if self.dropped:
            text += f"; {self.dropped} dropped before export"
        return text


class _EndCounter(SpanProcessor):
    def __init__(self, stats: ExportStats) -> None:
        self._stats = stats

    def on_end(self, span: ReadableSpan) -> None:
        with self._stats._lock:
            self._stats.ended += 1


class CountingExporter(SpanExporter):
    """Wraps an exporter and counts the spans it exported and those it failed to export."""

    def __init__(self, inner: SpanExporter, stats: ExportStats) -> None:
        self.inner = inner
        self.stats = stats

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception:  # an exporter must never take the application down
            logger.exception("span exporter raised")
            result = SpanExportResult.FAILURE
        with self.stats._lock:
            if result is SpanExportResult.SUCCESS:
                self.stats.exported += len(spans)
            else:
                self.stats.failed += len(spans)
                self.stats.failed_batches += 1
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


@dataclass
class TracingSetup:
    """A configured provider. ``memory`` is set for the in-memory exporter."""

    provider: TracerProvider
    stats: ExportStats
    exporter: SpanExporter | None
    memory: InMemorySpanExporter | None = None

    def shutdown(self) -> ExportStats:
        """Flush and shut down; bounded by the exporter's timeout (seconds, not the SDK's 30)."""
        self.provider.shutdown()
        return self.stats

    def force_flush(self, timeout_millis: int = 5000) -> bool:
        return self.provider.force_flush(timeout_millis)


def otlp_protocol_from_env() -> OtlpProtocol:
    value = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    return "grpc" if value == "grpc" else "http/protobuf"


def make_otlp_exporter(
    endpoint: str | None = None,
    protocol: OtlpProtocol | None = None,
    timeout: float | None = None,
) -> tuple[SpanExporter, str]:
    """An OTLP span exporter and the address it sends to.

    ``endpoint`` is the collector's base address (``http://localhost:4318`` for HTTP,
    ``http://localhost:4317`` for gRPC); ``None`` leaves it to the standard ``OTEL_EXPORTER_OTLP_*``
    variables. ``timeout`` (seconds) bounds each export including its retries; it defaults to
    ``OTEL_EXPORTER_OTLP_TIMEOUT`` or 2 s, so a dead endpoint cannot stall shutdown for long.
    """
    protocol = protocol or otlp_protocol_from_env()
    if timeout is None:
        env_timeout = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") or os.environ.get(
            "OTEL_EXPORTER_OTLP_TIMEOUT"
        )
        timeout = float(env_timeout) if env_timeout else DEFAULT_EXPORT_TIMEOUT_S
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        target = (
            endpoint
            or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            or (os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "http://localhost:4317")
        )
        insecure = not target.startswith("https://")
        grpc_exporter = GrpcExporter(endpoint=target, insecure=insecure, timeout=timeout)
        return grpc_exporter, f"{target} (OTLP/gRPC)"
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    full: str | None = None
    if endpoint is not None:
        full = endpoint.rstrip("/")
        if not full.endswith("/v1/traces"):
            full += "/v1/traces"
    http_exporter = HttpExporter(endpoint=full, timeout=timeout)
    return http_exporter, f"{http_exporter._endpoint} (OTLP/HTTP)"


def setup_tracing(
    exporter: ExporterKind | SpanExporter = "console",
    *,
    service_name: str = "otelhooks",
    otlp_endpoint: str | None = None,
    otlp_protocol: OtlpProtocol | None = None,
    export_timeout: float | None = None,
    redactor: Any = None,
    batch: bool = True,
    batch_options: Mapping[str, int] | None = None,
    processors: Sequence[SpanProcessor] = (),
    console_out: IO[str] | None = None,
    set_global: bool = False,
) -> TracingSetup:
    """Build a :class:`TracerProvider` that exports tool spans.

    ``exporter`` is ``"console"`` (the SDK's console exporter), ``"otlp"``, ``"memory"``,
    ``"none"`` or any SDK ``SpanExporter``. ``service_name`` is used unless ``OTEL_SERVICE_NAME``
    is set. With a ``redactor`` (:class:`otelhooks.builtin.redaction.Redactor`) every span is
    scrubbed before any exporter or extra processor sees it. ``processors`` receive the
    (scrubbed) spans too. ``batch_options`` go to the ``BatchSpanProcessor``
    (see :data:`RECOMMENDED_BATCH`). ``set_global`` installs the provider as the global one unless
    one is already installed, in which case it logs a warning and leaves the global alone.
    """
    attributes: dict[str, Any] = {}
    if not os.environ.get("OTEL_SERVICE_NAME"):
        attributes[SERVICE_NAME] = service_name
    provider = TracerProvider(resource=Resource.create(attributes))
    stats = ExportStats()
    provider.add_span_processor(_EndCounter(stats))

    memory: InMemorySpanExporter | None = None
    inner: SpanExporter | None
    if isinstance(exporter, SpanExporter):
        inner, stats.destination = exporter, type(exporter).__name__
    elif exporter == "console":
        inner = ConsoleSpanExporter(out=console_out or sys.stdout)
        stats.destination = "the console"
    elif exporter == "otlp":
        inner, stats.destination = make_otlp_exporter(otlp_endpoint, otlp_protocol, export_timeout)
    elif exporter == "memory":
        memory = InMemorySpanExporter()
        inner, stats.destination = memory, "memory"
    elif exporter == "none":
        inner, stats.destination = None, "nowhere (exporter none)"
    else:
        raise ValueError(f"unknown exporter {exporter!r}: use console, otlp, memory or none")

    chain: list[SpanProcessor] = list(processors)
    counting = CountingExporter(inner, stats) if inner is not None else None
    if counting is not None:
        if batch and exporter != "memory":
            options = batch_options or {}
            chain.append(
                BatchSpanProcessor(
                    counting,
                    max_queue_size=options.get("max_queue_size"),
                    schedule_delay_millis=options.get("schedule_delay_millis"),
                    max_export_batch_size=options.get("max_export_batch_size"),
                    export_timeout_millis=options.get("export_timeout_millis"),
                )
            )
        else:
            chain.append(SimpleSpanProcessor(counting))
    if redactor is not None and chain:
        from .builtin.span_redaction import RedactingSpanProcessor

        chain = [RedactingSpanProcessor(redactor, *chain)]
    for processor in chain:
        provider.add_span_processor(processor)

    if set_global:
        current = trace.get_tracer_provider()
        if isinstance(current, trace.ProxyTracerProvider):
            trace.set_tracer_provider(provider)
        else:
            logger.warning(
                "a global TracerProvider is already set (%s); otelhooks left it in place",
                type(current).__name__,
            )
    return TracingSetup(provider, stats, counting, memory)
