"""Start the pinned Jaeger binary on free loopback ports and read traces back from it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from otelhooks.cli import ports
from otelhooks.cli.cache import cached

ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = ROOT / "collector-config"


def jaeger_binary() -> Path | None:
    """The binary from $OTELHOOKS_JAEGER_BIN or the cache scripts/install-jaeger.sh fills."""
    explicit = os.environ.get("OTELHOOKS_JAEGER_BIN")
    if explicit:
        return Path(explicit) if Path(explicit).is_file() else None
    return cached("jaeger", _pinned_version(), "jaeger")


def _pinned_version() -> str:
    for line in (ROOT / "scripts" / "install-jaeger.sh").read_text().splitlines():
        if line.startswith("JAEGER_VERSION="):
            return line.split("=", 1)[1].strip('"')
    raise RuntimeError("JAEGER_VERSION not found in scripts/install-jaeger.sh")


def require_jaeger() -> Path:
    """The binary, or a skip (a failure with OTELHOOKS_REQUIRE_JAEGER=1) saying why not."""
    binary = jaeger_binary()
    if binary is None:
        reason = (
            "no Jaeger binary: run `bash scripts/install-jaeger.sh` (needs Go) "
            "or set OTELHOOKS_JAEGER_BIN"
        )
        if os.environ.get("OTELHOOKS_REQUIRE_JAEGER") == "1":
            pytest.fail(reason + " (OTELHOOKS_REQUIRE_JAEGER=1)")
        pytest.skip(reason)
    return binary


def worker_ports() -> tuple[int, int]:
    """This test process's share of the ports :mod:`otelhooks.cli.ports` draws from: with
    pytest-xdist, each worker its own slice, so two workers never pick the same port."""
    first, end = ports.LOWEST, ports.ephemeral_start()
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    index = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    size = (end - first) // max(count, 1)
    return first + index * size, first + (index + 1) * size


def free_ports(n: int) -> list[int]:
    """``n`` distinct free loopback ports from this worker's slice, outside the kernel's
    ephemeral range (an outgoing connection cannot take one before the server binds it)."""
    return ports.free_ports(n, worker_ports())


def free_port() -> int:
    return free_ports(1)[0]


def http_get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return bytes(response.read())


@dataclass
class Collector:
    """A running Jaeger binary (as Jaeger, or as the gateway) and where to reach it."""

    process: subprocess.Popen[bytes]
    ports: dict[str, int]
    log_path: Path

    @property
    def otlp_http(self) -> str:
        return f"http://127.0.0.1:{self.ports['otlp_http']}"

    @property
    def otlp_grpc(self) -> str:
        return f"http://127.0.0.1:{self.ports['otlp_grpc']}"

    @property
    def query(self) -> str:
        return f"http://127.0.0.1:{self.ports['query']}"

    def metric(self, name: str) -> float:
        """Sum of a Prometheus counter of the collector's own telemetry."""
        text = http_get(f"http://127.0.0.1:{self.ports['metrics']}/metrics").decode()
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name) and not line.startswith("#"):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def traces(self, service: str, limit: int = 100) -> list[dict[str, Any]]:
        url = f"{self.query}/api/traces?service={service}&limit={limit}&lookback=1h"
        try:
            body = json.loads(http_get(url))
        except urllib.error.HTTPError:
            return []
        return list(body.get("data") or [])

    def wait_for_traces(
        self,
        service: str,
        count: int,
        timeout: float = 30.0,
        settle: Callable[[], None] | None = None,
    ) -> list[dict[str, Any]]:
        """At least ``count`` traces of ``service``, once their spans stopped arriving (two polls
        in a row see the same spans: Jaeger writes a trace's batches one after another)."""
        deadline = time.monotonic() + timeout
        traces: list[dict[str, Any]] = []
        seen: list[int] | None = None
        while time.monotonic() < deadline:
            traces = self.traces(service)
            spans = sorted(len(t.get("spans") or []) for t in traces)
            if len(traces) >= count and spans == seen:
                return traces
            seen = spans if len(traces) >= count else None
            time.sleep(0.25)
        raise AssertionError(
            f"Jaeger has {len(traces)} traces of {service!r}, expected {count}; log: "
            f"{self.log_path.read_text()[-2000:]}"
        )


@contextmanager
def run_collector(
    binary: Path,
    config: Path,
    tmp_path: Path,
    extra_env: dict[str, str] | None = None,
    ports: dict[str, int] | None = None,
) -> Iterator[Collector]:
    """Start ``binary --config config`` on free ports (or ``ports``); stop it, never leaving it
    running. ``collector.process`` may be killed by the test itself."""
    names = ["otlp_grpc", "otlp_http", "query", "query_grpc", "health", "metrics"]
    ports = ports or dict(zip(names, free_ports(len(names)), strict=True))
    env = {
        **os.environ,
        "OTLP_GRPC_PORT": str(ports["otlp_grpc"]),
        "OTLP_HTTP_PORT": str(ports["otlp_http"]),
        "JAEGER_QUERY_PORT": str(ports["query"]),
        "JAEGER_QUERY_GRPC_PORT": str(ports["query_grpc"]),
        "JAEGER_HEALTH_PORT": str(ports["health"]),
        "JAEGER_METRICS_PORT": str(ports["metrics"]),
        "GATEWAY_OTLP_GRPC_PORT": str(ports["otlp_grpc"]),
        "GATEWAY_OTLP_HTTP_PORT": str(ports["otlp_http"]),
        "GATEWAY_HEALTH_PORT": str(ports["health"]),
        "GATEWAY_METRICS_PORT": str(ports["metrics"]),
        # As scripts/run-jaeger.sh: Jaeger's own tracing off, and never to the default 4317.
        "OTEL_TRACES_SAMPLER": "always_off",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://127.0.0.1:{ports['otlp_grpc']}",
        **(extra_env or {}),
    }
    log_path = tmp_path / f"{config.stem}-{ports['health']}.log"
    log = log_path.open("wb")
    process = subprocess.Popen(
        [str(binary), "--config", str(config)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    collector = Collector(process, ports, log_path)
    try:
        _wait_healthy(collector)
        yield collector
    finally:
        _stop(process)
        log.close()


def _wait_healthy(collector: Collector, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    url = f"http://127.0.0.1:{collector.ports['health']}/status"
    while time.monotonic() < deadline:
        if collector.process.poll() is not None:
            raise RuntimeError(f"collector exited: {collector.log_path.read_text()[-3000:]}")
        try:
            status = json.loads(http_get(url, timeout=1))
            if status.get("healthy"):
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    raise RuntimeError(
        f"collector not healthy after {timeout}s: {collector.log_path.read_text()[-3000:]}"
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)


# -- reading Jaeger's trace JSON --------------------------------------------------------------


def tags(span: dict[str, Any]) -> dict[str, Any]:
    return {t["key"]: t["value"] for t in span.get("tags", [])}


def parent_id(span: dict[str, Any]) -> str | None:
    for ref in span.get("references", []):
        if ref.get("refType") == "CHILD_OF":
            return str(ref["spanID"])
    return None


def children(trace: dict[str, Any], span: dict[str, Any]) -> list[dict[str, Any]]:
    kids = [s for s in trace["spans"] if parent_id(s) == span["spanID"]]
    return sorted(kids, key=lambda s: s["startTime"])


def span_named(trace: dict[str, Any], name: str) -> dict[str, Any]:
    matches = [s for s in trace["spans"] if s["operationName"] == name]
    assert len(matches) == 1, f"{len(matches)} spans named {name!r}"
    return matches[0]


def event_names(span: dict[str, Any]) -> list[str]:
    names = []
    for log in span.get("logs", []):
        for field in log.get("fields", []):
            if field["key"] == "event":
                names.append(field["value"])
    return names
