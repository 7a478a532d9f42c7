"""Deferred runs: a deferred call ends the run with a state that resumes it, in this process or
after a restart, without running again what already ran, and only as decided."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from otelhooks import (
    Agent,
    Approve,
    AssistantMessage,
    BeforeToolCallContext,
    Deny,
    Hooks,
    ToolCall,
    ToolRegistry,
    ToolResult,
    defer,
)
from otelhooks.core.resume import STATE_VERSION, RunState, StateError
from otelhooks.providers import ScriptedProvider, quote_last_tool_result
from otelhooks.telemetry import attributes as A
from otelhooks.telemetry.testing import InMemoryTracing

BATCH = AssistantMessage(
    tool_calls=(
        ToolCall("c1", "read", {"path": "a.txt"}),
        ToolCall("c2", "wire", {"to": "acme", "amount": 900}),
        ToolCall("c3", "read", {"path": "b.txt"}),
    ),
    stop_reason="toolUse",
)


SECRET = b"the treasurers' approval secret"


def make_agent(
    counts: dict[str, int],
    steps: list[Any],
    tracing: InMemoryTracing | None = None,
    secret: bytes = SECRET,
    name: str = "agent",
) -> Agent:
    registry = ToolRegistry()

    @registry.tool
    def read(path: str) -> str:
        """Read a file."""
        counts[path] = counts.get(path, 0) + 1
        return f"read {path}"

    @registry.tool
    def wire(to: str, amount: int) -> str:
        """Wire money."""
        counts["wire"] = counts.get("wire", 0) + 1
        return f"wired {amount} to {to}"

    hooks = Hooks()

    @hooks.before(tools="wire")
    def treasury(ctx: BeforeToolCallContext) -> Any:
        return defer("wires wait for the treasurer", policies=["treasury.wires"])

    return Agent(
        ScriptedProvider(steps),
        tools=registry,
        hooks=hooks,
        tracer_provider=tracing.provider if tracing is not None else None,
        approval_secret=secret,
        name=name,
    )


async def test_a_deferred_call_ends_the_run_and_resuming_runs_only_what_waited(
    otelhooks_tracing: InMemoryTracing,
) -> None:
    counts: dict[str, int] = {}
    agent = make_agent(counts, [BATCH], otelhooks_tracing)
    first = await agent.run("pay the invoice", user="ann")
    assert counts == {"a.txt": 1, "b.txt": 1}  # the rest of the batch ran
    assert first.state is not None and first.stop_reason == "toolUse"
    assert [r.call_id for r in first.pending] == ["c2"]
    assert first.pending[0].policies == ("treasury.wires",)
    assert not any(isinstance(m, ToolResult) for m in agent.messages)  # none reached the model
    text = json.dumps(first.state.to_json())  # plain JSON
    assert json.loads(text)["version"] == STATE_VERSION

    resumed_agent = make_agent(counts, [quote_last_tool_result()], otelhooks_tracing)
    second = await resumed_agent.resume(text, {"c2": Approve("tom", "phone")})
    assert counts == {"a.txt": 1, "b.txt": 1, "wire": 1}  # nothing ran twice
    assert second.run_id == first.run_id and second.state is None
    assert second.text == "The tool result is: read a.txt; wired 900 to acme; read b.txt"
    results = [m for m in resumed_agent.messages if isinstance(m, ToolResult)]
    assert [r.tool_call_id for r in results] == ["c1", "c2", "c3"]  # source order

    runs = otelhooks_tracing.find(gen_ai__operation__name=A.OP_INVOKE_AGENT)
    assert len(runs) == 2
    before, after = runs
    assert [link.context.span_id for link in after.links] == [before.context.span_id]
    assert after.links[0].attributes == {A.RESUMED_FROM: first.run_id}
    wires = otelhooks_tracing.tool_spans("wire")
    assert [(s.attributes or {}).get(A.DECISION) for s in wires] == ["defer", "allow"]
    assert (wires[1].attributes or {})[A.APPROVAL_BY] == "tom"


async def test_a_denied_or_undecided_call_is_refused_and_never_runs() -> None:
    counts: dict[str, int] = {}
    first = await make_agent(counts, [BATCH]).run("pay")
    assert first.state is not None
    denied = make_agent(counts, [quote_last_tool_result()])
    result = await denied.resume(first.state, {"c2": Deny("tom", "phone", "not this month")})
    assert "blocked: approval denied by tom (phone): not this month" in result.text
    again = await make_agent(counts, [BATCH]).run("pay")  # a resumed state is spent, denied too
    assert again.state is not None
    undecided = make_agent(counts, [quote_last_tool_result()])
    result = await undecided.resume(again.state)
    assert "resumed without a decision" in result.text
    assert "wire" not in counts


async def test_a_decision_is_used_once_and_only_for_the_arguments_it_was_made_for() -> None:
    counts: dict[str, int] = {}
    first = await make_agent(counts, [BATCH]).run("pay")
    assert first.state is not None
    agent = make_agent(counts, [quote_last_tool_result(), quote_last_tool_result()])
    await agent.resume(first.state, {"c2": Approve("tom")})
    again = await agent.resume(first.state, {"c2": Approve("tom")})  # replayed in this process
    assert "resumed already" in again.text
    assert counts["wire"] == 1

    # The model's call changed in the state after the decision was asked for: refused.
    data = first.state.to_json()
    data["messages"][-1]["tool_calls"][1]["arguments"]["amount"] = 90000
    tampered = make_agent(counts, [quote_last_tool_result()])
    with pytest.raises(StateError, match="seal does not match"):
        await tampered.resume(data, {"c2": Approve("tom")})
    assert counts["wire"] == 1


async def test_states_and_decisions_that_do_not_fit_are_refused_before_anything_runs() -> None:
    counts: dict[str, int] = {}
    first = await make_agent(counts, [BATCH]).run("pay")
    assert first.state is not None
    data = first.state.to_json()
    agent = make_agent(counts, [quote_last_tool_result()])
    with pytest.raises(StateError, match="pending calls are: c2"):
        await agent.resume(data, {"c-2": Approve("tom")})  # a typo approves nothing
    with pytest.raises(StateError, match="expected Approve"):
        await agent.resume(data, {"c2": "approve"})  # type: ignore[dict-item]
    with pytest.raises(StateError, match="version"):
        await agent.resume({**data, "version": 99}, {"c2": Approve("tom")})
    with pytest.raises(StateError, match="malformed"):
        await agent.resume({**data, "pending": [{"request": {}}]}, {})
    with pytest.raises(StateError, match="do not match"):
        await agent.resume({**data, "done": {"c9": data["done"]["c1"]}}, {})
    with pytest.raises(StateError):
        RunState.from_json("[]")
    assert counts == {"a.txt": 1, "b.txt": 1}  # nothing ran
    assert agent.messages == []  # nor did the conversation change


SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    from pathlib import Path
    from otelhooks import (Agent, Approve, AssistantMessage, Hooks, ToolCall, ToolRegistry,
                           defer)
    from otelhooks.providers import ScriptedProvider, quote_last_tool_result

    phase, folder = sys.argv[1], Path(sys.argv[2])
    ledger = folder / "ran.txt"
    registry = ToolRegistry()

    @registry.tool
    def read(path: str) -> str:
        with ledger.open("a") as f:
            f.write(path + "\\n")
        return f"read {path}"

    @registry.tool
    def wire(to: str, amount: int) -> str:
        with ledger.open("a") as f:
            f.write("wire\\n")
        return f"wired {amount} to {to}"

    hooks = Hooks()
    hooks.add(before=lambda ctx: defer("treasurer"), tools="wire", name="treasury")
    batch = AssistantMessage(tool_calls=(
        ToolCall("c1", "read", {"path": "a.txt"}),
        ToolCall("c2", "wire", {"to": "acme", "amount": 900}),
    ), stop_reason="toolUse")

    async def main() -> None:
        if phase == "first":
            agent = Agent(ScriptedProvider([batch]), tools=registry, hooks=hooks,
                          approval_secret=b"shared")
            result = await agent.run("pay", user="ann")
            (folder / "state.json").write_text(json.dumps(result.state.to_json()))
        else:
            agent = Agent(ScriptedProvider([quote_last_tool_result()]), tools=registry,
                          hooks=hooks, approval_secret=b"shared")
            state = (folder / "state.json").read_text()
            result = await agent.resume(state, {"c2": Approve("tom", "phone")})
            print(result.run_id, result.text)

    asyncio.run(main())
    """
)


def test_a_deferred_run_resumes_after_the_process_restarted(tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(SCRIPT)

    def run(phase: str) -> str:
        done = subprocess.run(
            [sys.executable, str(script), phase, str(tmp_path)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    run("first")
    state = json.loads((tmp_path / "state.json").read_text())
    assert (tmp_path / "ran.txt").read_text().split() == ["a.txt"]
    out = run("second")  # another process, the same approval secret: the decision holds
    assert out.split(" ", 1) == [
        state["run_id"],
        "The tool result is: read a.txt; wired 900 to acme\n",
    ]
    assert (tmp_path / "ran.txt").read_text().split() == ["a.txt", "wire"]  # each ran once
