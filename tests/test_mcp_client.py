"""MCP servers' tools through the boundary: real servers from PyPI (mcp-server-time,
mcp-server-git) and a fault server built on the official SDK, driven by the official client."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from otelhooks import Hooks, ToolCall, ToolExecutor, ToolRegistry, block
from otelhooks.builtin import RedactionHook, Redactor
from otelhooks.integrations.mcp.client import (
    MCPServerTools,
    MCPToolError,
    mcp_tools,
    strict_schema,
    tool_name,
)
from otelhooks.telemetry.testing import InMemoryTracing

from .jaeger_support import free_ports
from .mcp_fault_server import SECRET
from .mcp_support import (
    fault_command,
    git_command,
    git_repository,
    records,
    time_command,
    wait_for_record,
)


@pytest.fixture
def record(tmp_path: Path) -> Path:
    return tmp_path / "record.jsonl"


@pytest.fixture
async def fault(record: Path) -> AsyncIterator[MCPServerTools]:
    server = MCPServerTools(fault_command(), prefix="f", env={"FAULT_SERVER_RECORD": str(record)})
    async with server:
        yield server


def executor_for(
    tracing: InMemoryTracing, *servers: MCPServerTools, hooks: Hooks | None = None, **kw: Any
) -> ToolExecutor:
    registry = ToolRegistry()
    for server in servers:
        server.register(registry)
    return ToolExecutor(registry, hooks, tracer_provider=tracing.provider, **kw)


# -- real servers from PyPI -------------------------------------------------------------------


@pytest.fixture
def sdk_spans(otelhooks_tracing: InMemoryTracing, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``mcp`` SDK's own spans (made with the global tracer) go to the test's exporter."""
    from mcp.shared import _otel

    tracer = otelhooks_tracing.provider.get_tracer("mcp-python-sdk")
    monkeypatch.setattr(_otel._tracer, "inner", tracer)


async def test_time_server_tools_run_as_execute_tool_spans_with_mcp_attributes(
    otelhooks_tracing: InMemoryTracing, sdk_spans: None
) -> None:
    async with MCPServerTools(time_command(), prefix="time") as time_tools:
        executor = executor_for(otelhooks_tracing, time_tools)
        names = sorted(t.name for t in executor.registry)
        assert names == ["time_convert_time", "time_get_current_time"]
        schema = executor.registry.get("time_get_current_time").parameters  # type: ignore[union-attr]
        assert schema["additionalProperties"] is False
        assert "timezone" in schema["properties"]

        result = await executor.execute(
            ToolCall("c1", "time_get_current_time", {"timezone": "Europe/Paris"})
        )
    assert not result.is_error, result.content
    assert json.loads(result.content)["timezone"] == "Europe/Paris"
    span = otelhooks_tracing.tool_span(call_id="c1")
    otelhooks_tracing.assert_children(span, ["before", "run", "after"])
    attrs = dict(span.attributes or {})
    assert attrs["mcp.method.name"] == "tools/call"
    assert attrs["mcp.protocol.version"][:4] == "2026"
    assert attrs["network.transport"] == "pipe"
    assert attrs["jsonrpc.request.id"].isdigit()
    assert attrs["gen_ai.tool.name"] == "time_get_current_time"
    # one span for the call: the SDK's client span is not started next to ours, while the
    # SDK's other requests (listing the tools) keep theirs
    names = [s.name for s in otelhooks_tracing.spans()]
    assert "MCP send tools/list" in names
    assert not [n for n in names if "tools/call" in n], names


async def test_a_server_error_result_is_an_error_span_with_tool_error(
    otelhooks_tracing: InMemoryTracing,
) -> None:
    async with MCPServerTools(time_command()) as time_tools:
        executor = executor_for(otelhooks_tracing, time_tools)
        result = await executor.execute(
            ToolCall("bad", "get_current_time", {"timezone": "Not/AZone"})
        )
    assert result.is_error
    assert "Not/AZone" in result.content
    span = otelhooks_tracing.tool_span(call_id="bad")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "tool_error"  # type: ignore[index]


async def test_arguments_are_checked_against_the_input_schema_before_any_hook(
    otelhooks_tracing: InMemoryTracing,
) -> None:
    seen: list[str] = []
    hooks = Hooks()
    hooks.add(before=lambda ctx: seen.append(ctx.tool_call.name))
    async with MCPServerTools(time_command()) as time_tools:
        executor = executor_for(otelhooks_tracing, time_tools, hooks=hooks)
        extra = await executor.execute(
            ToolCall("x", "get_current_time", {"timezone": "UTC", "verbose": True})
        )
        missing = await executor.execute(ToolCall("m", "get_current_time", {}))
    assert extra.is_error and "verbose" in extra.content
    assert missing.is_error and "timezone" in missing.content
    assert seen == []
    assert otelhooks_tracing.tool_span(call_id="x").attributes["error.type"] == (  # type: ignore[index]
        "invalid_arguments"
    )


async def test_extra_arguments_pass_when_allowed(otelhooks_tracing: InMemoryTracing) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert strict_schema(schema, allow_extra=False)["additionalProperties"] is False
    assert strict_schema(schema, allow_extra=True)["additionalProperties"] is True  # said
    closed = {**schema, "additionalProperties": {"type": "integer"}}
    assert strict_schema(closed, allow_extra=False)["additionalProperties"] == {"type": "integer"}


def test_registered_names_are_prefixed_safe_and_never_collide() -> None:
    assert tool_name("get_current_time", "time") == "time_get_current_time"
    assert tool_name("read.file", None) == "read_file"
    long_a = tool_name("a" * 80 + "x", "srv")
    long_b = tool_name("a" * 80 + "y", "srv")
    assert len(long_a) <= 64 and len(long_b) <= 64 and long_a != long_b


async def test_git_server_on_a_temporary_repository(
    otelhooks_tracing: InMemoryTracing, tmp_path: Path
) -> None:
    repo = git_repository(tmp_path / "repo")
    async with MCPServerTools(git_command(repo), prefix="git") as git_tools:
        executor = executor_for(otelhooks_tracing, git_tools)
        assert {"git_git_status", "git_git_log"} <= {t.name for t in executor.registry}
        status = await executor.execute(ToolCall("s", "git_git_status", {"repo_path": str(repo)}))
        log = await executor.execute(
            ToolCall("l", "git_git_log", {"repo_path": str(repo), "max_count": 5})
        )
    assert not status.is_error and "main" in status.content
    assert not log.is_error
    assert "second commit" in log.content and "first commit" in log.content
    otelhooks_tracing.assert_children(
        otelhooks_tracing.tool_span(call_id="l"), ["before", "run", "after"]
    )


# -- the fault server -------------------------------------------------------------------------


async def test_content_blocks_map_to_text_media_and_details(
    fault: MCPServerTools, otelhooks_tracing: InMemoryTracing
) -> None:
    executor = executor_for(otelhooks_tracing, fault)
    rich = await executor.execute(ToolCall("r", "f_rich", {}))
    weather = await executor.execute(ToolCall("w", "f_weather", {"city": "Oslo"}))
    assert rich.content.splitlines() == [
        "a picture, a sound and two resources",
        "[resource link: readme <file:///srv/readme.md>]",
        "embedded notes",
    ]
    assert [(m.kind, m.mime_type) for m in rich.media] == [
        ("image", "image/png"),
        ("audio", "audio/wav"),
    ]
    assert [b["type"] for b in rich.details["content"]] == [
        "text",
        "image",
        "audio",
        "resource_link",
        "resource",
    ]
    assert weather.details["structuredContent"] == {"city": "Oslo", "temperature_c": 11.5}
    listing = {t.name: t for t in fault.listings}["f_weather"].listing
    assert listing.output_schema is not None
    assert executor.registry.get("f_weather").output_schema == listing.output_schema  # type: ignore[union-attr]


async def test_is_error_and_a_raising_tool_are_error_spans(
    fault: MCPServerTools, otelhooks_tracing: InMemoryTracing
) -> None:
    executor = executor_for(otelhooks_tracing, fault)
    soft = await executor.execute(ToolCall("soft", "f_fail_soft", {"reason": "disk full"}))
    boom = await executor.execute(ToolCall("boom", "f_explode", {}))
    assert soft.is_error and "disk full" in soft.content
    assert boom.is_error
    for call_id in ("soft", "boom"):
        span = otelhooks_tracing.tool_span(call_id=call_id)
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes["error.type"] == "tool_error"  # type: ignore[index]
        assert span.attributes["mcp.method.name"] == "tools/call"  # type: ignore[index]


async def test_a_json_rpc_error_carries_its_code(
    fault: MCPServerTools, otelhooks_tracing: InMemoryTracing
) -> None:
    with pytest.raises(MCPToolError) as raised:
        await fault.call_tool("protocol_error", {"code": -32001})
    assert raised.value.error_type == "-32001"

    executor = executor_for(otelhooks_tracing, fault)
    result = await executor.execute(ToolCall("g", "f_protocol_error", {}))
    code = "-32602"
    assert result.is_error
    assert result.content == "error: MCP error -32602: the server refused this request"
    span = otelhooks_tracing.tool_span(call_id="g")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == code  # type: ignore[index]
    assert span.attributes["rpc.response.status_code"] == code  # type: ignore[index]


async def test_progress_notifications_are_span_events_of_run(
    fault: MCPServerTools, otelhooks_tracing: InMemoryTracing
) -> None:
    executor = executor_for(otelhooks_tracing, fault)
    updates: list[Any] = []
    result = await executor.execute(
        ToolCall("p", "f_slow_progress", {"steps": 3}), on_update=lambda call, u: updates.append(u)
    )
    assert result.content == "done after 3 steps"
    run = otelhooks_tracing.child(otelhooks_tracing.tool_span(call_id="p"), "run")
    assert len(otelhooks_tracing.events(run, "otelhooks.tool.progress")) == 3
    assert len(updates) == 3


async def test_a_hanging_call_times_out_and_the_server_is_told_to_cancel(
    fault: MCPServerTools, record: Path, otelhooks_tracing: InMemoryTracing
) -> None:
    executor = executor_for(otelhooks_tracing, fault)
    started = time.monotonic()
    result = await executor.execute(ToolCall("h", "f_hang", {}), timeout=0.5)
    assert result.is_error and "timed out" in result.content
    assert time.monotonic() - started < 10  # about 0.5 s; the server never answers
    await wait_for_record(record, "cancelled", name="hang")
    assert records(record, "request", method="notifications/cancelled")
    after = await executor.execute(ToolCall("e", "f_echo", {"text": "still here"}))
    assert after.content == "still here"


async def test_a_crashed_server_gives_an_error_result_and_starts_again(
    fault: MCPServerTools, record: Path, otelhooks_tracing: InMemoryTracing
) -> None:
    executor = executor_for(otelhooks_tracing, fault)
    crashed = await executor.execute(ToolCall("c", "f_crash", {}))
    assert crashed.is_error
    assert "MCP server 'f' is gone" in crashed.content
    assert "started again on the next call" in crashed.content
    span = otelhooks_tracing.tool_span(call_id="c")
    assert span.attributes["error.type"] == "connection_error"  # type: ignore[index]
    back = await executor.execute(ToolCall("b", "f_echo", {"text": "back"}))
    assert not back.is_error and back.content == "back"
    assert (
        len(records(record, "request", method="server/discover"))
        + len(records(record, "request", method="initialize"))
        >= 2
    )


async def test_a_server_that_cannot_start_is_a_clear_error() -> None:
    server = MCPServerTools([sys.executable, "-c", "import sys; sys.exit(4)"], name="broken")
    with pytest.raises(MCPToolError, match="cannot start or reach the MCP server 'broken'"):
        await asyncio.wait_for(server.connect(), timeout=30)


async def test_garbage_on_stdout_large_results_and_many_tools(
    record: Path, otelhooks_tracing: InMemoryTracing
) -> None:
    server = MCPServerTools(
        fault_command(),
        env={"FAULT_SERVER_RECORD": str(record), "FAULT_SERVER_MANY_TOOLS": "500"},
    )
    async with server:
        executor = executor_for(otelhooks_tracing, server)
        assert len(executor.registry) >= 500
        garbage = await executor.execute(ToolCall("g", "garbage", {}))
        big = await executor.execute(ToolCall("b", "big", {"size": 1_000_000}))
        numbered = await executor.execute(ToolCall("n", "tool_499", {"value": 7}))
    assert garbage.content == "answered after garbage"
    assert len(big.content) == 1_000_000
    assert numbered.content == "tool 499: 7"


async def test_trace_context_reaches_the_server_in_meta(
    fault: MCPServerTools, record: Path, otelhooks_tracing: InMemoryTracing
) -> None:
    executor = executor_for(otelhooks_tracing, fault)
    await executor.execute(ToolCall("t", "f_echo", {"text": "traced"}))
    call = [r for r in records(record, "request", method="tools/call")][-1]
    version, trace_id, parent_id, _flags = call["meta"]["traceparent"].split("-")
    span = otelhooks_tracing.tool_span(call_id="t")
    run = otelhooks_tracing.child(span, "run")
    assert version == "00"
    assert trace_id == format(span.context.trace_id, "032x")  # type: ignore[union-attr]
    assert parent_id == format(run.context.span_id, "016x")  # type: ignore[union-attr]


async def test_a_blocked_call_never_reaches_the_server(
    fault: MCPServerTools, record: Path, otelhooks_tracing: InMemoryTracing
) -> None:
    hooks = Hooks()
    hooks.add(before=lambda ctx: block("not today"), tools="f_echo")
    executor = executor_for(otelhooks_tracing, fault, hooks=hooks)
    result = await executor.execute(ToolCall("x", "f_echo", {"text": "forbidden"}))
    assert result.is_error and "not today" in result.content
    allowed = await executor.execute(ToolCall("y", "f_leak", {}))
    assert not allowed.is_error
    assert records(record, "tool", name="leak")
    assert not records(record, "tool", name="echo")


async def test_a_secret_from_the_server_reaches_neither_the_model_nor_a_span(
    fault: MCPServerTools, otelhooks_tracing: InMemoryTracing
) -> None:
    redactor = Redactor()
    hooks = Hooks([RedactionHook(redactor)])
    executor = executor_for(
        otelhooks_tracing, fault, hooks=hooks, capture_content=True, scrubber=redactor
    )
    result = await executor.execute(ToolCall("s", "f_leak", {}))
    assert SECRET not in result.content and "[REDACTED:" in result.content
    assert SECRET not in json.dumps(result.details)
    for span in otelhooks_tracing.spans():
        assert SECRET not in json.dumps(dict(span.attributes or {}), default=str)
        for event in span.events:
            assert SECRET not in json.dumps(dict(event.attributes or {}), default=str)


async def test_the_registry_follows_the_servers_tool_list(
    fault: MCPServerTools, otelhooks_tracing: InMemoryTracing
) -> None:
    changes: list[str] = []
    fault.on_tools_changed = lambda server: changes.append(server.name)
    executor = executor_for(otelhooks_tracing, fault)
    assert executor.registry.get("f_newcomer") is None
    await executor.execute(ToolCall("a", "f_add_tool", {"name": "newcomer"}))
    deadline = time.monotonic() + 60
    while executor.registry.get("f_newcomer") is None and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert executor.registry.get("f_newcomer") is not None
    assert changes == ["f"]
    result = await executor.execute(ToolCall("n", "f_newcomer", {}))
    assert result.content == "I am newcomer"


async def test_two_servers_through_one_registry(
    record: Path, otelhooks_tracing: InMemoryTracing
) -> None:
    registry = ToolRegistry()
    servers = (
        MCPServerTools(time_command(), prefix="time"),
        MCPServerTools(fault_command(), prefix="fault"),
    )
    async with mcp_tools(registry, *servers):
        executor = ToolExecutor(registry, tracer_provider=otelhooks_tracing.provider)
        now = await executor.execute(ToolCall("t", "time_get_current_time", {"timezone": "UTC"}))
        echo = await executor.execute(ToolCall("e", "fault_echo", {"text": "two"}))
    assert not now.is_error and echo.content == "two"
    assert not servers[0].connected and not servers[1].connected


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_streamable_http_server_gets_server_address_and_port(
    record: Path, otelhooks_tracing: InMemoryTracing, mode: str
) -> None:
    (port,) = free_ports(1)
    process = subprocess.Popen(
        [*fault_command(), "--http", str(port)],
        env={"FAULT_SERVER_RECORD": str(record), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        server = MCPServerTools(url, prefix="web", headers={"X-Test": "1"}, mode=mode)
        deadline = time.monotonic() + 30
        while True:
            try:
                await server.connect()
                break
            except MCPToolError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
        try:
            executor = executor_for(otelhooks_tracing, server)
            result = await executor.execute(ToolCall("h", "web_echo", {"text": "over http"}))
        finally:
            await server.close()
    finally:
        process.terminate()
        process.wait(timeout=60)
    assert result.content == "over http"
    attrs = dict(otelhooks_tracing.tool_span(call_id="h").attributes or {})
    assert attrs["network.transport"] == "tcp"
    assert attrs["server.address"] == "127.0.0.1"
    assert attrs["server.port"] == port
    assert records(record, "tool", name="echo", text="over http")
    if mode == "legacy":  # sessions belong to the handshake era; 2026-07-28 has none
        assert len(attrs["mcp.session.id"]) >= 16
        assert attrs["mcp.protocol.version"] == "2025-11-25"
    else:
        assert "mcp.session.id" not in attrs
