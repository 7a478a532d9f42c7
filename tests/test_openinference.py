"""OpenInference attributes for a viewer such as Arize Phoenix: added on copies at export, from the
spans the real demo agents make."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otelhooks.builtin import Redactor
from otelhooks.cli.demo_cases import BLOCK_REASON, DEMO_CASES, FAKE_API_KEY, demo_agent
from otelhooks.cli.transcript import Transcript
from otelhooks.telemetry.attributes import CAPTURE_CONTENT_ENV
from otelhooks.telemetry.openinference import (
    INPUT_VALUE,
    METADATA,
    OUTPUT_VALUE,
    PROJECT,
    SPAN_KIND,
    OpenInferenceExporter,
    openinference_attributes,
)
from otelhooks.telemetry.tracing import setup_tracing


async def run_case(name: str) -> tuple[list[Any], list[Any]]:
    """The spans of a demo case: as an OpenInference viewer gets them, and as every other
    exporter on the same provider gets them."""
    viewer, plain = InMemorySpanExporter(), InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "oi-test"}))
    provider.add_span_processor(SimpleSpanProcessor(OpenInferenceExporter(viewer)))
    provider.add_span_processor(SimpleSpanProcessor(plain))
    agent = demo_agent(
        DEMO_CASES[name],
        Transcript(io.StringIO()),
        redactor=Redactor(),
        tracer_provider=provider,
    )
    await agent.run(DEMO_CASES[name].prompt)
    provider.shutdown()
    return list(viewer.get_finished_spans()), list(plain.get_finished_spans())


def by_name(spans: list[Any]) -> dict[str, Any]:
    return {span.name: span for span in spans}


async def test_each_span_gets_its_kind_and_the_service_is_the_project() -> None:
    seen, plain = await run_case("allowed")
    kinds = {span.name: span.attributes[SPAN_KIND] for span in seen}
    assert kinds == {
        "invoke_agent demo-allowed": "AGENT",
        "chat scripted": "LLM",
        "execute_tool echo": "TOOL",
        "before": "GUARDRAIL",
        "run": "CHAIN",
        "after": "GUARDRAIL",
    }
    assert {span.resource.attributes[PROJECT] for span in seen} == {"oi-test"}
    # the other exporters get the spans as they were made
    assert all(SPAN_KIND not in (span.attributes or {}) for span in plain)
    assert all(PROJECT not in span.resource.attributes for span in plain)
    # ... and the GenAI attributes reach the viewer unchanged
    for mine, theirs in zip(seen, plain, strict=True):
        assert {k: v for k, v in mine.attributes.items() if k in theirs.attributes} == dict(
            theirs.attributes
        )


async def test_a_blocked_call_shows_the_decision_the_hook_and_the_reason() -> None:
    seen, _ = await run_case("blocked")
    spans = by_name(seen)
    tool = spans["execute_tool dangerous"]
    meta = json.loads(tool.attributes[METADATA])
    assert meta["decision"] == "block"
    assert meta["block_reason"] == BLOCK_REASON
    assert meta["decided_by"]
    assert tool.attributes["tool.name"] == "dangerous"
    assert "run" not in spans  # the handler never ran
    before = json.loads(spans["before"].attributes[METADATA])
    assert {"hook": meta["decided_by"], "decision": "block"} in before["hooks"]


async def test_content_only_when_captured_and_redacted_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    seen, _ = await run_case("redaction")
    assert all(
        INPUT_VALUE not in span.attributes and OUTPUT_VALUE not in span.attributes
        for span in seen
        if span.attributes.get(SPAN_KIND) == "TOOL"
    )
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "SPAN_ONLY")
    seen, _ = await run_case("redaction")
    tool = by_name(seen)["execute_tool environment"]
    assert "[REDACTED:openai_api_key]" in tool.attributes[OUTPUT_VALUE]
    assert tool.attributes[INPUT_VALUE] == "{}"
    assert FAKE_API_KEY not in repr([dict(span.attributes) for span in seen])


def test_spans_that_are_not_otelhooks_pass_through() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "x", PROJECT: "chosen"}))
    wrapped = OpenInferenceExporter(exporter)
    provider.add_span_processor(SimpleSpanProcessor(wrapped))
    with provider.get_tracer("other").start_as_current_span("GET /", attributes={"a": 1}):
        pass
    provider.shutdown()
    (span,) = exporter.get_finished_spans()
    assert openinference_attributes(span) == {}
    assert dict(span.attributes or {}) == {"a": 1}
    assert span.resource.attributes[PROJECT] == "chosen"  # a project set by the user stays


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_setup_tracing_sends_it_on_request(how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if how == "environment":
        monkeypatch.setenv("OTELHOOKS_OPENINFERENCE", "true")
    setup = setup_tracing(
        "otlp",
        otlp_endpoint="http://127.0.0.1:9",
        export_timeout=0.2,
        openinference=True if how == "argument" else None,
        use_global=False,
    )
    setup.shutdown()
    assert "for an OpenInference viewer" in setup.stats.summary()
    plain = setup_tracing("otlp", otlp_endpoint="http://127.0.0.1:9", use_global=False)
    plain.shutdown()
    assert ("OpenInference" in plain.stats.summary()) is (how == "environment")


def test_an_unadapted_span_is_the_same_object() -> None:
    exporter = InMemorySpanExporter()
    wrapped = OpenInferenceExporter(exporter)
    span = ReadableSpan(name="x", resource=Resource({}))
    wrapped.export([span])
    assert exporter.get_finished_spans()[0] is span
