"""`otelhooks demo` run as users run it: a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

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
    assert lines[start : start + 18] == [
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
        "[span trees]",
        "allowed",
    ]
    tree = lines[start + 18 :]
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


def test_console_exporter_prints_spans_with_the_scrub_record() -> None:
    done = demo("--case", "redaction")
    assert done.returncode == 0, done.stderr
    assert FAKE_API_KEY not in done.stdout + done.stderr
    assert "OPENAI_API_KEY=[REDACTED:openai_api_key]" in done.stdout
    exported = done.stdout.split("[exported spans: the OpenTelemetry console exporter]", 1)[1]
    assert '"name": "execute_tool environment"' in exported
    assert '"otelhooks.redacted.paths"' in exported
    # The last screen is what a person reads: the trees, a summary, and how to see one alone.
    ending = exported.split("[span trees]", 1)[1]
    assert "{" not in ending.split("[summary]", 1)[1]
    assert "execute_tool environment" in ending and "redacted=result" in ending
    assert "  redaction  1 ran" in ending
    assert done.stdout.rstrip().endswith("Only the exported spans: otelhooks demo --no-tree.")


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
