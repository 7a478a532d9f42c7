"""The stdio relay answers a ``tools/call`` only once its audit line is written and made
durable: a relay killed with ``kill -9`` right after an answer has that call's line in its log,
and the log still verifies (lines after the head are named as not yet sealed, never missing)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from otelhooks.builtin.audit import verify_audit_log

from .gateway_support import INITIALIZE
from .mcp_support import time_command

CALLS = 5


def test_a_relay_killed_right_after_an_answer_has_audited_that_call(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    policy = tmp_path / "relay.toml"
    policy.write_text(f'[tools]\ndeny = ["convert_time"]\n[audit]\nfile = "{log}"\n')
    relay = subprocess.Popen(
        [sys.executable, "-m", "otelhooks", "mcp", "proxy", "--policy", str(policy), "--",
         *time_command()],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        cwd=tmp_path, env={**os.environ, "OTEL_TRACES_EXPORTER": "none"},
        start_new_session=True,
    )  # fmt: skip
    assert relay.stdin is not None and relay.stdout is not None

    def send(message: dict[str, Any]) -> None:
        relay.stdin.write(json.dumps(message) + "\n")  # type: ignore[union-attr]
        relay.stdin.flush()  # type: ignore[union-attr]

    def answer(request_id: int) -> dict[str, Any]:
        while True:
            line = relay.stdout.readline()  # type: ignore[union-attr]
            assert line, "the relay closed stdout before answering"
            message = json.loads(line)
            if message.get("id") == request_id and "method" not in message:
                return message  # type: ignore[no-any-return]

    answered = 0
    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE["params"]})
        answer(1)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for request_id in range(2, 2 + CALLS):
            send(
                {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                 "params": {"name": "get_current_time", "arguments": {"timezone": "UTC"}}}
            )  # fmt: skip
            assert "result" in answer(request_id)
            answered += 1
        os.killpg(relay.pid, signal.SIGKILL)  # at once, the upstream too
    finally:
        if relay.poll() is None:
            os.killpg(relay.pid, signal.SIGKILL)
        relay.wait(timeout=30)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    calls = [entry for entry in lines if entry.get("event") == "tool_call"]
    assert answered == CALLS
    assert [c["tool"] for c in calls] == ["get_current_time"] * CALLS
    assert all(c["outcome"] == "ok" for c in calls), calls
    report = verify_audit_log(log)
    assert report.ok, report
