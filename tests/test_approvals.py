"""Ask before it runs: the before phase's answers (allow, block, ask, defer) and approvals bound
to the exact call. Each test tries to get a call to run that should not, or to stop one that
should run."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import pytest

from otelhooks import (
    ApprovalDecision,
    ApprovalRequest,
    ApprovalSettings,
    Approve,
    ApproveWithEdit,
    BeforeDecision,
    BeforeToolCallContext,
    CallIdentity,
    Deny,
    Hooks,
    ToolCall,
    ToolCallRecord,
    ToolExecutor,
    ToolRegistry,
    allow,
    ask,
    block,
    defer,
    rewrite,
)
from otelhooks.builtin import Redactor
from otelhooks.core.approvals import Grants, approval_key, arguments_digest
from otelhooks.telemetry import attributes as A
from otelhooks.telemetry.testing import InMemoryTracing


class Recorder:
    """An approver that answers from a list and keeps what it was asked."""

    def __init__(self, *answers: ApprovalDecision) -> None:
        self.answers = list(answers)
        self.asked: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        self.asked.append(request)
        return self.answers.pop(0)


def tools(ran: list[Mapping[str, Any]]) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def pay(to: str, amount: int) -> str:
        """Pay someone."""
        ran.append({"to": to, "amount": amount})
        return f"paid {amount} to {to}"

    return registry


def records(hooks: Hooks) -> list[ToolCallRecord]:
    seen: list[ToolCallRecord] = []
    hooks.add(observe=seen.append, name="records")
    return seen


def call(amount: int = 10, to: str = "alice", call_id: str = "c1") -> ToolCall:
    return ToolCall(call_id, "pay", {"to": to, "amount": amount})


# -- the answers and their precedence -------------------------------------------------------------


@pytest.mark.parametrize(
    ("answers", "ran", "decision", "verdict"),
    [
        (["allow", "allow"], True, "allow", "allow"),
        (["ask", "allow"], True, "allow", "ask"),  # approved below
        (["ask", "block"], False, "block", "block"),  # a later block beats an ask
        (["defer", "ask"], True, "allow", "defer"),  # defer beats ask; no loop: asked, approved
        (["block", "ask"], False, "block", "block"),  # the first block ends the chain
        (["defer", "block"], False, "block", "block"),  # block beats defer
    ],
)
async def test_precedence_is_block_over_defer_over_ask_over_allow(
    answers: list[str], ran: bool, decision: str, verdict: str
) -> None:
    handled: list[Mapping[str, Any]] = []
    hooks = Hooks()
    made: dict[str, BeforeDecision] = {
        "allow": allow(),
        "ask": ask("asks"),
        "block": block("no"),
        "defer": defer("later"),
    }
    asked_second: list[bool] = []

    def first(ctx: BeforeToolCallContext) -> BeforeDecision:
        return made[answers[0]]

    def second(ctx: BeforeToolCallContext) -> BeforeDecision:
        asked_second.append(True)
        return made[answers[1]]

    hooks.add(before=first, name="first")
    hooks.add(before=second, name="second")
    seen = records(hooks)
    approver = Recorder(Approve("carol"))
    result = await ToolExecutor(tools(handled), hooks, approver=approver).execute(call())
    assert bool(handled) is ran, result.content
    assert seen[0].decision == decision
    assert seen[0].verdict == verdict
    assert asked_second == ([] if answers[0] == "block" else [True])
    assert len(approver.asked) == (1 if verdict in ("ask", "defer") else 0)


async def test_a_defer_outside_a_loop_without_an_approver_is_a_block_that_says_so() -> None:
    handled: list[Mapping[str, Any]] = []
    hooks = Hooks()
    hooks.add(before=lambda ctx: defer("a person decides tomorrow"), name="g")
    result = await ToolExecutor(tools(handled), hooks).execute(call())
    assert handled == []
    assert result.content == (
        "blocked: a person decides tomorrow (deferred, and nothing here can resume it or ask)"
    )


async def test_ask_without_an_approver_is_a_block_that_says_so_and_not_an_error(
    otelhooks_tracing: InMemoryTracing,
) -> None:
    handled: list[Mapping[str, Any]] = []
    hooks = Hooks()
    hooks.add(before=lambda ctx: ask("payments need a person", policies=["pay.human"]), name="g")
    seen = records(hooks)
    executor = ToolExecutor(tools(handled), hooks, tracer_provider=otelhooks_tracing.provider)
    result = await executor.execute(call())
    assert handled == []
    assert result.is_error
    assert "no approver is configured" in result.content
    assert "payments need a person" in result.content
    record = seen[0]
    assert (record.decision, record.verdict, record.error_type) == ("block", "ask", None)
    assert record.approval is not None and record.approval.answer == "missing"
    span = otelhooks_tracing.tool_span(call_id="c1")
    attrs = span.attributes or {}
    assert A.ERROR_TYPE not in attrs  # a refusal is not an error
    assert attrs[A.GEN_AI_GUARDRAIL_VERDICT_TYPE] == "escalate"
    assert attrs[A.GEN_AI_GUARDRAIL_ACTION_TYPE] == "block"
    assert attrs[A.GEN_AI_GUARDRAIL_POLICY_ID] == "pay.human"


async def test_the_approver_sees_the_final_arguments_redacted_and_their_keyed_digest() -> None:
    handled: list[Mapping[str, Any]] = []
    hooks = Hooks()
    secret = "sk-proj-" + "A1b2C3d4" * 5
    hooks.add(before=lambda ctx: rewrite({**ctx.args, "amount": 20}), name="cap")
    hooks.add(before=lambda ctx: ask("check"), name="gate")
    approver = Recorder(Approve("carol"))
    settings = ApprovalSettings(approver, secret=b"s" * 32)
    executor = ToolExecutor(tools(handled), hooks, approver=settings, scrubber=Redactor())
    result = await executor.execute(call(5, to=secret), identity=CallIdentity("a", "r", "u"))
    assert handled == [{"to": secret, "amount": 20}], result.content
    request = approver.asked[0]
    assert request.arguments["amount"] == 20  # after the rewrite
    assert secret not in str(request.arguments) and request.secret
    assert request.digest == arguments_digest(settings.key, "pay", {"to": secret, "amount": 20})
    assert request.digest.startswith("hmac-sha256:")
    assert request.identity == CallIdentity("a", "r", "u")
    other_key = approval_key(b"t" * 32)
    assert request.digest != arguments_digest(other_key, "pay", {"to": secret, "amount": 20})


async def test_a_denial_blocks_and_says_who_and_how() -> None:
    handled: list[Mapping[str, Any]] = []
    hooks = Hooks()
    hooks.add(before=lambda ctx: ask("check"), name="gate")
    seen = records(hooks)
    approver = Recorder(Deny("dave", "terminal", "too much"))
    result = await ToolExecutor(tools(handled), hooks, approver=approver).execute(call())
    assert handled == []
    assert result.content == "blocked: approval denied by dave (terminal): too much"
    approval = seen[0].approval
    assert approval is not None
    assert (approval.answer, approval.by, approval.how) == ("deny", "dave", "terminal")
    assert seen[0].error_type is None


@pytest.mark.parametrize(
    "behaviour",
    ["raises", "nonsense", "nobody", "sync-nonsense"],
)
async def test_an_approver_that_fails_denies_and_marks_the_failure(behaviour: str) -> None:
    handled: list[Mapping[str, Any]] = []
    hooks = Hooks()
    hooks.add(before=lambda ctx: ask("check"), name="gate")
    seen = records(hooks)

    async def approver(request: ApprovalRequest) -> Any:
        if behaviour == "raises":
            raise RuntimeError("the approval service is down")
        if behaviour == "nobody":
            return Approve("")
        return "yes" if behaviour == "nonsense" else True

    result = await ToolExecutor(tools(handled), hooks, approver=approver).execute(call())
    assert handled == []
    assert result.content.startswith("blocked: approval required (check): ")
    assert seen[0].approval is not None and seen[0].approval.answer == "failed"
    assert seen[0].error_type == A.ERR_APPROVER_FAILED


async def test_an_approver_that_never_answers_is_a_denial_after_the_ttl() -> None:
    handled: list[Mapping[str, Any]] = []
    hooks = Hooks()
    hooks.add(before=lambda ctx: ask("check"), name="gate")
    seen = records(hooks)
    never = asyncio.Event()

    async def approver(request: ApprovalRequest) -> ApprovalDecision:
        await never.wait()
        raise AssertionError("unreachable")

    settings = ApprovalSettings(approver, ttl=0.05)
    result = await ToolExecutor(tools(handled), hooks, approver=settings).execute(call())
    assert handled == []
    assert "no answer from the approver within 0.05s" in result.content
    assert seen[0].approval is not None and seen[0].approval.answer == "timeout"
    assert seen[0].error_type is None  # nobody answering is a refusal, not a fault


# -- approve with an edit -------------------------------------------------------------------------


async def test_an_edit_goes_through_validation_and_the_hooks_again_and_its_approval_binds_it(
    otelhooks_tracing: InMemoryTracing,
) -> None:
    handled: list[Mapping[str, Any]] = []
    hooks = Hooks()
    checked: list[int] = []

    def limit(ctx: BeforeToolCallContext) -> BeforeDecision | None:
        checked.append(ctx.args["amount"])
        if ctx.args["amount"] > 1000:
            return block("over the limit")
        return ask("payments need a person")

    hooks.add(before=limit, name="limit")
    seen = records(hooks)
    approver = Recorder(ApproveWithEdit({"to": "alice", "amount": 50}, "erin", "terminal"))
    executor = ToolExecutor(tools(handled), hooks, approver=approver,
                            tracer_provider=otelhooks_tracing.provider)  # fmt: skip
    result = await executor.execute(call(500))
    assert result.content == "paid 50 to alice"
    assert handled == [{"to": "alice", "amount": 50}]
    assert checked == [500, 50]  # the second pass saw the edit
    assert len(approver.asked) == 1  # the edit's approval answered the second pass's ask
    approval = seen[0].approval
    assert approval is not None and (approval.answer, approval.by) == ("granted", "erin")
    assert len(executor.approvals.grants) == 0  # spent
    before = otelhooks_tracing.child(otelhooks_tracing.tool_span(call_id="c1"), "before")
    answers = [e[A.APPROVAL_ANSWER] for e in otelhooks_tracing.events(before, A.EVENT_APPROVAL)]
    assert answers == ["edit", "granted"]


async def test_an_edit_the_hooks_block_or_the_schema_refuses_never_runs() -> None:
    handled: list[Mapping[str, Any]] = []
    hooks = Hooks()
    hooks.add(
        before=lambda ctx: block("over") if ctx.args["amount"] > 1000 else ask("check"), name="g"
    )
    over = Recorder(ApproveWithEdit({"to": "alice", "amount": 5000}, "erin"))
    result = await ToolExecutor(tools(handled), hooks, approver=over).execute(call())
    assert result.content == "blocked: over"
    invalid = Recorder(ApproveWithEdit({"to": "alice", "amount": "lots"}, "erin"))
    result = await ToolExecutor(tools(handled), hooks, approver=invalid).execute(call())
    assert result.is_error and "edit of the arguments" in result.content
    assert handled == []


async def test_edits_that_never_settle_are_refused_after_the_limit() -> None:
    handled: list[Mapping[str, Any]] = []
    hooks = Hooks()
    hooks.add(before=lambda ctx: rewrite({**ctx.args, "amount": ctx.args["amount"] + 1}), name="r")
    hooks.add(before=lambda ctx: ask("check"), name="g")
    approver = Recorder(*[ApproveWithEdit({"to": "a", "amount": n}, "erin") for n in range(10)])
    result = await ToolExecutor(tools(handled), hooks, approver=approver).execute(call())
    assert handled == []
    assert "edits: refused" in result.content
    assert len(approver.asked) == 2  # the ask, one more after the first edit, then refused


# -- approvals bound to the call ------------------------------------------------------------------


def test_an_approval_is_bound_to_tool_digest_and_identity_used_once_and_expires() -> None:
    grants = Grants()
    me = CallIdentity("agent", "run-1", "alice")
    grants.add("pay", "d1", me, by="carol", how="test", ttl=60, call="c1")
    assert grants.take("pay", "d2", me, call="c1") is None  # other arguments
    assert grants.take("refund", "d1", me, call="c1") is None  # another tool
    assert grants.take("pay", "d1", CallIdentity("agent", "run-1", "mallory"), call="c1") is None
    assert grants.take("pay", "d1", CallIdentity("agent", "run-2", "alice"), call="c1") is None
    assert grants.take("pay", "d1", me, call="c2") is None  # another call
    assert grants.take("pay", "d1", me, call="c1") is not None
    assert grants.take("pay", "d1", me, call="c1") is None  # used once
    grants.add("pay", "d1", me, by="carol", how="test", ttl=0.01, call="c1")
    time.sleep(0.05)
    assert grants.take("pay", "d1", me, call="c1") is None  # expired


async def test_identity_defaults_to_the_context_and_a_user_given_to_run_binds_it() -> None:
    from otelhooks import Agent, AssistantMessage
    from otelhooks.providers import ScriptedProvider

    handled: list[Mapping[str, Any]] = []
    hooks = Hooks()
    hooks.add(before=lambda ctx: ask("check"), name="g")
    approver = Recorder(Approve("carol"))
    provider = ScriptedProvider([AssistantMessage(tool_calls=(call(),), stop_reason="toolUse")])
    agent = Agent(provider, tools=tools(handled), hooks=hooks, approver=approver, name="payer")
    result = await agent.run("pay alice", user="bob")
    identity = approver.asked[0].identity
    assert identity == CallIdentity("payer", result.run_id, "bob")


# -- typos fail closed ----------------------------------------------------------------------------


def test_typos_in_answers_and_settings_fail_closed() -> None:
    with pytest.raises(ValueError, match="did you mean 'defer'"):
        BeforeDecision("defr")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="only allow may rewrite"):
        BeforeDecision("ask", arguments={"a": 1})
    with pytest.raises(TypeError, match="policies"):
        ask("x", policies="one-policy-not-a-list")
    with pytest.raises(ValueError, match="ttl"):
        ApprovalSettings(ttl=0)
    with pytest.raises(TypeError, match="async callable"):
        ApprovalSettings("carol")  # type: ignore[arg-type]


def test_a_hook_object_with_a_misspelt_method_is_refused() -> None:
    class Gate:
        def befor_tool_call(self, ctx: BeforeToolCallContext) -> BeforeDecision:
            return ask("check")

    with pytest.raises(TypeError, match="before_tool_call"):
        Hooks([Gate()])
