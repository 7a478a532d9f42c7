"""One otelhooks agent process of the fleet tests: runs agent turns (allowed, blocked, failing
and secret-returning tool calls, through the redaction and structlog hooks) and sends their
spans over OTLP/gRPC to the fleet's gateways, failing over between them.

    python tests/fleet_agent.py --endpoints http://127.0.0.1:1,http://127.0.0.1:2 \
        --runs 50 --agent 1 --out result.json [--mix all|keep] [--pace 0.05]

Writes what it sent: spans ended/exported/failed/dropped, and per trace its span count and kind
(``plain``, ``secret``, ``blocked``, ``failing``) and the end of its root span (Unix s), plus
the secrets its tools returned.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from collections import Counter
from pathlib import Path

import structlog
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otelhooks import AssistantMessage, Hooks, ToolCall, ToolRegistry
from otelhooks.builtin import (
    RedactingProcessor,
    RedactionHook,
    Redactor,
    StructlogEvents,
    ToolDenyList,
    add_trace_context,
)
from otelhooks.core.loop import Agent
from otelhooks.providers import ScriptedProvider, quote_last_tool_result
from otelhooks.telemetry.tracing import setup_tracing

# Secrets in the formats their services document (AWS access key id + secret access key from
# AWS's own documentation; a GitHub fine-grained token's shape), suffixed per agent and run.
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
GITHUB_PREFIX = "github_pat_11ABCDEFG0"


def github_token(agent: int, run: int) -> str:
    body = f"{agent:02d}{run:05d}Zq8rTn3vLx7Wm2Kp5Hs9Dj4Fg6Yc1Bv0Na8Qe3Ru7Ti2Ow5Pl"
    return f"{GITHUB_PREFIX}{body}_{'k7Hd2Lm9Qx4Rt6Vw1Yz3Bn8Cs5Fg0Jp2Mu7Xe4Ta9Wq6Eo1Ri3Sy8Dv5Gh'}"[
        :93
    ]


def kinds(mix: str) -> list[str]:
    return ["blocked", "failing"] if mix == "keep" else ["plain", "blocked", "failing", "secret"]


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoints", required=True)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--agent", type=int, default=1)
    parser.add_argument("--out", required=True)
    parser.add_argument("--mix", choices=("all", "keep"), default="all")
    parser.add_argument("--pace", type=float, default=0.0, help="seconds between runs")
    args = parser.parse_args()

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    redactor = Redactor()
    structlog.configure(
        processors=[
            add_trace_context,
            RedactingProcessor(redactor),
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    memory = InMemorySpanExporter()
    setup = setup_tracing(
        "otlp",
        service_name=f"fleet-agent-{args.agent}",
        otlp_endpoint=args.endpoints.split(","),
        otlp_protocol="grpc",
        export_timeout=3.0,
        redactor=redactor,
        processors=[SimpleSpanProcessor(memory)],
        shutdown_timeout=60.0,
        batch_options={"schedule_delay_millis": 200, "max_export_batch_size": 256},
    )

    tools = ToolRegistry()
    secrets: list[str] = []

    @tools.tool
    def lookup(key: str) -> str:
        """Look a key up in the configuration."""
        return {"region": "eu-west-1", "replicas": "3"}.get(key, "unset")

    @tools.tool
    def read_credentials(profile: str) -> str:
        """Read a credentials profile."""
        token = github_token(args.agent, len(secrets))
        secrets.append(token)
        return f"[{profile}]\naws_secret_access_key = {AWS_SECRET}\ngithub_token = {token}\n"

    @tools.tool
    def flaky(n: int) -> str:
        """Fails every time."""
        raise RuntimeError(f"backend {n} is unavailable")

    @tools.tool
    def delete_file(path: str) -> str:
        """Delete a file (the policy blocks it)."""
        raise SystemExit("delete_file must never run")

    hooks = Hooks([RedactionHook(redactor), StructlogEvents(mirror_to_span=True)])
    hooks.add(ToolDenyList(["delete_*"]))
    calls = {
        "plain": [
            ToolCall("c1", "lookup", {"key": "region"}),
            ToolCall("c2", "lookup", {"key": "replicas"}),
        ],
        "secret": [ToolCall("c1", "read_credentials", {"profile": "prod"})],
        "blocked": [
            ToolCall("c1", "lookup", {"key": "region"}),
            ToolCall("c2", "delete_file", {"path": "/etc/passwd"}),
        ],
        "failing": [ToolCall("c1", "flaky", {"n": 7})],
    }
    order = kinds(args.mix)
    for run in range(args.runs):
        kind = order[run % len(order)]
        provider = ScriptedProvider(
            [AssistantMessage(tool_calls=tuple(calls[kind])), quote_last_tool_result()]
        )
        agent = Agent(
            provider,
            tools=tools,
            hooks=hooks,
            scrubber=redactor,
            name=f"fleet-{kind}",
            tracer_provider=setup.provider,
            capture_content=True,  # results on the spans: the redactor must scrub them
        )
        await agent.run(f"run {run}: {kind}")
        if args.pace:
            time.sleep(args.pace)

    stats = setup.shutdown()
    per_trace: Counter[str] = Counter()
    kind_of: dict[str, str] = {}
    ended_at: dict[str, float] = {}
    for span in memory.get_finished_spans():
        trace_id = format(span.context.trace_id, "032x")
        per_trace[trace_id] += 1
        if span.parent is None:
            kind_of[trace_id] = str(span.name).removeprefix("invoke_agent fleet-")
            ended_at[trace_id] = (span.end_time or 0) / 1e9
    result = {
        "ended": stats.ended,
        "exported": stats.exported,
        "failed": stats.failed,
        "dropped": stats.dropped,
        "traces": {
            t: {"spans": n, "kind": kind_of.get(t, "?"), "end": ended_at.get(t, 0.0)}
            for t, n in per_trace.items()
        },
        "secrets": [AWS_SECRET, *secrets],
    }
    Path(args.out).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
