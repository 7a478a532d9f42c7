"""Host -> ``otelhooks mcp proxy`` -> mcp-server-time as one trace in a real Jaeger.

The host is this test (its own tracer provider, exporting to Jaeger); the proxy is the CLI as a
host launches it; the server is mcp-server-time from PyPI run under ``opentelemetry-instrument``,
so its spans come from the ``mcp`` SDK's own server instrumentation, which reads the trace
context the proxy put in ``params._meta``. The three services' spans are read back through
Jaeger's query API.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from opentelemetry import propagate

from otelhooks.telemetry.tracing import setup_tracing

from .jaeger_support import (
    Collector,
    http_get,
    parent_id,
    tags,
)
from .mcp_support import time_command

pytestmark = pytest.mark.jaeger
ROOT = Path(__file__).resolve().parent.parent


def wait_for_trace(
    jaeger: Collector, trace_id: str, spans: set[tuple[str, str]], timeout: float = 300
) -> dict[str, Any]:
    """The trace once it holds each (service, span name) of ``spans``: the processes export in
    batches of their own, so a service's first spans may arrive before the one awaited."""
    deadline = time.monotonic() + timeout
    trace: dict[str, Any] = {}
    seen: set[tuple[str, str]] = set()
    while time.monotonic() < deadline:
        try:
            body = json.loads(http_get(f"{jaeger.query}/api/traces/{trace_id}"))
            trace = (body.get("data") or [{}])[0]
        except OSError:
            trace = {}
        service_of = {pid: p["serviceName"] for pid, p in trace.get("processes", {}).items()}
        seen = {
            (service_of.get(s["processID"], "?"), s["operationName"])
            for s in trace.get("spans", [])
        }
        if spans <= seen:
            return trace
        time.sleep(0.25)
    raise AssertionError(f"trace {trace_id} has {sorted(seen)}, expected {sorted(spans)}")


async def test_host_proxy_and_server_spans_are_one_trace_in_jaeger(
    jaeger: Collector, tmp_path: Path
) -> None:
    instrument = Path(sys.executable).parent / "opentelemetry-instrument"
    assert instrument.exists(), "opentelemetry-distro is part of the dev extra"
    run = uuid.uuid4().hex[:8]
    host_service, proxy_service, server_service = (
        f"mcp-host-{run}",
        f"mcp-proxy-{run}",
        f"mcp-time-{run}",
    )
    policy = tmp_path / "policy.toml"
    policy.write_text(
        f"""
[[upstream]]
name = "time"
command = {json.dumps([str(instrument), *time_command()])}
env = {{ OTEL_SERVICE_NAME = "{server_service}" }}
inherit_env = ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_*_EXPORTER",
               "OTEL_BSP_SCHEDULE_DELAY"]
"""
    )
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "OTEL_SERVICE_NAME": proxy_service,
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_http,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "otelhooks", "mcp", "proxy", "--policy", str(policy)],
        env=env,
        cwd=str(ROOT),
    )
    host = setup_tracing(
        "otlp", otlp_endpoint=jaeger.otlp_http, service_name=host_service, use_global=False
    )
    try:
        async with Client(params) as client:
            with host.provider.get_tracer("host").start_as_current_span("host turn") as turn:
                meta: dict[str, Any] = {}
                propagate.inject(meta)
                result = await client.call_tool(
                    "get_current_time",
                    {"timezone": "America/New_York"},
                    meta=meta,  # type: ignore[arg-type]
                )
            assert not result.is_error
            host.force_flush()
            trace_id = format(turn.get_span_context().trace_id, "032x")
            # Awaited while the proxy and its server still run (each exports every 100 ms): a
            # host that stops a slow proxy kills it, and the server dies with it, maybe before
            # its last export.
            trace = await asyncio.to_thread(
                wait_for_trace,
                jaeger,
                trace_id,
                {
                    (host_service, "host turn"),
                    (proxy_service, "execute_tool get_current_time"),
                    (server_service, "tools/call get_current_time"),
                },
            )
    finally:
        host.shutdown()
    service_of = {pid: p["serviceName"] for pid, p in trace["processes"].items()}
    by_id = {s["spanID"]: s for s in trace["spans"]}

    def only(name: str, service: str) -> dict[str, Any]:
        found = [
            s
            for s in trace["spans"]
            if s["operationName"] == name and service_of[s["processID"]] == service
        ]
        assert len(found) == 1, (name, service, [s["operationName"] for s in trace["spans"]])
        return found[0]

    def ancestors(span: dict[str, Any]) -> list[str]:
        names = []
        while (parent := parent_id(span)) is not None and parent in by_id:
            span = by_id[parent]
            names.append(f"{service_of[span['processID']]}:{span['operationName']}")
        return names

    root = only("host turn", host_service)
    execute = only("execute_tool get_current_time", proxy_service)
    server = only("tools/call get_current_time", server_service)
    assert tags(execute)["mcp.method.name"] == "tools/call"
    assert tags(execute)["network.transport"] == "pipe"
    assert tags(server)["span.kind"] == "server"
    chain = ancestors(server)
    assert chain[:2] == [f"{proxy_service}:run", f"{proxy_service}:execute_tool get_current_time"]
    assert chain[-1] == f"{host_service}:host turn"
    assert f"{proxy_service}:tools/call get_current_time" in chain  # the proxy's MCP server span
    assert parent_id(root) is None
