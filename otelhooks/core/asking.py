"""Asks and defers: what the executor does when the before-hooks answered ``ask`` or ``defer``
(:mod:`otelhooks.core.approvals` has the contracts).

:class:`Approvals` (one per executor) holds the settings (the approver, the time to live, the
digest key) and the approvals made and not used yet. It turns a :class:`~otelhooks.core.chain.
Asked` verdict into an allowed call (an approval of this exact call exists, or the approver
gives one) or a blocked one (no approver, denied, no answer in time, the approver failed), and a
:class:`~otelhooks.core.chain.Held` verdict into a :class:`Deferral` (the loop can resume the
call) or a block. Each answer is one ``otelhooks.approval`` event on the call's ``before`` span:
who answered, how, how long the call waited.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, TypeAlias

from ..telemetry import attributes as A
from .approvals import (
    MAX_EDITS,
    AnswerKind,
    ApprovalOutcome,
    ApprovalRequest,
    ApprovalSettings,
    ApproveWithEdit,
    Grants,
    ask_approver,
)
from .chain import Asked, Blocked, Held, HookRequest
from .hooks import BeforeAction, Outcome
from .messages import ToolResult
from .outcome import Allowed, CallState, blocked, refused
from .scrub import Scrubber
from .tool_span import NoPhase, Phase
from .tools import InvalidArguments

_SPENT: set[str] = set()
"""The deferred calls' requests resumed in this process (see :meth:`Approvals.spend`)."""
_SPENT_LOCK = threading.Lock()


class Deferral(NamedTuple):
    """A deferred call's outcome and what an approver would be asked (before its span ends)."""

    outcome: Outcome
    request: ApprovalRequest


Rerun: TypeAlias = Callable[
    [CallState, "Phase | NoPhase", Allowed, int], Awaitable["Allowed | Outcome | Deferral"]
]
"""The executor's before-hooks, run again on an approver's edit (the edits so far counted)."""


class Approvals:
    """How one executor answers asks and defers (see the module's docs)."""

    __slots__ = ("grants", "scrubber", "settings")

    def __init__(self, settings: ApprovalSettings, scrubber: Scrubber) -> None:
        self.settings = settings
        self.scrubber = scrubber
        self.grants = Grants()
        """Approvals made and not used yet (an edit's)."""

    @staticmethod
    def spend(request_id: str) -> bool:
        """Mark a deferred call's request as answered: ``False`` when it was already, by any
        agent of this process (a decision is used once per process; across processes, the
        store's approvals are). The ids are kept for the process's lifetime."""
        with _SPENT_LOCK:
            if request_id in _SPENT:
                return False
            _SPENT.add(request_id)
            return True

    def request(
        self, state: CallState, tool: str, args: Mapping[str, Any], asks: Sequence[HookRequest]
    ) -> ApprovalRequest:
        """What an approver is asked about this call (its arguments redacted for display)."""
        scrubber = self.scrubber
        shown, paths = scrubber.redact(dict(args), A.GEN_AI_TOOL_CALL_ARGUMENTS)
        call_id = str(state.call.id)
        settings = self.settings
        return ApprovalRequest(
            uuid.uuid4().hex[:12],
            tool,
            call_id,
            scrubber.redact_identifier(call_id, A.GEN_AI_TOOL_CALL_ID)[0],
            settings.digest(tool, args),
            MappingProxyType(shown if isinstance(shown, dict) else {}),
            state.asking(),
            tuple(dict.fromkeys(r.reason for r in asks)),
            tuple(dict.fromkeys(p for r in asks for p in r.policies)),
            tuple(dict.fromkeys(r.hook for r in asks)),
            time.time() + settings.ttl,
            bool(paths),
        )

    def deferred(
        self, state: CallState, phase: Phase | NoPhase, tool: str, verdict: Held, rewritten: bool
    ) -> Deferral:
        """A before-hook deferred the call (and the caller can resume it): it is pending."""
        request = self.request(state, tool, verdict.args, verdict.requests)
        defers = [r for r in verdict.requests if r.action == "defer"]
        hook, reason = defers[0].hook, "; ".join(r.reason for r in defers)
        approval = ApprovalOutcome(
            request.id, request.digest, "pending", None, None, 0.0, "", None, "defer",
            request.policies,
        )  # fmt: skip
        phase.event(A.EVENT_APPROVAL, approval_event(approval, A.GUARDRAIL_ESCALATE))
        call = state.call
        shown, _ = self.scrubber.redact_text(reason, A.BLOCK_REASON)
        result = ToolResult(call.id, call.name, f"deferred: {shown}", None, True)
        outcome = Outcome(
            result, A.DECISION_DEFER, None, hook, shown, rewritten, verdict.args,
            verdict="defer", policies=request.policies, approval=approval,
        )  # fmt: skip
        return Deferral(outcome, request)

    async def asked(
        self, state: CallState, phase: Phase | NoPhase, admitted: Allowed,
        verdict: Asked | Held, edits: int, again: Rerun,
    ) -> Allowed | Outcome | Deferral:  # fmt: skip
        """A before-hook asked (or deferred a call nothing can resume): run only if an approval
        of this exact call exists or the approver (the call's, else the executor's) gives one;
        else end blocked (see :mod:`otelhooks.core.approvals`)."""
        tool = admitted.tool
        asked: Literal["ask", "defer"] = "defer" if isinstance(verdict, Held) else "ask"
        request = self.request(state, tool.name, verdict.args, verdict.requests)
        identity = request.identity
        rewritten = verdict.rewritten or admitted.rewritten

        def answered(
            answer: AnswerKind,
            by: str | None = None,
            how: str | None = None,
            waited: float = 0.0,
            reason: str = "",
            grant: str | None = None,
        ) -> ApprovalOutcome:
            """What became of this ask."""
            return ApprovalOutcome(
                request.id, request.digest, answer, by, how, waited, reason, grant, asked,
                request.policies,
            )  # fmt: skip

        grant = self.grants.take(tool.name, request.digest, identity, call=_call_key(state))
        if grant is not None:
            approval = answered("granted", grant.by, grant.how, grant=grant.id)
            phase.event(A.EVENT_APPROVAL, approval_event(approval, A.GUARDRAIL_ALLOW))
            return Allowed(state, tool, verdict.args, rewritten, verdict.deciding_hook, approval)
        approver = state.approver or self.settings.approver
        first = verdict.requests[0].hook
        if approver is None:
            approval = answered("missing")
            why = f"approval required ({request.reason}) and no approver is configured"
            if asked == "defer":
                why = f"{request.reason} (deferred, and nothing here can resume it or ask)"
            return self._refusal(state, phase, verdict, asked, approval, first, why)
        if edits >= MAX_EDITS:
            approval = answered("deny")
            why = f"approval required ({request.reason}) after {edits} edits: refused"
            return self._refusal(state, phase, verdict, asked, approval, first, why)
        start = time.perf_counter()
        decision, answer, fault = await ask_approver(approver, request, self.settings.ttl)
        waited = (time.perf_counter() - start) * 1000.0
        by = decision.by if decision is not None else None
        how = decision.how if decision is not None else None
        if decision is None or answer == "deny":
            why = fault or getattr(decision, "reason", "") or "no reason given"
            approval = answered(answer, by, how, waited, why)
            if decision is None:
                reason = f"approval required ({request.reason}): {why}"
            else:
                reason = f"approval denied by {by} ({how}): {why}"
            failed = A.ERR_APPROVER_FAILED if answer == "failed" else None
            return self._refusal(state, phase, verdict, asked, approval, first, reason, failed)
        assert by is not None and how is not None
        if isinstance(decision, ApproveWithEdit):
            return await self._edited(
                state, phase, admitted, request, decision, waited, edits, again
            )
        # The approval is the request's, used at once by this call (and by nothing else).
        used = getattr(decision, "id", "") or request.id
        approval = answered(answer, by, how, waited, grant=used)
        phase.event(A.EVENT_APPROVAL, approval_event(approval, A.GUARDRAIL_ALLOW))
        return Allowed(state, tool, verdict.args, rewritten, verdict.deciding_hook, approval)

    async def _edited(
        self, state: CallState, phase: Phase | NoPhase, admitted: Allowed,
        request: ApprovalRequest, decision: ApproveWithEdit, waited: float, edits: int,
        again: Rerun,
    ) -> Allowed | Outcome | Deferral:  # fmt: skip
        """An approve-with-edit: the edited arguments are validated and go through the
        before-hooks again; the approval made for them answers that pass's ask."""
        tool, identity = admitted.tool, request.identity
        approval = ApprovalOutcome(
            request.id, request.digest, "edit", decision.by, decision.how, waited
        )
        phase.event(A.EVENT_APPROVAL, approval_event(approval, A.GUARDRAIL_MODIFY))
        try:
            edited = tool.validate(decision.arguments)
        except InvalidArguments as exc:
            message = f"the approver's edit of the arguments of {tool.name!r} is invalid: {exc}"
            return refused(state, phase, A.ERR_INVALID_ARGUMENTS, message)
        grant = self.grants.add(
            tool.name, self.settings.digest(tool.name, edited), identity,
            by=decision.by, how=decision.how, ttl=self.settings.ttl, call=_call_key(state),
            arguments=edited,
        )  # fmt: skip
        edited_call = Allowed(state, tool, edited, True, f"approver:{decision.by}")
        try:
            return await again(state, phase, edited_call, edits + 1)
        finally:
            self.grants.discard(grant.id)  # unused when the second pass did not ask

    def _refusal(
        self, state: CallState, phase: Phase | NoPhase, verdict: Asked | Held,
        asked: BeforeAction, approval: ApprovalOutcome, hook: str, reason: str,
        error_type: str | None = None,
    ) -> Outcome:  # fmt: skip
        """An ask or a defer that ends the call blocked (no approver, denied, no answer); the
        approver's failure (``error_type``) marks the phase failed."""
        phase.event(A.EVENT_APPROVAL, approval_event(approval, A.GUARDRAIL_BLOCK))
        verdict_ = Blocked(
            verdict.args, verdict.rewritten, hook, reason, False, None, (),
            tuple(dict.fromkeys(p for r in verdict.requests for p in r.policies)),
        )  # fmt: skip
        outcome = blocked(state, self.scrubber, None, verdict_)
        if error_type is not None:
            phase.fail(error_type, reason)
        return outcome._replace(verdict=asked, approval=approval, error_type=error_type)


def _call_key(state: CallState) -> str:
    """This call in flight, as an approval made for it is bound to: its id, and the state it
    runs in (a model may give two calls one id; an edit's approval is dropped before its call
    ends, so the state outlives it)."""
    return f"{state.call.id}\x1f{id(state)}"


def approval_event(approval: ApprovalOutcome, action: str) -> dict[str, Any]:
    """The attributes of an approval's event under ``before``."""
    attributes: dict[str, Any] = {
        A.APPROVAL_REQUEST_ID: approval.request_id,
        A.APPROVAL_ANSWER: approval.answer,
        A.GEN_AI_GUARDRAIL_ACTION_TYPE: action,
        A.APPROVAL_WAIT_MS: round(approval.wait_ms, 3),
        A.GEN_AI_GUARDRAIL_INPUT_HASH: approval.digest,
    }
    if approval.by is not None:
        attributes[A.APPROVAL_BY] = approval.by
    if approval.how is not None:
        attributes[A.APPROVAL_HOW] = approval.how
    if approval.grant is not None:
        attributes[A.APPROVAL_ID] = approval.grant
    return attributes
