"""``otelhooks traces``: read traces back from a Jaeger query API and print their span trees.

How to look at traces without Docker (the Jaeger built from the Go module has no web UI): the
same picture the demo prints, for any service that sent traces to that Jaeger. Filters: service,
operation, tags (``otelhooks.decision=block``, ``error=true``), a time window and a limit;
``--follow`` prints traces as they arrive; ``--json`` prints one JSON object per trace.
Needs nothing beyond the standard library.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, TextIO

from ..telemetry.jaeger_query import JaegerQuery, QueryError, Trace, parse_tags
from ..telemetry.spantree import render_tree

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}
SKIPPED_SERVICES = ("jaeger",)


def add_parser(sub: Any) -> None:
    traces = sub.add_parser(
        "traces",
        help="print span trees of traces stored in Jaeger",
        description="Read traces back from a Jaeger query API and print their span trees (the "
        "demo's picture), for any service that sent traces to that Jaeger. Filter by service, "
        "operation, tags (otelhooks.decision=block, error=true), time window and count; "
        "--follow prints traces as they arrive, --json one JSON object per trace.",
    )
    traces.add_argument(
        "--endpoint",
        default=None,
        help="Jaeger query API (default: OTELHOOKS_JAEGER_QUERY_URL, else http://localhost:16686)",
    )
    traces.add_argument(
        "--service", action="append", default=None, help="service name (default: every service)"
    )
    traces.add_argument("--operation", default=None, help="span name, e.g. 'execute_tool shell'")
    traces.add_argument(
        "--tag",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keep traces with a span carrying this tag (repeatable): otelhooks.decision=block",
    )
    traces.add_argument(
        "--since", default="1h", help="how far back to look: 30s, 15m, 2h, 1d (default 1h)"
    )
    traces.add_argument(
        "--until", default=None, help="end of the window, as far back (default now)"
    )
    traces.add_argument("--limit", type=int, default=20, help="traces per service (default 20)")
    traces.add_argument("--follow", action="store_true", help="keep printing new traces")
    traces.add_argument(
        "--interval", type=float, default=2.0, help="seconds between polls with --follow"
    )
    traces.add_argument("--json", action="store_true", help="one JSON object per trace")


def parse_duration(text: str) -> float:
    """Seconds in ``30s``, ``15m``, ``2h``, ``1d``, ``500ms`` (a bare number is seconds)."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not a duration: {text!r} (use e.g. 30s, 15m, 2h, 1d)")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    try:
        tags = parse_tags(args.tag)
        since = parse_duration(args.since)
        until = parse_duration(args.until) if args.until else 0.0
    except ValueError as exc:
        print(f"otelhooks traces: {exc}", file=sys.stderr)
        return 2
    client = JaegerQuery(args.endpoint)
    printer = _Printer(out, as_json=args.json)
    try:
        services = args.service or [s for s in client.services() if s not in SKIPPED_SERVICES]
        window_start = time.time() - since
        while True:
            now = time.time()
            found: list[Trace] = []
            for service in services:
                found.extend(
                    client.traces(
                        service,
                        operation=args.operation,
                        tags=tags,
                        start_us=int(window_start * 1e6),
                        end_us=int((now - until) * 1e6),
                        limit=args.limit,
                    )
                )
            printer.print_new(found, settle=args.follow)
            if not args.follow:
                if not printer.printed:
                    where = ", ".join(services) or "no service"
                    print(f"otelhooks traces: no traces found ({where})", file=sys.stderr)
                return 0
            time.sleep(args.interval)
            if not args.service:  # services that appeared meanwhile
                services = [s for s in client.services() if s not in SKIPPED_SERVICES]
            window_start = max(window_start, now - since)
    except QueryError as exc:
        print(f"otelhooks traces: {exc}", file=sys.stderr)
        return 1


class _Printer:
    """Prints each trace once. With ``settle``, a trace is printed when its span count was the
    same in two polls in a row (its spans may still be arriving before that)."""

    def __init__(self, out: TextIO, *, as_json: bool) -> None:
        self.out = out
        self.as_json = as_json
        self.printed: set[str] = set()
        self._pending: dict[str, int] = {}

    def print_new(self, traces: Iterable[Trace], *, settle: bool) -> None:
        unique = {t.trace_id: t for t in traces}
        for trace in sorted(unique.values(), key=lambda t: t.start_ns):
            if trace.trace_id in self.printed:
                continue
            if settle and self._pending.get(trace.trace_id) != len(trace.spans):
                self._pending[trace.trace_id] = len(trace.spans)
                continue
            self._pending.pop(trace.trace_id, None)
            self.printed.add(trace.trace_id)
            self._print(trace)

    def _print(self, trace: Trace) -> None:
        root = trace.root
        service = root.service if root is not None else ""
        if self.as_json:
            record = {
                "trace_id": trace.trace_id,
                "service": service,
                "start": _iso(trace.start_ns),
                "spans": [s.to_dict() for s in sorted(trace.spans, key=lambda s: s.start_ns)],
            }
            print(json.dumps(record, ensure_ascii=False, default=str), file=self.out, flush=True)
            return
        header = (
            f"trace {trace.trace_id}  {service}  {_iso(trace.start_ns)}  {len(trace.spans)} spans"
        )
        print(f"{header}\n{render_tree(trace.spans)}\n", file=self.out, flush=True)


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).isoformat(timespec="milliseconds")
