"""The standard ``OTEL_*`` variables, read as the OpenTelemetry SDK reads them, and the OTLP
exporters they configure (traces and metrics alike).

An invalid value is warned about and replaced by the default, as the SDK does; a value that
cannot be honoured (``http/json``) is a :class:`ConfigurationError` that says why.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Mapping
from typing import Any, Final, Literal

OtlpProtocol = Literal["http/protobuf", "grpc"]
Signal = Literal["traces", "metrics"]

logger = logging.getLogger(__name__)

DEFAULT_EXPORTER: Final = "console"
REDACTING_OTLP: Final = "otelhooks_otlp"
"""The name of otelhooks' redacting OTLP exporter as an ``opentelemetry_traces_exporter`` entry
point: what ``OTEL_TRACES_EXPORTER`` names for a pipeline ``opentelemetry-instrument`` builds.
For ``setup_tracing`` it means ``otlp``, which is behind the redactor already."""
DEFAULT_EXPORT_TIMEOUT_S: Final = 2.0
EXPORTER_KINDS: Final = ("console", "otlp", "memory", "none")

_BSP_ENV: Final = {
    "max_queue_size": "OTEL_BSP_MAX_QUEUE_SIZE",
    "schedule_delay_millis": "OTEL_BSP_SCHEDULE_DELAY",
    "max_export_batch_size": "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
    "export_timeout_millis": "OTEL_BSP_EXPORT_TIMEOUT",
}


class ConfigurationError(ValueError):
    """A telemetry setting that cannot be honoured (say, ``http/json``); the message says why."""


def first_set(*names: str) -> str | None:
    """The value of the first of ``names`` that is set and not blank."""
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def sdk_disabled() -> bool:
    """``OTEL_SDK_DISABLED=true``: tracing is off (the SDK then hands out no-op tracers)."""
    return (os.environ.get("OTEL_SDK_DISABLED") or "").strip().lower() == "true"


def exporters_from_env() -> list[str] | None:
    """The exporter names of ``OTEL_TRACES_EXPORTER`` (``None`` when unset); ``otelhooks_otlp``
    is ``otlp``; unknown names are warned about and left out."""
    value = first_set("OTEL_TRACES_EXPORTER")
    if value is None:
        return None
    kinds = []
    for name in (part.strip().lower() for part in value.split(",")):
        if name == REDACTING_OTLP:
            name = "otlp"
        if name in EXPORTER_KINDS:
            kinds.append(name)
        elif name:
            logger.warning(
                "OTEL_TRACES_EXPORTER: unknown exporter %r ignored (otelhooks knows %s)",
                name,
                ", ".join(EXPORTER_KINDS),
            )
    if not kinds:
        logger.warning(
            "OTEL_TRACES_EXPORTER=%r names no usable exporter; using %s", value, DEFAULT_EXPORTER
        )
        return [DEFAULT_EXPORTER]
    return kinds


def redacting_otlp_in_env() -> bool:
    """Whether ``OTEL_TRACES_EXPORTER`` names otelhooks' redacting OTLP exporter."""
    value = first_set("OTEL_TRACES_EXPORTER") or ""
    return REDACTING_OTLP in (part.strip().lower() for part in value.split(","))


def otlp_protocol_from_env() -> OtlpProtocol:
    """``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` / ``..._PROTOCOL``, default ``http/protobuf``."""
    value = first_set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
    return check_protocol(value) if value is not None else "http/protobuf"


def check_protocol(value: str) -> OtlpProtocol:
    """A supported OTLP protocol; ``http/json`` is refused, anything else warned about."""
    value = value.strip().lower()
    if value in ("http/protobuf", "grpc"):
        return value  # type: ignore[return-value]
    if value == "http/json":
        raise ConfigurationError(
            "OTLP protocol 'http/json' is not supported: the official JSON exporter "
            "(opentelemetry-exporter-otlp-json-http) conflicts with the OTLP/protobuf exporters of "
            "this SDK release; use http/protobuf (the default) or grpc"
        )
    logger.warning("unknown OTLP protocol %r; using http/protobuf", value)
    return "http/protobuf"


def export_timeout_from_env() -> float:
    """``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`` / ``..._TIMEOUT`` in seconds (as the Python SDK
    reads them), default 2 s; an invalid value is warned about and the default used."""
    value = first_set("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
    if value is None:
        return DEFAULT_EXPORT_TIMEOUT_S
    try:
        timeout = float(value)
        if timeout > 0:
            return timeout
    except ValueError:
        pass
    logger.warning(
        "invalid OTLP export timeout %r; using the default of %s seconds",
        value,
        DEFAULT_EXPORT_TIMEOUT_S,
    )
    return DEFAULT_EXPORT_TIMEOUT_S


def batch_options_from_env(defaults: Mapping[str, int]) -> dict[str, int]:
    """``defaults`` with each ``OTEL_BSP_*`` variable that is set and valid applied."""
    options = dict(defaults)
    for key, name in _BSP_ENV.items():
        value = first_set(name)
        if value is None:
            continue
        try:
            number = int(value)
            if number <= 0:
                raise ValueError
            options[key] = number
        except ValueError:
            logger.warning("invalid %s=%r ignored; using %s", name, value, options.get(key))
    return options


# The exporter class of each signal and protocol (module, class), and the HTTP path.
_OTLP_EXPORTERS: Final = {
    ("traces", "grpc"): (
        "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
        "OTLPSpanExporter",
    ),
    ("traces", "http/protobuf"): (
        "opentelemetry.exporter.otlp.proto.http.trace_exporter",
        "OTLPSpanExporter",
    ),
    ("metrics", "grpc"): (
        "opentelemetry.exporter.otlp.proto.grpc.metric_exporter",
        "OTLPMetricExporter",
    ),
    ("metrics", "http/protobuf"): (
        "opentelemetry.exporter.otlp.proto.http.metric_exporter",
        "OTLPMetricExporter",
    ),
}


def otlp_exporter(
    signal: Signal,
    endpoint: str | None = None,
    protocol: OtlpProtocol | str | None = None,
    timeout: float | None = None,
) -> tuple[Any, str]:
    """The OTLP exporter of ``signal`` and the address it sends to.

    ``endpoint`` is the collector's base address; ``None`` leaves it, with headers, compression
    and certificates, to the ``OTEL_EXPORTER_OTLP_[{SIGNAL}_]*`` variables. ``protocol`` and
    ``timeout`` (seconds, each export with its retries) default to the variables, then
    ``http/protobuf`` and 2 s.
    """
    proto = check_protocol(protocol) if protocol is not None else otlp_protocol_from_env()
    if timeout is None:
        timeout = export_timeout_from_env()
    module, name = _OTLP_EXPORTERS[(signal, proto)]
    exporter_class = getattr(importlib.import_module(module), name)
    upper = signal.upper()
    if proto == "grpc":
        target = endpoint or first_set(
            f"OTEL_EXPORTER_OTLP_{upper}_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"
        )
        target = target or "http://localhost:4317"
        insecure_env = first_set(
            f"OTEL_EXPORTER_OTLP_{upper}_INSECURE", "OTEL_EXPORTER_OTLP_INSECURE"
        )
        insecure = (
            insecure_env.lower() == "true"
            if insecure_env is not None
            else not target.startswith("https://")
        )
        return exporter_class(endpoint=target, insecure=insecure, timeout=timeout), (
            f"{target} (OTLP/gRPC)"
        )
    full: str | None = None
    if endpoint is not None:
        full = endpoint.rstrip("/")
        if not full.endswith(f"/v1/{signal}"):
            full += f"/v1/{signal}"
    http = exporter_class(endpoint=full, timeout=timeout)
    return http, f"{http._endpoint} (OTLP/HTTP)"
