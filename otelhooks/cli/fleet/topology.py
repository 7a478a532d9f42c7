"""The fleet's components on one machine: their ports, command lines, environments, health
checks and the files they write, all under one run folder.

Ports come from a base (``--base-port``, default 24000) in a fixed layout, and any one can be
given by name (``--port gateway-1.otlp_grpc=4317``); :func:`port_names` lists the names.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .engines import Engines, FleetError

HOST = "127.0.0.1"
TOPIC = "otelhooks-spans"
GROUP = "otelhooks-ingest"
KEYSPACE = "otelhooks_traces"
DEFAULT_BASE_PORT = 24000

# Cassandra's own JVM options for Java 17 (conf/jvm17-server.options): the module exports and
# opens it needs, and attach-self for the jamm agent.
CASSANDRA_JVM_FLAGS = (
    "-Djdk.attach.allowAttachSelf=true",
    *(
        f"--add-exports={m}=ALL-UNNAMED"
        for m in (
            "java.base/jdk.internal.misc",
            "java.base/jdk.internal.ref",
            "java.base/sun.nio.ch",
            "java.management.rmi/com.sun.jmx.remote.internal.rmi",
            "java.rmi/sun.rmi.registry",
            "java.rmi/sun.rmi.server",
            "java.sql/java.sql",
        )
    ),
    *(
        f"--add-opens={m}=ALL-UNNAMED"
        for m in (
            "java.base/java.lang.module",
            "java.base/jdk.internal.loader",
            "java.base/jdk.internal.ref",
            "java.base/jdk.internal.reflect",
            "java.base/jdk.internal.math",
            "java.base/jdk.internal.module",
            "java.base/jdk.internal.util.jar",
            "jdk.management/com.sun.management.internal",
            "java.base/sun.nio.ch",
            "java.base/java.io",
            "java.base/java.nio",
            "java.base/java.util.concurrent",
            "java.base/java.util",
            "java.base/java.util.concurrent.atomic",
            "java.base/java.lang",
            "java.base/java.math",
            "java.base/java.lang.reflect",
            "java.base/java.net",
        )
    ),
)


@dataclass(frozen=True)
class Shape:
    """How many of each tier, and how the ingest tier samples."""

    gateways: int = 2
    ingesters: int = 2
    sampling: float = 10.0  # percent of ordinary traces kept
    decision_wait: str = "5s"
    partitions: int = 0  # 0: four per ingester
    kafka_heap: str = "512m"
    cassandra_heap: str = "1G"

    def __post_init__(self) -> None:
        if self.gateways < 1 or self.ingesters < 1:
            raise FleetError("a fleet needs at least one gateway and one ingester")
        if not 0 <= self.sampling <= 100:
            raise FleetError(f"--sampling is a percentage (0 to 100), not {self.sampling}")

    @property
    def topic_partitions(self) -> int:
        return self.partitions or max(4, 4 * self.ingesters)


def gateway_names(shape: Shape) -> list[str]:
    return [f"gateway-{i + 1}" for i in range(shape.gateways)]


def ingester_names(shape: Shape) -> list[str]:
    return [f"ingester-{i + 1}" for i in range(shape.ingesters)]


def default_ports(shape: Shape, base: int = DEFAULT_BASE_PORT) -> dict[str, int]:
    """Every port of the fleet by name, laid out from ``base``."""
    ports = {
        "kafka.broker": base,
        "kafka.controller": base + 1,
        "cassandra.cql": base + 2,
        "cassandra.storage": base + 3,
        "cassandra.jmx": base + 4,
        "query.http": base + 5,
        "query.grpc": base + 6,
        "query.health": base + 7,
        "query.metrics": base + 8,
        "query.otlp": base + 9,
    }
    for i, name in enumerate(gateway_names(shape)):
        first = base + 10 + 4 * i
        for offset, role in enumerate(("otlp_grpc", "otlp_http", "health", "metrics")):
            ports[f"{name}.{role}"] = first + offset
    first_ingester = base + 10 + 4 * shape.gateways
    for i, name in enumerate(ingester_names(shape)):
        ports[f"{name}.health"] = first_ingester + 2 * i
        ports[f"{name}.metrics"] = first_ingester + 2 * i + 1
    return ports


def port_names(shape: Shape) -> list[str]:
    return list(default_ports(shape))


def plan_ports(shape: Shape, base: int, overrides: Mapping[str, int]) -> dict[str, int]:
    """The fleet's ports: the layout from ``base`` with ``overrides`` by name; a clear error
    for an unknown name or two components on one port."""
    ports = default_ports(shape, base)
    for name, port in overrides.items():
        if name not in ports:
            raise FleetError(f"no port named {name!r}; the names are: {', '.join(ports)}")
        if not 0 < port < 65536:
            raise FleetError(f"port {name}={port} is not a TCP port")
        ports[name] = port
    seen: dict[int, str] = {}
    for name, port in ports.items():
        if port in seen:
            raise FleetError(f"ports {seen[port]} and {name} are both {port}")
        seen[port] = name
    return ports


@dataclass
class Component:
    """One process of the fleet: how to start it, how to tell it is up, where it logs."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: str
    health_url: str | None = None  # answers 200 when up
    tcp_port: int | None = None  # or: accepts connections when up
    timeout: float = 60.0  # seconds to come up
    ports: dict[str, int] = field(default_factory=dict)  # every port it listens on, by name
    data: list[str] = field(default_factory=list)  # folders it keeps state in


def _env(values: Mapping[str, object]) -> dict[str, str]:
    return {key: str(value) for key, value in values.items()}


def kafka_cluster_id() -> str:
    """A cluster id as Kafka's storage tool makes them (16 random bytes, URL-safe base64)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def write_kafka_config(run: Path, ports: Mapping[str, int]) -> Path:
    """A one-node KRaft broker+controller's ``server.properties`` and log configuration."""
    folder = run / "kafka"
    folder.mkdir(parents=True, exist_ok=True)
    controller = f"{HOST}:{ports['kafka.controller']}"
    broker = f"{HOST}:{ports['kafka.broker']}"
    properties = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": controller,
        "listeners": f"PLAINTEXT://{broker},CONTROLLER://{controller}",
        "advertised.listeners": f"PLAINTEXT://{broker}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(folder / "data"),
        "num.partitions": "4",
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "min.insync.replicas": "1",
        "group.initial.rebalance.delay.ms": "0",
        "log.retention.hours": "24",
        "log.segment.bytes": str(256 * 1024 * 1024),
    }
    config = folder / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
    (folder / "log4j2.yaml").write_text(
        "Configuration:\n"
        "  Appenders:\n"
        "    Console:\n"
        "      name: STDOUT\n"
        "      PatternLayout:\n"
        '        pattern: "[%d] %p %m (%c)%n"\n'
        "  Loggers:\n"
        "    Root:\n"
        "      level: INFO\n"
        "      AppenderRef:\n"
        "        - ref: STDOUT\n"
    )
    return config


def write_cassandra_config(run: Path, ports: Mapping[str, int]) -> Path:
    """A one-node ``cassandra.yaml`` on loopback with every folder under the run folder."""
    folder = run / "cassandra"
    folder.mkdir(parents=True, exist_ok=True)
    storage = f"{HOST}:{ports['cassandra.storage']}"
    config = folder / "cassandra.yaml"
    config.write_text(
        f"""cluster_name: otelhooks-fleet
num_tokens: 16
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
data_file_directories: [{folder / "data"}]
commitlog_directory: {folder / "commitlog"}
saved_caches_directory: {folder / "saved_caches"}
hints_directory: {folder / "hints"}
cdc_raw_directory: {folder / "cdc_raw"}
commitlog_sync: periodic
commitlog_sync_period: 10000ms
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "{storage}"
listen_address: {HOST}
rpc_address: {HOST}
storage_port: {ports["cassandra.storage"]}
native_transport_port: {ports["cassandra.cql"]}
start_native_transport: true
concurrent_writes: 32
write_request_timeout: 5000ms
"""
    )
    (folder / "logback.xml").write_text(
        "<configuration>\n"
        '  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">\n'
        "    <encoder><pattern>%d %level [%thread] %logger{20} %msg%n</pattern></encoder>\n"
        "  </appender>\n"
        '  <root level="INFO"><appender-ref ref="STDOUT"/></root>\n'
        "</configuration>\n"
    )
    return config


def plan(
    run: Path, engines: Engines, shape: Shape, ports: Mapping[str, int]
) -> dict[str, Component]:
    """Every component of the fleet, in start order; writes the Kafka and Cassandra configs."""
    logs = run / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    kafka_config = write_kafka_config(run, ports)
    cassandra_config = write_cassandra_config(run, ports)
    brokers = f"{HOST}:{ports['kafka.broker']}"
    cassandra = f"{HOST}:{ports['cassandra.cql']}"
    components: dict[str, Component] = {}
    components["kafka"] = Component(
        "kafka",
        [
            str(engines.java),
            f"-Xmx{shape.kafka_heap}",
            f"-Xms{shape.kafka_heap}",
            f"-Dlog4j2.configurationFile={run / 'kafka' / 'log4j2.yaml'}",
            "-cp",
            f"{engines.kafka_lib}/*",
            "kafka.Kafka",
            str(kafka_config),
        ],
        {},
        str(logs / "kafka.log"),
        tcp_port=ports["kafka.broker"],
        data=[str(run / "kafka" / "data")],
    )
    cassandra_dir = run / "cassandra"
    components["cassandra"] = Component(
        "cassandra",
        [
            str(engines.java),
            f"-Xms{shape.cassandra_heap}",
            f"-Xmx{shape.cassandra_heap}",
            "-XX:+UseG1GC",
            *CASSANDRA_JVM_FLAGS,
            f"-javaagent:{engines.jar(engines.cassandra_lib, 'jamm-')}",
            "-Dcassandra-foreground=yes",
            f"-Dcassandra.config=file://{cassandra_config}",
            f"-Dcassandra.storagedir={cassandra_dir}",
            f"-Dcassandra.jmx.local.port={ports['cassandra.jmx']}",
            f"-Dlogback.configurationFile={cassandra_dir / 'logback.xml'}",
            "-cp",
            f"{engines.cassandra_lib}/*",
            "org.apache.cassandra.service.CassandraDaemon",
        ],
        {},
        str(logs / "cassandra.log"),
        tcp_port=ports["cassandra.cql"],
        timeout=240.0,
        data=[str(cassandra_dir / d) for d in ("data", "commitlog", "saved_caches", "hints")],
    )
    common = {"FLEET_HOST": HOST, "FLEET_KAFKA_BROKERS": brokers, "FLEET_KAFKA_TOPIC": TOPIC}
    for name in ingester_names(shape):
        components[name] = Component(
            name,
            [str(engines.jaeger), "--config", str(engines.configs / "ingester.yaml")],
            _env(
                {
                    **common,
                    "FLEET_KAFKA_GROUP": GROUP,
                    "FLEET_CASSANDRA": cassandra,
                    "FLEET_KEYSPACE": KEYSPACE,
                    "FLEET_SAMPLING_PERCENTAGE": shape.sampling,
                    "FLEET_DECISION_WAIT": shape.decision_wait,
                    "FLEET_HEALTH_PORT": ports[f"{name}.health"],
                    "FLEET_METRICS_PORT": ports[f"{name}.metrics"],
                }
            ),
            str(logs / f"{name}.log"),
            health_url=f"http://{HOST}:{ports[f'{name}.health']}/status",
            timeout=120.0,
        )
    components["query"] = Component(
        "query",
        [str(engines.jaeger), "--config", str(engines.configs / "query.yaml")],
        _env(
            {
                "FLEET_HOST": HOST,
                "FLEET_CASSANDRA": cassandra,
                "FLEET_KEYSPACE": KEYSPACE,
                "FLEET_QUERY_HTTP_PORT": ports["query.http"],
                "FLEET_QUERY_GRPC_PORT": ports["query.grpc"],
                "FLEET_HEALTH_PORT": ports["query.health"],
                "FLEET_METRICS_PORT": ports["query.metrics"],
                "FLEET_UNUSED_PORT": ports["query.otlp"],
            }
        ),
        str(logs / "query.log"),
        health_url=f"http://{HOST}:{ports['query.health']}/status",
    )
    for name in gateway_names(shape):
        queue = run / name / "queue"
        components[name] = Component(
            name,
            [str(engines.gateway), "--config", str(engines.configs / "gateway.yaml")],
            _env(
                {
                    **common,
                    "FLEET_OTLP_GRPC_PORT": ports[f"{name}.otlp_grpc"],
                    "FLEET_OTLP_HTTP_PORT": ports[f"{name}.otlp_http"],
                    "FLEET_HEALTH_PORT": ports[f"{name}.health"],
                    "FLEET_METRICS_PORT": ports[f"{name}.metrics"],
                    "FLEET_QUEUE_DIR": queue,
                }
            ),
            str(logs / f"{name}.log"),
            health_url=f"http://{HOST}:{ports[f'{name}.health']}/status",
            data=[str(queue)],
        )
    for name, component in components.items():
        component.ports = {k: v for k, v in ports.items() if k.split(".")[0] == name}
    return components
