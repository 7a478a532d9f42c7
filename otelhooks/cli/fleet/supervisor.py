"""Starting, watching and stopping the fleet's processes, with what was started recorded in
``fleet.json`` in the run folder so that ``status`` and ``down`` (another process) act on those
processes and nothing else."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .engines import Engines, FleetError
from .topology import GROUP, HOST, KEYSPACE, TOPIC, Component, Shape, kafka_cluster_id

STATE_FILE = "fleet.json"
GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def default_run_dir() -> Path:
    """``$XDG_STATE_HOME/otelhooks/fleet`` (``~/.local/state/otelhooks/fleet``)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "otelhooks" / "fleet"


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def check_ports(components: Iterable[Component]) -> None:
    """A :class:`FleetError` naming the first port of ``components`` that something holds."""
    for component in components:
        check_port_map(component.ports)


def check_port_map(ports: Mapping[str, int]) -> None:
    """A :class:`FleetError` naming the first of ``ports`` (by name) that something holds."""
    for name, port in ports.items():
        if not port_free(port):
            raise FleetError(
                f"port {port} ({name}) is in use: stop what holds it, or give "
                f"--port {name}=N (or --base-port)"
            )


def accepts(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1):
            return True
    except OSError:
        return False


def healthy(component: Component) -> bool:
    """Whether the component answers its health check."""
    if component.health_url is not None:
        try:
            with urllib.request.urlopen(component.health_url, timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False
    return component.tcp_port is not None and accepts(component.tcp_port)


def _start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (field 22 of /proc/pid/stat), to tell a process from
    a later one that got its number."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def alive(pid: int, started: str | None) -> bool:
    """Whether ``pid`` is still the process that was started (not a zombie, not reused)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z" and (started is None or _start_time(pid) == started)


def _tail(log: str, lines: int = 3) -> str:
    try:
        text = Path(log).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line[:200] for line in text[-lines:])


class Fleet:
    """The processes of one fleet in one run folder."""

    def __init__(self, run: Path, components: Mapping[str, Component] | None = None) -> None:
        self.run = run
        self.components: dict[str, Component] = dict(components or {})
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.pids: dict[str, tuple[int, str | None]] = {}
        self.info: dict[str, Any] = {}
        self.partitions = 0  # the topic's partitions, as Kafka describes them once it is up

    # -- state ---------------------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        return self.run / STATE_FILE

    def save(self) -> None:
        state = {
            "info": self.info,
            "components": {n: asdict(c) for n, c in self.components.items()},
            "pids": {n: {"pid": p, "started": s} for n, (p, s) in self.pids.items()},
        }
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.state_file)

    @classmethod
    def load(cls, run: Path) -> Fleet:
        """The fleet recorded in ``run``; a :class:`FleetError` when there is none."""
        try:
            state = json.loads((run / STATE_FILE).read_text())
        except FileNotFoundError:
            raise FleetError(f"no fleet was started in {run} (no {STATE_FILE})") from None
        except ValueError as exc:
            raise FleetError(f"{run / STATE_FILE} is not a fleet's state: {exc}") from None
        fleet = cls(run, {n: Component(**c) for n, c in state["components"].items()})
        fleet.info = state.get("info", {})
        fleet.pids = {n: (p["pid"], p.get("started")) for n, p in state.get("pids", {}).items()}
        return fleet

    # -- one component -------------------------------------------------------------------
    def is_running(self, name: str) -> bool:
        if name not in self.pids:
            return False
        pid, started = self.pids[name]
        process = self.processes.get(name)
        if process is not None:
            return process.poll() is None
        return alive(pid, started)

    def start(self, name: str) -> None:
        """Start one component (not waiting for it); a clear error if a port of its is taken."""
        component = self.components[name]
        check_ports([component])
        # The fleet's processes are not agents: none of the user's OTEL_* settings, and no
        # traces of their own sent to whatever listens on the default OTLP port.
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env.update({"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"})
        env.update(component.env)
        Path(component.log).parent.mkdir(parents=True, exist_ok=True)
        with open(component.log, "ab") as out:
            process = subprocess.Popen(
                component.argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=self.run,
            )
        self.processes[name] = process
        self.pids[name] = (process.pid, _start_time(process.pid))
        self.save()

    def wait_healthy(self, name: str, timeout: float | None = None) -> None:
        """Return once the component answers; a :class:`FleetError` naming its log if it exits
        or does not answer in time."""
        component = self.components[name]
        deadline = time.monotonic() + (timeout or component.timeout)
        while time.monotonic() < deadline:
            if not self.is_running(name):
                raise FleetError(
                    f"{name} exited while starting; its log: {component.log} "
                    f"({_tail(component.log)})"
                )
            if healthy(component):
                return
            time.sleep(0.3)
        raise FleetError(
            f"{name} did not come up in {timeout or component.timeout:.0f} s; its log: "
            f"{component.log} ({_tail(component.log)})"
        )

    def stop(self, name: str, sig: int = signal.SIGTERM, grace: float = 30.0) -> None:
        """Stop one component this fleet started: ``sig`` to its process group, then SIGKILL
        after ``grace`` s. A process that is not the one started (its number reused) is left."""
        if not self.is_running(name):
            self.pids.pop(name, None)
            return
        pid, _ = self.pids[name]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, sig)
        deadline = time.monotonic() + grace
        while self.is_running(name) and time.monotonic() < deadline:
            self._reap(name)
            time.sleep(0.1)
        if self.is_running(name):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            while self.is_running(name):
                self._reap(name)
                time.sleep(0.05)
        self._reap(name)
        self.pids.pop(name, None)
        self.processes.pop(name, None)
        self.save()

    def kill(self, name: str) -> None:
        """``kill -9`` one component (a crash, for fault tests)."""
        self.stop(name, signal.SIGKILL, grace=0)

    def restart(self, name: str) -> None:
        self.stop(name)
        self.start(name)
        self.wait_healthy(name)

    def _reap(self, name: str) -> None:
        process = self.processes.get(name)
        if process is not None:
            process.poll()

    # -- the whole fleet -----------------------------------------------------------------
    def up(self, engines: Engines, shape: Shape) -> None:
        """Start everything in order and wait for each to answer; on a failure, stop what was
        started and raise the :class:`FleetError`."""
        check_ports(self.components.values())
        try:
            self._format_kafka(engines)
            self.start("kafka")
            self.start("cassandra")
            self.wait_healthy("kafka")
            self._create_topic(engines, shape.topic_partitions)
            self.partitions = self._topic_partitions(engines)
            self.wait_healthy("cassandra")
            ingesters = [n for n in self.components if n.startswith("ingester-")]
            self.start(ingesters[0])  # the first one creates the keyspace
            self.wait_healthy(ingesters[0])
            rest = [n for n in self.components if n not in ("kafka", "cassandra", ingesters[0])]
            for name in rest:
                self.start(name)
            with ThreadPoolExecutor(len(rest)) as pool:
                list(pool.map(self.wait_healthy, rest))
            self.wait_for_group(engines)
        except BaseException:
            self.down()
            raise

    def down(self, names: Iterable[str] | None = None) -> list[str]:
        """Stop the fleet's processes, the gateways first (they hand what they hold to Kafka)
        and Kafka last; returns the names of those that were running."""
        order = [n for n in self.components if n.startswith("gateway-")]
        order += [n for n in self.components if n.startswith("ingester-") or n == "query"]
        order += ["cassandra", "kafka"]
        wanted = set(names) if names is not None else set(self.components)
        stopped = []
        for name in [n for n in order if n in wanted and n in self.components]:
            if self.is_running(name):
                stopped.append(name)
            self.stop(name)
        return stopped

    def status(self) -> dict[str, Any]:
        """Each component: pid, running, healthy, log."""
        report: dict[str, Any] = {}
        for name, component in self.components.items():
            running = self.is_running(name)
            report[name] = {
                "pid": self.pids[name][0] if name in self.pids else None,
                "running": running,
                "healthy": running and healthy(component),
                "log": component.log,
            }
        return report

    # -- Kafka's storage and topic --------------------------------------------------------
    def _kafka_tool(self, engines: Engines, main: str, *args: str) -> str:
        """Run one of Kafka's tools; its output goes to Kafka's log and is returned."""
        log = self.components["kafka"].log
        done = subprocess.run(
            [str(engines.java), "-cp", f"{engines.kafka_lib}/*", main, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=120,
        )
        with open(log, "ab") as out:
            out.write(done.stdout)
        if done.returncode != 0:
            raise FleetError(f"kafka: {main} {args[0]} failed; its log: {log} ({_tail(log)})")
        return done.stdout.decode(errors="replace")

    def group_partitions(self, engines: Engines) -> list[int]:
        """How many partitions each member of the ingesters' consumer group holds, as Kafka
        describes the group ([] while it has no member; a member holds none while the group
        rebalances)."""
        broker = f"{HOST}:{self.components['kafka'].tcp_port}"
        argv = [str(engines.java), "-cp", f"{engines.kafka_lib}/*", GROUP_COMMAND, "--describe"]
        done = subprocess.run(
            [*argv, "--bootstrap-server", broker, "--group", GROUP, "--members"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        rows = [line.split() for line in done.stdout.splitlines() if line.startswith(GROUP)]
        return [int(row[-1]) for row in rows if row[-1].isdigit()]

    def wait_for_group(self, engines: Engines, timeout: float = 180.0) -> None:
        """Return once every ingester holds some of the topic's partitions and all of them are
        held. Ingesters answer their health checks before their consumer group has settled,
        and a partition that moves while a trace waits for its sampling decision splits the
        trace between two tail samplers (docs/scaling-out.md): a fleet handed out before
        then would keep some traces in part."""
        ingesters = sum(1 for name in self.components if name.startswith("ingester-"))
        deadline = time.monotonic() + timeout
        while True:
            held = self.group_partitions(engines)
            if len(held) == ingesters and all(held) and sum(held) == self.partitions:
                return
            if time.monotonic() > deadline:
                raise FleetError(
                    f"the ingesters' consumer group did not settle in {timeout:.0f} s "
                    f"(partitions per member: {held}); their logs: "
                    + ", ".join(self.components[n].log for n in self.components if "ingester" in n)
                )
            time.sleep(1)

    def _format_kafka(self, engines: Engines) -> None:
        data = Path(self.components["kafka"].data[0])
        if (data / "meta.properties").exists():
            return
        config = self.components["kafka"].argv[-1]
        cluster = kafka_cluster_id()
        self._kafka_tool(
            engines,
            "kafka.tools.StorageTool",
            "format",
            "-t",
            cluster,
            "-c",
            config,
            "--standalone",
        )

    def _topic_partitions(self, engines: Engines) -> int:
        """The partitions the spans' topic has, as Kafka describes it (a topic kept from an
        earlier run keeps its own count)."""
        broker = f"{HOST}:{self.components['kafka'].tcp_port}"
        text = self._kafka_tool(
            engines,
            "org.apache.kafka.tools.TopicCommand",
            "--describe",
            "--bootstrap-server",
            broker,
            "--topic",
            TOPIC,
        )
        found = re.search(r"PartitionCount:\s*(\d+)", text)
        if found is None:
            raise FleetError(f"kafka: the topic {TOPIC} has no partition count: {text[:200]}")
        return int(found.group(1))

    def _create_topic(self, engines: Engines, partitions: int) -> None:
        broker = f"{HOST}:{self.components['kafka'].tcp_port}"
        self._kafka_tool(
            engines,
            "org.apache.kafka.tools.TopicCommand",
            "--create",
            "--if-not-exists",
            "--bootstrap-server",
            broker,
            "--topic",
            TOPIC,
            "--partitions",
            str(partitions),
            "--replication-factor",
            "1",
        )


__all__ = ["GROUP", "KEYSPACE", "TOPIC", "Fleet", "Shape", "default_run_dir"]
