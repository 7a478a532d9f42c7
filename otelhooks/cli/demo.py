"""``otelhooks demo``: example agents whose tool calls are allowed, blocked, run in parallel and
redacted (and, with the ``mcp`` extra, MCP server tools), each run traced.

Output, in order, for each case: its transcript, its structlog events (on stderr, held back
until the transcript is out, so they never land inside it) and its span tree; last a one-line
summary per case. The console exporter (the default) is those span trees; ``--console-json``
adds the OpenTelemetry SDK console exporter's JSON of every span, after the cases. The exporter,
endpoint, protocol, timeout and service name come from the flags, else from the standard
``OTEL_*`` variables, else the defaults (console; ``otelhooks-demo``). Under
``opentelemetry-instrument`` with no ``--exporter`` the demo uses the pipeline it configured.

Printing is never part of a hook: hooks record their lines, which are written between events.
When stdout's reader goes away (``otelhooks demo | head -5``) the demo stops after the case in
progress, prints nothing more (on stderr either) and exits with 141.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from ..builtin import Redactor
    from ..core.loop import RunResult
    from .transcript import Output, Transcript

CASE_CHOICES = ("allowed", "blocked", "parallel", "redaction", "mcp", "approval", "all")
CASE_HELP = (
    "allowed: a tool runs and an after-hook checks its result; blocked: a before-hook stops a "
    "tool (it never runs); parallel: three tools at once; redaction: a secret in a result is "
    "redacted; mcp: mcp-server-time's tools (needs the mcp extra and mcp-server-time); "
    "approval: two transfers ask for approval, a scripted approver approves one and refuses "
    "the other; all: every case but mcp and approval (the default)"
)
DEMO_SERVICE_NAME = "otelhooks-demo"
DEMO_EXPORT_TIMEOUT_S = 1.0
UI_EXPORT_TIMEOUT_S = 10.0
"""With ``--ui`` the viewer is known to be up (started or found): an export waits for it this
long, so a viewer slow to answer on a busy machine gets every span (a dead one refuses at once)."""


def add_parser(sub: Any) -> None:
    demo = sub.add_parser(
        "demo",
        help="run example agents (allowed, blocked, parallel, redaction) and show their traces",
        description="Run example agents whose tool calls are allowed, blocked, run in parallel "
        "and redacted; print each case's transcript, its log events (on stderr) and its span "
        "tree, and last a one-line summary per case. The raw spans as OpenTelemetry JSON: "
        "--console-json.",
    )
    demo.add_argument("--case", choices=CASE_CHOICES, default="all", help=CASE_HELP)
    demo.add_argument(
        "--exporter",
        choices=("console", "otlp", "none"),
        default=None,
        help="where spans go (default: OTEL_TRACES_EXPORTER, else console: the span trees)",
    )
    demo.add_argument(
        "--console-json",
        action="store_true",
        help="also print every span as the OpenTelemetry SDK's console exporter does (JSON), "
        "after the cases",
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
        help="seconds one OTLP export may take with its retries (default: "
        "OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT, else 1: the demo's collector is a local one; "
        f"{UI_EXPORT_TIMEOUT_S:g} with --ui, whose viewer is known to be up)",
    )
    demo.add_argument(
        "--service-name",
        default=None,
        help=f"service.name (default: OTEL_SERVICE_NAME, else {DEMO_SERVICE_NAME})",
    )
    demo.add_argument(
        "--metrics",
        choices=("console", "otlp", "none"),
        default=None,
        help="where the GenAI and tool-call metrics go (default: OTEL_METRICS_EXPORTER, else none)",
    )
    demo.add_argument("--json", action="store_true", help="print the transcript as JSON lines")
    demo.add_argument(
        "--log-format",
        choices=("console", "json"),
        default="console",
        help="how structlog renders the tool-call events on stderr",
    )
    demo.add_argument("--no-tree", action="store_true", help="do not print the span trees")
    demo.add_argument(
        "--ui",
        action="store_true",
        help="send the traces, with their content, to Arize Phoenix on this machine (the one "
        "running at --ui-port, else one started for the run; see otelhooks ui) and print where",
    )
    demo.add_argument("--ui-port", type=int, default=6006, help="the viewer's port (default 6006)")


def configure_structlog(
    fmt: str, redactor: Any, file: TextIO | None = None, level: str | None = None
) -> None:
    """structlog for a command: trace ids, redaction, a readable console or JSON, on ``file``
    (stderr by default: stdout is the transcript, or in MCP stdio mode the protocol); events
    below ``level`` (a :mod:`logging` level name) are dropped before any processor runs."""
    import structlog

    from ..builtin import RedactingProcessor, add_trace_context

    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,  # what a caller bound (the proxy's caller)
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            add_trace_context,
            RedactingProcessor(redactor),
            renderer,
        ],
        logger_factory=structlog.PrintLoggerFactory(file=file or sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level] if level is not None else logging.NOTSET
        ),
        cache_logger_on_first_use=False,
    )


def quiet_exporter_logs() -> None:
    """The OTLP exporter logs each failed attempt; commands report the outcome once, clearly."""
    logging.getLogger("opentelemetry.exporter").setLevel(logging.CRITICAL)
    logging.getLogger("opentelemetry.sdk").setLevel(logging.CRITICAL)


def _export_timeout(given: float | None, default: float = DEMO_EXPORT_TIMEOUT_S) -> float | None:
    """The demo's export timeout: given, the standard variables', else ``default`` (1 s: a short
    run against a local collector, where a dead one costs one second at the end, not two)."""
    if given is not None:
        return given
    variables = ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
    return None if any(os.environ.get(v) for v in variables) else default


def run(args: argparse.Namespace) -> int:
    if not args.ui:
        return run_demo(args)
    from ..telemetry.attributes import CAPTURE_CONTENT_ENV
    from . import ui

    if args.exporter not in (None, "otlp") or args.otlp_endpoint or args.otlp_protocol:
        print(
            "otelhooks demo: --ui sends to the viewer over OTLP/HTTP; leave out --exporter, "
            "--otlp-endpoint and --otlp-protocol",
            file=sys.stderr,
        )
        return 2
    try:
        with ui.viewer_for(args, args.ui_port, port_flag="--ui-port") as viewer:
            if viewer.process is not None:
                ui.announce_started(viewer)
            # the viewer shows what the calls did: content on the spans (redacted, as always)
            os.environ.setdefault(CAPTURE_CONTENT_ENV, "SPAN_ONLY")
            args.exporter, args.otlp_endpoint, args.otlp_protocol = "otlp", viewer.url, None
            args.export_timeout = _export_timeout(args.export_timeout, UI_EXPORT_TIMEOUT_S)
            status = run_demo(args, openinference=True)
            service = args.service_name or os.environ.get("OTEL_SERVICE_NAME") or DEMO_SERVICE_NAME
            print(f"\nThe traces in Phoenix: {viewer.project_url(service)}", flush=True)
            if viewer.process is None:
                return status
            print("Phoenix keeps running for you to look; Ctrl-C stops it.", flush=True)
            ui.wait_for_interrupt(viewer)
            return status
    except ui.ViewerError as exc:
        print(f"otelhooks demo: {exc}", file=sys.stderr)
        return 2


def run_demo(args: argparse.Namespace, *, openinference: bool | None = None) -> int:
    """The demo itself, to the exporter the arguments name. Each case's transcript, then its log
    lines (on stderr, held back until the transcript is out), then its span tree; last a
    summary. A reader that goes away (``otelhooks demo | head``) ends it quietly after the
    case in progress, with :data:`READER_GONE`."""
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ..builtin import Redactor
    from ..telemetry.environment import ConfigurationError
    from ..telemetry.spantree import render_tree
    from ..telemetry.tracing import setup_tracing
    from .demo_cases import CASES
    from .transcript import HeldLines, Output, Transcript

    out, err = Output(sys.stdout), Output(sys.stderr)
    held = HeldLines()
    redactor = Redactor()
    configure_structlog(args.log_format, redactor, file=held)  # type: ignore[arg-type]
    logging.basicConfig(level=logging.WARNING, format="otelhooks: %(message)s", stream=err)
    quiet_exporter_logs()

    tree = InMemorySpanExporter()
    json_out = err if args.json else out  # in --json mode stdout holds JSON lines only
    exporter, kinds, console_json = _exporter_choice(args)
    processors: list[Any] = [SimpleSpanProcessor(tree)]
    if console_json == "processor":
        processors.append(
            BatchSpanProcessor(_console_json(json_out), schedule_delay_millis=_HOLD_MS)
        )
    try:
        setup = setup_tracing(
            exporter,
            service_name=args.service_name,
            default_service_name=DEMO_SERVICE_NAME,
            otlp_endpoint=args.otlp_endpoint,
            otlp_protocol=args.otlp_protocol,
            export_timeout=_export_timeout(args.export_timeout),
            redactor=redactor,
            processors=processors,
            # the console exporter's JSON comes once, at the end: never inside the transcripts
            batch_options={"schedule_delay_millis": _HOLD_MS}
            if console_json == "exporter"
            else None,
            console_out=json_out,  # type: ignore[arg-type]
            metrics=args.metrics,
            openinference=openinference,
        )
    except ConfigurationError as exc:
        err.line(f"otelhooks demo: {exc}")
        return 2
    transcript = Transcript(out, json_lines=args.json)

    def after_case(name: str) -> None:
        spans = tree.get_finished_spans()
        tree.clear()
        if not args.no_tree:
            text = render_tree(spans)
            if args.json:
                transcript.note(text, type="span_tree", case=name)
            else:
                transcript.note(f"\n[span tree: {name}]\n{text}")
        transcript.flush()
        if out.reader_gone:
            held.drop()  # the reader left: nothing more, on stderr either
        else:
            held.release(err, apart=not args.json)  # the case's log lines, after its tree

    names = list(CASES) if args.case == "all" else [args.case]
    finals: dict[str, RunResult] = {}
    try:
        finals = asyncio.run(
            run_cases(
                names,
                transcript,
                redactor=redactor,
                tracer_provider=setup.provider,
                after_case=after_case,
                meter_provider=setup.meter_provider,
                stop=lambda: out.reader_gone,
            )
        )
    finally:
        if console_json and not out.reader_gone and not setup.uses_global:
            json_out.line("\n[exported spans: the OpenTelemetry console exporter's JSON]")
        stats = setup.shutdown()  # the console exporter's JSON, if asked for, is written now
        if out.reader_gone:
            held.drop()
        else:
            held.release(err)
    if out.reader_gone:
        return READER_GONE
    if not args.json:
        _summary(out, finals, console_json=bool(console_json))
    if "otlp" in kinds and not setup.uses_global:
        status = "ok" if stats.lost == 0 else "EXPORT FAILED"
        err.line(f"traces: {status}: {stats.summary()}")
    return READER_GONE if out.reader_gone else 0


# Hold a batch until shutdown: the demo is short, and its exported spans come after it.
_HOLD_MS = 600_000

READER_GONE = 141
"""The exit status once the reader of stdout went away: 128 + SIGPIPE, as a program the signal
ended (the demo ignores the signal, stops quietly, and says so with the status)."""


def _exporter_choice(args: argparse.Namespace) -> tuple[str | None, list[str], str]:
    """The exporter to pass to ``setup_tracing``, the exporter kinds in effect, and where the
    console exporter's JSON comes from: ``"exporter"`` (the console exporter set up from
    ``OTEL_TRACES_EXPORTER`` with others), ``"processor"`` (``--console-json``: one more
    processor), or ``""`` (none). The console exporter alone (the default) is the span trees."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider

    from ..telemetry.environment import exporters_from_env

    if args.exporter is None and isinstance(trace.get_tracer_provider(), SdkTracerProvider):
        # opentelemetry-instrument configured the pipeline: setup_tracing uses it
        return None, [], "processor" if args.console_json else ""
    kinds = [args.exporter] if args.exporter else (exporters_from_env() or ["console"])
    if len(kinds) > 1:  # several from OTEL_TRACES_EXPORTER: as configured
        return None, kinds, "exporter" if "console" in kinds else ""
    chosen = kinds[0]
    return (
        "none" if chosen == "console" else chosen,
        kinds,
        "processor" if args.console_json else "",
    )


def _console_json(out: Any) -> Any:
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    return ConsoleSpanExporter(out=out)


def _summary(out: Output, finals: dict[str, RunResult], *, console_json: bool) -> None:
    """Last, what a person reads: a line per case, and where the rest is."""
    out.write("\n[summary]\n")
    for name, result in finals.items():
        out.write(summary_line(name, result) + "\n")
    if not console_json:
        out.write(
            "\nThe spans as the OpenTelemetry console exporter prints them (JSON): "
            "otelhooks demo --console-json\n"
        )
    out.flush()


def summary_line(name: str, result: RunResult) -> str:
    """One line for a case: what became of its tool calls, and the answer."""
    from ..core.messages import ToolResult

    outcomes: dict[str, int] = {}
    for message in result.messages:
        if isinstance(message, ToolResult):
            kind = (
                "blocked"
                if message.content.startswith("blocked:")
                else "failed"
                if message.is_error
                else "ran"
            )
            outcomes[kind] = outcomes.get(kind, 0) + 1
    calls = ", ".join(f"{count} {kind}" for kind, count in outcomes.items()) or "no tool calls"
    text = " ".join(result.text.split())  # one line, whatever the answer holds
    answer = text if len(text) <= 70 else text[:67] + "..."
    if result.stop_reason == "error":
        answer = f"error: {result.error_message}"
    return f"  {name:<10} {calls:<22} {answer}"


async def run_cases(
    names: list[str],
    transcript: Transcript,
    *,
    redactor: Redactor,
    tracer_provider: TracerProvider | None,
    after_case: Callable[[str], None] | None = None,
    logger: Any = None,
    meter_provider: Any = None,
    stop: Callable[[], bool] | None = None,
) -> dict[str, RunResult]:
    """Run the named cases one after the other; return each one's final message. ``stop``,
    asked before each case, ends the run early (the reader went away). The ``mcp`` case needs
    ``otelhooks[mcp]`` and ``mcp-server-time`` (see :mod:`otelhooks.cli.demo_mcp`)."""
    from .demo_cases import DEMO_CASES, demo_agent

    finals: dict[str, RunResult] = {}
    for name in names:
        if stop is not None and stop():
            break
        if finals:
            transcript.gap()
        transcript.note(f"otelhooks demo: {name}", case=name)
        if name == "mcp":
            from .demo_mcp import run_mcp_case

            finals[name] = await run_mcp_case(
                transcript,
                redactor=redactor,
                tracer_provider=tracer_provider,
                logger=logger,
                meter_provider=meter_provider,
            )
        else:
            case = DEMO_CASES[name]
            agent = demo_agent(
                case,
                transcript,
                redactor=redactor,
                tracer_provider=tracer_provider,
                logger=logger,
                meter_provider=meter_provider,
            )
            finals[name] = await agent.run(case.prompt)
        if after_case is not None:
            after_case(name)
    return finals
