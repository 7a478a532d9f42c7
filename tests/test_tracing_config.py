"""setup_tracing honours the standard OTEL_* variables with the SDK's precedence (explicit argument
> environment > default), warns about invalid values, refuses what it cannot honour clearly, and
adopts a provider configured elsewhere."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import time

import pytest
from opentelemetry.sdk.trace.export import ConsoleSpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otelhooks.telemetry.environment import ConfigurationError
from otelhooks.telemetry.tracing import (
    BoundedBatchSpanProcessor,
    make_otlp_exporter,
    setup_tracing,
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)


def service_of(setup: object) -> object:
    return setup.provider.resource.attributes.get("service.name")  # type: ignore[attr-defined]


def processors_of(setup: object) -> list[object]:
    """The provider's span processors, those behind the redacting one included."""
    provider = setup.provider  # type: ignore[attr-defined]
    found = []
    for processor in provider._active_span_processor._span_processors:
        found.append(processor)
        found.extend(getattr(processor, "downstream", ()))
    return found


def exporters_of(setup: object) -> list[object]:
    found = []
    for processor in processors_of(setup):
        inner = getattr(processor, "span_exporter", None) or getattr(processor, "_exporter", None)
        if inner is not None:
            found.append(getattr(inner, "inner", inner))
    return found


@pytest.mark.parametrize(
    ("env", "explicit", "expected"),
    [
        ({}, None, "otelhooks"),
        ({"OTEL_SERVICE_NAME": "from-env"}, None, "from-env"),
        ({"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attrs,team=a"}, None, "from-attrs"),
        (
            {"OTEL_SERVICE_NAME": "env-wins", "OTEL_RESOURCE_ATTRIBUTES": "service.name=x"},
            None,
            "env-wins",
        ),
        ({"OTEL_SERVICE_NAME": "from-env"}, "explicit", "explicit"),
    ],
)
def test_service_name_precedence(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], explicit: str | None, expected: str
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    setup = setup_tracing("none", service_name=explicit)
    assert service_of(setup) == expected
    if "team=a" in env.get("OTEL_RESOURCE_ATTRIBUTES", ""):
        assert setup.provider.resource.attributes["team"] == "a"


@pytest.mark.parametrize(
    ("value", "kinds"),
    [
        ("console", [ConsoleSpanExporter]),
        ("none", []),
        ("otlp", ["OTLPSpanExporter"]),
        ("console,otlp", [ConsoleSpanExporter, "OTLPSpanExporter"]),
    ],
)
def test_traces_exporter_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str, kinds: list[object]
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", value)
    setup = setup_tracing()
    found = exporters_of(setup)
    assert [
        type(e) if not isinstance(k, str) else type(e).__name__
        for e, k in zip(found, kinds, strict=True)
    ] == kinds
    setup.shutdown()


def test_explicit_exporter_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    setup = setup_tracing("memory")
    assert [type(e) for e in exporters_of(setup)] == [InMemorySpanExporter]


def test_unknown_exporter_name_is_warned_about(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    with caplog.at_level(logging.WARNING, logger="otelhooks.telemetry.tracing"):
        setup = setup_tracing()
    assert "unknown exporter 'zipkin'" in caplog.text
    assert [type(e) for e in exporters_of(setup)] == [ConsoleSpanExporter]


def test_http_json_is_refused_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match="'http/json' is not supported"):
        setup_tracing("otlp", otlp_protocol="http/json")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    with pytest.raises(ConfigurationError, match="use http/protobuf"):
        setup_tracing("otlp")


def test_protocol_endpoint_and_timeout_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "7")
    exporter, where = make_otlp_exporter()
    assert where == "http://collector:4317 (OTLP/gRPC)"
    assert exporter._timeout == 7  # type: ignore[attr-defined]  # the gRPC exporter's own
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=otel")
    exporter, where = make_otlp_exporter()
    assert where == "http://collector:4317/v1/traces (OTLP/HTTP)"
    assert exporter._client._headers["x-team"] == "otel"  # type: ignore[attr-defined]
    assert exporter._client._timeout == 7  # type: ignore[attr-defined]


def test_invalid_timeout_is_warned_about_and_the_default_used(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "soon")
    with caplog.at_level(logging.WARNING, logger="otelhooks.telemetry.tracing"):
        exporter, _ = make_otlp_exporter("http://127.0.0.1:9")
    assert "invalid OTLP export timeout 'soon'" in caplog.text
    assert exporter._client._timeout == 2.0  # type: ignore[attr-defined]


def test_batch_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "1234")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "bogus")
    setup = setup_tracing("otlp", otlp_endpoint="http://127.0.0.1:9")
    (batch,) = [p for p in processors_of(setup) if isinstance(p, BoundedBatchSpanProcessor)]
    assert batch._batch_processor._max_queue_size == 1234
    assert batch._batch_processor._max_export_batch_size == 1234  # kept within the queue
    assert batch._batch_processor._schedule_delay_millis == 200  # the invalid one was ignored
    setup.shutdown()


def test_sdk_disabled_records_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    setup = setup_tracing("memory")
    with setup.provider.get_tracer("t").start_as_current_span("s") as span:
        assert not span.is_recording()
    assert setup.stats.ended == 0
    assert "OTEL_SDK_DISABLED" in setup.stats.destination


def test_shutdown_is_bounded_with_a_full_queue_and_a_dead_endpoint() -> None:
    setup = setup_tracing("otlp", otlp_endpoint="http://10.255.255.1:4318", export_timeout=1.0)
    tracer = setup.provider.get_tracer("t")
    for _ in range(20_000):
        tracer.start_span("s").end()
    started = time.monotonic()
    stats = setup.shutdown()
    assert time.monotonic() - started < 15  # about 1 s (one 1 s export timeout); SDK: 30 s+
    assert stats.ended == 20_000 and stats.exported == 0
    assert stats.failed + stats.dropped == 20_000  # lost, and every one of them counted


def test_a_global_provider_made_elsewhere_is_adopted_with_advice() -> None:
    # A fresh interpreter: the global provider can be set once per process.
    code = textwrap.dedent(
        """
        import logging
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from otelhooks.telemetry.tracing import setup_tracing

        logging.basicConfig(level=logging.WARNING)
        theirs = TracerProvider()
        seen = InMemorySpanExporter()
        theirs.add_span_processor(SimpleSpanProcessor(seen))
        trace.set_tracer_provider(theirs)
        mine = InMemorySpanExporter()
        setup = setup_tracing(processors=[SimpleSpanProcessor(mine)])
        assert setup.provider is theirs and setup.uses_global
        setup.provider.get_tracer("t").start_span("x").end()
        assert [s.name for s in seen.get_finished_spans()] == ["x"]
        assert [s.name for s in mine.get_finished_spans()] == ["x"]
        explicit = setup_tracing("memory")
        assert explicit.provider is not theirs  # asked for explicitly: its own provider
        print("ok")
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert "OTEL_TRACES_EXPORTER=otelhooks_otlp" in done.stderr


def test_a_burst_of_10000_calls_with_a_stdout_logger_loses_no_span() -> None:
    root = __import__("pathlib").Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.burst_child", "otelhooks-defaults", "10000"],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    stats = __import__("json").loads(done.stderr.strip().splitlines()[-1])
    assert stats["ended"] == 40_000 and stats["exported"] == 40_000 and stats["dropped"] == 0


def test_setup_tracing_adds_a_meter_provider_for_metrics() -> None:
    import asyncio
    import io

    from otelhooks import ToolCall, ToolExecutor, ToolRegistry
    from otelhooks.telemetry.tracing import setup_tracing

    out = io.StringIO()
    setup = setup_tracing("memory", metrics="console", console_out=out)
    assert setup.meter_provider is not None and setup.metrics_destination == "the console"
    registry = ToolRegistry()
    registry.register(lambda text: text, name="echo")
    executor = ToolExecutor(
        registry, tracer_provider=setup.provider, meter_provider=setup.meter_provider
    )
    asyncio.run(executor.execute(ToolCall("1", "echo", {"text": "hi"})))
    setup.shutdown()
    exported = out.getvalue()
    assert '"otelhooks.tool.calls"' in exported and '"otelhooks.tool.outcome": "allow"' in exported
    assert setup_tracing("memory").meter_provider is None  # no metrics unless asked for
