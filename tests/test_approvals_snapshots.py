"""What each outcome of the before phase looks like: the call's span tree (with the guardrail
proposal's names, the approval's event under ``before``) and its audit lines, as snapshots. A
change in any of them is a change an auditor sees: it must show up here."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from otelhooks import (
    Agent,
    ApprovalRequest,
    Approve,
    AssistantMessage,
    BeforeToolCallContext,
    Deny,
    Hooks,
    ToolCall,
    ToolRegistry,
    ask,
    block,
    defer,
)
from otelhooks.builtin.audit import AuditLog, verify_audit_log
from otelhooks.core.approvals import ApprovalDecision, Approver
from otelhooks.providers import ScriptedProvider, quote_last_tool_result
from otelhooks.telemetry import attributes as A
from otelhooks.telemetry.testing import InMemoryTracing

SPAN_KEYS = (
    A.DECISION,
    A.VERDICT,
    A.GEN_AI_GUARDRAIL_VERDICT_TYPE,
    A.GEN_AI_GUARDRAIL_ACTION_TYPE,
    A.GEN_AI_GUARDRAIL_COMPONENT_NAME,
    A.GEN_AI_GUARDRAIL_POLICY_ID,
    A.GEN_AI_GUARDRAIL_INPUT_HASH,
    A.APPROVAL_ANSWER,
    A.APPROVAL_BY,
    A.ERROR_TYPE,
)
EVENT_KEYS = (
    A.APPROVAL_ANSWER,
    A.GEN_AI_GUARDRAIL_ACTION_TYPE,
    A.APPROVAL_BY,
    A.APPROVAL_HOW,
    A.GEN_AI_GUARDRAIL_INPUT_HASH,
)
AUDIT_KEYS = (
    "event", "tool", "decision", "verdict", "policies", "outcome", "error_type", "answer", "by",
    "how", "reason", "approval_digest", "approval",
)  # fmt: skip


def shown(key: str, value: Any) -> Any:
    """A value as the snapshot shows it: digests and ids by their kind, the rest as it is."""
    if isinstance(value, str) and value.startswith("hmac-sha256:"):
        return "<keyed digest>"
    if key == "approval" and value is not None:
        return "<id>"
    return list(value) if isinstance(value, tuple) else value


def tree(spans: list[ReadableSpan]) -> list[str]:
    """The tool calls' spans and their children, with the attributes and events that say what
    was decided."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        by_parent.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(span: ReadableSpan, depth: int) -> None:
        attrs = span.attributes or {}
        picked = {k: shown(k, attrs[k]) for k in SPAN_KEYS if k in attrs}
        line = "  " * depth + span.name + (f" {json.dumps(picked)}" if picked else "")
        lines.append(line)
        for event in span.events:
            if event.name == A.EVENT_APPROVAL:
                e = event.attributes or {}
                fields = {k: shown(k, e[k]) for k in EVENT_KEYS if k in e}
                lines.append("  " * (depth + 1) + f"event approval {json.dumps(fields)}")
        for child in sorted(
            by_parent.get(span.context.span_id, []), key=lambda s: s.start_time or 0
        ):
            walk(child, depth + 1)

    for span in sorted(spans, key=lambda s: s.start_time or 0):
        if span.name.startswith("execute_tool"):
            walk(span, 0)
    return lines


def audit(path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [{k: shown(k, line[k]) for k in AUDIT_KEYS if k in line} for line in lines]


def gate(ctx: BeforeToolCallContext) -> Any:
    amount = ctx.args["amount"]
    if amount > 10_000:
        return block("over the hard limit", policies=["limits.hard"])
    if amount > 1_000:
        return defer("large payments wait for the treasurer", policies=["limits.treasurer"])
    if amount > 100:
        return ask("payments over 100 need a person", policies=["limits.person"])
    return None


def agent_for(
    amount: int,
    approver: Approver | None,
    ttl: float,
    tracing: InMemoryTracing,
    log: AuditLog,
    resumed: bool = False,
) -> Agent:
    registry = ToolRegistry()

    @registry.tool
    def pay(to: str, amount: int) -> str:
        """Pay someone."""
        return f"paid {amount} to {to}"

    hooks = Hooks()
    hooks.add(before=gate, name="limits")
    hooks.add(log)
    call = ToolCall("c1", "pay", {"to": "acme", "amount": amount})
    asking = AssistantMessage(tool_calls=(call,), stop_reason="toolUse")
    steps: list[Any] = [quote_last_tool_result()] if resumed else [asking, quote_last_tool_result()]
    return Agent(
        ScriptedProvider(steps),
        tools=registry,
        hooks=hooks,
        approver=approver,
        approval_ttl=ttl,
        approval_secret=b"the approvers' secret",  # a resumed run is sealed under it
        tracer_provider=tracing.provider,
    )


def answering(decision: ApprovalDecision | None) -> Approver:
    async def approver(request: ApprovalRequest) -> ApprovalDecision:
        if decision is None:
            await asyncio.Event().wait()  # never answers
        assert decision is not None
        return decision

    return approver


CASES: dict[str, tuple[int, ApprovalDecision | str | None]] = {
    "allow": (50, "none"),
    "block": (50_000, "none"),
    "ask approved": (500, Approve("carol", "terminal")),
    "ask denied": (500, Deny("carol", "terminal", "not today")),
    "ask timed out": (500, None),
    "ask without an approver": (500, "none"),
    "defer": (5_000, "none"),
}

ALLOWED = {
    A.DECISION: "allow", A.VERDICT: "allow", A.GEN_AI_GUARDRAIL_VERDICT_TYPE: "allow",
    A.GEN_AI_GUARDRAIL_ACTION_TYPE: "allow",
}  # fmt: skip
ASKED_AND_BLOCKED = {
    A.DECISION: "block", A.VERDICT: "ask", A.GEN_AI_GUARDRAIL_VERDICT_TYPE: "escalate",
    A.GEN_AI_GUARDRAIL_ACTION_TYPE: "block", A.GEN_AI_GUARDRAIL_COMPONENT_NAME: "limits",
    A.GEN_AI_GUARDRAIL_POLICY_ID: "limits.person", A.GEN_AI_GUARDRAIL_INPUT_HASH: "<keyed digest>",
}  # fmt: skip


def span_line(attrs: Mapping[str, Any]) -> str:
    return f"execute_tool pay {json.dumps(dict(attrs))}"


def event_line(answer: str, action: str, by: str | None = None, how: str | None = None) -> str:
    fields: dict[str, Any] = {A.APPROVAL_ANSWER: answer, A.GEN_AI_GUARDRAIL_ACTION_TYPE: action}
    if by is not None:
        fields[A.APPROVAL_BY] = by
    if how is not None:
        fields[A.APPROVAL_HOW] = how
    fields[A.GEN_AI_GUARDRAIL_INPUT_HASH] = "<keyed digest>"
    return f"    event approval {json.dumps(fields)}"


def approval_line(answer: str, by: str | None, how: str | None, reason: str | None,
                  grant: bool, verdict: str, policy: str) -> dict[str, Any]:  # fmt: skip
    line = {
        "event": "approval", "tool": "pay", "verdict": verdict, "policies": [policy],
        "answer": answer, "by": by, "how": how, "reason": reason,
        "approval_digest": "<keyed digest>", "approval": "<id>" if grant else None,
    }  # fmt: skip
    return line


def call_line(decision: str, verdict: str, outcome: str, policy: str | None) -> dict[str, Any]:
    line: dict[str, Any] = {"event": "tool_call", "tool": "pay", "decision": decision,
                            "verdict": verdict}  # fmt: skip
    if policy is not None:
        line["policies"] = [policy]
    line["outcome"] = outcome
    line["error_type"] = None
    return line


SNAPSHOTS: dict[str, tuple[list[str], list[dict[str, Any]]]] = {
    "allow": (
        [span_line(ALLOWED), "  before", "  run", "  after"],
        [call_line("allow", "allow", "ok", None)],
    ),
    "block": (
        [
            span_line(
                {
                    A.DECISION: "block",
                    A.VERDICT: "block",
                    A.GEN_AI_GUARDRAIL_VERDICT_TYPE: "deny",
                    A.GEN_AI_GUARDRAIL_ACTION_TYPE: "block",
                    A.GEN_AI_GUARDRAIL_COMPONENT_NAME: "limits",
                    A.GEN_AI_GUARDRAIL_POLICY_ID: "limits.hard",
                }
            ),
            "  before",
        ],
        [call_line("block", "block", "blocked", "limits.hard")],
    ),
    "ask approved": (
        [
            span_line(
                {
                    A.DECISION: "allow",
                    A.VERDICT: "ask",
                    A.GEN_AI_GUARDRAIL_VERDICT_TYPE: "escalate",
                    A.GEN_AI_GUARDRAIL_ACTION_TYPE: "allow",
                    A.GEN_AI_GUARDRAIL_POLICY_ID: "limits.person",
                    A.GEN_AI_GUARDRAIL_INPUT_HASH: "<keyed digest>",
                    A.APPROVAL_ANSWER: "approve",
                    A.APPROVAL_BY: "carol",
                }
            ),
            "  before",
            event_line("approve", "allow", "carol", "terminal"),
            "  run",
            "  after",
        ],
        [
            approval_line("approve", "carol", "terminal", None, True, "ask", "limits.person"),
            call_line("allow", "ask", "ok", "limits.person"),
        ],
    ),
    "ask denied": (
        [
            span_line({**ASKED_AND_BLOCKED, A.APPROVAL_ANSWER: "deny", A.APPROVAL_BY: "carol"}),
            "  before",
            event_line("deny", "block", "carol", "terminal"),
        ],
        [
            approval_line("deny", "carol", "terminal", "not today", False, "ask", "limits.person"),
            call_line("block", "ask", "blocked", "limits.person"),
        ],
    ),
    "ask timed out": (
        [
            span_line({**ASKED_AND_BLOCKED, A.APPROVAL_ANSWER: "timeout"}),
            "  before",
            event_line("timeout", "block"),
        ],
        [
            approval_line(
                "timeout",
                None,
                None,
                "no answer from the approver within 0.05s",
                False,
                "ask",
                "limits.person",
            ),
            call_line("block", "ask", "blocked", "limits.person"),
        ],
    ),
    "ask without an approver": (
        [
            span_line({**ASKED_AND_BLOCKED, A.APPROVAL_ANSWER: "missing"}),
            "  before",
            event_line("missing", "block"),
        ],
        [
            approval_line("missing", None, None, None, False, "ask", "limits.person"),
            call_line("block", "ask", "blocked", "limits.person"),
        ],
    ),
    "defer": (
        [
            span_line(
                {
                    A.DECISION: "defer",
                    A.VERDICT: "defer",
                    A.GEN_AI_GUARDRAIL_VERDICT_TYPE: "escalate",
                    A.GEN_AI_GUARDRAIL_ACTION_TYPE: "escalate",
                    A.GEN_AI_GUARDRAIL_COMPONENT_NAME: "limits",
                    A.GEN_AI_GUARDRAIL_POLICY_ID: "limits.treasurer",
                    A.GEN_AI_GUARDRAIL_INPUT_HASH: "<keyed digest>",
                    A.APPROVAL_ANSWER: "pending",
                }
            ),
            "  before",
            event_line("pending", "escalate"),
        ],
        [
            approval_line("pending", None, None, None, False, "defer", "limits.treasurer"),
            call_line("defer", "defer", "deferred", "limits.treasurer"),
        ],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_each_outcome_has_its_span_tree_and_audit_lines(
    case: str, tmp_path: Path, otelhooks_tracing: InMemoryTracing
) -> None:
    amount, answer = CASES[case]
    approver = None if answer == "none" else answering(answer)  # type: ignore[arg-type]
    log = AuditLog(tmp_path / "audit.jsonl", secret=b"k" * 32)
    agent = agent_for(amount, approver, 0.05 if answer is None else 60, otelhooks_tracing, log)
    result = await agent.run("pay acme")
    log.close()
    spans, lines = SNAPSHOTS[case]
    assert tree(otelhooks_tracing.spans()) == spans
    assert audit(tmp_path / "audit.jsonl") == lines
    assert verify_audit_log(tmp_path / "audit.jsonl", secret=b"k" * 32).ok
    assert (result.state is not None) is (case == "defer")


async def test_a_resumed_call_has_its_span_tree_and_audit_lines(
    tmp_path: Path, otelhooks_tracing: InMemoryTracing
) -> None:
    log = AuditLog(tmp_path / "audit.jsonl", secret=b"k" * 32)
    first = await agent_for(5_000, None, 60, otelhooks_tracing, log).run("pay acme")
    assert first.state is not None
    otelhooks_tracing.clear()
    resumed = agent_for(5_000, None, 60, otelhooks_tracing, log, resumed=True)
    await resumed.resume(first.state, {"c1": Approve("tom", "phone")})
    log.close()
    assert tree(otelhooks_tracing.spans()) == [
        span_line(
            {
                A.DECISION: "allow",
                A.VERDICT: "defer",
                A.GEN_AI_GUARDRAIL_VERDICT_TYPE: "escalate",
                A.GEN_AI_GUARDRAIL_ACTION_TYPE: "allow",
                A.GEN_AI_GUARDRAIL_POLICY_ID: "limits.treasurer",
                A.GEN_AI_GUARDRAIL_INPUT_HASH: "<keyed digest>",
                A.APPROVAL_ANSWER: "approve",
                A.APPROVAL_BY: "tom",
            }
        ),
        "  before",
        event_line("approve", "allow", "tom", "phone"),
        "  run",
        "  after",
    ]
    assert audit(tmp_path / "audit.jsonl")[2:] == [
        approval_line("approve", "tom", "phone", None, True, "defer", "limits.treasurer"),
        call_line("allow", "defer", "ok", "limits.treasurer"),
    ]
