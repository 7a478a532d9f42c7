"""The proxy never leaves a process behind and never hangs on an upstream: a start is bounded,
the upstream dies with the proxy (killed outright too), and the proxy leaves with its host. Its
traces: one per host session for the session-level messages, one per call, and no error span
for a discovery probe a server does not implement."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from otelhooks.integrations.mcp.client import DISCOVERY
from otelhooks.telemetry.testing import InMemoryTracing

from .mcp_support import proxy_cli, time_command

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def alive(pattern: str) -> list[str]:
    found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return [line for line in found.stdout.split() if line and int(line) != os.getpid()]


def wait_until(condition: object, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def test_an_upstream_that_never_speaks_mcp_is_given_up_within_its_start_timeout(
    tmp_path: Path,
) -> None:
    marker = f"{time.time_ns() % 10**9}"
    policy = tmp_path / "policy.toml"
    policy.write_text(
        f'[[upstream]]\nname = "mute"\ncommand = ["sleep", "{marker}"]\nstart_timeout = 2\n'
    )
    started = time.monotonic()
    done = proxy_cli("--policy", str(policy), "--check", timeout=120)
    took = time.monotonic() - started
    assert done.returncode == 1 and took < 30  # about 4 s; the upstream never answers
    assert "did not answer initialize and tools/list within 2 s (sleep" in done.stderr
    assert "is it an MCP server?" in done.stderr
    assert wait_until(lambda: not alive(f"sleep {marker}")), "the upstream was left behind"


def spawn_proxy(marker: str, tmp_path: Path) -> subprocess.Popen[bytes]:
    policy = tmp_path / "policy.toml"
    policy.write_text(
        f'[[upstream]]\nname = "mute"\ncommand = ["sleep", "{marker}"]\nstart_timeout = 60\n'
    )
    return subprocess.Popen(
        [sys.executable, "-m", "otelhooks", "mcp", "proxy", "--policy", str(policy)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        env={**os.environ, "OTEL_TRACES_EXPORTER": "none"},
    )


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_the_upstream_dies_with_the_proxy(tmp_path: Path, how: str) -> None:
    marker = f"{time.time_ns() % 10**9}"
    proxy = spawn_proxy(marker, tmp_path)
    try:
        assert wait_until(lambda: alive(f"sleep {marker}")), "the upstream never started"
        proxy.send_signal(getattr(signal, how))
        proxy.wait(timeout=60)
        assert wait_until(lambda: not alive(f"sleep {marker}")), f"orphaned after {how}"
    finally:
        proxy.kill()


def test_the_proxy_and_its_upstream_leave_when_the_host_does(tmp_path: Path) -> None:
    proxy = subprocess.Popen(
        [sys.executable, "-m", "otelhooks", "mcp", "proxy", "--", *time_command()],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        env={**os.environ, "OTEL_TRACES_EXPORTER": "none", "XDG_STATE_HOME": str(tmp_path)},
    )
    try:
        assert wait_until(lambda: alive("mcp-server-time --local-timezone UTC"))
        assert proxy.stdin is not None
        proxy.stdin.close()  # the host goes away
        assert proxy.wait(timeout=60) == 0
        assert wait_until(lambda: not alive(f"{proxy.pid}.*mcp-server-time"))
    finally:
        proxy.kill()


async def test_session_messages_share_a_trace_and_each_call_has_its_own(
    otelhooks_tracing: InMemoryTracing, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx
    from mcp.shared import _otel

    from .gateway_support import INITIALIZE, MCP_HEADERS, gateway

    # The SDK's own spans (the MCP server and client spans) into the test's exporter.
    monkeypatch.setattr(
        _otel._tracer, "inner", otelhooks_tracing.provider.get_tracer("mcp-python-sdk")
    )
    policy = (
        f'[[upstream]]\nname = "time"\ncommand = {json.dumps(time_command())}\n'
        f'[store]\nfile = "{tmp_path / "gateway.sqlite3"}"\n'
    )
    # A host as most are: plain JSON-RPC, no trace context in _meta.
    async with (
        gateway(policy, tmp_path, tracer_provider=otelhooks_tracing.provider) as gw,
        httpx.AsyncClient(timeout=20) as http,
    ):
        opened = await http.post(gw.url, json=INITIALIZE, headers=MCP_HEADERS)
        headers = {
            **MCP_HEADERS,
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-11-25",
        }

        async def send(message: dict[str, object]) -> None:
            answer = await http.post(gw.url, json={"jsonrpc": "2.0", **message}, headers=headers)
            assert answer.status_code in (200, 202), answer.text

        await send({"method": "notifications/initialized"})
        await send({"id": 2, "method": "tools/list"})
        await send({"id": 3, "method": "tools/list"})
        for index, zone in enumerate(("UTC", "Asia/Tokyo")):
            call = {"name": "get_current_time", "arguments": {"timezone": zone}}
            await send({"id": 10 + index, "method": "tools/call", "params": call})
    spans = otelhooks_tracing.spans()
    initialize = [s for s in spans if s.name == "initialize" and s.kind.name == "SERVER"]
    assert len(initialize) == 1
    session = initialize[0].context.trace_id  # type: ignore[union-attr]
    listings = [s for s in spans if s.name == "tools/list" and s.kind.name == "SERVER"]
    assert len(listings) == 2 and {s.context.trace_id for s in listings} == {session}  # type: ignore[union-attr]
    calls = otelhooks_tracing.find("execute_tool get_current_time")
    assert len(calls) == 2
    call_traces = {s.context.trace_id for s in calls}  # type: ignore[union-attr]
    assert len(call_traces) == 2 and session not in call_traces  # each call is findable alone
    for call in calls:
        assert [link.context.trace_id for link in call.links] == [session]
    for probe in (s for s in spans if s.name == "MCP send server/discover"):
        assert probe.status.status_code.name != "ERROR"


async def test_a_discovery_probe_a_server_lacks_is_not_an_error(
    otelhooks_tracing: InMemoryTracing, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp.shared import _otel

    from otelhooks.integrations.mcp import MCPServerTools

    from .mcp_support import everything_command

    monkeypatch.setattr(
        _otel._tracer, "inner", otelhooks_tracing.provider.get_tracer("mcp-python-sdk")
    )
    async with MCPServerTools(everything_command()) as server:  # a 2025-11-25 server
        assert server.tools
    (probe,) = [s for s in otelhooks_tracing.spans() if s.name == "MCP send server/discover"]
    assert probe.status.status_code.name != "ERROR"
    assert (probe.attributes or {})[DISCOVERY] == "unsupported"
    assert "error.type" not in (probe.attributes or {})
    assert (probe.attributes or {})["rpc.response.status_code"] == "-32601"
