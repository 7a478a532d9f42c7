"""``otelhooks mcp proxy`` between the official ``mcp`` client (the host) and real servers:
mcp-server-time, mcp-server-git on a temporary repository, and the fault server."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp.types as mcp_types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from opentelemetry import propagate
from opentelemetry.trace import StatusCode

from otelhooks.integrations.mcp.policy import UpstreamConfig, parse_policy
from otelhooks.integrations.mcp.proxy import MCPProxy
from otelhooks.telemetry.testing import InMemoryTracing

from .jaeger_support import free_ports
from .mcp_fault_server import SECRET
from .mcp_support import (
    fault_command,
    git_command,
    git_repository,
    proxy_cli,
    records,
    time_command,
    wait_for_record,
)

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ("--pass-env", "FAULT_SERVER_RECORD")  # the fault server's record file, passed on


def RECORD_ENV(record: Path) -> dict[str, str]:
    return {"FAULT_SERVER_RECORD": str(record)}


def proxy_params(*args: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    """The proxy as a host launches it: ``python -m otelhooks mcp proxy ...`` over stdio. The
    SDK passes a host's process only a few variables: the test run's private state and data
    folders (``conftest.private_state``) are named, so that its store is the run's own."""
    state = {k: os.environ[k] for k in ("XDG_STATE_HOME", "XDG_DATA_HOME") if k in os.environ}
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "otelhooks", "mcp", "proxy", *args],
        env={"OTEL_TRACES_EXPORTER": "none", **state, **(env or {})},
        cwd=str(ROOT),
    )


def toml_list(items: list[str]) -> str:
    return json.dumps(items)


def write_policy(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def text_of(result: mcp_types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, mcp_types.TextContent))


@pytest.fixture
def record(tmp_path: Path) -> Path:
    return tmp_path / "record.jsonl"


# -- real servers, the proxy as a host runs it ------------------------------------------------


async def test_time_server_through_the_proxy_over_stdio() -> None:
    async with Client(proxy_params("--", *time_command())) as host:
        tools = await host.list_tools()
        assert sorted(t.name for t in tools.tools) == ["convert_time", "get_current_time"]
        listed = {t.name: t for t in tools.tools}["get_current_time"]
        assert "timezone" in listed.input_schema["properties"]
        result = await host.call_tool("get_current_time", {"timezone": "Asia/Tokyo"})
    assert not result.is_error
    assert json.loads(text_of(result))["timezone"] == "Asia/Tokyo"


async def test_git_policy_hides_and_blocks_writes_and_guards_paths(tmp_path: Path) -> None:
    repo = git_repository(tmp_path / "repo")
    policy = write_policy(
        tmp_path / "policy.toml",
        f"""
[tools]
deny = ["git_commit", "git_reset", "git_add", "git_checkout", "git_create_branch"]

[[guard]]
kind = "path"
argument = "repo_path"
root = {json.dumps(str(repo))}
""",
    )
    async with Client(proxy_params("--policy", str(policy), "--", *git_command(repo))) as host:
        names = {t.name for t in (await host.list_tools()).tools}
        assert "git_status" in names and "git_log" in names
        assert not names & {"git_commit", "git_reset", "git_add"}
        with pytest.raises(MCPError, match="Unknown tool: 'git_commit'") as commit:
            await host.call_tool("git_commit", {"repo_path": str(repo), "message": "evil"})
        outside = await host.call_tool("git_status", {"repo_path": "/etc"})
        escape = await host.call_tool("git_log", {"repo_path": f"{repo}/../.."})
        status = await host.call_tool("git_status", {"repo_path": str(repo)})
    assert "git_status" not in str(commit.value)  # a hidden tool is answered as unknown
    assert outside.is_error and "must stay under" in text_of(outside)
    assert escape.is_error and "'..'" in text_of(escape)
    assert not status.is_error and "main" in text_of(status)
    log = subprocess.run(
        ["git", "log", "--oneline"], cwd=repo, capture_output=True, text=True, check=True
    )
    assert len(log.stdout.splitlines()) == 2  # the blocked commit never happened


# -- the fault server --------------------------------------------------------------------------


async def test_blocked_calls_never_reach_the_server_and_secrets_never_reach_the_host(
    tmp_path: Path, record: Path
) -> None:
    policy = write_policy(tmp_path / "policy.toml", '[tools]\ndeny = ["echo"]\n')
    params = proxy_params(
        "--policy",
        str(policy),
        *RECORDED,
        "--",
        *fault_command(),
        env=RECORD_ENV(record),
    )
    async with Client(params) as host:
        with pytest.raises(MCPError, match="Unknown tool: 'echo'"):
            await host.call_tool("echo", {"text": "should not arrive"})
        leak = await host.call_tool("leak", {})
        config = await host.read_resource("config://app")
        listed = await host.list_resources()
        prompts = await host.list_prompts()
        prompt = await host.get_prompt("review", {"code": "print(1)"})
    assert not records(record, "tool", name="echo")
    assert records(record, "tool", name="leak")  # the server did answer ...
    wire = leak.model_dump_json() + config.model_dump_json()
    assert SECRET not in wire  # ... but the host only saw it redacted
    assert "[REDACTED:github_token]" in text_of(leak)
    assert "api_token=[REDACTED:" in config.contents[0].text  # type: ignore[union-attr]
    assert [str(r.uri) for r in listed.resources] == ["config://app"]  # passed through
    assert [p.name for p in prompts.prompts] == ["review"]
    assert prompt.messages[0].content.text == "Review this code:\nprint(1)"  # type: ignore[union-attr]


@pytest.mark.parametrize(("level", "completed"), [("INFO", True), ("WARNING", False)])
async def test_log_level_applies_to_the_per_call_events(
    tmp_path: Path, level: str, completed: bool
) -> None:
    """``--log-level WARNING`` drops ``tool_call.completed`` (INFO) and keeps
    ``tool_call.blocked`` (WARNING)."""
    policy = write_policy(tmp_path / "policy.toml", '[tools]\ndeny = ["convert_time"]\n')
    log = tmp_path / "proxy.log"
    args = ("--policy", str(policy), "--log-format", "json", "--log-file", str(log))
    async with Client(proxy_params(*args, "--log-level", level, "--", *time_command())) as host:
        await host.call_tool("get_current_time", {"timezone": "UTC"})
        with pytest.raises(MCPError, match="Unknown tool"):  # denied: hidden, and refused
            await host.call_tool(
                "convert_time",
                {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
            )
    events = [json.loads(line)["event"] for line in log.read_text().splitlines()
              if line.startswith("{")]  # fmt: skip
    assert "tool_call.blocked" in events
    assert ("tool_call.completed" in events) is completed


async def test_content_progress_and_cancellation_pass_through(record: Path) -> None:
    params = proxy_params(*RECORDED, "--", *fault_command(), env=RECORD_ENV(record))
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async with Client(params) as host:
        rich = await host.call_tool("rich", {})
        weather = await host.call_tool("weather", {"city": "Lima"})
        slow = await host.call_tool("slow_progress", {"steps": 3}, progress_callback=on_progress)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(host.call_tool("hang", {}), timeout=1.0)
        await wait_for_record(record, "cancelled", name="hang")
        after = await host.call_tool("echo", {"text": "after the cancel"})
    assert [b.type for b in rich.content] == ["text", "image", "audio", "resource_link", "resource"]
    assert weather.structured_content == {"city": "Lima", "temperature_c": 11.5}
    assert text_of(slow) == "done after 3 steps"
    assert progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert text_of(after) == "after the cancel"


async def test_a_crashed_upstream_is_an_error_result_and_the_others_keep_serving(
    tmp_path: Path, record: Path
) -> None:
    policy = write_policy(
        tmp_path / "servers.toml",
        f"""
[[upstream]]
name = "time"
prefix = "time"
command = {toml_list(time_command())}

[[upstream]]
name = "fault"
command = {toml_list(fault_command())}
env = {{ FAULT_SERVER_RECORD = {json.dumps(str(record))} }}
""",
    )
    async with Client(proxy_params("--policy", str(policy))) as host:
        names = {t.name for t in (await host.list_tools()).tools}
        assert {"time_get_current_time", "crash", "echo"} <= names  # only "time" has a prefix
        crashed = await host.call_tool("crash", {})
        now = await host.call_tool("time_get_current_time", {"timezone": "UTC"})
        again = await host.call_tool("echo", {"text": "restarted"})
    assert crashed.is_error and "MCP server 'fault' is gone" in text_of(crashed)
    assert not now.is_error and json.loads(text_of(now))["timezone"] == "UTC"
    assert text_of(again) == "restarted"


async def test_stdout_carries_nothing_but_protocol(tmp_path: Path) -> None:
    """A hook that prints, and the console exporter, write to stderr: stdout is the protocol."""
    policy = write_policy(
        tmp_path / "policy.toml",
        '[[hook]]\nimport = "tests.mcp_noisy_hook:NoisyHook"\nargs = { word = "chatter" }\n',
    )
    out, err = tmp_path / "stdout.log", tmp_path / "stderr.log"
    proxy = " ".join(
        [
            sys.executable,
            "-m",
            "otelhooks",
            "mcp",
            "proxy",
            "--policy",
            str(policy),
            "--",
            *fault_command(),
        ]
    )
    params = StdioServerParameters(
        command="/bin/sh",
        args=["-c", f"{proxy} 2>{err} | tee {out}"],
        env={"OTEL_TRACES_EXPORTER": "console", "PATH": os.environ.get("PATH", "/usr/bin")},
        cwd=str(ROOT),
    )
    async with Client(params, mode="legacy") as host:
        result = await host.call_tool("echo", {"text": "quiet please"})
        await host.call_tool("garbage", {})
    assert text_of(result) == "quiet please"
    lines = [line for line in out.read_text().splitlines() if line.strip()]
    assert lines, "the proxy answered nothing on stdout"
    for line in lines:
        assert json.loads(line)["jsonrpc"] == "2.0", line
    await asyncio.sleep(0.5)  # the console exporter writes when the proxy shuts down
    deadline = time.monotonic() + 60
    while "execute_tool echo" not in err.read_text() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    errors = err.read_text()
    assert "chatter before echo" in errors
    assert "execute_tool echo" in errors


async def test_streamable_http_listen_mode() -> None:
    (port,) = free_ports(1)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "otelhooks",
            "mcp",
            "proxy",
            "--listen",
            f"127.0.0.1:{port}",
            "--",
            *time_command(),
        ],
        env={**os.environ, "OTEL_TRACES_EXPORTER": "none"},
        cwd=str(ROOT),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        deadline = time.monotonic() + 60
        while True:
            try:
                async with Client(url) as host:
                    result = await host.call_tool("get_current_time", {"timezone": "UTC"})
                break
            except Exception:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                await asyncio.sleep(0.25)
    finally:
        process.terminate()
        stdout, _ = process.communicate(timeout=60)
    assert json.loads(text_of(result))["timezone"] == "UTC"
    assert stdout == b""


async def test_elicitation_goes_to_the_host_and_back(tmp_path: Path) -> None:
    policy = write_policy(
        tmp_path / "policy.toml",
        f'[[upstream]]\nname = "fault"\ncommand = {toml_list(fault_command())}\nmode = "legacy"\n',
    )
    asked: list[str] = []

    async def answer(context: Any, params: Any) -> mcp_types.ElicitResult:
        asked.append(params.message)
        return mcp_types.ElicitResult(action="accept", content={"confirmed": True})

    async with Client(
        proxy_params("--policy", str(policy)), elicitation_callback=answer, mode="legacy"
    ) as host:
        result = await host.call_tool("ask", {"question": "Deploy now?"})
    assert asked == ["Deploy now?"]
    assert text_of(result) == "accept: True"


# -- in process: the span tree ----------------------------------------------------------------


@pytest.fixture
async def proxy(
    otelhooks_tracing: InMemoryTracing, record: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[MCPProxy]:
    from mcp.shared import _otel

    monkeypatch.setattr(
        _otel._tracer, "inner", otelhooks_tracing.provider.get_tracer("mcp-python-sdk")
    )
    policy = parse_policy('[tools]\ndeny = ["crash"]\n')
    upstream = UpstreamConfig("fault", tuple(fault_command()), env=RECORD_ENV(record))
    async with MCPProxy(policy, [upstream], tracer_provider=otelhooks_tracing.provider) as p:
        yield p


async def test_host_proxy_and_server_are_one_trace(
    proxy: MCPProxy, otelhooks_tracing: InMemoryTracing, record: Path
) -> None:
    tracer = otelhooks_tracing.provider.get_tracer("host")
    async with Client(proxy.server()) as host:
        with tracer.start_as_current_span("host turn") as turn:
            meta: dict[str, Any] = {}
            propagate.inject(meta)
            await host.call_tool("echo", {"text": "traced"}, meta=meta)  # type: ignore[arg-type]
            with pytest.raises(MCPError, match="Unknown tool: 'crash'"):
                await host.call_tool("crash", {}, meta=meta)  # type: ignore[arg-type]
    trace_id = turn.get_span_context().trace_id
    execute = otelhooks_tracing.find_one("execute_tool echo")
    server_span = otelhooks_tracing.find_one("tools/call echo")
    assert execute.context.trace_id == trace_id  # type: ignore[union-attr]
    assert server_span.parent.span_id == turn.get_span_context().span_id  # type: ignore[union-attr]
    assert execute.parent.span_id == server_span.context.span_id  # type: ignore[union-attr]
    otelhooks_tracing.assert_children(execute, ["before", "run", "after"])
    run = otelhooks_tracing.child(execute, "run")
    call = records(record, "request", method="tools/call")[-1]
    assert call["meta"]["traceparent"].split("-")[1] == format(trace_id, "032x")
    assert call["meta"]["traceparent"].split("-")[2] == format(run.context.span_id, "016x")  # type: ignore[union-attr]
    denied = otelhooks_tracing.find_one("execute_tool crash")
    assert otelhooks_tracing.child_names(denied) == ["before"]
    # a block is a decision, recorded as such; the MCP server span says the host got an error
    assert denied.attributes["otelhooks.decision"] == "block"  # type: ignore[index]
    answered = otelhooks_tracing.find_one("tools/call crash")
    assert answered.status.status_code is StatusCode.ERROR
    assert answered.attributes["error.type"] == "-32602"  # type: ignore[index]
    assert not records(record, "tool", name="crash")


async def test_a_rule_that_matches_no_tool_stops_the_start_unless_told_otherwise(
    tmp_path: Path,
) -> None:
    # A typo in a deny entry would leave the tool it meant callable: refused by default.
    policy = write_policy(tmp_path / "policy.toml", '[tools]\ndeny = ["get_weather"]\n')
    refused = proxy_cli("--policy", str(policy), "--check", "--", *time_command())
    assert refused.returncode == 1
    assert "'get_weather' matches no registered tool" in refused.stderr
    assert "convert_time, get_current_time" in refused.stderr
    assert "strict = false" in refused.stderr  # and it says how to start anyway
    assert refused.stdout == ""

    lenient = write_policy(
        tmp_path / "lenient.toml", '[proxy]\nstrict = false\n[tools]\ndeny = ["get_weather"]\n'
    )
    warned = proxy_cli("--policy", str(lenient), "--check", "--", *time_command())
    assert warned.returncode == 0, warned.stderr
    assert "get_weather" in warned.stderr


# -- the stdio relay (one stdio upstream) ------------------------------------------------------


async def test_the_relay_cancels_a_timed_out_call_upstream_and_restarts_a_dead_server(
    tmp_path: Path, record: Path
) -> None:
    policy = write_policy(tmp_path / "policy.toml", "[tools]\ntimeouts = { hang = 1 }\n")
    params = proxy_params(
        "--policy",
        str(policy),
        *RECORDED,
        "--",
        *fault_command(),
        env=RECORD_ENV(record),
    )
    async with Client(params) as host:
        hung = await host.call_tool("hang", {})
        await wait_for_record(record, "cancelled", name="hang")  # the server was told
        crashed = await host.call_tool("crash", {})
        again = await host.call_tool("echo", {"text": "a new server"})
        names = {t.name for t in (await host.list_tools()).tools}
    assert hung.is_error and "timed out" in text_of(hung).lower()
    assert crashed.is_error and "is gone" in text_of(crashed)
    assert not again.is_error and text_of(again) == "a new server"
    assert {"echo", "crash", "hang"} <= names


async def test_the_relay_reviews_a_changed_tool_against_its_pin_and_holds_it_back(
    tmp_path: Path, record: Path
) -> None:
    policy = write_policy(
        tmp_path / "policy.toml", f'[store]\nfile = "{tmp_path / "gateway.sqlite3"}"\n'
    )
    params = proxy_params(
        "--policy",
        str(policy),
        *RECORDED,
        "--",
        *fault_command(),
        env=RECORD_ENV(record),
    )
    async with Client(params) as host:
        assert text_of(await host.call_tool("echo", {"text": "pinned"})) == "pinned"
        await host.call_tool("add_tool", {"name": "echo"})  # a new definition, list changed
        for _ in range(100):
            names = {t.name for t in (await host.list_tools()).tools}
            if "echo" not in names:
                break
            await asyncio.sleep(0.05)
        changed = await host.call_tool("echo", {})
    assert "echo" not in names and "weather" in names
    assert changed.is_error and "changed" in text_of(changed)
    assert len(records(record, "tool", name="echo")) == 1  # the changed tool never ran


def test_the_relay_lets_no_call_past_the_boundary_in_a_batch_or_without_an_id(
    tmp_path: Path, record: Path
) -> None:
    policy = write_policy(tmp_path / "policy.toml", '[tools]\ndeny = ["echo"]\n')
    call = {"name": "echo", "arguments": {"text": "smuggled"}}
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        [{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}],
        {"jsonrpc": "2.0", "method": "tools/call", "params": call},
        "not json",
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call},
    ]  # fmt: skip
    proxy = subprocess.Popen(
        [sys.executable, "-m", "otelhooks", "mcp", "proxy", "--policy", str(policy), *RECORDED,
         "--", *fault_command()],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "OTEL_TRACES_EXPORTER": "none", "FAULT_SERVER_RECORD": str(record)},
    )  # fmt: skip
    assert proxy.stdin is not None and proxy.stdout is not None
    for line in lines:
        proxy.stdin.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
    proxy.stdin.flush()
    answers: list[dict[str, Any]] = []
    while not any(a.get("id") == 3 for a in answers):
        out = proxy.stdout.readline()
        assert out, "the proxy closed stdout before answering"
        answers.append(json.loads(out))
    proxy.stdin.close()
    stderr = proxy.stderr.read() if proxy.stderr is not None else ""
    proxy.wait(timeout=30)
    codes = [a["error"]["code"] for a in answers if "error" in a and a.get("id") != 3]
    assert codes == [-32600, -32700], answers  # the batch, the line that is not JSON
    (blocked,) = [a for a in answers if a.get("id") == 3]
    assert blocked["error"] == {"code": -32602, "message": "Unknown tool: 'echo'"}
    assert not records(record, "tool", name="echo")  # nothing reached the server's tool
    assert "dropped a tools/call request without an id" in stderr
