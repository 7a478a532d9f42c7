"""``otelhooks fleet``: the trace pipeline past one machine, started on this one.

::

    otelhooks fleet up [--gateways N] [--ingesters M] [--sampling PCT]  # one JSON object
    otelhooks fleet status                                    # JSON; exit 1 unless all are up
    otelhooks fleet down [--purge]                            # stops what up started

Agents send OTLP to any gateway (N collectors: memory limiter, attribute scrubbing, a persistent
queue, the Kafka exporter keyed by trace ID) -> Kafka (KRaft, acks=all) -> M ingesters in one
consumer group (tail sampling: blocked calls, errors and hook failures kept, the rest sampled) ->
Cassandra, read through Jaeger's query API (``otelhooks traces --endpoint``). Everything listens
on 127.0.0.1. See docs/scaling-out.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from .engines import FleetError, find_engines
from .supervisor import STATE_FILE, Fleet, check_port_map, default_run_dir
from .topology import DEFAULT_BASE_PORT, HOST, Shape, plan, plan_ports


def add_parser(sub: Any) -> None:
    fleet = sub.add_parser(
        "fleet",
        help="the trace pipeline past one machine (gateways, Kafka, ingesters, Cassandra), here",
        description="Start, inspect and stop a local fleet pipeline on loopback: OTLP gateways "
        "-> Kafka -> ingesters with tail sampling -> Cassandra, with Jaeger's query API.",
    )
    fleet.add_argument("--dir", help=f"its run folder (default {default_run_dir()})")
    actions = fleet.add_subparsers(dest="action", required=True)
    up = actions.add_parser(
        "up",
        help="start the fleet and print its endpoints as JSON",
        description="Start Kafka, Cassandra, the ingesters, the query service and the gateways "
        "on loopback, wait until each answers, and print the endpoints as one JSON object. A "
        "taken port refuses the start before anything is made; a failure later stops what had "
        "started (fleet down --purge removes what is left).",
    )
    up.add_argument("--gateways", type=int, default=2, help="gateway collectors (default 2)")
    up.add_argument("--ingesters", type=int, default=2, help="ingesters (default 2)")
    up.add_argument(
        "--sampling", type=float, default=10.0, help="%% of ordinary traces kept (default 10)"
    )
    up.add_argument("--decision-wait", default="5s", help="tail-sampling wait (default 5s)")
    up.add_argument(
        "--base-port", type=int, default=DEFAULT_BASE_PORT, help="first port of the layout"
    )
    up.add_argument(
        "--port",
        action="append",
        default=[],
        metavar="NAME=N",
        help="one port by name, e.g. gateway-1.otlp_grpc=4317 (repeatable)",
    )
    up.add_argument(
        "--install", action="store_true", help="install the engines first (from a checkout)"
    )
    actions.add_parser(
        "status",
        help="each component's pid and health, as JSON",
        description="Print the fleet's endpoints, its shape (the topic's partitions as Kafka "
        "describes them) and each component's pid, whether it runs, whether it answers its "
        "health check, and its log, as one JSON object; exit 1 unless every component is "
        "healthy.",
    )
    down = actions.add_parser(
        "down",
        help="stop what `fleet up` started",
        description="Stop the processes `fleet up` recorded in the run folder (the gateways "
        "first, Kafka last; a process whose pid was reused is left alone) and print what was "
        "stopped as JSON. --purge deletes the run folder too: its data, logs and configs.",
    )
    down.add_argument(
        "--purge", action="store_true", help="delete the run folder (data, logs, configs) too"
    )


def _overrides(values: list[str]) -> dict[str, int]:
    overrides = {}
    for value in values:
        name, sep, port = value.partition("=")
        if not sep or not port.strip().isdigit():
            raise FleetError(f"--port takes NAME=N (e.g. gateway-1.otlp_grpc=4317), not {value!r}")
        overrides[name.strip()] = int(port)
    return overrides


def endpoints(fleet: Fleet) -> dict[str, Any]:
    """What agents and readers need: OTLP base URLs, the query API, Kafka, Cassandra, pids."""
    ports = {k: v for c in fleet.components.values() for k, v in c.ports.items()}
    gateways = [n for n in fleet.components if n.startswith("gateway-")]
    return {
        "otlp_grpc": [f"http://{HOST}:{ports[f'{g}.otlp_grpc']}" for g in gateways],
        "otlp_http": [f"http://{HOST}:{ports[f'{g}.otlp_http']}" for g in gateways],
        "query": f"http://{HOST}:{ports['query.http']}",
        "kafka": f"{HOST}:{ports['kafka.broker']}",
        "cassandra": f"{HOST}:{ports['cassandra.cql']}",
        "dir": str(fleet.run),
        "pids": {name: pid for name, (pid, _) in fleet.pids.items()},
        "logs": {name: c.log for name, c in fleet.components.items()},
    }


def start_fleet(
    run: Path, shape: Shape, base: int, overrides: dict[str, int], install: bool
) -> Fleet:
    """Start a fleet in ``run`` and return it once every component answers."""
    try:
        existing = Fleet.load(run)
    except FleetError:
        existing = None
    if existing is not None and any(existing.is_running(n) for n in existing.components):
        raise FleetError(f"a fleet is already running in {run}: otelhooks fleet status / down")
    engines = find_engines(install)
    ports = plan_ports(shape, base, overrides)
    check_port_map(ports)  # a taken port refuses the start before anything is made
    run.mkdir(parents=True, exist_ok=True)
    fleet = Fleet(run)
    fleet.info = {"shape": vars(shape)}
    fleet.save()  # recorded first: `fleet down --purge` removes whatever this start leaves
    fleet.components = plan(run, engines, shape, ports)
    fleet.save()
    fleet.up(engines, shape)
    fleet.info["shape"] = {**vars(shape), "partitions": fleet.partitions}
    fleet.info.update(endpoints(fleet))
    fleet.save()
    return fleet


def _empty_folder(folder: Path) -> bool:
    return folder.is_dir() and not (folder / STATE_FILE).exists() and not any(folder.iterdir())


def run(args: argparse.Namespace) -> int:
    folder = Path(args.dir) if args.dir else default_run_dir()
    try:
        if args.action == "up":
            shape = Shape(args.gateways, args.ingesters, args.sampling, args.decision_wait)
            fleet = start_fleet(folder, shape, args.base_port, _overrides(args.port), args.install)
            print(json.dumps(endpoints(fleet)))
            return 0
        if args.action == "down" and args.purge and _empty_folder(folder):
            folder.rmdir()  # what a start refused before it recorded anything may leave
            print(json.dumps({"stopped": [], "purged": True}))
            return 0
        fleet = Fleet.load(folder)
        if args.action == "status":
            report = fleet.status()
            print(json.dumps({**fleet.info, **endpoints(fleet), "components": report}))
            return 0 if all(c["healthy"] for c in report.values()) else 1
        stopped = fleet.down()
        if args.purge:
            shutil.rmtree(folder, ignore_errors=True)
        print(json.dumps({"stopped": stopped, "purged": bool(args.purge)}))
        return 0
    except FleetError as exc:
        print(f"otelhooks fleet: {exc}", file=sys.stderr)
        return 1
