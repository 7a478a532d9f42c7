"""A real fleet (Kafka, Cassandra, gateways, ingesters, query) on free loopback ports for the
fleet tests, real otelhooks agent processes to load it, and the counting of what each tier saw
(from the components' own Prometheus metrics) and what the store holds."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from otelhooks.cli.fleet import endpoints, start_fleet
from otelhooks.cli.fleet.engines import FleetError, find_engines
from otelhooks.cli.fleet.supervisor import Fleet
from otelhooks.cli.fleet.topology import Shape, port_names

from .jaeger_support import free_ports

ROOT = Path(__file__).resolve().parent.parent
AGENT = Path(__file__).with_name("fleet_agent.py")
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def require_fleet() -> None:
    """A skip (a failure with OTELHOOKS_REQUIRE_FLEET=1) when the engines are missing."""
    try:
        find_engines()
    except FleetError as exc:
        reason = f"no fleet engines: {exc}"
        if os.environ.get("OTELHOOKS_REQUIRE_FLEET") == "1":
            pytest.fail(reason + " (OTELHOOKS_REQUIRE_FLEET=1)")
        pytest.skip(reason)


def start_test_fleet(run: Path, shape: Shape) -> Fleet:
    """A fleet of ``shape`` on free ports, handed out once its consumer group has settled."""
    names = port_names(shape)
    overrides = dict(zip(names, free_ports(len(names)), strict=True))
    return start_fleet(run, shape, 0, overrides, install=False)


def metric(fleet: Fleet, names: Iterable[str], metric_name: str, **labels: str) -> float:
    """The sum of ``metric_name`` (with these labels) over the components ``names``; a component
    that is down counts 0."""
    total = 0.0
    for name in names:
        port = fleet.components[name].ports[f"{name}.metrics"]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                text = r.read().decode()
        except OSError:
            continue
        for line in text.splitlines():
            match = _SAMPLE.match(line)
            if not match or match.group(1) != metric_name:
                continue
            found = match.group(2) or ""
            if all(f'{k}="{v}"' in found for k, v in labels.items()):
                total += float(match.group(3))
    return total


def gateways(fleet: Fleet) -> list[str]:
    return [n for n in fleet.components if n.startswith("gateway-")]


def ingesters(fleet: Fleet) -> list[str]:
    return [n for n in fleet.components if n.startswith("ingester-")]


@dataclass
class Load:
    """What the agent processes sent."""

    results: list[dict[str, Any]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    @property
    def traces(self) -> dict[str, dict[str, Any]]:
        return {t: info for r in self.results for t, info in r["traces"].items()}

    def total(self, key: str) -> int:
        return sum(int(r[key]) for r in self.results)

    @property
    def secrets(self) -> set[str]:
        return {s for r in self.results for s in r["secrets"]}


def start_agents(
    fleet: Fleet,
    folder: Path,
    agents: int,
    runs: int,
    mix: str = "all",
    pace: float = 0.0,
    targets: str = "",
) -> list[tuple[subprocess.Popen[bytes], Path, Path]]:
    """Start ``agents`` agent processes sending to ``targets`` (comma-separated OTLP/gRPC
    endpoints; default: the fleet's gateways)."""
    folder.mkdir(parents=True, exist_ok=True)
    targets = targets or ",".join(endpoints(fleet)["otlp_grpc"])
    started = []
    for i in range(agents):
        out, log = folder / f"agent-{i + 1}.json", folder / f"agent-{i + 1}.log"
        argv = [sys.executable, str(AGENT), "--endpoints", targets, "--runs", str(runs)]
        argv += ["--agent", str(i + 1), "--out", str(out), "--mix", mix, "--pace", str(pace)]
        with open(log, "wb") as err:
            process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT)
        started.append((process, out, log))
    return started


def finish_agents(started: list[tuple[subprocess.Popen[bytes], Path, Path]]) -> Load:
    load = Load()
    for process, out, log in started:
        assert process.wait(timeout=300) == 0, log.read_text()[-2000:]
        load.results.append(json.loads(out.read_text()))
        load.logs.append(log)
    return load


def stored_spans(fleet: Fleet, trace_id: str, patience: float = 60.0) -> list[dict[str, Any]]:
    """The spans the store holds for ``trace_id`` ([] for none). While the query service cannot
    reach Cassandra (a 5xx, e.g. just after Cassandra came back) it asks again for up to
    ``patience`` s."""
    url = f"{endpoints(fleet)['query']}/api/traces/{trace_id}"
    deadline = time.monotonic() + patience
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                data = json.load(r)["data"]
            return [span for trace in data for span in trace["spans"]]
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return []
            if exc.code < 500 or time.monotonic() > deadline:
                raise
        except urllib.error.URLError:
            if time.monotonic() > deadline:
                raise
        time.sleep(1)


def store_report(fleet: Fleet, load: Load) -> dict[str, dict[str, int]]:
    """Per kind of trace: how many are complete, partial, missing or duplicated in the store."""
    report: dict[str, dict[str, int]] = {}
    for trace_id, info in load.traces.items():
        spans = stored_spans(fleet, trace_id)
        unique = {s["spanID"] for s in spans}
        if len(spans) > len(unique):
            state = "duplicated"
        elif len(unique) == info["spans"]:
            state = "complete"
        elif unique:
            state = "partial"
        else:
            state = "missing"
        row = report.setdefault(info["kind"], {})
        row[state] = row.get(state, 0) + 1
    return report


def partial_traces(fleet: Fleet, load: Load) -> dict[str, dict[str, Any]]:
    """Per trace the store holds only some spans of: its kind, the spans the agent ended, and
    the name, span ID and parent of each span stored (to tell where the others stopped)."""
    found: dict[str, dict[str, Any]] = {}
    for trace_id, info in load.traces.items():
        spans = stored_spans(fleet, trace_id)
        if spans and len({s["spanID"] for s in spans}) != info["spans"]:
            stored = [
                (s["operationName"], s["spanID"], [r["spanID"] for r in s.get("references", [])])
                for s in spans
            ]
            found[trace_id] = {"kind": info["kind"], "ended": info["spans"], "stored": stored}
    return found


def wait_for_keep_traces(fleet: Fleet, load: Load, timeout: float = 180.0) -> dict[str, Any]:
    """Wait until every trace that sampling must keep (blocked, failing) is complete in the
    store, or ``timeout``; returns the last store report."""
    deadline = time.monotonic() + timeout
    while True:
        report = store_report(fleet, load)
        waiting = sum(
            n
            for kind in ("blocked", "failing")
            for s, n in report.get(kind, {}).items()
            if s != "complete"
        )
        if not waiting or time.monotonic() > deadline:
            return report
        time.sleep(2)


def lost(fleet: Fleet, load: Load, kinds: tuple[str, ...] = ("blocked", "failing")) -> Lost:
    """What of the traces of ``kinds`` the agents exported the store does not hold."""
    result = Lost()
    for trace_id, info in load.traces.items():
        if info["kind"] in kinds:
            held = {s["spanID"] for s in stored_spans(fleet, trace_id)}
            result.sent += info["spans"]
            result.spans += info["spans"] - len(held)
            if len(held) < info["spans"]:
                result.traces += 1
                result.ends[trace_id] = float(info["end"])
    return result


@dataclass
class Lost:
    """Spans sent, spans lost, traces with a span lost (and when each one's root span ended,
    Unix s)."""

    sent: int = 0
    spans: int = 0
    traces: int = 0
    ends: dict[str, float] = field(default_factory=dict)
    window: tuple[float, float] = (0.0, 0.0)  # the fault's span, Unix s (set by the test)
