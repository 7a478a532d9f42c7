"""The gateway under load, authentication and the audit log on: 50 concurrent clients, and a
``kill -9`` of the gateway while they call. Every call a client got an answer for is in the
audit log exactly once (the line is durable before the answer leaves), none twice, and the
chain verifies."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from otelhooks.builtin.audit import AuditLog, verify_audit_log
from otelhooks.integrations.mcp.auth import add_token

from .gateway_support import free_port, gateway, host, wait_for_port
from .mcp_support import fault_command

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def fault_server() -> Iterator[str]:
    """The fault server over Streamable HTTP on loopback (one process for every session: the
    load is on the gateway, not on starting fifty Python processes); its URL."""
    port = free_port()
    process = subprocess.Popen(
        [*fault_command(), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        process.wait(timeout=30)


def policy(tokens: Path, url: str) -> str:
    return f"""
[[upstream]]
name = "fault"
url = "{url}"

[proxy]
max_sessions = 64
max_sessions_per_identity = 2

[auth]
tokens = "{tokens}"

[[identity]]
name = "team"
groups = ["team"]
tools = ["echo"]

[audit]
file = "audit.jsonl"

[store]
file = "gateway.sqlite3"
"""


def audited(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The audit log's echo lines by identity."""
    found: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        if entry["tool"] == "echo":
            found[entry["identity"]].append(entry)
    return found


async def test_fifty_authenticated_clients_get_every_answer_audited_once(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.toml"
    clients, calls = 50, 3
    keys = {f"dev{i:02d}": add_token(tokens, f"dev{i:02d}", scopes=["mcp"], groups=["team"])
            for i in range(clients)}  # fmt: skip
    answered: dict[str, int] = collections.Counter()
    wrong: list[str] = []

    async def one(subject: str, url: str) -> None:
        async with host(url, keys[subject], mode="legacy") as h:
            for n in range(calls):
                text = f"{subject}-{n}"
                result = await h.call_tool("echo", {"text": text})
                got = result.content[0].text if result.content else ""  # type: ignore[union-attr]
                if not result.is_error and got != text:  # an answer meant for another call
                    wrong.append(f"{subject}: {got!r}")
                answered[subject] += 1

    with fault_server() as url:
        async with gateway(policy(tokens, url), tmp_path) as gw:
            await asyncio.gather(*(one(s, gw.url) for s in keys))
    assert wrong == []
    lines = audited(tmp_path / "audit.jsonl")
    assert {s: len(v) for s, v in lines.items()} == {s: calls for s in keys}
    for entries in lines.values():  # each call once: no request id of a session twice
        assert len({(e["session"], e["call_id"]) for e in entries}) == calls
        assert all(e["decision"] == "allow" for e in entries)
    check = verify_audit_log(tmp_path / "audit.jsonl")
    assert check.ok and check.lines == clients * calls


def test_a_gateway_killed_under_load_has_audited_every_call_it_answered(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.toml"
    clients = 20
    keys = {f"dev{i:02d}": add_token(tokens, f"dev{i:02d}", scopes=["mcp"], groups=["team"])
            for i in range(clients)}  # fmt: skip
    upstream = contextlib.ExitStack()
    (tmp_path / "gateway.toml").write_text(policy(tokens, upstream.enter_context(fault_server())))
    port = free_port()
    gateway_process = subprocess.Popen(
        [sys.executable, "-m", "otelhooks", "mcp", "proxy", "--log-level", "WARNING",
         "--policy", str(tmp_path / "gateway.toml"), "--listen", f"127.0.0.1:{port}"],
        cwd=tmp_path, env={**os.environ, "OTEL_TRACES_EXPORTER": "none",
                           "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        wait_for_port(port)
        answered = asyncio.run(
            _load_then_kill(f"http://127.0.0.1:{port}/mcp", keys, gateway_process)
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(gateway_process.pid, signal.SIGKILL)  # its upstreams too
        gateway_process.wait(timeout=30)
        upstream.close()
    assert gateway_process.returncode == -signal.SIGKILL
    assert sum(answered.values()) >= 100  # it was under load when it died
    lines = audited(tmp_path / "audit.jsonl")
    for subject, count in answered.items():
        entries = lines.get(subject, [])
        # every answered call is there; at most the one in flight when it died besides
        assert count <= len(entries) <= count + 1, (subject, count, len(entries))
        assert len({(e["session"], e["call_id"]) for e in entries}) == len(entries)
    check = verify_audit_log(tmp_path / "audit.jsonl")
    assert check.ok, check.problems
    # The head names only lines on disk; what the kill left after it chains from it, and the
    # next start seals it (a crash, never a cut).
    if check.unsealed is not None:
        assert check.unsealed[1] == check.lines
    AuditLog(tmp_path / "audit.jsonl").close()
    restarted = verify_audit_log(tmp_path / "audit.jsonl")
    assert restarted.ok and restarted.unsealed is None and restarted.lines == check.lines


async def _load_then_kill(
    url: str, keys: dict[str, str], process: subprocess.Popen[bytes]
) -> dict[str, int]:
    answered: dict[str, int] = collections.Counter()
    killed = asyncio.Event()

    async def one(subject: str) -> None:
        with contextlib.suppress(BaseException):
            async with host(url, keys[subject], mode="legacy") as h:
                for n in range(1000):
                    if killed.is_set():
                        return
                    await h.call_tool("echo", {"text": f"{subject}-{n}"})
                    answered[subject] += 1

    async def killer() -> None:
        for _ in range(600):
            if sum(answered.values()) >= 150:
                break
            await asyncio.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
        killed.set()

    tasks = [asyncio.ensure_future(one(s)) for s in keys]
    await killer()
    _, pending = await asyncio.wait(tasks, timeout=30)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    return dict(answered)


pytestmark = [
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]
