"""What docs/scaling-out.md says a fault does to a trace's sampling decision, on the pinned Jaeger
with the fleet ingesters' own tail-sampling policies: a trace is decided once its wait ends, from
the spans held then, and a span arriving later follows that decision. A failing trace whose error
span arrives after the decision is dropped whole; one whose error span came first is kept whole."""

from __future__ import annotations

import json
import time
import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode, Tracer

from .jaeger_support import CONFIG_DIR, Collector, http_get, require_jaeger, run_collector

pytestmark = pytest.mark.jaeger

WAIT = 1  # s, the decision wait of this test's sampler
LATE = 5  # s between a trace's two parts: well past the wait and the sampler's next tick


def sampling_config(folder: Path) -> Path:
    """jaeger.yaml with the ingesters' tail sampler (their policies; the wait shortened, the
    ordinary traces sampled at 0 %) in front of the in-memory store."""
    config = yaml.safe_load((CONFIG_DIR / "jaeger.yaml").read_text())
    ingester = yaml.safe_load((CONFIG_DIR / "fleet" / "ingester.yaml").read_text())
    sampler = ingester["processors"]["tail_sampling"]
    sampler["decision_wait"] = f"{WAIT}s"
    for policy in sampler["policies"]:
        if policy["type"] == "probabilistic":
            policy["probabilistic"]["sampling_percentage"] = 0
    config["processors"]["tail_sampling"] = sampler
    config["service"]["pipelines"]["traces"]["processors"] = ["tail_sampling"]
    path = folder / "tail-sampling.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def sampler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    folder = tmp_path_factory.mktemp("tail-sampling")
    with run_collector(require_jaeger(), sampling_config(folder), folder) as collector:
        yield collector


def stored(collector: Collector, trace_id: str) -> list[str]:
    """The names of the spans Jaeger holds for ``trace_id``."""
    try:
        body = json.loads(http_get(f"{collector.query}/api/traces/{trace_id}"))
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return []
        raise
    data: list[dict[str, Any]] = body.get("data") or []
    return sorted(span["operationName"] for trace in data for span in trace["spans"])


def failing_trace(tracer: Tracer, error_first: bool, pause: float) -> str:
    """A failing agent trace sent in two parts ``pause`` s apart (each span is exported as it
    ends): an ordinary ``chat`` span and an ``execute_tool`` span in error, in either order,
    then the root. Returns its trace ID."""
    with tracer.start_as_current_span("invoke_agent") as root:
        for name in ("execute_tool", "chat") if error_first else ("chat", "execute_tool"):
            with tracer.start_as_current_span(name) as span:
                if name == "execute_tool":
                    span.set_attribute("error.type", "tool_error")
                    span.set_status(Status(StatusCode.ERROR, "backend unavailable"))
            if name != ("chat" if error_first else "execute_tool"):
                time.sleep(pause)
        return format(root.get_span_context().trace_id, "032x")


def test_a_span_after_the_decision_follows_it(sampler: Collector) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "tail-sampling"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(sampler.otlp_grpc)))
    tracer = provider.get_tracer("test")
    try:
        whole = failing_trace(tracer, error_first=False, pause=0)
        error_first = failing_trace(tracer, error_first=True, pause=LATE)
        cut = failing_trace(tracer, error_first=False, pause=LATE)
    finally:
        provider.shutdown()
    every = ["chat", "execute_tool", "invoke_agent"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (
        stored(sampler, whole) == every and stored(sampler, error_first) == every
    ):
        time.sleep(0.5)
    assert stored(sampler, whole) == every  # the error within the wait: kept
    assert stored(sampler, error_first) == every  # decided on the error; the late spans follow
    time.sleep(2 * WAIT + 1)  # the cut trace's late part has been decided on as well
    assert stored(sampler, cut) == []  # decided on `chat` alone: dropped, and its error with it
