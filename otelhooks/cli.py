"""``otelhooks demo``: run the demo cases with the console, OTLP or no exporter."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from typing import Any

CASE_CHOICES = ("allowed", "blocked", "parallel", "redaction", "all")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="otelhooks", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the seed chapter's cases, traced")
    demo.add_argument("--case", choices=CASE_CHOICES, default="all")
    demo.add_argument(
        "--exporter",
        choices=("console", "otlp", "none"),
        default="console",
        help="where spans go (default: the OpenTelemetry SDK's console exporter)",
    )
    demo.add_argument(
        "--otlp-endpoint",
        default=None,
        help="collector base URL (default: OTEL_EXPORTER_OTLP_ENDPOINT, else localhost)",
    )
    demo.add_argument(
        "--otlp-protocol",
        choices=("http/protobuf", "grpc"),
        default=None,
        help="OTLP transport (default: OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf)",
    )
    demo.add_argument(
        "--export-timeout",
        type=float,
        default=None,
        help="seconds one OTLP export may take with its retries (default 2)",
    )
    demo.add_argument("--json", action="store_true", help="print the transcript as JSON lines")
    demo.add_argument(
        "--log-format",
        choices=("console", "json"),
        default="console",
        help="how structlog renders the tool-call events on stderr",
    )
    demo.add_argument("--no-tree", action="store_true", help="do not print the span trees")
    return parser


def configure_structlog(fmt: str, redactor: Any) -> None:
    """The demo's structlog set-up: trace ids, redaction, a readable console or JSON, on stderr."""
    import structlog

    from .builtin import RedactingProcessor, add_trace_context

    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            add_trace_context,
            RedactingProcessor(redactor),
            renderer,
        ],
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def run_demo(args: argparse.Namespace) -> int:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from .builtin import Redactor
    from .demo import CASES, run_cases
    from .spantree import render_tree
    from .tracing import setup_tracing
    from .transcript import Transcript

    out = sys.stdout
    redactor = Redactor()
    configure_structlog(args.log_format, redactor)
    # The OTLP exporter logs each failed attempt; the demo reports the outcome once, clearly.
    logging.getLogger("opentelemetry.exporter").setLevel(logging.CRITICAL)
    logging.getLogger("opentelemetry.sdk").setLevel(logging.CRITICAL)

    tree = InMemorySpanExporter()
    setup = setup_tracing(
        args.exporter,
        service_name="otelhooks-demo",
        otlp_endpoint=args.otlp_endpoint,
        otlp_protocol=args.otlp_protocol,
        export_timeout=args.export_timeout,
        redactor=redactor,
        processors=[SimpleSpanProcessor(tree)],
        # console: export once at the end, after the transcripts, not interleaved with them
        batch_options={"schedule_delay_millis": 600_000} if args.exporter == "console" else None,
        console_out=sys.stderr if args.json else out,
    )
    transcript = Transcript(out, json_lines=args.json)

    def after_case(name: str) -> None:
        if args.no_tree:
            return
        spans = tree.get_finished_spans()
        tree.clear()
        if args.json:
            transcript.note(render_tree(spans), type="span_tree", case=name)
        else:
            print(f"\n[spans]\n{render_tree(spans)}\n", file=out, flush=True)

    names = list(CASES) if args.case == "all" else [args.case]
    try:
        asyncio.run(
            run_cases(
                names,
                transcript,
                redactor=redactor,
                tracer_provider=setup.provider,
                after_case=after_case,
            )
        )
    finally:
        if args.exporter == "console" and not args.json:
            print("[exported spans: OpenTelemetry console exporter]", file=out, flush=True)
        stats = setup.shutdown()
    if args.exporter == "otlp":
        status = "ok" if stats.lost == 0 else "EXPORT FAILED"
        print(f"traces: {status}: {stats.summary()}", file=sys.stderr, flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "demo":
        return run_demo(args)
    return 2  # pragma: no cover - argparse rejects other commands


if __name__ == "__main__":
    sys.exit(main())
