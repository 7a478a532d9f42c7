"""The fleet's set-up without starting it: ports, bad input, the Kubernetes manifests against the
configs, and failover between OTLP endpoints (a refused port, then the SDK's in-memory exporter)."""

from __future__ import annotations

import os
import random
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otelhooks.cli.fleet.engines import FleetError
from otelhooks.cli.fleet.supervisor import Fleet, check_ports
from otelhooks.cli.fleet.topology import Component, Shape, default_ports, plan_ports
from otelhooks.telemetry.failover import FailoverSpanExporter
from otelhooks.telemetry.tracing import make_otlp_exporter, setup_tracing

from .jaeger_support import free_ports

ROOT = Path(__file__).resolve().parent.parent
FLEET = ROOT / "collector-config" / "fleet"


def test_every_port_has_a_name_and_the_layout_has_no_collision() -> None:
    shape = Shape(gateways=3, ingesters=4)
    ports = default_ports(shape, 30000)
    assert len(set(ports.values())) == len(ports)
    assert {"gateway-3.otlp_grpc", "ingester-4.metrics", "kafka.broker", "query.http"} <= set(ports)
    moved = plan_ports(shape, 30000, {"gateway-1.otlp_grpc": 4317})
    assert moved["gateway-1.otlp_grpc"] == 4317


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"gateway-9.otlp_grpc": 1}, "no port named 'gateway-9.otlp_grpc'; the names are: kafka"),
        ({"query.http": 70000}, "is not a TCP port"),
        ({"query.http": 30000}, "ports kafka.broker and query.http are both 30000"),
    ],
)
def test_bad_ports_get_one_clear_error(overrides: dict[str, int], message: str) -> None:
    with pytest.raises(FleetError, match=re.escape(message)):
        plan_ports(Shape(), 30000, overrides)


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(FleetError, match="at least one gateway"):
        Shape(gateways=0)
    with pytest.raises(FleetError, match="percentage"):
        Shape(sampling=140)


def test_a_taken_port_is_named_with_the_option_that_moves_it() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        component = Component("query", [], {}, "q.log", ports={"query.http": port})
        with pytest.raises(FleetError, match=rf"port {port} \(query.http\) is in use.*--port"):
            check_ports([component])


def _fleet(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "otelhooks", "fleet", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_status_and_down_without_a_fleet_say_so_in_one_line(tmp_path: Path) -> None:
    for action in ("status", "down"):
        done = _fleet("--dir", str(tmp_path), action)
        assert done.returncode == 1 and done.stdout == ""
        assert (
            done.stderr == f"otelhooks fleet: no fleet was started in {tmp_path} (no fleet.json)\n"
        )


def test_up_without_java_says_so_in_one_line(tmp_path: Path) -> None:
    python_only = tmp_path / "bin"
    python_only.mkdir()
    done = _fleet("--dir", str(tmp_path / "run"), "up", env={"PATH": str(python_only)})
    assert done.returncode == 1
    assert done.stderr == (
        "otelhooks fleet: Java 17 is needed to run Kafka and Cassandra: no 'java' on PATH\n"
    )


def test_a_bad_port_option_is_refused_before_anything_starts(tmp_path: Path) -> None:
    done = _fleet("--dir", str(tmp_path), "up", "--port", "query.http")
    assert done.returncode == 1
    assert "--port takes NAME=N" in done.stderr
    assert not (tmp_path / "fleet.json").exists()


def test_every_fleet_action_says_what_it_does_in_its_help() -> None:
    for action, words in (
        ("up", "wait until each answers"),
        ("status", "the topic's partitions as Kafka describes them"),
        ("down", "--purge deletes the run folder too"),
    ):
        done = _fleet(action, "--help")
        assert done.returncode == 0, done.stderr
        assert words in " ".join(done.stdout.split()), (action, done.stdout)


def _stand_in_engines(tmp_path: Path) -> dict[str, str]:
    """Engines that exist but hold nothing (an empty Kafka class path): found, never run."""
    engines = tmp_path / "engines"
    for folder in ("kafka", "cassandra"):
        (engines / folder).mkdir(parents=True)
    for program in ("gateway", "jaeger"):
        (engines / program).write_text("#!/bin/sh\nexit 1\n")
        (engines / program).chmod(0o755)
    return {
        "OTELHOOKS_KAFKA_LIB": str(engines / "kafka"),
        "OTELHOOKS_CASSANDRA_LIB": str(engines / "cassandra"),
        "OTELHOOKS_GATEWAY_BIN": str(engines / "gateway"),
        "OTELHOOKS_JAEGER_BIN": str(engines / "jaeger"),
    }


def test_an_up_refused_for_a_taken_port_makes_nothing(tmp_path: Path) -> None:
    env = _stand_in_engines(tmp_path)
    run = tmp_path / "run"
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = _fleet("--dir", str(run), "up", "--port", f"query.http={port}", env=env)
    assert done.returncode == 1
    assert f"port {port} (query.http) is in use" in done.stderr
    assert not run.exists()  # nothing made, so nothing for down --purge to remove
    run.mkdir()  # an empty run folder (as an earlier version left) is purged too
    purged = _fleet("--dir", str(run), "down", "--purge")
    assert purged.returncode == 0, purged.stderr
    assert not run.exists()


@pytest.mark.skipif(shutil.which("java") is None, reason="needs java on PATH")
def layout_base(span: int = 64) -> int:
    """A base whose ``span`` ports are free, below the kernel's range for ports it hands out
    (ports other tests are given): the fleet's layout takes ports from its base on."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for base in random.sample(
        range(10000, low - span, span), k=len(range(10000, low - span, span))
    ):
        try:
            for port in range(base, base + span):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise AssertionError("no free port range below the kernel's")


def test_an_up_that_fails_after_it_made_files_is_purged_by_down(tmp_path: Path) -> None:
    env = _stand_in_engines(tmp_path)
    run = tmp_path / "run"
    base = str(layout_base())
    # Cassandra's class path without its jamm agent: refused while the configs are written
    done = _fleet("--dir", str(run), "up", "--base-port", base, env=env)
    assert done.returncode == 1 and "no jamm-*.jar in" in done.stderr, done.stderr
    assert (run / "fleet.json").exists() and len(list(run.iterdir())) > 1
    purged = _fleet("--dir", str(run), "down", "--purge")
    assert purged.returncode == 0, purged.stderr
    assert not run.exists()
    # with the agent, Kafka's storage tool fails on its empty class path: files, logs, data
    (Path(env["OTELHOOKS_CASSANDRA_LIB"]) / "jamm-0.4.0.jar").write_bytes(b"")
    done = _fleet("--dir", str(run), "up", "--base-port", base, env=env)
    assert "kafka: kafka.tools.StorageTool format failed" in done.stderr, done.stderr
    assert (run / "logs" / "kafka.log").exists()
    purged = _fleet("--dir", str(run), "down", "--purge")
    assert purged.returncode == 0, purged.stderr
    assert not run.exists()


def test_the_state_file_of_something_else_is_refused(tmp_path: Path) -> None:
    (tmp_path / "fleet.json").write_text("not json")
    with pytest.raises(FleetError, match="is not a fleet's state"):
        Fleet.load(tmp_path)


def _env_without_default(text: str) -> set[str]:
    return set(re.findall(r"\$\{env:(FLEET_[A-Z_]+)\}", text))


def test_the_kubernetes_manifests_set_what_the_configs_need() -> None:
    documents = list(yaml.safe_load_all((FLEET / "kubernetes" / "fleet.yaml").read_text()))
    kinds = {(d["kind"], d["metadata"]["name"]) for d in documents}
    assert ("StatefulSet", "otelhooks-gateway") in kinds  # a volume per pod for the queue
    env = next(d["data"] for d in documents if d["metadata"]["name"] == "fleet-env")
    used = set()
    for name in ("gateway.yaml", "ingester.yaml", "query.yaml"):
        text = (FLEET / name).read_text()
        used |= set(re.findall(r"\$\{env:(FLEET_[A-Z_]+)", text))
        assert _env_without_default(text) <= set(env), name
        args = [
            c["args"]
            for d in documents
            if d["kind"] in ("Deployment", "StatefulSet")
            for c in d["spec"]["template"]["spec"]["containers"]
        ]
        assert ["--config", f"/etc/fleet/{name}"] in args
    assert set(env) - used <= set(), set(env) - used  # nothing set that no config reads


def test_failover_sends_the_batch_to_the_next_endpoint_when_one_refuses() -> None:
    (dead,) = free_ports(1)
    refusing, _ = make_otlp_exporter(f"http://127.0.0.1:{dead}", "grpc", timeout=0.5)
    memory = InMemorySpanExporter()
    failover = FailoverSpanExporter([refusing, memory], ["dead", "memory"])
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(failover))
    tracer = provider.get_tracer("test")
    for name in ("first", "second"):
        with tracer.start_as_current_span(name):
            pass
    assert [s.name for s in memory.get_finished_spans()] == ["first", "second"]
    assert failover.current == 1 and failover.switches == 1  # the second went straight there
    memory.shutdown()  # an in-memory exporter that is shut down refuses
    refusing.shutdown()
    assert failover.export(memory.get_finished_spans()) is SpanExportResult.FAILURE
    provider.shutdown()


def test_setup_tracing_takes_a_list_of_otlp_endpoints() -> None:
    a, b = free_ports(2)
    setup = setup_tracing(
        "otlp",
        otlp_endpoint=[f"http://127.0.0.1:{a}", f"http://127.0.0.1:{b}"],
        otlp_protocol="grpc",
        export_timeout=0.5,
    )
    assert f"127.0.0.1:{a} (OTLP/gRPC) or http://127.0.0.1:{b}" in setup.stats.destination
    setup.shutdown()
    with pytest.raises(Exception, match="empty list"):
        make_otlp_exporter([], "grpc")
