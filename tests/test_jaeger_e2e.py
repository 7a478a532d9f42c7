"""End to end against a real Jaeger (and the gateway config run by the same binary)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from otelhooks.cli.demo_cases import BLOCK_REASON, FAKE_API_KEY

from .jaeger_support import (
    CONFIG_DIR,
    Collector,
    _pinned_version,
    children,
    event_names,
    parent_id,
    require_jaeger,
    run_collector,
    span_named,
    tags,
)

pytestmark = pytest.mark.jaeger


def run_demo(
    endpoint: str, protocol: str, service: str, *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OTEL_SERVICE_NAME": service}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "otelhooks",
            "demo",
            "--exporter",
            "otlp",
            "--otlp-endpoint",
            endpoint,
            "--otlp-protocol",
            protocol,
            "--no-tree",
            *args,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )


def trace_with(traces: list[dict[str, Any]], root_name: str) -> dict[str, Any]:
    for trace in traces:
        if any(s["operationName"] == root_name for s in trace["spans"]):
            return trace
    raise AssertionError(f"no trace has a span {root_name!r}")


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_demo_traces_arrive_in_jaeger(jaeger: Collector, protocol: str) -> None:
    service = f"otelhooks-e2e-{uuid.uuid4().hex[:8]}"
    endpoint = jaeger.otlp_http if protocol == "http/protobuf" else jaeger.otlp_grpc
    done = run_demo(endpoint, protocol, service)
    assert "traces: ok:" in done.stderr
    traces = jaeger.wait_for_traces(service, 4)

    allowed = trace_with(traces, "invoke_agent demo-allowed")
    agent = span_named(allowed, "invoke_agent demo-allowed")
    tool = span_named(allowed, "execute_tool echo")
    assert parent_id(tool) == agent["spanID"]
    assert [c["operationName"] for c in children(allowed, tool)] == ["before", "run", "after"]
    tool_tags = tags(tool)
    assert tool_tags["gen_ai.operation.name"] == "execute_tool"
    assert tool_tags["gen_ai.tool.name"] == "echo"
    assert tool_tags["gen_ai.tool.call.id"] == "call_1"
    assert tool_tags["otelhooks.decision"] == "allow"
    assert "tool_call.completed" in event_names(tool)  # the mirrored structlog event
    chat = [s for s in allowed["spans"] if s["operationName"] == "chat scripted"]
    assert len(chat) == 2 and all(parent_id(s) == agent["spanID"] for s in chat)

    blocked = trace_with(traces, "invoke_agent demo-blocked")
    tool = span_named(blocked, "execute_tool dangerous")
    assert [c["operationName"] for c in children(blocked, tool)] == ["before"]
    blocked_tags = tags(tool)
    assert blocked_tags["otelhooks.decision"] == "block"
    assert blocked_tags["otelhooks.block.reason"] == BLOCK_REASON
    assert blocked_tags["otelhooks.decision.hook"] == "seed_hooks"
    assert "tool_call.blocked" in event_names(tool)

    parallel = trace_with(traces, "invoke_agent demo-parallel")
    runs = [s for s in parallel["spans"] if s["operationName"] == "run"]
    assert len(runs) == 3

    stored = json.dumps(traces)
    assert FAKE_API_KEY not in stored
    assert "[REDACTED:openai_api_key]" not in stored  # content capture is off: no result at all
    redaction = trace_with(traces, "invoke_agent demo-redaction")
    tool = span_named(redaction, "execute_tool environment")  # the executor's scrubber
    assert tags(tool)["otelhooks.redacted.paths"] is not None


def test_captured_content_is_scrubbed_before_it_reaches_jaeger(jaeger: Collector) -> None:
    service = f"otelhooks-e2e-content-{uuid.uuid4().hex[:8]}"
    env_flag = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
    os.environ[env_flag] = "true"
    try:
        run_demo(jaeger.otlp_http, "http/protobuf", service, "--case", "redaction")
    finally:
        del os.environ[env_flag]
    (trace,) = jaeger.wait_for_traces(service, 1)
    tool = span_named(trace, "execute_tool environment")
    result = tags(tool)["gen_ai.tool.call.result"]
    assert "[REDACTED:openai_api_key]" in result
    assert FAKE_API_KEY not in json.dumps(trace)


def test_every_config_is_valid_for_the_real_binary(tmp_path: Path) -> None:
    binary = require_jaeger()
    configs = sorted(CONFIG_DIR.glob("*.yaml"))
    configs = [c for c in configs if c.name != "docker-compose.yaml"]
    assert {c.name for c in configs} >= {"jaeger.yaml", "gateway.yaml"}
    for config in configs:
        done = subprocess.run(
            [str(binary), "validate", "--config", str(config)], capture_output=True, text=True
        )
        assert done.returncode == 0, f"{config.name}: {done.stderr}"
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        (CONFIG_DIR / "gateway.yaml")
        .read_text()
        .replace("[memory_limiter,", "[no_such_processor, memory_limiter,")
    )
    done = subprocess.run([str(binary), "validate", "--config", str(broken)], capture_output=True)
    assert done.returncode != 0  # validation really can fail


def test_compose_file_pins_images_and_mounts_the_configs() -> None:
    text = (CONFIG_DIR / "docker-compose.yaml").read_text()
    assert f"jaegertracing/jaeger:{_pinned_version().lstrip('v')}" in text
    assert "otel/opentelemetry-collector-contrib:0.140.1" in text
    assert "./jaeger.yaml:" in text and "./gateway.yaml:" in text


def test_gateway_keeps_blocked_traces_and_drops_sampled_out_ones(tmp_path: Path) -> None:
    binary = require_jaeger()
    with run_collector(binary, CONFIG_DIR / "jaeger.yaml", tmp_path) as backend:
        gateway_env = {
            "JAEGER_OTLP_ENDPOINT": f"127.0.0.1:{backend.ports['otlp_grpc']}",
            "GATEWAY_SAMPLING_PERCENTAGE": "0",
            "GATEWAY_DECISION_WAIT": "1s",
        }
        with run_collector(binary, CONFIG_DIR / "gateway.yaml", tmp_path, gateway_env) as gateway:
            service = f"otelhooks-gw-{uuid.uuid4().hex[:8]}"
            run_demo(gateway.otlp_http, "http/protobuf", service, "--case", "allowed")
            run_demo(gateway.otlp_grpc, "grpc", service, "--case", "blocked")
            _send_error_span_with_secret_attributes(gateway.otlp_http, service)
            traces = backend.wait_for_traces(service, 2, timeout=30)
            time.sleep(3)  # past the decision wait and the batch: nothing else may arrive
            traces = backend.traces(service)
    roots = sorted(s["operationName"] for t in traces for s in t["spans"] if not parent_id(s))
    assert roots == ["invoke_agent demo-blocked", "leaky"]  # the allowed-only trace is sampled out
    leaky = trace_with(traces, "leaky")
    leaky_tags = tags(span_named(leaky, "leaky"))
    assert "session_id" not in leaky_tags and "db.password" not in leaky_tags
    assert leaky_tags["gen_ai.usage.input_tokens"] == 7  # counters are not mistaken for secrets
    assert leaky_tags["enduser.id"] != "alice"  # hashed


def _send_error_span_with_secret_attributes(endpoint: str, service: str) -> None:
    """A span that skips the in-process redactor: the gateway is the only defence here."""
    code = f"""
from opentelemetry.trace import Status, StatusCode
from otelhooks.telemetry.tracing import setup_tracing
setup = setup_tracing("otlp", otlp_endpoint={endpoint!r}, batch=False)  # OTEL_SERVICE_NAME
tracer = setup.provider.get_tracer("leak-test")
with tracer.start_as_current_span("leaky") as span:
    span.set_attributes({{"session_id": "s-123", "db.password": "pw",
                          "gen_ai.usage.input_tokens": 7, "enduser.id": "alice"}})
    span.set_status(Status(StatusCode.ERROR, "kept by the error policy"))
setup.shutdown()
"""
    env = {**os.environ, "OTEL_SERVICE_NAME": service}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=30)


def test_send_to_jaeger_example(jaeger: Collector) -> None:
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_http}
    done = subprocess.run(
        [sys.executable, str(CONFIG_DIR.parent / "examples" / "send_to_jaeger.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "11 of 11 spans exported" in done.stdout
    (trace,) = jaeger.wait_for_traces("otelhooks-example", 1)
    assert "s3cret" not in json.dumps(trace)


# The run of _scripted_results: 1 agent span, 2 chat spans and 5 tool calls of 4 spans each
# (execute_tool, before, run, after).
SPANS_PER_RUN = 1 + 2 + 5 * 4


@pytest.mark.slow
def test_jaeger_killed_mid_run_and_restarted(tmp_path: Path) -> None:
    """The agent's results do not change, shutdown is bounded, every span is accounted for."""
    import asyncio
    import signal as signals

    from otelhooks.telemetry.tracing import setup_tracing

    from .test_faults import _scripted_results

    binary = require_jaeger()
    baseline = asyncio.run(_scripted_results(None))
    config = CONFIG_DIR / "jaeger.yaml"
    with run_collector(binary, config, tmp_path) as first:
        ports = first.ports
        setup = setup_tracing(
            "otlp",
            otlp_endpoint=first.otlp_http,
            otlp_protocol="http/protobuf",
            export_timeout=1,
            batch_options={"schedule_delay_millis": 50},
        )
        for _ in range(3):
            assert asyncio.run(_scripted_results(setup.provider)) == baseline
        setup.force_flush()
        os.killpg(first.process.pid, signals.SIGKILL)
        first.process.wait(10)
        for _ in range(3):  # Jaeger is gone: the agent does not notice
            assert asyncio.run(_scripted_results(setup.provider)) == baseline
        setup.force_flush()
    with run_collector(binary, config, tmp_path, ports=ports) as second:
        for _ in range(3):
            assert asyncio.run(_scripted_results(setup.provider)) == baseline
            setup.force_flush()
        started = time.monotonic()
        stats = setup.shutdown()
        assert time.monotonic() - started < 10  # a live endpoint: well under 1 s
        second.wait_for_traces("otelhooks", 3)
        accepted_after_restart = second.metric("otelcol_receiver_accepted_spans_total")
    assert stats.ended == 9 * SPANS_PER_RUN
    assert stats.exported + stats.failed + stats.dropped == stats.ended
    assert stats.exported >= 6 * SPANS_PER_RUN  # before the kill and after the restart
    assert (
        stats.failed + stats.dropped >= SPANS_PER_RUN
    )  # what was sent while it was down: counted, not silent
    assert accepted_after_restart >= 3 * SPANS_PER_RUN
