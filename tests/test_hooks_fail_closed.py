"""No hook fails silently, and the built-in redaction holds whatever the other hooks do."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otelhooks import (
    AfterOverride,
    Hooks,
    ToolCall,
    ToolContext,
    ToolExecutor,
    ToolRegistry,
    block,
)
from otelhooks.builtin import RedactionHook, Redactor, StructlogEvents, json_logger
from otelhooks.telemetry import attributes as A
from otelhooks.telemetry.testing import in_memory_tracing

SECRET = "ghp_" + "Zq8RkT2mWx9LpN4vB7cY1dF6hJ3sA5eG0uIo"


@pytest.fixture
def logs() -> io.StringIO:
    out = io.StringIO()
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.JSONRenderer()],
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
    yield out
    structlog.reset_defaults()


def run(executor: ToolExecutor, *calls: ToolCall) -> list[Any]:
    async def main() -> list[Any]:
        return [await executor.execute(call) for call in calls]

    return asyncio.run(main())


def records(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]


@pytest.mark.parametrize(
    ("returned", "named"),
    [
        (block("wrong phase"), "a before-hook decision (allow/block/rewrite)"),
        ({"content": "hidden"}, "dict"),
        (42, "int"),
    ],
    ids=["block", "dict", "int"],
)
def test_an_after_hook_with_a_wrong_return_type_is_logged_and_named(
    registry: ToolRegistry, logs: io.StringIO, returned: Any, named: str
) -> None:
    hooks = Hooks()
    hooks.add(after=lambda ctx: returned, name="hide_field")
    tracing = in_memory_tracing()
    result = run(
        ToolExecutor(registry, hooks, tracer_provider=tracing.provider),
        ToolCall("c1", "echo", {"text": "visible"}),
    )[0]
    assert result.content == "visible"  # fail open (the default) keeps the result...
    (warning,) = [r for r in records(logs) if r["event"] == "hook.failed"]
    assert warning["level"] == "warning" and warning["hook"] == "hide_field"
    assert named in warning["message"] and warning["tool_name"] == "echo"
    after = tracing.child(tracing.tool_span(call_id="c1"), "after")
    (event,) = tracing.events(after, A.EVENT_HOOK)
    assert event[A.EVENT_HOOK_DECISION] == "failed" and named in event[A.EVENT_HOOK_ERROR]


def test_a_fail_closed_after_hook_withholds_the_result(
    registry: ToolRegistry, logs: io.StringIO
) -> None:
    hooks = Hooks()

    @hooks.after(after_failure="fail_closed")
    def hide_salary(ctx: Any) -> Any:
        raise KeyError("salary")

    tracing = in_memory_tracing()
    result = run(
        ToolExecutor(registry, hooks, tracer_provider=tracing.provider),
        ToolCall("c1", "echo", {"text": "salary: 100k"}),
    )[0]
    assert result.is_error and "withheld" in result.content and "100k" not in result.content
    assert [r["event"] for r in records(logs)] == ["hook.failed"]
    span = tracing.tool_span(call_id="c1")
    assert span.attributes[A.ERROR_TYPE] == "hook_failed"  # type: ignore[index]


def test_redaction_holds_whatever_the_other_hooks_do(
    registry: ToolRegistry, logs: io.StringIO
) -> None:
    redactor = Redactor()
    hooks = Hooks()
    hooks.add(after=lambda ctx: 1 / 0, name="buggy_before_redaction")  # raises, fail open
    hooks.add(RedactionHook(redactor))
    hooks.add(  # runs after redaction and puts the raw argument back
        after=lambda ctx: AfterOverride(content=f"echo: {ctx.args['text']}"), name="echo_back"
    )
    hooks.add(after=lambda ctx: None, name="harmless")
    tracing = in_memory_tracing(redactor=redactor)
    result = run(
        ToolExecutor(
            registry,
            hooks,
            tracer_provider=tracing.provider,
            capture_content=True,
            scrubber=redactor,
        ),
        ToolCall("c1", "echo", {"text": f"token {SECRET}"}),
    )[0]
    assert SECRET not in result.content
    assert result.content == "echo: token [REDACTED:github_token]"
    assert SECRET not in "".join(s.to_json() for s in tracing.spans())


def test_block_reasons_and_failure_messages_reaching_the_model_are_redacted(
    registry: ToolRegistry, logs: io.StringIO
) -> None:
    redactor = Redactor()
    hooks = Hooks([RedactionHook(redactor)])
    hooks.add(before=lambda ctx: block(f"key {SECRET} is revoked"), tools="echo", name="revoked")
    registry.register(lambda: 1, name="other")
    hooks.add(
        before=lambda ctx: (_ for _ in ()).throw(RuntimeError(f"bad {SECRET}")),
        tools="other",
        name="crashes",
    )
    tracing = in_memory_tracing(redactor=redactor)
    blocked, failed = run(
        ToolExecutor(registry, hooks, tracer_provider=tracing.provider, scrubber=redactor),
        ToolCall("c1", "echo", {"text": "x"}),
        ToolCall("c2", "other", {}),
    )
    assert blocked.content == "blocked: key [REDACTED:github_token] is revoked"
    assert failed.is_error and SECRET not in failed.content
    warning = next(r for r in records(logs) if r["event"] == "hook.failed")
    assert SECRET not in json.dumps(warning)  # the log line is scrubbed before it is written
    assert SECRET not in "".join(s.to_json() for s in tracing.spans())


def test_unknown_tools_and_invalid_arguments_are_logged_like_other_outcomes(
    registry: ToolRegistry, logs: io.StringIO
) -> None:
    hooks = Hooks([StructlogEvents()])
    run(
        ToolExecutor(registry, hooks),
        ToolCall("c1", "no_such_tool", {}),
        ToolCall("c2", "echo", {"wrong": 1}),
    )
    events = {r["call_id"]: r for r in records(logs)}
    assert events["c1"]["event"] == "tool_call.failed"
    assert events["c1"]["error_type"] == "tool_not_found"
    assert events["c2"]["error_type"] == "invalid_arguments"


_texts = st.text(alphabet="abcdefgh -_:", max_size=150)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    where=st.sampled_from(["tool_name", "call_id", "progress", "block_reason", "error"]),
    before=_texts,
    after=_texts,
    limit=st.integers(10, 120),
)
def test_property_secrets_in_every_channel_are_removed_before_any_cut(
    where: str, before: str, after: str, limit: int
) -> None:
    planted = f"{before} {SECRET} {after}"
    redactor = Redactor()
    tracing = in_memory_tracing(redactor=redactor)
    out = io.StringIO()
    logger = json_logger(out, redactor)
    registry = ToolRegistry()

    @registry.tool
    def work() -> str:
        return "ok"

    @registry.tool
    def report(ctx: ToolContext) -> str:
        ctx.progress(planted)
        raise RuntimeError(planted)

    hooks = Hooks([RedactionHook(redactor), StructlogEvents(logger, mirror_to_span=True)])
    if where == "block_reason":
        hooks.add(before=lambda ctx: block(planted), tools="work")
    executor = ToolExecutor(
        registry,
        hooks,
        tracer_provider=tracing.provider,
        capture_content=True,
        max_content_length=limit,
        scrubber=redactor,
    )
    call = {
        "tool_name": ToolCall("c1", planted, {}),
        "call_id": ToolCall(planted, "work", {}),
        "progress": ToolCall("c1", "report", {}),
        "block_reason": ToolCall("c1", "work", {}),
        "error": ToolCall("c1", "report", {}),
    }[where]
    result = run(executor, call)[0]
    everything = "".join(s.to_json() for s in tracing.spans()) + out.getvalue() + result.content
    for i in range(len(SECRET) - 7):
        assert SECRET[i : i + 8] not in everything, (where, SECRET[i : i + 8])
