"""The fleet pipeline end to end on real processes: otelhooks agents -> 2 gateways (OCB
collector, persistent queue) -> Kafka (KRaft) -> 2 ingesters (Jaeger, tail sampling) ->
Cassandra, read back through Jaeger's query API and ``otelhooks traces``; then faults, each with
the count of what was lost."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from otelhooks.cli.fleet import endpoints
from otelhooks.cli.fleet.engines import find_engines
from otelhooks.cli.fleet.supervisor import Fleet
from otelhooks.cli.fleet.topology import Shape

from .fleet_support import (
    Lost,
    finish_agents,
    gateways,
    ingesters,
    lost,
    metric,
    partial_traces,
    require_fleet,
    start_agents,
    start_test_fleet,
    stored_spans,
    wait_for_keep_traces,
)

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

ACCEPTED = "otelcol_receiver_accepted_spans_total"
REFUSED = "otelcol_receiver_refused_spans_total"
SENT = "otelcol_exporter_sent_spans_total"
SEND_FAILED = "otelcol_exporter_send_failed_spans_total"
IN_FLIGHT = 2.0  # s either side of a fault in which a trace counts as in flight
IN_FLIGHT_TRACES = 4  # 20 traces/s over one 200 ms export interval
KEPT_WHOLE = {"blocked": {"complete": 60}, "failing": {"complete": 60}}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    require_fleet()
    run = tmp_path_factory.mktemp("fleet")
    started = start_test_fleet(run, Shape(gateways=2, ingesters=2, decision_wait="2s"))
    try:
        yield started
    finally:
        started.down()


def wait_until(predicate: Callable[[], bool], timeout: float = 120.0, every: float = 1.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every)
    return bool(predicate())


def test_status_reports_the_partitions_kafka_describes(fleet: Fleet) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "otelhooks", "fleet", "--dir", str(fleet.run), "status"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    report = json.loads(done.stdout)
    assert report["shape"]["partitions"] == 8, report["shape"]  # four per ingester, from Kafka
    assert set(report["components"]) == set(fleet.components)


def test_four_agents_every_span_accounted_for_at_each_tier(fleet: Fleet, tmp_path: Path) -> None:
    load = finish_agents(start_agents(fleet, tmp_path, agents=4, runs=60))
    sent = load.total("exported")
    assert load.total("ended") == sent > 0
    assert load.total("failed") == load.total("dropped") == 0

    # Acknowledged by the gateways = handed to Kafka = consumed by the ingesters.
    gw, ing = gateways(fleet), ingesters(fleet)
    assert wait_until(lambda: metric(fleet, gw, SENT, exporter="kafka") >= sent)
    assert metric(fleet, gw, ACCEPTED, receiver="otlp") == sent
    assert metric(fleet, gw, REFUSED) == 0
    assert metric(fleet, gw, SENT, exporter="kafka") == sent
    assert metric(fleet, gw, SEND_FAILED) == 0
    assert wait_until(lambda: metric(fleet, ing, ACCEPTED, receiver="kafka") >= sent)
    assert metric(fleet, ing, ACCEPTED, receiver="kafka") == sent

    # Stored: every trace with a blocked call or an error, complete; the rest sampled at ~10%,
    # whole or not at all; the store holds exactly what the ingesters wrote.
    report = wait_for_keep_traces(fleet, load)
    whole = all(report.get(kind) == row for kind, row in KEPT_WHOLE.items())
    partial = {} if whole else partial_traces(fleet, load)  # where the missing spans stopped
    assert report["blocked"] == {"complete": 60}, (report, partial)
    assert report["failing"] == {"complete": 60}, (report, partial)
    ordinary = [report.get(kind, {}) for kind in ("plain", "secret")]
    assert all(set(row) <= {"complete", "missing"} for row in ordinary), report
    kept = sum(row.get("complete", 0) for row in ordinary)
    assert 2 <= kept <= 36, f"{kept} of 120 ordinary traces kept at 10% sampling: {report}"
    stored = sum(
        info["spans"]
        for trace_id, info in load.traces.items()
        if info["kind"] in ("blocked", "failing") or stored_spans(fleet, trace_id)
    )
    written = lambda: metric(fleet, ing, SENT, exporter="jaeger_storage_exporter")  # noqa: E731
    assert wait_until(lambda: written() >= stored, timeout=30), (
        written(),
        stored,
        metric(fleet, ing, SEND_FAILED),
        metric(fleet, ing, "jaeger_storage_errors_total"),
    )
    assert written() == stored

    # No secret in storage; the secret-returning calls that were kept show the redaction.
    query = endpoints(fleet)["query"]
    for agent in range(1, 5):
        raw = _read(f"{query}/api/traces?service=fleet-agent-{agent}&limit=1000&lookback=1h")
        assert not [s for s in load.secrets if s in raw]
        assert "github_pat_" not in raw and "wJalrXUtnFEMI" not in raw
    kept_secret = [
        t for t, info in load.traces.items() if info["kind"] == "secret" and stored_spans(fleet, t)
    ]
    for trace_id in kept_secret:
        assert "[REDACTED:" in json.dumps(stored_spans(fleet, trace_id))
    for log in load.logs:  # the agents' own JSON log lines
        assert not [s for s in load.secrets if s in log.read_text()]

    # `otelhooks traces` reads the blocked calls back from the fleet's query service.
    argv = [sys.executable, "-m", "otelhooks", "traces", "--endpoint", query, "--json"]
    argv += ["--service", "fleet-agent-1", "--tag", "otelhooks.decision=block", "--limit", "200"]
    shown = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    listed = {json.loads(line)["trace_id"] for line in shown.stdout.splitlines() if line}
    blocked = {t for t, i in load.results[0]["traces"].items() if i["kind"] == "blocked"}
    assert listed == blocked


def _read(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as r:
        return str(r.read().decode())


def _fault_run(
    fleet: Fleet,
    tmp_path: Path,
    name: str,
    fault: Callable[[], None],
    heal: Callable[[], None],
    runs: int = 60,
) -> tuple[Lost, dict[str, dict[str, int]]]:
    """Two agents send only traces that sampling must keep (blocked and failing calls) at 10
    runs/s each, ``fault`` strikes a third of the way in, ``heal`` runs once they finished;
    returns what was lost and the store report (also printed: the fault's record). The load
    starts once the ingesters' group has settled: an earlier test's restarted ingester, or Kafka
    come back, moves partitions, which would split traces the fault did not."""
    fleet.wait_for_group(find_engines())
    started = start_agents(fleet, tmp_path, agents=2, runs=runs, mix="keep", pace=0.1)
    time.sleep(runs * 0.1 / 3)
    struck = time.time()
    fault()
    missing_window = (struck - IN_FLIGHT, time.time() + IN_FLIGHT)
    load = finish_agents(started)
    heal()
    assert load.total("ended") == load.total("exported"), "an agent lost spans before the fleet"
    report = wait_for_keep_traces(fleet, load, timeout=240)
    missing = lost(fleet, load)
    missing.window = missing_window
    assert not [k for k, row in report.items() if "duplicated" in row], report  # collapsed
    print(f"{name}: lost {missing.spans} of {missing.sent} spans ({missing.traces} traces)")
    return missing, report


def assert_lost_only_in_flight(missing: Lost, report: dict[str, dict[str, int]]) -> None:
    """Nothing is lost but a trace in flight when the fault struck, and at most a few of those.

    The tail sampler decides on a trace once its wait ends, from the spans it holds then, and a
    later span of a decided trace follows that decision (docs/scaling-out.md). A trace whose
    first spans reached an ingester just before the fault and whose others waited in a queue
    through it (longer than the decision wait) is decided on its first spans alone: a failing
    trace whose error came after the cut is dropped whole. Agents export every 200 ms and
    gateways flush every 200 ms, so only the few traces ending around the fault can be cut."""
    start, end = missing.window
    outside = {t: at for t, at in missing.ends.items() if not start <= at <= end}
    assert not outside, (f"lost outside the fault ({start:.1f}-{end:.1f}): {outside}", report)
    assert missing.traces <= IN_FLIGHT_TRACES, (missing, report)


def test_gateway_killed_agents_fail_over_and_nothing_acknowledged_is_lost(
    fleet: Fleet, tmp_path: Path
) -> None:
    missing, report = _fault_run(
        fleet,
        tmp_path,
        "gateway-1 killed",
        lambda: fleet.kill("gateway-1"),
        lambda: fleet.restart("gateway-1"),
    )
    assert_lost_only_in_flight(missing, report)


def test_ingester_killed_the_group_rebalances_losing_only_its_decision_wait(
    fleet: Fleet, tmp_path: Path
) -> None:
    # The partitions of the killed ingester move to the other one, which resumes from their
    # committed offsets. The traces the killed one held in its tail-sampling wait were already
    # committed (the sampler takes a span, and its offset is marked, before deciding): those are
    # lost, at most what reached it in one decision wait plus one commit interval (2 s + 1 s,
    # at 20 traces/s for the whole load). Known miss of the 0-lost goal; see docs/scaling-out.md.
    missing, report = _fault_run(
        fleet,
        tmp_path,
        "ingester-1 killed",
        lambda: fleet.kill("ingester-1"),
        lambda: fleet.restart("ingester-1"),
    )
    assert missing.traces <= 60, report
    assert missing.spans < missing.sent / 4, report


def test_kafka_restarted_gateways_hold_and_resend(fleet: Fleet, tmp_path: Path) -> None:
    missing, report = _fault_run(
        fleet, tmp_path, "Kafka restarted", lambda: fleet.restart("kafka"), lambda: None
    )
    assert_lost_only_in_flight(missing, report)


def test_cassandra_away_for_30_seconds_ingest_backs_off_and_resumes(
    fleet: Fleet, tmp_path: Path
) -> None:
    def away() -> None:
        fleet.stop("cassandra")
        time.sleep(30)
        fleet.start("cassandra")
        fleet.wait_healthy("cassandra")

    missing, report = _fault_run(fleet, tmp_path, "Cassandra away 30 s", away, lambda: None)
    assert missing.spans == 0, report


def test_gateway_restarted_sends_what_its_disk_queue_acknowledged(
    fleet: Fleet, tmp_path: Path
) -> None:
    # Kafka is down: the gateways acknowledge into their queues on disk; both are then killed
    # and restarted, and what they acknowledged reaches the store once Kafka is back.
    fleet.stop("kafka")
    load = finish_agents(start_agents(fleet, tmp_path, agents=2, runs=30, mix="keep"))
    assert load.total("ended") == load.total("exported") > 0
    for gateway in gateways(fleet):
        fleet.kill(gateway)
    fleet.start("kafka")
    fleet.wait_healthy("kafka")
    for gateway in gateways(fleet):
        fleet.start(gateway)
        fleet.wait_healthy(gateway)
    report = wait_for_keep_traces(fleet, load, timeout=240)
    missing = lost(fleet, load)
    print(f"gateways killed with a full disk queue: lost {missing.spans} of {missing.sent} spans")
    assert missing.spans == 0, report
