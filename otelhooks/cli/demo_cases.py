"""The demo: the seed chapter's cases, run through the loop, traced, with the built-in hooks on.

Cases: ``allowed`` (echo of ``hi``; the after-hook rewrites it to ``checked: hi``), ``blocked``
(the ``dangerous`` tool is blocked by a before-hook; its handler never runs), ``parallel``
(three tool calls run concurrently), ``redaction`` (a tool returns an environment listing with a
fake API key; the model, the log and the spans see it redacted). ``all`` runs them in turn.
``mcp`` (not part of ``all``: it needs the ``mcp`` extra) runs the tools of the real
``mcp-server-time`` through the same boundary. ``approval`` (not part of ``all``) asks before two
transfers: a scripted approver approves the first and refuses the second, and the span trees and
the transcript show who answered and how.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from opentelemetry.trace import TracerProvider

from ..builtin import RedactionHook, Redactor, StructlogEvents
from ..builtin.approvers import ScriptedApprover
from ..core.approvals import ApprovalDecision, ApprovalRequest
from ..core.hooks import (
    AfterToolCallContext,
    BeforeDecision,
    BeforeToolCallContext,
    Hooks,
    ask,
    block,
)
from ..core.loop import Agent
from ..core.messages import AssistantMessage, ToolCall
from ..core.tools import ToolRegistry
from ..providers import ScriptedProvider, quote_last_tool_result
from .transcript import Transcript

CASES = ("allowed", "blocked", "parallel", "redaction")
BLOCK_REASON = "this tool is disabled in the demo"
NEVER_PRINTED = "this line must never appear: the dangerous handler ran"
FAKE_API_KEY = "sk-proj-DEMO0000fake0000key0000notreal0000"


@dataclass(frozen=True)
class DemoCase:
    name: str
    prompt: str
    calls: tuple[ToolCall, ...]
    answers: tuple[str, ...] = ()  # the scripted approver's answers, in order


DEMO_CASES = {
    "allowed": DemoCase(
        "allowed", "Repeat after me: hi", (ToolCall("call_1", "echo", {"text": "hi"}),)
    ),
    "blocked": DemoCase(
        "blocked", "Run the dangerous tool", (ToolCall("call_1", "dangerous", {}),)
    ),
    "parallel": DemoCase(
        "parallel",
        "What is the weather in Paris and Tokyo, and what time is it?",
        (
            ToolCall("call_1", "weather", {"city": "Paris"}),
            ToolCall("call_2", "weather", {"city": "Tokyo"}),
            ToolCall("call_3", "clock", {"zone": "UTC"}),
        ),
    ),
    "redaction": DemoCase(
        "redaction", "Show me the environment", (ToolCall("call_1", "environment", {}),)
    ),
    "approval": DemoCase(
        "approval",
        "Pay the two invoices",
        (
            ToolCall("call_1", "transfer", {"to": "ACME Ltd", "amount": 120}),
            ToolCall("call_2", "transfer", {"to": "unknown-account-7", "amount": 9000}),
        ),
        ("approve", "deny"),
    ),
}
APPROVAL_POLICY = "demo.transfers-need-a-person"


def demo_tools() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @registry.tool
    def dangerous() -> str:
        """Do something the demo's policy forbids."""
        print(NEVER_PRINTED, flush=True)
        return "done something dangerous"

    @registry.tool
    async def weather(city: str) -> str:
        """Today's weather in a city."""
        await asyncio.sleep(0.2)
        return {"Paris": "light rain, 11°C", "Tokyo": "clear, 18°C"}.get(city, "unknown")

    @registry.tool
    async def clock(zone: str) -> str:
        """The current time in a time zone."""
        await asyncio.sleep(0.1)
        return f"12:00 {zone}"

    @registry.tool
    def transfer(to: str, amount: int) -> str:
        """Transfer an amount to an account (asks for approval first)."""
        return f"transferred {amount} to {to}"

    @registry.tool
    def environment() -> str:
        """List the process environment."""
        return f"HOME=/home/demo\nOPENAI_API_KEY={FAKE_API_KEY}\nLANG=C.UTF-8"

    return registry


class SeedHooks:
    """The seed chapter's hooks: print what they do, block ``dangerous``, check every result."""

    name = "seed_hooks"

    def __init__(self, transcript: Transcript) -> None:
        self.transcript = transcript

    def before_tool_call(self, ctx: BeforeToolCallContext) -> BeforeDecision | None:
        self.transcript.note("[beforeToolCall]", hook="before", tool=ctx.tool_call.name)
        if ctx.tool_call.name == "dangerous":
            self.transcript.note(f"block: {ctx.tool_call.name}", decision="block")
            return block(BLOCK_REASON)
        if ctx.tool_call.name == "transfer":
            self.transcript.note(f"ask: {ctx.tool_call.name}", decision="ask")
            return ask("transfers need a person's approval", policies=[APPROVAL_POLICY])
        self.transcript.note(f"allow: {ctx.tool_call.name}", decision="allow")
        return None

    def after_tool_call(self, ctx: AfterToolCallContext) -> str:
        self.transcript.note("[afterToolCall]", hook="after", tool=ctx.tool_call.name)
        self.transcript.note(f"{ctx.tool_call.name} -> {ctx.result.content}")
        return f"checked: {ctx.result.content}"


def demo_agent(
    case: DemoCase,
    transcript: Transcript,
    *,
    redactor: Redactor,
    tracer_provider: TracerProvider | None,
    logger: Any = None,
    tools: ToolRegistry | None = None,
    meter_provider: Any = None,
) -> Agent:
    hooks = Hooks()
    hooks.add(RedactionHook(redactor))  # first: every later after-hook sees redacted results
    hooks.add(SeedHooks(transcript))
    hooks.add(StructlogEvents(logger, mirror_to_span=True))
    provider = ScriptedProvider(
        [AssistantMessage(tool_calls=case.calls), quote_last_tool_result()], model="scripted"
    )
    agent = Agent(
        provider,
        approver=_TellingApprover(ScriptedApprover(case.answers), transcript)
        if case.answers
        else None,
        tools=tools if tools is not None else demo_tools(),
        hooks=hooks,
        scrubber=redactor,
        model="scripted",
        name=f"demo-{case.name}",
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    )
    agent.subscribe(transcript)
    return agent


class _TellingApprover:
    """The scripted approver, its question and answer written to the transcript."""

    def __init__(self, script: ScriptedApprover, transcript: Transcript) -> None:
        self.script = script
        self.transcript = transcript

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        args = ", ".join(f"{k}={v!r}" for k, v in request.arguments.items())
        self.transcript.note(f"[approver] asked: {request.tool}({args})", request=request.id)
        decision = await self.script(request)
        kind = type(decision).__name__.lower()
        self.transcript.note(f"[approver] {kind} by {decision.by} ({decision.how})", answer=kind)
        return decision
