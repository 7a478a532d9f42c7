"""Tracing set-up: console, OTLP (HTTP or gRPC) or in-memory, configured the standard way, with a
bounded shutdown and every lost span counted.

This is the one module of the package that needs ``opentelemetry-sdk`` (the ``sdk``
extra). It returns the provider instead of hiding it; pass ``setup.provider`` to the
runtime. It sets the global provider only when asked, and never silently replaces one.

Configuration follows the OpenTelemetry SDK's precedence: an explicit argument, else the standard
environment variable, else a default. Honoured: ``OTEL_SDK_DISABLED``, ``OTEL_TRACES_EXPORTER``
(``otlp``, ``console``, ``none``, comma-separated), ``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER[_ARG]``, ``OTEL_BSP_*`` and every
``OTEL_EXPORTER_OTLP_[TRACES_]*`` variable (endpoint, protocol, headers, timeout, compression,
certificates, insecure). An invalid value is warned about and replaced by the default, as the SDK
does; ``http/json`` is refused with a message saying why.

When a global SDK provider already exists (``opentelemetry-instrument`` made one) and no exporter
was asked for explicitly, :func:`setup_tracing` uses it instead of making a second pipeline, and
logs how to scrub spans before its exporter (``OTEL_TRACES_EXPORTER=otelhooks_otlp``, see
:class:`RedactingOTLPSpanExporter`).

The path of a span::

    span end -> EndCounter -> [RedactingSpanProcessor ->] BoundedBatchSpanProcessor
             -> CountingExporter -> console | OTLP | in-memory
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Final, Literal

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

from .environment import (
    DEFAULT_EXPORT_TIMEOUT_S,
    DEFAULT_EXPORTER,
    ConfigurationError,
    OtlpProtocol,
    batch_options_from_env,
    check_protocol,
    export_timeout_from_env,
    exporters_from_env,
    otlp_exporter,
    otlp_protocol_from_env,
    redacting_otlp_in_env,
    sdk_disabled,
)
from .openinference import OpenInferenceExporter, enabled_by_env, with_project

ExporterKind = Literal["console", "otlp", "memory", "none"]

logger = logging.getLogger(__name__)

DEFAULT_SERVICE_NAME: Final = "otelhooks"
SHUTDOWN_BUDGET_S: Final = 3.0  # all of TracingSetup.shutdown() with a dead endpoint
DEFAULT_SHUTDOWN_TIMEOUT_S: Final = 2.5  # the queue's share; metrics and the rest fit in 3 s

# Batch settings that carry a burst of 10,000 tool calls (40,000+ spans) into a reachable
# exporter without a drop, with a logger writing to stdout competing for the GIL, while keeping
# memory bounded when the exporter is down (see benchmarks/): a queue that holds the burst,
# batches large enough to amortise an export, and a worker woken early.
DEFAULT_BATCH: Final[Mapping[str, int]] = {
    "max_queue_size": 65536,
    "schedule_delay_millis": 200,
    "max_export_batch_size": 2048,
}
RECOMMENDED_BATCH = dict(DEFAULT_BATCH)  # the name earlier releases documented


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
        """Spans that never reached the exporter's destination (failed and dropped)."""
        return self.failed + self.dropped

    def summary(self) -> str:
        """One line: how many spans were exported, to where, and how many were lost and why."""
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
    """Wraps an exporter and counts the spans it exported and those it failed to export. The
    first failure is logged once (a warning naming the destination), and so is the first
    success after failures: a long-running process (the MCP proxy) does not lose spans in
    silence."""

    def __init__(self, inner: SpanExporter, stats: ExportStats) -> None:
        self.inner = inner
        self.stats = stats
        self.last_success = float("-inf")  # time.monotonic() of the last successful export
        self.last_failure = float("-inf")  # and of the last failed one
        self.exporting_since: float | None = None  # time.monotonic() an export in flight began
        self._failing = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Export and count the outcome."""
        self.exporting_since = time.monotonic()
        try:
            result = self.inner.export(spans)
        except Exception:  # an exporter must never take the application down
            logger.exception("span exporter raised")
            result = SpanExportResult.FAILURE
        finally:
            self.exporting_since = None
        with self.stats._lock:
            if result is SpanExportResult.SUCCESS:
                self.last_success = time.monotonic()
                self.stats.exported += len(spans)
                recovered, self._failing = self._failing, False
                failed_first = False
            else:
                self.last_failure = time.monotonic()
                self.stats.failed += len(spans)
                self.stats.failed_batches += 1
                failed_first, self._failing = not self._failing, True
                recovered = False
        if failed_first:
            logger.warning(
                "spans are not reaching %s (the export failed); they are counted and dropped "
                "until it answers (is a collector listening there?)",
                self.stats.destination or "the exporter's destination",
            )
        elif recovered:
            logger.warning("spans reach %s again", self.stats.destination)
        return result

    @property
    def failing(self) -> bool:
        """Whether the last export failed."""
        return self._failing

    def shutdown(self) -> None:
        """Shut the inner exporter down."""
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush the inner exporter."""
        return self.inner.force_flush(timeout_millis)


class BoundedBatchSpanProcessor(BatchSpanProcessor):
    """The SDK's batch processor with a bounded shutdown.

    The SDK's waits up to 30 s whatever the endpoint does. This one waits ``shutdown_timeout``
    seconds, and longer only while the exporter keeps succeeding or an export is in flight (a
    live endpoint draining a large queue gets up to ``max_drain`` seconds, an export in flight
    up to ``export_timeout``); it stops at the first export that fails while draining. With an
    endpoint that is down or silent, shutdown returns within about ``shutdown_timeout`` or one
    export timeout, whichever is longer, and what was not sent is dropped and counted as
    dropped by :class:`ExportStats`.

    A full queue pushes back instead of dropping while the exporter is healthy: the span that
    finds the queue full waits (at most ``max_block`` seconds) for the worker to make room, so
    a process that makes spans faster than a live exporter takes them is slowed to its pace
    rather than losing spans. With the exporter failing it never waits. A span still without
    room is dropped (the newest, not the oldest), counted in :class:`ExportStats`, in the SDK's
    ``otel.sdk.processor.span.processed`` metric (``error.type=queue_full``) when a meter
    provider is given, and warned about once per episode instead of once per span.
    """

    def __init__(
        self,
        exporter: CountingExporter,
        *,
        shutdown_timeout: float,
        export_timeout: float = DEFAULT_EXPORT_TIMEOUT_S,
        max_drain: float = 60.0,
        max_block: float = 0.1,
        meter_provider: Any = None,
        **options: Any,
    ) -> None:
        super().__init__(exporter, meter_provider=meter_provider, **options)
        self.counting = exporter
        self.shutdown_timeout = shutdown_timeout
        self.export_timeout = export_timeout
        self.max_drain = max_drain
        self.max_block = max_block
        self._dropping = False
        if meter_provider is not None:  # count drops whatever OTEL_PYTHON_SDK_INTERNAL_... says
            from opentelemetry.sdk._shared_internal._processor_metrics import (
                create_processor_metrics,
            )
            from opentelemetry.semconv._incubating.attributes.otel_attributes import (
                OtelComponentTypeValues,
            )

            batch = self._batch_processor
            batch._metrics = create_processor_metrics(
                "traces",
                OtelComponentTypeValues.BATCHING_SPAN_PROCESSOR,
                meter_provider,
                capacity=batch._max_queue_size,
                enabled=True,
            )

    def on_end(self, span: ReadableSpan) -> None:
        """Queue the span; wait for room while the exporter is healthy (see the class)."""
        if not (span.context and span.context.trace_flags.sampled):
            return
        batch = self._batch_processor
        queue, size = batch._queue, batch._max_queue_size
        if len(queue) >= size and not batch._shutdown:
            if not self.counting.failing:
                batch._worker_awaken.set()
                deadline = time.monotonic() + self.max_block
                while len(queue) >= size and time.monotonic() < deadline:
                    time.sleep(0.0005)
            if len(queue) >= size:
                batch._metrics.drop_items(1)
                if not self._dropping:
                    self._dropping = True
                    logger.warning(
                        "the span queue is full (%d spans) and %s does not take them fast "
                        "enough: spans are dropped and counted until it catches up",
                        size,
                        self.counting.stats.destination or "the exporter",
                    )
                return
        if self._dropping and len(queue) < size // 2:
            self._dropping = False
        batch.emit(span)

    def shutdown(self) -> None:
        """Drain the queue while exports succeed, within the shutdown bound; count what is left as
        dropped."""
        batch = self._batch_processor
        if batch._shutdown:
            return
        started = time.monotonic()
        deadline = started + self.shutdown_timeout
        batch._shutdown = True  # the worker exports what is queued, then stops
        batch._worker_awaken.set()
        while batch._worker_thread.is_alive():
            batch._worker_thread.join(0.05)
            now = time.monotonic()
            if self.counting.last_failure >= started:
                break  # an export failed while draining: the rest would wait out the same
            if now < deadline:
                continue
            counting, since = self.counting, self.counting.exporting_since
            # an export in flight is waited for, for one export timeout
            healthy = (since is not None and now - since < self.export_timeout) or (
                now - counting.last_success < self.shutdown_timeout
            )
            if healthy and now - started < self.max_drain:
                deadline = now + 0.25  # still delivering: keep going
                continue
            break
        batch._shutdown_timeout_exceeded = True  # the worker exports nothing more
        self.counting.shutdown()


@dataclass
class TracingSetup:
    """A configured provider. ``memory`` is set for the in-memory exporter; ``uses_global`` when
    the set-up adopted a provider someone else configured (its exporters are not counted)."""

    provider: TracerProvider
    stats: ExportStats
    exporter: SpanExporter | None
    memory: InMemorySpanExporter | None = None
    uses_global: bool = False
    meter_provider: Any = None  # an SDK MeterProvider when metrics were asked for
    metrics_destination: str = ""

    def shutdown(self) -> ExportStats:
        """Flush and shut down, bounded (see ``shutdown_timeout``); a global provider someone
        else configured is only flushed, not shut down. Metrics are exported one last time."""
        started = time.monotonic()
        if self.uses_global:
            self.provider.force_flush(int(DEFAULT_SHUTDOWN_TIMEOUT_S * 1000))
        else:
            self.provider.shutdown()
        if self.meter_provider is not None:
            left = max(0.2, SHUTDOWN_BUDGET_S - (time.monotonic() - started))
            try:
                self.meter_provider.shutdown(timeout_millis=left * 1000)
            except Exception:  # an exporter that fails at the end costs only its metrics
                logger.debug("metrics shutdown failed", exc_info=True)
        return self.stats

    def force_flush(self, timeout_millis: int = 5000) -> bool:
        """Export what is queued, within ``timeout_millis``."""
        return self.provider.force_flush(timeout_millis)


def make_resource(
    service_name: str | None,
    attributes: Mapping[str, Any] | None = None,
    default_service_name: str = DEFAULT_SERVICE_NAME,
) -> Resource:
    """The resource: ``service_name`` if given, else ``OTEL_SERVICE_NAME`` or ``service.name`` of
    ``OTEL_RESOURCE_ATTRIBUTES``, else ``default_service_name``; other attributes from the
    variable too."""
    given: dict[str, Any] = dict(attributes or {})
    if service_name is not None:
        given[SERVICE_NAME] = service_name
    resource = Resource.create(given)
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: default_service_name}))
    return resource


def make_otlp_exporter(
    endpoint: str | Sequence[str] | None = None,
    protocol: OtlpProtocol | str | None = None,
    timeout: float | None = None,
) -> tuple[SpanExporter, str]:
    """An OTLP span exporter and the address it sends to.

    ``endpoint`` is the collector's base address (``http://localhost:4318`` for HTTP,
    ``http://localhost:4317`` for gRPC); ``None`` leaves it, with headers, compression and
    certificates, to the standard ``OTEL_EXPORTER_OTLP_*`` variables. ``timeout`` (seconds)
    bounds each export including its retries; default ``OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT`` or
    2 s, so a dead endpoint cannot stall shutdown for long. A sequence of endpoints (the
    gateways of a fleet) gives a :class:`~otelhooks.telemetry.failover.FailoverSpanExporter`
    that sends each batch to the first that accepts it.
    """
    if endpoint is None or isinstance(endpoint, str):
        return otlp_exporter("traces", endpoint, protocol, timeout)
    if not endpoint:
        raise ConfigurationError("otlp_endpoint: an empty list of endpoints")
    from .failover import FailoverSpanExporter

    made = [otlp_exporter("traces", one, protocol, timeout) for one in endpoint]
    names = [where for _, where in made]
    failover = FailoverSpanExporter([exporter for exporter, _ in made], names)
    return failover, " or ".join(names)


class RedactingOTLPSpanExporter(SpanExporter):
    """The OTLP exporter (protocol from the standard variables) with the default
    :class:`~otelhooks.builtin.redaction.Redactor` scrubbing every span first.

    Registered as the ``otelhooks_otlp`` traces exporter, so a pipeline that someone else
    configures from the environment scrubs spans too::

        OTEL_TRACES_EXPORTER=otelhooks_otlp opentelemetry-instrument python my_agent.py
    """

    def __init__(self, inner: SpanExporter | None = None, redactor: Any = None) -> None:
        from ..builtin.redaction import default_redactor
        from ..builtin.span_redaction import scrub_span

        self.inner = inner if inner is not None else make_otlp_exporter()[0]
        self.redactor = redactor if redactor is not None else default_redactor()
        self._scrub = scrub_span

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Scrub the spans, then export them over OTLP."""
        scrubbed = []
        for span in spans:
            try:
                scrubbed.append(self._scrub(self.redactor, span))
            except Exception:  # never let a secret through because scrubbing failed
                logger.exception("span scrubbing failed; the span was dropped")
        return self.inner.export(scrubbed) if scrubbed else SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Shut the OTLP exporter down."""
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush the OTLP exporter."""
        return self.inner.force_flush(timeout_millis)


GLOBAL_PROVIDER_ADVICE: Final = (
    "a global TracerProvider is already configured (opentelemetry-instrument?); otelhooks uses "
    "it. Its exporter is not behind otelhooks' redactor: to scrub spans before they leave, set "
    "OTEL_TRACES_EXPORTER=otelhooks_otlp (the OTLP exporter with redaction) for that pipeline"
)


def _global_sdk_provider() -> TracerProvider | None:
    current = trace.get_tracer_provider()
    return current if isinstance(current, TracerProvider) else None


def setup_tracing(
    exporter: ExporterKind | str | SpanExporter | None = None,
    *,
    service_name: str | None = None,
    default_service_name: str = DEFAULT_SERVICE_NAME,
    resource_attributes: Mapping[str, Any] | None = None,
    otlp_endpoint: str | Sequence[str] | None = None,
    otlp_protocol: OtlpProtocol | str | None = None,
    export_timeout: float | None = None,
    redactor: Any = True,
    batch: bool = True,
    batch_options: Mapping[str, int] | None = None,
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT_S,
    processors: Sequence[SpanProcessor] = (),
    console_out: IO[str] | None = None,
    set_global: bool = False,
    use_global: bool = True,
    metrics: str | Any = None,
    openinference: bool | None = None,
) -> TracingSetup:
    """Build a :class:`TracerProvider` that exports tool spans.

    ``exporter`` is ``"console"`` (the SDK's console exporter), ``"otlp"``, ``"memory"``,
    ``"none"`` or any SDK ``SpanExporter``; ``None`` means ``OTEL_TRACES_EXPORTER``, else
    console. ``service_name`` wins over ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES``,
    which win over ``default_service_name`` (``otelhooks``). Every span is scrubbed before any
    exporter or extra processor sees it, by ``redactor`` (a
    :class:`otelhooks.builtin.redaction.Redactor`; by default the default one; ``False`` turns
    redaction off, as asked). ``processors`` receive the (scrubbed) spans too.
    ``batch_options`` go to the batch processor (default :data:`DEFAULT_BATCH`, under any
    ``OTEL_BSP_*`` variable); ``shutdown_timeout`` bounds :meth:`TracingSetup.shutdown`.
    ``metrics`` (``"console"``, ``"otlp"``, ``"none"`` or an SDK ``MetricExporter``; default
    ``OTEL_METRICS_EXPORTER``, else none) adds a meter provider, ``setup.meter_provider``, with
    the same resource and OTLP endpoint; with ``set_global`` it becomes the global one too.
    ``openinference`` (default: ``OTELHOOKS_OPENINFERENCE``) makes the OTLP exporter send what
    an OpenInference viewer such as Arize Phoenix reads (see
    :mod:`otelhooks.telemetry.openinference`; ``otelhooks ui`` starts one).

    With ``OTEL_SDK_DISABLED=true`` the provider records nothing. When ``use_global`` and a
    global SDK provider exists and no exporter was asked for, that provider is used (see the
    module's documentation). ``set_global`` installs the new provider as the global one unless
    one is already installed, in which case it logs a warning and leaves the global alone.
    """
    from ..builtin.redaction import resolve

    redactor = resolve(redactor)
    stats = ExportStats()
    existing = _global_sdk_provider() if use_global and exporter is None else None
    if existing is not None:
        if not redacting_otlp_in_env():  # its pipeline exports through the redactor already
            logger.warning(GLOBAL_PROVIDER_ADVICE)
        stats.destination = "the global TracerProvider's exporters (not counted here)"
        chain = list(processors)
        if redactor is not None and chain:
            from ..builtin.span_redaction import RedactingSpanProcessor

            chain = [RedactingSpanProcessor(redactor, *chain)]
        for processor in chain:
            existing.add_span_processor(processor)
        return TracingSetup(existing, stats, None, uses_global=True)

    kinds: list[Any] = [exporter] if exporter is not None else (exporters_from_env() or [])
    if not kinds:
        kinds = [DEFAULT_EXPORTER]
    resource = make_resource(service_name, resource_attributes, default_service_name)
    if "otlp" in kinds:  # an OpenInference viewer files the traces under the service's name
        resource = with_project(resource)
    provider = TracerProvider(resource=resource)
    if sdk_disabled():
        stats.destination = "nowhere (OTEL_SDK_DISABLED=true)"
        return TracingSetup(provider, stats, None)
    provider.add_span_processor(_EndCounter(stats))

    memory: InMemorySpanExporter | None = None
    inners: list[SpanExporter] = []
    destinations: list[str] = []
    for kind in kinds:
        if isinstance(kind, SpanExporter):
            inners.append(kind)
            destinations.append(type(kind).__name__)
        elif kind == "console":
            inners.append(ConsoleSpanExporter(out=console_out or sys.stdout))
            destinations.append("the console")
        elif kind == "otlp":
            otlp, where = make_otlp_exporter(otlp_endpoint, otlp_protocol, export_timeout)
            if openinference or (openinference is None and enabled_by_env()):
                otlp, where = OpenInferenceExporter(otlp), f"{where}, for an OpenInference viewer"
            inners.append(otlp)
            destinations.append(where)
        elif kind == "memory":
            memory = InMemorySpanExporter()
            inners.append(memory)
            destinations.append("memory")
        elif kind == "none":
            destinations.append("nowhere (exporter none)")
        else:
            raise ConfigurationError(
                f"unknown exporter {kind!r}: use console, otlp, memory, none or a SpanExporter"
            )
    stats.destination = " and ".join(destinations)

    meter_provider, metrics_where = _meter_provider(
        metrics,
        resource,
        otlp_endpoint
        if otlp_endpoint is None or isinstance(otlp_endpoint, str)
        else otlp_endpoint[0],
        otlp_protocol,
        export_timeout,
        console_out,
    )
    options = batch_options_from_env(DEFAULT_BATCH)
    options.update(batch_options or {})
    options["max_export_batch_size"] = min(
        options["max_export_batch_size"], options["max_queue_size"]
    )
    chain = list(processors)
    counting: CountingExporter | None = None
    for i, inner in enumerate(inners):
        wrapped = CountingExporter(inner, stats if i == 0 else ExportStats())  # count the first
        counting = counting or wrapped
        if batch and inner is not memory:
            chain.append(
                BoundedBatchSpanProcessor(
                    wrapped,
                    shutdown_timeout=shutdown_timeout,
                    export_timeout=export_timeout_from_env()
                    if export_timeout is None
                    else export_timeout,
                    meter_provider=meter_provider,
                    **options,
                )
            )
        else:
            chain.append(SimpleSpanProcessor(wrapped))
    if redactor is not None and chain:
        from ..builtin.span_redaction import RedactingSpanProcessor

        chain = [RedactingSpanProcessor(redactor, *chain)]
    for processor in chain:
        provider.add_span_processor(processor)

    if set_global and meter_provider is not None:
        from opentelemetry import metrics as metrics_api

        metrics_api.set_meter_provider(meter_provider)
    if set_global:
        current = trace.get_tracer_provider()
        if isinstance(current, trace.ProxyTracerProvider):
            trace.set_tracer_provider(provider)
        else:
            logger.warning(
                "a global TracerProvider is already set (%s); otelhooks left it in place",
                type(current).__name__,
            )
    return TracingSetup(
        provider,
        stats,
        counting,
        memory,
        meter_provider=meter_provider,
        metrics_destination=metrics_where,
    )


def _meter_provider(
    kind: Any,
    resource: Resource,
    endpoint: str | None,
    protocol: OtlpProtocol | str | None,
    timeout: float | None,
    console_out: IO[str] | None,
) -> tuple[Any, str]:
    """The meter provider ``setup_tracing(metrics=...)`` asked for, or ``(None, "")``."""
    from .meters import make_meter_provider, metrics_kind_from_env

    chosen = kind if kind is not None else metrics_kind_from_env()
    if chosen is None or chosen == "none":
        return None, ""
    proto = check_protocol(protocol) if protocol is not None else otlp_protocol_from_env()
    return make_meter_provider(
        chosen,
        resource,
        endpoint=endpoint,
        protocol=proto,
        timeout=timeout if timeout is not None else export_timeout_from_env(),
        console_out=console_out or sys.stdout,
    )
