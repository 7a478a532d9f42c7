"""14. The fleet pipeline: gateway and ingest throughput per core, 1 -> 2 ingesters, span end to
queryable, against one Jaeger on the same Cassandra."""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import Report

NAME = "fleet"
NUMBER = "14"
TITLE = "Fleet: gateways -> Kafka -> ingesters -> Cassandra, against one Jaeger"

CPU = "otelcol_process_cpu_seconds_total"
ACCEPTED = "otelcol_receiver_accepted_spans_total"
WRITTEN = "otelcol_exporter_sent_spans_total"


def _probe(endpoint: str, query: str, count: int, spacing: float, timeout: float) -> list[float]:
    """Send ``count`` one-span traces with a blocked decision (kept by sampling) through
    ``endpoint``, ``spacing`` s apart, and return for each the seconds from its end to the
    query API answering for it (traces not found in ``timeout`` count as ``timeout``)."""
    import urllib.error
    import urllib.request

    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "fleet-probe"}))
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True))
    )
    tracer = provider.get_tracer("benchmark")
    ended: dict[str, float] = {}
    found: dict[str, float] = {}

    def send() -> None:
        for _ in range(count):
            with tracer.start_as_current_span("execute_tool delete_file") as span:
                span.set_attribute("otelhooks.decision", "block")
                trace_id = format(span.get_span_context().trace_id, "032x")
            ended[trace_id] = time.time()
            time.sleep(spacing)

    sender = threading.Thread(target=send)
    sender.start()
    deadline = time.monotonic() + count * spacing + timeout
    while time.monotonic() < deadline and (sender.is_alive() or len(found) < len(ended)):
        for trace_id in [t for t in list(ended) if t not in found]:
            try:
                with urllib.request.urlopen(f"{query}/api/traces/{trace_id}", timeout=5):
                    found[trace_id] = time.time()
            except (urllib.error.URLError, OSError):
                pass
        time.sleep(0.1)
    sender.join()
    provider.shutdown()
    return [found.get(t, ended[t] + timeout) - ended[t] for t in ended]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _load(fleet: Any, folder: Path, agents: int, runs: int, target: str) -> int:
    from tests.fleet_support import finish_agents, start_agents

    started = start_agents(fleet, folder, agents, runs, targets=target)
    return finish_agents(started).total("exported")


def _phase(
    report: Report,
    fleet: Any,
    folder: Path,
    label: str,
    entry: str,
    store: list[str],
    agents: int,
    runs: int,
    probes: int,
) -> dict[str, float]:
    """One load through ``entry`` (gateway names, or the single Jaeger) with ``store`` (the
    components that write to Cassandra); throughput per core from their own CPU counters."""
    from tests.fleet_support import metric

    entries = (
        [entry] if entry == "single" else [n for n in fleet.components if n.startswith("gateway-")]
    )
    live_store = [n for n in store if fleet.is_running(n)]
    cpu_in, cpu_store = metric(fleet, entries, CPU), metric(fleet, live_store, CPU)
    base_in = metric(fleet, live_store, ACCEPTED) if entry != "single" else 0.0
    base_written = metric(fleet, live_store, WRITTEN)
    port = fleet.components[entries[0]].ports[f"{entries[0]}.otlp_grpc"]
    query = fleet.info["query"] if entry != "single" else fleet.info["single_query"]
    latencies: list[float] = []
    prober = threading.Thread(
        target=lambda: latencies.extend(_probe(f"http://127.0.0.1:{port}", query, probes, 0.25, 60))
    )
    start = time.monotonic()
    prober.start()
    targets = ",".join(
        f"http://127.0.0.1:{fleet.components[e].ports[f'{e}.otlp_grpc']}" for e in entries
    )
    sent = _load(fleet, folder / label.replace(" ", "-"), agents, runs, targets) + probes
    sent_s = time.monotonic() - start
    # Stored: everything taken in by the ingest tier (or the single Jaeger), the decision wait
    # over, the writers' queues empty and nothing more written for 2 s.
    taken_by = live_store if entry != "single" else ["single"]
    deadline = time.monotonic() + 600
    while metric(fleet, taken_by, ACCEPTED) - base_in < sent and time.monotonic() < deadline:
        time.sleep(0.5)
    last, still = -1.0, 0.0
    while time.monotonic() < deadline:
        now = metric(fleet, live_store, WRITTEN)
        queued = metric(fleet, live_store, "otelcol_exporter_queue_size")
        if now == last and queued == 0:
            if time.monotonic() - still >= 2:
                break
        else:
            last, still = now, time.monotonic()
        time.sleep(0.25)
    drained = still - start
    prober.join()
    in_cpu = metric(fleet, entries, CPU) - cpu_in
    store_cpu = metric(fleet, live_store, CPU) - cpu_store
    written = metric(fleet, live_store, WRITTEN) - base_written
    figures = {
        "spans": sent,
        "written": written,
        "sent_s": sent_s,
        "drain_s": drained,
        "drain_spans_per_s": sent / drained,
        "entry_spans_per_cpu_s": sent / in_cpu if in_cpu else 0.0,
        "store_spans_per_cpu_s": sent / store_cpu if store_cpu else 0.0,
        "queryable_p50_s": statistics.median(latencies),
        "queryable_p99_s": _percentile(latencies, 0.99),
    }
    report.row(
        f"{label}: spans carried, drained in",
        f"{sent:,}",
        f"{drained:.1f} s ({figures['drain_spans_per_s']:,.0f} spans/s)",
    )
    if entry != "single":
        report.row(f"{label}: gateway spans/s per core", f"{figures['entry_spans_per_cpu_s']:,.0f}")
    report.row(
        f"{label}: ingest spans/s per core",
        f"{figures['store_spans_per_cpu_s']:,.0f}",
        f"{written:,.0f} written after sampling",
    )
    report.row(
        f"{label}: span end -> queryable p50 / p99",
        f"{figures['queryable_p50_s']:.2f} / {figures['queryable_p99_s']:.2f} s",
        f"{probes} blocked-call probes",
    )
    return figures


def run(report: Report, quick: bool) -> None:
    from otelhooks.cli.fleet.engines import FleetError, find_engines
    from otelhooks.cli.fleet.topology import HOST, Component, Shape
    from tests.fleet_support import start_test_fleet
    from tests.jaeger_support import free_ports

    try:
        engines = find_engines()
    except FleetError as exc:
        report.row("fleet", "no engines", str(exc)[:60])
        report.results["fleet"] = None
        return
    agents, runs, probes = (2, 15, 8) if quick else (4, 250, 40)
    results: dict[str, Any] = {"agents": agents, "runs_per_agent": runs}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        fleet = start_test_fleet(
            folder / "fleet", Shape(gateways=2, ingesters=2, decision_wait="2s")
        )
        try:
            ingesters = [n for n in fleet.components if n.startswith("ingester-")]
            fleet.stop("ingester-2")
            time.sleep(5)  # the group hands every partition to ingester-1
            results["1 ingester"] = _phase(
                report,
                fleet,
                folder,
                "fleet, 1 ingester",
                "gateways",
                ingesters,
                agents,
                runs,
                probes,
            )
            fleet.start("ingester-2")
            fleet.wait_healthy("ingester-2")
            time.sleep(8)  # rebalanced
            results["2 ingesters"] = _phase(
                report,
                fleet,
                folder,
                "fleet, 2 ingesters",
                "gateways",
                ingesters,
                agents,
                runs,
                probes,
            )
            ports = dict(
                zip(("otlp_grpc", "http", "grpc", "health", "metrics"), free_ports(5), strict=True)
            )
            cassandra = f"{HOST}:{fleet.components['cassandra'].ports['cassandra.cql']}"
            fleet.components["single"] = Component(
                "single",
                [str(engines.jaeger), "--config", str(engines.configs / "single.yaml")],
                {
                    "FLEET_CASSANDRA": cassandra,
                    "FLEET_OTLP_GRPC_PORT": str(ports["otlp_grpc"]),
                    "FLEET_QUERY_HTTP_PORT": str(ports["http"]),
                    "FLEET_QUERY_GRPC_PORT": str(ports["grpc"]),
                    "FLEET_HEALTH_PORT": str(ports["health"]),
                    "FLEET_METRICS_PORT": str(ports["metrics"]),
                },
                str(folder / "fleet" / "logs" / "single.log"),
                health_url=f"http://{HOST}:{ports['health']}/status",
                ports={f"single.{k}": v for k, v in ports.items()},
                timeout=120,
            )
            fleet.info["single_query"] = f"http://{HOST}:{ports['http']}"
            fleet.start("single")
            fleet.wait_healthy("single")
            results["single jaeger"] = _phase(
                report,
                fleet,
                folder,
                "one Jaeger on Cassandra",
                "single",
                ["single"],
                agents,
                runs,
                probes,
            )
        finally:
            fleet.down(list(fleet.components))
    one, two, single = results["1 ingester"], results["2 ingesters"], results["single jaeger"]
    results["drain_2_over_1"] = two["drain_spans_per_s"] / one["drain_spans_per_s"]
    results["queryable_p50_fleet_over_single"] = two["queryable_p50_s"] / single["queryable_p50_s"]
    report.row(
        "drain rate, 2 ingesters / 1",
        f"{results['drain_2_over_1']:.2f}×",
        "2 cores: the agents, Kafka and Cassandra share them",
    )
    report.row(
        "span end -> queryable p50, fleet / one Jaeger",
        f"{results['queryable_p50_fleet_over_single']:.2f}×",
        "the fleet adds Kafka and the tail-sampling wait (2 s here)",
    )
    report.results["fleet"] = results
