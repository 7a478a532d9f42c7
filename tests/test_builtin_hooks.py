"""structlog events and policy hooks."""

from __future__ import annotations

from typing import Any

import pytest
import structlog
from structlog.testing import LogCapture

from otelhooks import AgentContext, Hooks, ToolCall, ToolExecutor, ToolRegistry, block
from otelhooks.builtin import (
    ArgumentPattern,
    CallLimit,
    PathGuard,
    StructlogEvents,
    ToolAllowList,
    ToolDenyList,
    UrlHostGuard,
    add_trace_context,
)
from otelhooks.telemetry.testing import InMemoryTracing


@pytest.fixture
def capture() -> LogCapture:
    return LogCapture()


def _logger(capture: LogCapture) -> Any:
    return structlog.wrap_logger(
        structlog.ReturnLogger(),
        processors=[add_trace_context, capture],
        wrapper_class=structlog.BoundLogger,
    )


async def test_one_event_per_outcome_with_the_tool_span_ids(
    registry: ToolRegistry, otelhooks_tracing: InMemoryTracing, capture: LogCapture
) -> None:
    @registry.tool
    def fail() -> str:
        raise OSError("disk")

    hooks = Hooks([StructlogEvents(_logger(capture), mirror_to_span=True)])
    hooks.add(
        before=lambda ctx: block("not today") if ctx.tool_call.id == "c3" else None, name="gate"
    )
    executor = ToolExecutor(registry, hooks, tracer_provider=otelhooks_tracing.provider)
    await executor.execute(ToolCall("c1", "echo", {"text": "hello"}))
    await executor.execute(ToolCall("c2", "fail", {}))
    await executor.execute(ToolCall("c3", "echo", {"text": "x"}))

    completed, failed, blocked = capture.entries
    assert completed["event"] == "tool_call.completed" and completed["log_level"] == "info"
    assert completed["tool_name"] == "echo" and completed["call_id"] == "c1"
    assert completed["is_error"] is False and completed["result_size"] == 5
    assert completed["arguments_rewritten"] is False and completed["duration_ms"] >= 0
    span = otelhooks_tracing.tool_span(call_id="c1")
    assert completed["trace_id"] == format(span.context.trace_id, "032x")  # type: ignore[union-attr]
    assert completed["span_id"] == format(span.context.span_id, "016x")  # type: ignore[union-attr]
    assert failed["event"] == "tool_call.failed" and failed["error_type"] == "OSError"
    assert blocked["event"] == "tool_call.blocked" and blocked["log_level"] == "warning"
    assert blocked["reason"] == "not today" and blocked["hook"] == "gate"
    mirrored = otelhooks_tracing.events(
        otelhooks_tracing.tool_span(call_id="c3"), "tool_call.blocked"
    )
    assert mirrored[0]["log.reason"] == "not today"
    assert "log.trace_id" not in mirrored[0]


def test_trace_context_processor_is_a_plain_structlog_processor() -> None:
    assert add_trace_context(None, "info", {"event": "x"}) == {"event": "x"}  # no span: unchanged


def _ctx(name: str, args: dict[str, Any], run_id: str = "r1") -> Any:
    from otelhooks import BeforeToolCallContext, CancelSignal, ToolSpec

    return BeforeToolCallContext(
        ToolCall("c", name, args),
        args,
        ToolSpec(name, "", {}),
        None,
        AgentContext(run_id=run_id),
        CancelSignal(),
    )


def test_allow_and_deny_lists() -> None:
    allow = ToolAllowList(["read_*", "echo"])
    assert allow.before_tool_call(_ctx("read_file", {})) is None
    blocked = allow.before_tool_call(_ctx("rm", {}))
    assert (
        blocked is not None
        and blocked.reason == "tool 'rm' is not on the allow-list (read_*, echo)"
    )
    deny = ToolDenyList(["shell*"])
    assert deny.before_tool_call(_ctx("echo", {})) is None
    decision = deny.before_tool_call(_ctx("shell_exec", {}))
    assert (
        decision is not None and decision.reason == "tool 'shell_exec' is denied by policy (shell*)"
    )


@pytest.mark.parametrize(
    ("path", "relative_to", "allowed"),
    [
        ("notes/today.md", None, False),  # relative to what? The server decides: refused
        ("notes/today.md", "/srv/data", True),
        ("notes/today.md", "/srv", False),  # /srv/notes/today.md
        ("/srv/data/x.txt", None, True),
        ("../etc/passwd", "/srv/data", False),
        ("notes/../../etc", "/srv/data", False),
        ("~/notes", "/srv/data", False),
        ("/etc/passwd", None, False),
        ("/srv/database", None, False),
    ],
)
def test_path_guard(path: str, relative_to: str | None, allowed: bool) -> None:
    guard = PathGuard("path", "/srv/data", relative_to=relative_to)
    decision = guard.before_tool_call(_ctx("read", {"path": path}))
    assert (decision is None) is allowed
    if not allowed:
        assert decision is not None and decision.reason.startswith("argument 'path' of 'read' must")


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://docs.python.org/3/", True),
        ("https://api.example.com/v1", True),
        ("https://evil.com/?q=docs.python.org", False),
        ("file:///etc/passwd", False),
        ("http://example.com.evil.org", False),
    ],
)
def test_url_host_guard(url: str, allowed: bool) -> None:
    guard = UrlHostGuard("url", ["docs.python.org", "*.example.com"])
    assert (guard.before_tool_call(_ctx("fetch", {"url": url})) is None) is allowed


def test_argument_pattern_and_missing_argument() -> None:
    guard = ArgumentPattern("branch", r"feature/[a-z-]+", description="be a feature branch")
    assert guard.before_tool_call(_ctx("push", {"branch": "feature/login"})) is None
    decision = guard.before_tool_call(_ctx("push", {"branch": "main"}))
    assert (
        decision is not None
        and decision.reason == "argument 'branch' of 'push' must be a feature branch"
    )
    assert guard.before_tool_call(_ctx("push", {})) is None  # not this guard's business


def test_call_limit_counts_per_run_and_tool() -> None:
    limit = CallLimit(2)
    assert [limit.before_tool_call(_ctx("search", {})) is None for _ in range(3)] == [
        True,
        True,
        False,
    ]
    assert limit.before_tool_call(_ctx("other", {})) is None
    assert limit.before_tool_call(_ctx("search", {}, run_id="r2")) is None
    decision = limit.before_tool_call(_ctx("search", {}))
    assert (
        decision is not None and decision.reason == "limit of 2 calls of 'search' per run reached"
    )


async def test_default_deny_through_the_executor(
    registry: ToolRegistry, otelhooks_tracing: InMemoryTracing
) -> None:
    registry.register(lambda: "ran", name="shell")
    hooks = Hooks([ToolAllowList(["echo"])])
    executor = ToolExecutor(registry, hooks, tracer_provider=otelhooks_tracing.provider)
    assert (await executor.execute(ToolCall("1", "echo", {"text": "ok"}))).content == "ok"
    denied = await executor.execute(ToolCall("2", "shell", {}))
    assert denied.content == "blocked: tool 'shell' is not on the allow-list (echo)"
    otelhooks_tracing.assert_children(otelhooks_tracing.tool_span(call_id="2"), ["before"])


async def test_guards_limited_to_tools(
    registry: ToolRegistry, otelhooks_tracing: InMemoryTracing
) -> None:
    registry.register(lambda path: path, name="read")
    registry.register(lambda path: path, name="log_path")
    hooks = Hooks([PathGuard("path", "/srv", tools=["read"])])
    executor = ToolExecutor(registry, hooks, tracer_provider=otelhooks_tracing.provider)
    assert (await executor.execute(ToolCall("1", "read", {"path": "/etc"}))).is_error
    assert (await executor.execute(ToolCall("2", "log_path", {"path": "/etc"}))).content == "/etc"
