"""A full span queue pushes back while the exporter is healthy and drops (counted in
ExportStats and in the SDK's processor metric, warned once) when it is failing."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from otelhooks.telemetry.tracing import BoundedBatchSpanProcessor, CountingExporter, ExportStats


class Slow(SpanExporter):
    """Takes a batch in 2 ms (succeeding) or refuses it (failing)."""

    def __init__(self, succeed: bool = True) -> None:
        self.succeed = succeed
        self.received = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        time.sleep(0.002)
        if not self.succeed:
            return SpanExportResult.FAILURE
        self.received += len(spans)
        return SpanExportResult.SUCCESS


OPTIONS = {"max_queue_size": 64, "max_export_batch_size": 32, "schedule_delay_millis": 50}


def _burst(processor: object, n: int) -> None:
    provider = TracerProvider()
    provider.add_span_processor(processor)  # type: ignore[arg-type]
    tracer = provider.get_tracer("test")
    for i in range(n):
        with tracer.start_as_current_span(f"s{i}"):
            pass
    provider.shutdown()


def test_a_healthy_exporter_slower_than_the_loop_loses_nothing() -> None:
    exporter, stats = Slow(), ExportStats()
    processor = BoundedBatchSpanProcessor(
        CountingExporter(exporter, stats), shutdown_timeout=5, **OPTIONS
    )
    stats.ended = 3000
    _burst(processor, 3000)
    assert exporter.received == 3000
    assert stats.dropped == 0


def test_the_sdk_processor_alone_drops_under_the_same_load() -> None:
    exporter = Slow()
    _burst(BatchSpanProcessor(exporter, **OPTIONS), 3000)  # the baseline this class fixes
    assert exporter.received < 3000


class Stuck(SpanExporter):
    """Fails at once the first time; after that each export fails only once ``release`` is set,
    so the queue cannot drain while a burst runs (one full-queue episode, whatever the load)."""

    def __init__(self) -> None:
        self.calls = 0
        self.release = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        if self.calls > 1:
            self.release.wait(60)
        return SpanExportResult.FAILURE


def test_a_failing_exporter_never_holds_the_caller_and_drops_are_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    stats = ExportStats()
    exporter = Stuck()
    processor = BoundedBatchSpanProcessor(
        CountingExporter(exporter, stats),
        shutdown_timeout=0.5,
        max_block=3600,  # a caller that waited for room at all would wait an hour
        meter_provider=meters,
        **OPTIONS,
    )
    processor.counting.export([])  # the exporter has failed once: no waiting from now on
    burst = threading.Thread(target=_burst, args=(processor, 2000), daemon=True)
    try:
        with caplog.at_level(logging.WARNING, logger="otelhooks.telemetry.tracing"):
            burst.start()
            burst.join(120)  # about 0.1 s when nothing waits
            assert not burst.is_alive(), "a span waited for room behind a failing exporter"
    finally:
        exporter.release.set()
    full = [r for r in caplog.records if "span queue is full" in r.getMessage()]
    assert len(full) == 1  # one episode: the queue never drained while the burst ran
    data = reader.get_metrics_data()
    points = [
        p
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "otel.sdk.processor.span.processed"
        for p in m.data.data_points
        if p.attributes.get("error.type") == "queue_full"
    ]
    assert points and sum(p.value for p in points) > 0


class Answering(SpanExporter):
    """Answers each export after ``delay`` seconds, or once ``release`` is set when it has no
    delay (an endpoint that hangs)."""

    def __init__(self, delay: float | None) -> None:
        self.delay = delay
        self.release = threading.Event()
        self.received = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.delay is None:
            self.release.wait(60)
            return SpanExportResult.FAILURE
        time.sleep(self.delay)
        self.received += len(spans)
        return SpanExportResult.SUCCESS


def test_an_export_in_flight_at_shutdown_is_waited_for_within_its_timeout() -> None:
    # A live endpoint slower to answer than the shutdown bound (a viewer on a loaded machine):
    # the export under way is not cut off, so nothing is lost.
    exporter, stats = Answering(delay=1.0), ExportStats()
    processor = BoundedBatchSpanProcessor(
        CountingExporter(exporter, stats), shutdown_timeout=0.1, export_timeout=30, **OPTIONS
    )
    stats.ended = 20
    _burst(processor, 20)
    assert exporter.received == 20
    assert (stats.exported, stats.dropped) == (20, 0)


def test_a_hung_export_holds_shutdown_one_export_timeout_and_its_spans_are_counted() -> None:
    exporter, stats = Answering(delay=None), ExportStats()
    processor = BoundedBatchSpanProcessor(
        CountingExporter(exporter, stats), shutdown_timeout=0.1, export_timeout=0.5, **OPTIONS
    )
    stats.ended = 20
    closing = threading.Thread(target=_burst, args=(processor, 20), daemon=True)
    try:
        closing.start()
        closing.join(30)  # the endpoint hangs for 60 s: shutdown must not wait for it
        assert not closing.is_alive(), "shutdown waited for a hung export past its timeout"
    finally:
        exporter.release.set()
    assert exporter.received == 0 and stats.exported == 0
    assert stats.lost == 20
