"""``otelhooks traces`` against a real Jaeger; the Badger config keeps traces across a restart;
``opentelemetry-instrument`` sends the demo through the pipeline it configured, scrubbed by the
``otelhooks_otlp`` exporter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from otelhooks.cli.demo_cases import FAKE_API_KEY
from otelhooks.telemetry.jaeger_query import JaegerQuery

from .jaeger_support import CONFIG_DIR, Collector, free_ports, require_jaeger, run_collector

pytestmark = pytest.mark.jaeger


def otelhooks(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run(
        [sys.executable, "-m", "otelhooks", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**base, **(env or {})},
    )


def send_demo(collector: Collector, service: str, *cases: str) -> None:
    for case in cases or ("all",):
        done = otelhooks(
            "demo",
            "--case",
            case,
            "--exporter",
            "otlp",
            "--otlp-endpoint",
            collector.otlp_http,
            "--service-name",
            service,
            "--no-tree",
        )
        assert done.returncode == 0 and "traces: ok" in done.stderr, done.stderr


def stored_demo(jaeger: Collector, prefix: str) -> tuple[str, tuple[str, ...]]:
    """The demo's four traces stored under a new service; the service and the arguments of
    ``otelhooks traces`` that read them."""
    service = f"{prefix}-{uuid.uuid4().hex[:8]}"
    send_demo(jaeger, service)
    jaeger.wait_for_traces(service, 4)
    return service, ("traces", "--endpoint", jaeger.query, "--service", service)


def test_traces_prints_the_span_trees_stored_in_jaeger(jaeger: Collector) -> None:
    service = f"traces-cli-{uuid.uuid4().hex[:8]}"
    send_demo(jaeger, service)
    jaeger.wait_for_traces(service, 4)
    done = otelhooks("traces", "--endpoint", jaeger.query, "--service", service)
    assert done.returncode == 0, done.stderr
    blocks = [b for b in done.stdout.split("\n\n") if b.strip()]
    assert len(blocks) == 4
    blocked = next(b for b in blocks if "invoke_agent demo-blocked" in b)
    lines = blocked.splitlines()
    assert lines[0].startswith("trace ") and service in lines[0]
    assert lines[1].endswith("[finish=stop]")  # an array attribute read back as the list it was
    tool = next(i for i, line in enumerate(lines) if "execute_tool dangerous" in line)
    assert "decision=block" in lines[tool] and "by=seed_hooks" in lines[tool]
    assert (
        lines[tool + 1].strip().startswith("before") and "hooks=seed_hooks:block" in lines[tool + 1]
    )
    assert not lines[tool + 2].strip().startswith("run")
    allowed = next(b for b in blocks if "invoke_agent demo-allowed" in b)
    assert [line.split()[0] for line in allowed.splitlines()[3:7]] == [
        "execute_tool",
        "before",
        "run",
        "after",
    ]


def test_traces_filters_by_tag_operation_and_prints_json(jaeger: Collector) -> None:
    _, args = stored_demo(jaeger, "traces-filter")
    blocked = otelhooks(*args, "--tag", "otelhooks.decision=block", "--json")
    assert blocked.returncode == 0, blocked.stderr
    records = [json.loads(line) for line in blocked.stdout.splitlines()]
    assert len(records) == 1
    names = [s["name"] for s in records[0]["spans"]]
    assert "execute_tool dangerous" in names and "run" not in names
    tool = next(s for s in records[0]["spans"] if s["name"] == "execute_tool dangerous")
    assert tool["attributes"]["otelhooks.decision"] == "block"
    parallel = otelhooks(*args, "--operation", "execute_tool weather", "--json")
    assert len(parallel.stdout.splitlines()) == 1
    limited = otelhooks(*args, "--limit", "2", "--json")
    assert len(limited.stdout.splitlines()) == 2
    nothing = otelhooks(*args, "--tag", "otelhooks.decision=nonesuch")
    assert nothing.returncode == 0 and nothing.stdout == ""
    assert "no traces found" in nothing.stderr


def test_traces_says_when_there_are_more_and_names_the_services_there_are(
    jaeger: Collector,
) -> None:
    service, args = stored_demo(jaeger, "traces-more")
    cut = otelhooks(*args, "--limit", "3", "--json")
    assert cut.returncode == 0, cut.stderr
    assert len(cut.stdout.splitlines()) == 3
    assert f"{service}: 3 traces shown (--limit 3); there may be more" in cut.stderr
    whole = otelhooks(*args, "--limit", "5", "--json")
    assert len(whole.stdout.splitlines()) == 4 and "there may be more" not in whole.stderr
    typo = otelhooks("traces", "--endpoint", jaeger.query, "--service", service + "x")
    assert typo.returncode == 1 and typo.stdout == ""
    assert f"has no traces of {service}x; the services it has traces of: " in typo.stderr
    assert service in typo.stderr.split("the services it has traces of: ", 1)[1]
    nothing = otelhooks(*args, "--tag", "otelhooks.decision=nonesuch")
    assert f"the services with traces at {jaeger.query}: " in nothing.stderr
    assert service in nothing.stderr


def test_traces_follow_prints_new_traces_as_they_arrive(jaeger: Collector) -> None:
    service = f"traces-follow-{uuid.uuid4().hex[:8]}"
    send_demo(jaeger, service, "allowed")
    jaeger.wait_for_traces(service, 1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    follower = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "otelhooks",
            "traces",
            "--endpoint",
            jaeger.query,
            "--service",
            service,
            "--follow",
            "--interval",
            "0.3",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert follower.stdout is not None
        first = json.loads(follower.stdout.readline())
        assert any(s["name"] == "invoke_agent demo-allowed" for s in first["spans"])
        send_demo(jaeger, service, "blocked")
        second = json.loads(follower.stdout.readline())
        assert any(s["name"] == "invoke_agent demo-blocked" for s in second["spans"])
    finally:
        follower.terminate()
        follower.wait(timeout=60)


def test_traces_piped_into_head_ends_quietly(jaeger: Collector) -> None:
    service = f"traces-pipe-{uuid.uuid4().hex[:8]}"
    send_demo(jaeger, service)
    jaeger.wait_for_traces(service, 4)
    piped = subprocess.run(
        f"{sys.executable} -m otelhooks traces --endpoint {jaeger.query} --service {service} "
        "--json | head -c 100",
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert len(piped.stdout) == 100
    assert "Traceback" not in piped.stderr and "BrokenPipeError" not in piped.stderr


def test_traces_help_is_plain_text() -> None:
    done = otelhooks("traces", "--help")
    assert done.returncode == 0 and "``" not in done.stdout and ":mod:" not in done.stdout
    assert "Read traces back from a Jaeger query API" in " ".join(done.stdout.split())


def test_traces_says_clearly_when_jaeger_is_not_there() -> None:
    (port,) = free_ports(1)
    done = otelhooks("traces", "--endpoint", f"http://127.0.0.1:{port}")
    assert done.returncode == 1
    assert "cannot reach the Jaeger query API" in done.stderr and "Traceback" not in done.stderr


def test_badger_keeps_traces_across_a_restart(tmp_path: Path) -> None:
    binary = require_jaeger()
    names = ["otlp_grpc", "otlp_http", "query", "query_grpc", "health", "metrics"]
    ports = dict(zip(names, free_ports(len(names)), strict=True))
    service = f"badger-{uuid.uuid4().hex[:8]}"
    env = {"JAEGER_DATA_DIR": str(tmp_path / "data")}
    config = CONFIG_DIR / "jaeger-badger.yaml"
    with run_collector(binary, config, tmp_path, extra_env=env, ports=ports) as first:
        send_demo(first, service, "allowed", "blocked")
        before = first.wait_for_traces(service, 2)
    assert first.process.poll() is not None  # stopped
    with run_collector(binary, config, tmp_path, extra_env=env, ports=ports) as second:
        after = second.wait_for_traces(service, 2, timeout=60)
        client = JaegerQuery(second.query)
        stored = client.traces(service, lookback="1h")
    assert {t["traceID"] for t in after} == {t["traceID"] for t in before}
    assert sorted(len(t.spans) for t in stored) == sorted(len(t["spans"]) for t in before)


def test_opentelemetry_instrument_sends_the_demo_scrubbed(jaeger: Collector) -> None:
    service = f"instrumented-{uuid.uuid4().hex[:8]}"
    instrument = Path(sys.executable).parent / "opentelemetry-instrument"
    if not instrument.exists():
        pytest.skip("opentelemetry-instrument (opentelemetry-distro) is not installed")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        {
            "OTEL_SERVICE_NAME": service,
            "OTEL_TRACES_EXPORTER": "otelhooks_otlp",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none",
            "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_http,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
    )
    started = time.monotonic()
    done = subprocess.run(
        [
            str(instrument),
            sys.executable,
            "-m",
            "otelhooks",
            "demo",
            "--case",
            "redaction",
            "--no-tree",
        ],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    # the demo adopted the configured pipeline (the traces below arrive through it), and with
    # the redacting exporter named there is no advice to name it
    assert "otelhooks:" not in done.stderr, done.stderr
    traces = jaeger.wait_for_traces(service, 1)
    assert time.monotonic() - started < 60
    stored = json.dumps(traces)
    assert "execute_tool environment" in stored
    assert FAKE_API_KEY not in stored
    assert "[REDACTED:openai_api_key]" in stored  # captured content, scrubbed by the exporter
