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


def _probe(
    endpoint: str, query: str, count: int, spacing: float, timeout: float
) -> tuple[list[float], int]:
    """Send ``count`` one-span traces with a blocked decision (kept by sampling) through
    ``endpoint``, ``spacing`` s apart; returns the seconds from each one's end to the query API
    answering for it, and how many were not found within ``timeout``."""
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
    return [found[t] - ended[t] for t in ended if t in found], len(ended) - len(found)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _load(fleet: Any, folder: Path, agents: int, runs: int, target: str) -> tuple[int, int]:
    """Spans the agents ended and spans their exporters had acknowledged."""
    from tests.fleet_support import finish_agents, start_agents

    load = finish_agents(start_agents(fleet, folder, agents, runs, targets=target))
    return load.total("ended"), load.total("exported")


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
    probed: list[tuple[list[float], int]] = []
    prober = threading.Thread(
        target=lambda: probed.append(_probe(f"http://127.0.0.1:{port}", query, probes, 0.25, 60))
    )
    start = time.monotonic()
    prober.start()
    targets = ",".join(
        f"http://127.0.0.1:{fleet.components[e].ports[f'{e}.otlp_grpc']}" for e in entries
    )
    ended, sent = _load(fleet, folder / label.replace(" ", "-"), agents, runs, targets)
    sent_s = time.monotonic() - start
    # Stored: everything taken in by the ingest tier (or the single Jaeger), the decision wait
    # over, the writers' queues empty and nothing more written for 2 s.
    taken_by = live_store if entry != "single" else ["single"]
    deadline = time.monotonic() + 600
    while (
        metric(fleet, taken_by, ACCEPTED) - base_in < sent + probes and time.monotonic() < deadline
    ):
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
    latencies, unseen = probed[0] if probed else ([], probes)
    consumed = metric(fleet, taken_by, ACCEPTED) - base_in
    in_cpu = metric(fleet, entries, CPU) - cpu_in
    store_cpu = metric(fleet, live_store, CPU) - cpu_store
    written = metric(fleet, live_store, WRITTEN) - base_written
    figures = {
        "ended": ended,
        "acknowledged": sent,
        "export_failed_at_agents": ended - sent,
        "written": written,
        "sent_s": sent_s,
        "drain_s": drained,
        "drain_spans_per_s": consumed / drained,
        "entry_spans_per_cpu_s": consumed / in_cpu if in_cpu else 0.0,
        "store_spans_per_cpu_s": consumed / store_cpu if store_cpu else 0.0,
        "queryable_p50_s": statistics.median(latencies) if latencies else float("nan"),
        "queryable_p99_s": _percentile(latencies, 0.99) if latencies else float("nan"),
        "probes_not_found": unseen,
    }
    report.row(
        f"{label}: spans ended / acknowledged",
        f"{ended:,} / {sent:,}",
        f"{ended - sent:,} timed out at the agents (3 s)" if ended > sent else "0 failed",
    )
    report.row(
        f"{label}: sent in / all stored after",
        f"{sent_s:.1f} / {drained:.1f} s",
        f"{figures['drain_spans_per_s']:,.0f} spans/s end to end",
    )
    if entry != "single":
        report.row(f"{label}: gateway spans/s per core", f"{figures['entry_spans_per_cpu_s']:,.0f}")
    report.row(
        f"{label}: ingest spans/s per core",
        f"{figures['store_spans_per_cpu_s']:,.0f}",
        f"{written:,.0f} spans written after sampling",
    )
    report.row(
        f"{label}: span end -> queryable p50 / p99",
        f"{figures['queryable_p50_s']:.2f} / {figures['queryable_p99_s']:.2f} s",
        f"{probes - unseen} of {probes} blocked-call probes found in 60 s",
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
    report.row(
        "drain rate, 2 ingesters / 1",
        f"{results['drain_2_over_1']:.2f}×",
        "2 cores: the agents, Kafka and Cassandra share them",
    )
    report.row(
        "agents' exports failed: fleet / one Jaeger",
        f"{two['export_failed_at_agents']:,} / {single['export_failed_at_agents']:,}",
        "without Kafka, Cassandra's pace reaches the agents",
    )
    report.results["fleet"] = results
