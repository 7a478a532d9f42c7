"""Where the fleet's engines are: the Kafka and Cassandra class paths, the gateway collector and
the Jaeger binary, each from its variable or the machine's otelhooks cache
(:mod:`otelhooks.cli.cache`) that ``scripts/install-fleet.sh`` and ``scripts/install-jaeger.sh``
fill from an otelhooks checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..cache import cached

KAFKA_VERSION = "4.3.2"
CASSANDRA_VERSION = "5.0.9"
GATEWAY_VERSION = "v0.139.0"
JAEGER_VERSION = "v2.12.0"


class FleetError(RuntimeError):
    """The fleet cannot do what was asked; the message is the one line to print."""


def source_root() -> Path | None:
    """The otelhooks checkout: ``OTELHOOKS_SOURCE``, the one this package was installed from
    (editable), or the working directory, whichever has ``scripts/install-fleet.sh``."""
    candidates = [os.environ.get("OTELHOOKS_SOURCE"), Path(__file__).resolve().parents[3], "."]
    for candidate in candidates:
        if candidate and (Path(candidate) / "scripts" / "install-fleet.sh").is_file():
            return Path(candidate).resolve()
    return None


@dataclass(frozen=True)
class Engines:
    """The programs a fleet runs."""

    java: Path
    kafka_lib: Path
    cassandra_lib: Path
    gateway: Path
    jaeger: Path
    configs: Path  # the folder with gateway.yaml, ingester.yaml and query.yaml

    def jar(self, lib: Path, prefix: str) -> Path:
        """The jar in ``lib`` whose name starts with ``prefix`` (the jamm agent)."""
        found = sorted(lib.glob(f"{prefix}*.jar"))
        if not found:
            raise FleetError(f"no {prefix}*.jar in {lib}: run bash scripts/install-fleet.sh")
        return found[-1]


def _given_or_cached(variable: str, folder: str, version: str, *inside: str) -> Path | None:
    given = os.environ.get(variable)
    return Path(given) if given else cached(folder, version, *inside)


def find_engines(install: bool = False) -> Engines:
    """The engines, installed first when ``install`` (from a checkout); a :class:`FleetError`
    naming what is missing and how to get it otherwise."""
    java = shutil.which("java")
    if java is None:
        raise FleetError("Java 17 is needed to run Kafka and Cassandra: no 'java' on PATH")
    root = source_root()
    if install:
        if root is None:
            raise FleetError("--install works from an otelhooks checkout (scripts/ not found)")
        for script in ("install-fleet.sh", "install-jaeger.sh"):
            done = subprocess.run(
                ["bash", str(root / "scripts" / script)], stdout=subprocess.DEVNULL
            )
            if done.returncode != 0:
                raise FleetError(f"scripts/{script} failed (exit {done.returncode}); see above")
    found = {
        "Kafka": _given_or_cached("OTELHOOKS_KAFKA_LIB", "kafka", KAFKA_VERSION, "lib"),
        "Cassandra": _given_or_cached(
            "OTELHOOKS_CASSANDRA_LIB", "cassandra", CASSANDRA_VERSION, "lib"
        ),
        "the gateway collector": _given_or_cached(
            "OTELHOOKS_GATEWAY_BIN",
            "fleet-gateway",
            GATEWAY_VERSION,
            "otelcol-otelhooks-gateway",
        ),
        "Jaeger": _given_or_cached("OTELHOOKS_JAEGER_BIN", "jaeger", JAEGER_VERSION, "jaeger"),
    }
    missing = [name for name, path in found.items() if path is None or not path.exists()]
    if missing:
        raise FleetError(
            f"{', '.join(missing)} not installed: run `otelhooks fleet up --install` (or bash "
            "scripts/install-fleet.sh and scripts/install-jaeger.sh) in the otelhooks checkout"
        )
    configs = Path(os.environ.get("OTELHOOKS_FLEET_CONFIGS", ""))
    if not os.environ.get("OTELHOOKS_FLEET_CONFIGS"):
        if root is None:
            raise FleetError("the fleet's configuration (collector-config/fleet/) was not found")
        configs = root / "collector-config" / "fleet"
    paths = {name: path for name, path in found.items() if path is not None}
    return Engines(
        java=Path(java),
        kafka_lib=paths["Kafka"],
        cassandra_lib=paths["Cassandra"],
        gateway=paths["the gateway collector"],
        jaeger=paths["Jaeger"],
        configs=configs,
    )
