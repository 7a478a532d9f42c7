"""``otelhooks mcp proxy``: serve upstream MCP servers' tools through the hook boundary.

::

    otelhooks mcp proxy --policy policy.toml -- uvx mcp-server-git --repository .
    otelhooks mcp proxy --policy servers.toml --listen 127.0.0.1:8765
    otelhooks mcp proxy --policy policy.toml --check -- uvx mcp-server-time

With stdio (the default) stdout carries the protocol and nothing else: logs go to stderr or
``--log-file``, console spans to stderr. Spans go where the standard ``OTEL_*`` variables say
(``OTEL_TRACES_EXPORTER`` defaults to ``otlp`` here, as in the OpenTelemetry SDK).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TextIO

PROXY_SERVICE_NAME = "otelhooks-mcp-proxy"


def add_parser(mcp_sub: Any) -> None:
    proxy = mcp_sub.add_parser(
        "proxy",
        help="serve upstream MCP servers' tools through before -> run -> after",
        description="Serve upstream MCP servers' tools through before -> run -> after. Give "
        "the upstream command after --, or name upstreams in the policy file.",
    )
    proxy.add_argument("--policy", help="policy file (TOML): rules, hooks, upstreams")
    proxy.add_argument(
        "--name", help="upstream name for the command after -- (default: its program)"
    )
    proxy.add_argument(
        "--pass-env",
        action="append",
        default=[],
        metavar="NAME",
        help="pass this environment variable on to the upstream after -- (repeatable; it gets "
        "only HOME, LOGNAME, PATH, SHELL, TERM and USER otherwise)",
    )
    proxy.add_argument(
        "--listen",
        metavar="[HOST:]PORT",
        help="serve Streamable HTTP at http://HOST:PORT/mcp instead of stdio",
    )
    proxy.add_argument("--log-file", help="write logs here instead of stderr")
    proxy.add_argument("--log-format", choices=("console", "json"), default="console")
    proxy.add_argument(
        "--log-level",
        default="INFO",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="lowest level of the log lines and of the per-call events (tool_call.completed "
        "is INFO, tool_call.blocked WARNING, tool_call.failed ERROR)",
    )
    proxy.add_argument(
        "--check",
        action="store_true",
        help="start the upstreams, check the policy against their tools, list them, and exit",
    )
    proxy.add_argument(
        "--audit-record-gap",
        action="store_true",
        help="start even though the audit log does not match its head (lines cut from its "
        "end, the head gone): write a signed record of the gap and go on from there",
    )
    proxy.add_argument(
        "upstream_command",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND",
        help="the upstream server command line",
    )


def run(args: argparse.Namespace) -> int:
    from ...integrations.mcp.policy import (
        PolicyError,
        ProxyPolicy,
        load_policy,
        upstream_from_command,
    )

    command = list(args.upstream_command or [])
    if command and command[0] == "--":
        command = command[1:]
    log = _open_log(args.log_file)
    try:
        policy = load_policy(args.policy) if args.policy else ProxyPolicy()
    except PolicyError as exc:
        print(f"otelhooks mcp proxy: {exc}", file=sys.stderr)
        return 2
    if args.audit_record_gap and policy.audit is not None:
        policy = dataclasses.replace(
            policy, audit=dataclasses.replace(policy.audit, record_gap=True)
        )
    try:
        upstreams = (
            [upstream_from_command(command, args.name, inherit_env=args.pass_env)]
            if command
            else []
        )
    except ValueError as exc:
        print(f"otelhooks mcp proxy: {exc}", file=sys.stderr)
        return 2
    if not upstreams and not policy.upstreams:
        print(
            "otelhooks mcp proxy: no upstream: give its command after -- "
            "(otelhooks mcp proxy -- uvx mcp-server-time) or [[upstream]] tables in --policy",
            file=sys.stderr,
        )
        return 2
    listen = _parse_listen(args.listen) if args.listen else None
    if args.listen and listen is None:
        print(
            f"otelhooks mcp proxy: --listen wants [HOST:]PORT, not {args.listen!r}", file=sys.stderr
        )
        return 2
    _configure_logging(log, args.log_format, args.log_level, policy.redactor)
    stop: list[Callable[[], None]] = []
    return asyncio.run(
        _until_signalled(_serve(policy, upstreams, listen, check=args.check, stop=stop), stop)
    )


async def _until_signalled(
    serving: Coroutine[Any, Any, int], stop: list[Callable[[], None]]
) -> int:
    """Run ``serving``; SIGTERM or SIGHUP ends it, so that it closes the upstreams (their
    process groups with them) and flushes its spans before the process exits: a listener
    stops accepting and answers what is in flight (``stop``), stdio serving is cancelled."""
    task = asyncio.ensure_future(serving)
    loop = asyncio.get_running_loop()

    def end() -> None:
        if stop:
            stop[0]()
        else:
            task.cancel()

    for signum in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(signum, end)
    try:
        return await task
    except asyncio.CancelledError:
        return 128 + signal.SIGTERM


async def _serve(
    policy: Any,
    upstreams: list[Any],
    listen: tuple[str, int] | None,
    *,
    check: bool,
    stop: list[Callable[[], None]],
) -> int:
    from ...integrations.mcp.proxy import MCPProxy, ProxyStartError
    from ...telemetry.environment import ConfigurationError, exporters_from_env
    from ...telemetry.tracing import setup_tracing

    try:
        setup = setup_tracing(
            None if exporters_from_env() else "otlp",
            default_service_name=PROXY_SERVICE_NAME,
            redactor=policy.redactor,
            console_out=sys.stderr,
            set_global=True,
        )
    except ConfigurationError as exc:
        print(f"otelhooks mcp proxy: {exc}", file=sys.stderr)
        return 2
    logging.getLogger("opentelemetry.exporter").setLevel(logging.CRITICAL)
    try:
        proxy = MCPProxy(policy, upstreams, tracer_provider=setup.provider)
        if listen is not None:
            proxy.check_listen(*listen)  # before any upstream starts: refused at once
        await proxy.start()
    except (ProxyStartError, ValueError) as exc:
        print(f"otelhooks mcp proxy: {exc}", file=sys.stderr)
        if "proxy" in locals():
            await proxy.close()
        setup.shutdown()
        return 1
    try:
        if check:
            assert proxy.base is not None
            for tool in proxy.base.registry:
                notes = []
                if policy.denies(tool.name):
                    notes.append("denied: hidden from tools/list")
                if proxy.gateway.held_back(tool.name, proxy.base.key):
                    notes.append("definition changed since pinned: hidden and blocked")
                notes.extend(proxy.guard_notes.get(tool.name, ()))
                cedar = proxy.gateway.cedar
                if cedar is not None:
                    notes.append(cedar.report(tool.name) or "cedar: not keyed")
                print(tool.name + (f" ({'; '.join(notes)})" if notes else ""), file=sys.stderr)
            return 0
        if listen is None:
            await proxy.serve_stdio()
        else:
            logging.getLogger("otelhooks.mcp.proxy").info(
                "serving on http://%s:%d/mcp (%s)", listen[0], listen[1], proxy.describe_auth()
            )
            stop.append(proxy.stop)
            await proxy.serve_http(*listen)
        return 0
    finally:
        await proxy.close()
        setup.shutdown()


def _parse_listen(value: str) -> tuple[str, int] | None:
    host, _, port = value.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        return None
    if not 0 < number < 65536:
        return None
    return (host.strip("[]") or "127.0.0.1", number)


def _open_log(path: str | None) -> TextIO:
    if path is None:
        return sys.stderr
    return open(os.path.expanduser(path), "a", encoding="utf-8", buffering=1)


def _configure_logging(out: TextIO, fmt: str, level: str, redactor: Any) -> None:
    from ..demo import configure_structlog

    configure_structlog(fmt, redactor, file=out, level=level)
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.getLogger("otelhooks").setLevel(level)
