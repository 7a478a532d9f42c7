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
    if args.limit < 1:
        print(f"otelhooks traces: --limit must be 1 or more, not {args.limit}", file=sys.stderr)
        return 2
    client = JaegerQuery(args.endpoint)
    printer = _Printer(out, as_json=args.json)
    try:
        known = [s for s in client.services() if s not in SKIPPED_SERVICES]
        unknown = [s for s in args.service or [] if s not in known]
        if unknown and not args.follow:
            print(
                f"otelhooks traces: {client.url} has no traces of {', '.join(unknown)}; "
                f"the services it has traces of: {', '.join(known) or 'none yet'}",
                file=sys.stderr,
            )
            return 1
        services = args.service or known
        window_start = time.time() - since
        while True:
            now = time.time()
            found: list[Trace] = []
            cut: list[str] = []
            for service in services:
                traces, more = recent_traces(
                    client,
                    service,
                    operation=args.operation,
                    tags=tags,
                    start_us=int(window_start * 1e6),
                    end_us=int((now - until) * 1e6),
                    limit=args.limit,
                )
                found.extend(traces)
                if more:
                    cut.append(service)
            printer.print_new(found, settle=args.follow)
            if not args.follow:
                _say_what_is_missing(args, client, services, known, printer, cut)
                return 0
            time.sleep(args.interval)
            if not args.service:  # services that appeared meanwhile
                services = [s for s in client.services() if s not in SKIPPED_SERVICES]
            window_start = max(window_start, now - since)
    except QueryError as exc:
        print(f"otelhooks traces: {exc}", file=sys.stderr)
        return 1


def recent_traces(
    client: JaegerQuery,
    service: str,
    *,
    operation: str | None,
    tags: dict[str, str],
    start_us: int,
    end_us: int,
    limit: int,
) -> tuple[list[Trace], bool]:
    """Up to ``limit`` traces of ``service`` in the window, and whether there may be more.

    A page as full as asked may leave traces out (which ones, the store decides). A page with
    fewer is not always all there is: on Cassandra, Jaeger's ``limit`` bounds the index rows
    (about one a span, newest first) a search reads, so a page of 20 may hold 11 traces while
    more are stored. So a short page is followed by earlier ones, each ending where the one
    before reached (the earliest of its traces' latest spans: nothing newer is skipped), until
    a page brings nothing new or more than ``limit`` traces are found; the newest are kept.
    """

    def page(end: int) -> list[Trace]:
        return client.traces(
            service, operation=operation, tags=tags, start_us=start_us, end_us=end, limit=limit
        )

    first = page(end_us)
    if len(first) >= limit:
        return first[:limit], True
    found = {t.trace_id: t for t in first}
    last, end = first, end_us
    while last and len(found) <= limit:
        reached = min(max(s.start_ns for s in t.spans) // 1000 for t in last if t.spans) + 1
        if reached >= end:
            break
        end = reached  # inclusive of the span that ended the page; seen traces are skipped
        last = [t for t in page(end) if t.trace_id not in found]
        found.update((t.trace_id, t) for t in last)
    newest = sorted(found.values(), key=lambda t: t.start_ns, reverse=True)[:limit]
    return sorted(newest, key=lambda t: t.start_ns), len(found) > limit


def _say_what_is_missing(
    args: argparse.Namespace,
    client: JaegerQuery,
    services: list[str],
    known: list[str],
    printer: _Printer,
    cut: list[str],
) -> None:
    """On stderr: the services whose list was cut at ``--limit``, or, when nothing was found,
    where it looked and which services have traces."""
    for service in cut:
        print(
            f"otelhooks traces: {service}: {args.limit} traces shown (--limit {args.limit}); "
            "there may be more in the window: raise --limit, or narrow it with --since, "
            "--until or --tag",
            file=sys.stderr,
        )
    if printer.printed:
        return
    where = ", ".join(services) or "no service"
    filters = "".join(
        f" {flag}"
        for flag, given in (("--operation", args.operation), ("--tag", args.tag))
        if given
    )
    print(
        f"otelhooks traces: no traces found ({where}) in the last {args.since}"
        + (f" matching{filters}" if filters else "")
        + f"; the services with traces at {client.url}: {', '.join(known) or 'none yet'}",
        file=sys.stderr,
    )


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
