"""`otelhooks demo` run as users run it: a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from otelhooks.cli.demo_cases import BLOCK_REASON, FAKE_API_KEY, NEVER_PRINTED


def demo(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run(
        [sys.executable, "-m", "otelhooks", "demo", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def test_allowed_case_transcript_has_the_seed_shape() -> None:
    done = demo("--case", "allowed", "--exporter", "none")
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line]
    start = lines.index("[user]")
    assert lines[start : start + 17] == [
        "[user]",
        "Repeat after me: hi",
        "message_start",
        "tool_call: echo",
        "message_end: toolUse",
        "[beforeToolCall]",
        "allow: echo",
        "[afterToolCall]",
        "echo -> hi",
        "tool_result: checked: hi",
        "message_start",
        "text_delta: The tool result is: checked: hi",
        "message_end: stop",
        "[assistant]",
        "content: The tool result is: checked: hi",
        "stopReason: stop",
        "[span tree: allowed]",
    ]
    tree = lines[start + 17 :]
    assert tree[0].startswith("invoke_agent demo-allowed")
    assert [t.split()[0] for t in tree[2:6]] == ["execute_tool", "before", "run", "after"]
    assert "tool_call.completed" in done.stderr  # the structlog event
    assert "trace_id=" in done.stderr


def test_blocked_case_never_runs_the_handler() -> None:
    done = demo("--case", "blocked", "--exporter", "none")
    assert done.returncode == 0, done.stderr
    assert NEVER_PRINTED not in done.stdout + done.stderr
    assert "block: dangerous" in done.stdout
    assert f"tool_result: blocked: {BLOCK_REASON}" in done.stdout
    assert f"content: The tool result is: blocked: {BLOCK_REASON}" in done.stdout
    tool_line = next(line for line in done.stdout.splitlines() if "execute_tool dangerous" in line)
    following = done.stdout.split(tool_line, 1)[1].splitlines()
    assert following[1].strip().startswith("before")
    assert not following[2].strip().startswith("run")
    assert "tool_call.blocked" in done.stderr


def test_console_json_prints_spans_with_the_scrub_record_before_the_summary() -> None:
    done = demo("--case", "redaction", "--console-json")
    assert done.returncode == 0, done.stderr
    assert FAKE_API_KEY not in done.stdout + done.stderr
    assert "OPENAI_API_KEY=[REDACTED:openai_api_key]" in done.stdout
    before, exported = done.stdout.split(
        "[exported spans: the OpenTelemetry console exporter's JSON]", 1
    )
    assert '"name": "execute_tool environment"' in exported
    assert '"otelhooks.redacted.paths"' in exported
    assert "{" not in before  # no JSON among the transcript and its tree
    tree = before.split("[span tree: redaction]", 1)[1]
    assert "execute_tool environment" in tree and "redacted=result" in tree
    # The last screen is what a person reads: the summary.
    ending = exported.split("[summary]", 1)[1]
    assert "{" not in ending and "  redaction  1 ran" in ending


def test_the_default_demo_reads_on_one_screen() -> None:
    """What a person reads, at most 300 lines: each case's transcript and span tree, the
    summary, and the flag that shows the raw spans; no exporter JSON."""
    done = demo()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) <= 300, len(lines)
    assert not [line for line in lines if line.lstrip().startswith(("{", '"'))]
    for case in ("allowed", "blocked", "parallel", "redaction"):
        assert f"[span tree: {case}]" in lines
        assert any(line.startswith(f"  {case} ") for line in lines[lines.index("[summary]") :])
    assert lines[-1].endswith("otelhooks demo --console-json")


def test_log_lines_never_land_inside_a_transcript() -> None:
    """stdout and stderr into one pipe, as a terminal shows them: each case's transcript and
    tree are whole, and its log lines follow them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-m", "otelhooks", "demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stdout
    lines = done.stdout.splitlines()
    logs = [i for i, line in enumerate(lines) if "tool_call." in line and "trace_id=" in line]
    assert len(logs) == 6  # one per tool call: 1 + 1 + 3 + 1
    for case in ("allowed", "blocked", "parallel", "redaction"):
        first = lines.index(f"otelhooks demo: {case}")
        tree = lines.index(f"[span tree: {case}]")
        end = next(i for i in range(tree, len(lines)) if not lines[i].strip())
        assert not [i for i in logs if first <= i <= end], (case, lines[first : end + 1])


def test_json_transcript_parses() -> None:
    done = demo("--case", "all", "--exporter", "none", "--json", "--log-format", "json")
    assert done.returncode == 0, done.stderr
    objects = [json.loads(line) for line in done.stdout.splitlines()]
    types = [o["type"] for o in objects]
    assert types.count("agent_start") == 4 and types.count("agent_end") == 4
    assert types.count("span_tree") == 4
    ends = [o for o in objects if o["type"] == "agent_end"]
    assert all(o["stop_reason"] == "stop" for o in ends)
    logs = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert {log["event"] for log in logs} == {"tool_call.completed", "tool_call.blocked"}
    assert all(len(log["trace_id"]) == 32 for log in logs)


def test_otlp_with_nothing_listening_finishes_quickly_and_says_so() -> None:
    started = time.monotonic()
    done = demo("--exporter", "otlp", "--otlp-endpoint", "http://127.0.0.1:9", "--no-tree")
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "stopReason: stop" in done.stdout
    assert "traces: EXPORT FAILED" in done.stderr
    assert "http://127.0.0.1:9/v1/traces" in done.stderr
    # About 2 s here; the SDK's defaults would hold shutdown for 30 s.
    assert elapsed < 25, f"took {elapsed:.1f}s"


def test_bad_arguments_exit_with_usage_error() -> None:
    done = demo("--case", "nope")
    assert done.returncode == 2
    assert "invalid choice" in done.stderr


def test_mcp_case_runs_the_time_servers_tools_through_the_boundary() -> None:
    done = demo("--case", "mcp", "--exporter", "none", "--json", "--no-tree")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    ends = [e["result"] for e in events if e.get("type") == "tool_execution_end"]
    results = sorted(ends, key=lambda r: r["tool_call_id"])
    assert [r["tool_name"] for r in results] == ["time_get_current_time", "time_convert_time"]
    assert not any(r["is_error"] for r in results)
    converted = json.loads(results[1]["content"].removeprefix("checked: "))
    assert converted["source"]["timezone"] == "Europe/London"
    assert converted["target"]["datetime"].endswith(("-05:00", "-04:00"))
    tokyo = json.loads(results[0]["content"].removeprefix("checked: "))
    assert tokyo["timezone"] == "Asia/Tokyo" and tokyo["datetime"].endswith("+09:00")


def test_mcp_case_without_the_server_says_what_to_install() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.modules['mcp_server_time'] = None\n"
            "import importlib.util\n"
            "importlib.util.find_spec = lambda name, *a: None\n"
            "from otelhooks.cli import main\n"
            "sys.exit(main(['demo', '--case', 'mcp', '--exporter', 'none']))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "otelhooks demo: mcp-server-time is not installed; "
        f"install it with: {sys.executable} -m pip install mcp-server-time"
    )


def _demo_into_a_closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    """The demo with stdout a real pipe whose reader left before the first line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "otelhooks", "demo", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            env=env,
        )
    finally:
        os.close(write)


def test_a_reader_gone_before_the_first_line_ends_the_demo_quietly() -> None:
    for args in ((), ("--json",), ("--console-json",), ("--log-format", "json")):
        done = _demo_into_a_closed_pipe(*args)
        assert done.stderr == "", (args, done.stderr)  # no traceback, no log line, nothing
        assert done.returncode == 141, (args, done.returncode)  # 128 + SIGPIPE


def test_demo_piped_into_head_prints_its_lines_and_no_traceback() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    for flags in ("", "--json", "--console-json"):
        piped = subprocess.run(
            f"{sys.executable} -m otelhooks demo {flags} | head -5",
            shell=True,
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert len(piped.stdout.splitlines()) == 5
        for word in ("Traceback", "BrokenPipe", "hook.failed", "subscriber raised", "[error"):
            assert word not in piped.stderr, (flags, piped.stderr)


async def test_the_demo_hooks_decide_as_usual_when_stdout_is_closed() -> None:
    """Printing is not part of a hook: with the reader gone, every call is decided as with it
    (the policy hook does not fail into a block), and nothing raises."""
    from otelhooks.builtin import Redactor
    from otelhooks.cli.demo import run_cases
    from otelhooks.cli.demo_cases import CASES
    from otelhooks.cli.transcript import Output, Transcript
    from otelhooks.telemetry.testing import in_memory_tracing

    read, write = os.pipe()
    os.close(read)
    with os.fdopen(write, "w") as stream:
        transcript = Transcript(Output(stream))
        tracing = in_memory_tracing()
        finals = await run_cases(
            list(CASES), transcript, redactor=Redactor(), tracer_provider=tracing.provider
        )
    assert transcript.reader_gone
    decisions = sorted(
        (str(s.attributes["gen_ai.tool.name"]), str(s.attributes["otelhooks.decision"]))
        for s in tracing.spans()
        if s.name.startswith("execute_tool")
    )
    assert decisions == [
        ("clock", "allow"),
        ("dangerous", "block"),
        ("echo", "allow"),
        ("environment", "allow"),
        ("weather", "allow"),
        ("weather", "allow"),
    ]
    assert not [s for s in tracing.spans() if (s.attributes or {}).get("error.type")]
    assert finals["allowed"].text == "The tool result is: checked: hi"


class _CassandraLikeQuery:
    """A Jaeger query API on loopback that answers as Jaeger does on Cassandra: ``limit`` bounds
    the index rows (one a span, newest first) a search reads, so a page holds fewer traces
    than asked while more are stored. 14 traces of 3 spans, a second apart."""

    def __init__(self, service: str, traces: int = 14) -> None:
        import http.server
        import threading
        import urllib.parse

        now_us = int(time.time() * 1e6)
        self.spans = [
            (f"{t:032x}", f"{t:08x}{s:08x}", now_us - (traces - t) * 1_000_000 + s * 1000)
            for t in range(1, traces + 1)
            for s in range(3)
        ]
        spans, name = self.spans, service

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(url.query))
                if url.path == "/api/services":
                    body: Any = {"data": [name]}
                else:
                    start, end = int(query["start"]), int(query["end"])
                    rows = sorted((s for s in spans if start <= s[2] <= end), key=lambda s: -s[2])
                    ids = {trace_id for trace_id, _, _ in rows[: int(query["limit"])]}
                    body = {"data": [_jaeger_trace(i, spans, name) for i in sorted(ids)]}
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _jaeger_trace(trace_id: str, spans: list[tuple[str, str, int]], service: str) -> Any:
    mine = [s for s in spans if s[0] == trace_id]
    root = mine[0][1]
    return {
        "traceID": trace_id,
        "processes": {"p1": {"serviceName": service}},
        "spans": [
            {
                "traceID": trace_id,
                "spanID": span_id,
                "operationName": "invoke_agent a" if span_id == root else "execute_tool t",
                "references": [] if span_id == root else [{"refType": "CHILD_OF", "spanID": root}],
                "startTime": start,
                "duration": 100,
                "tags": [],
                "logs": [],
                "processID": "p1",
            }
            for _, span_id, start in mine
        ],
    }


def test_traces_pages_back_through_a_store_whose_pages_are_short() -> None:
    """Jaeger on Cassandra answers ``limit=20`` with the traces of 20 spans (7 of these 14):
    ``otelhooks traces`` reads on until it has them all, or says there are more."""
    from otelhooks.cli import main

    query = _CassandraLikeQuery("svc")
    try:
        every = subprocess.run(
            [sys.executable, "-m", "otelhooks", "traces", "--endpoint", query.url, "--json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert every.returncode == 0, every.stderr
        ids = [json.loads(line)["trace_id"] for line in every.stdout.splitlines()]
        assert ids == [f"{t:032x}" for t in range(1, 15)]  # all 14, oldest first
        assert "there may be more" not in every.stderr
        cut = subprocess.run(
            [
                sys.executable,
                "-m",
                "otelhooks",
                "traces",
                "--endpoint",
                query.url,
                "--json",
                "--limit",
                "10",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        ids = [json.loads(line)["trace_id"] for line in cut.stdout.splitlines()]
        assert ids == [f"{t:032x}" for t in range(5, 15)]  # the 10 most recent
        assert "svc: 10 traces shown (--limit 10); there may be more" in cut.stderr
        assert main(["traces", "--endpoint", query.url, "--limit", "0"]) == 2
    finally:
        query.close()
