"""What the before phase decides, as values, and how a call ends.

:meth:`ToolExecutor.prepare <otelhooks.core.execute.ToolExecutor.prepare>` returns
:data:`Prepared`: :class:`Allowed` (the handler may run: :meth:`~otelhooks.core.execute.
ToolExecutor.finish` runs it and the after-hooks), :class:`Ended` (the call ended in its before
phase: blocked, refused by an approver, unknown tool, invalid arguments, cancelled; its outcome
is final) or :class:`Deferred` (a before-hook deferred it: it did not run, its span ended, and
the loop ends the run after this batch with the call pending, resumable with a decision), as
Pi's ``PreparedToolCall | ImmediateToolCallOutcome``. A call that asks for an approval waits
for it inside its before phase and leaves it as one of these three: asking is not a variant of
its own, an approved call is :class:`Allowed` and a refused one :class:`Ended`.

Every call ends with one :class:`~otelhooks.core.hooks.Outcome`, built once where it was
decided; :func:`end_call` gives it to the observers (as a
:class:`~otelhooks.core.hooks.ToolCallRecord`), to the call's span and to the metrics, once.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple, TypeAlias, TypedDict

from opentelemetry import context as otel_context

from ..telemetry import attributes as A
from .approvals import ApprovalOutcome, ApprovalRequest, Approver, CallIdentity
from .cancel import CancelSignal
from .chain import Blocked
from .handler import error_result
from .hooks import NO_ARGUMENTS, HookChain, Outcome, PhaseHooks, ToolCallRecord
from .messages import AgentContext, AssistantMessage, ToolCall, ToolResult
from .plan import CallPlan
from .scrub import Scrubber
from .tool_span import CallTrace, NoPhase, Phase
from .tools import Tool, ToolSet

UpdateCallback: TypeAlias = Callable[[ToolCall, Any], None]

_EMPTY_CONTEXT: Final = AgentContext()

__all__ = [
    "NO_ARGUMENTS",
    "Allowed",
    "CallOptions",
    "CallState",
    "Deferred",
    "Ended",
    "Outcome",
    "Prepared",
    "end_call",
    "end_outcome",
]


class CallOptions(TypedDict, total=False):
    """What :meth:`ToolExecutor.execute` and :meth:`ToolExecutor.prepare` accept besides the
    call; every key is optional."""

    assistant_message: AssistantMessage | None
    """The message that asked for the call (hooks see it)."""
    context: AgentContext | None
    """The run's snapshot (hooks see it)."""
    signal: CancelSignal | None
    """The run's cancellation signal: cancelling it stops the call."""
    on_update: UpdateCallback | None
    """Called with each progress update the tool reports."""
    hooks: HookChain | None
    """The hooks of this call (default: the executor's, as they are now)."""
    tools: ToolSet | None
    """The tools of this call (default: the executor's registry, as it is now)."""
    timeout: float | None
    """Seconds this call may run, replacing the tool's and the executor's; ``0`` disables."""
    identity: CallIdentity | None
    """Who asks for the call: what an approval is bound to (default: the context's agent and
    run, no user)."""
    deferrable: bool
    """The caller can end its run with the call pending (the loop): a before-hook's defer
    defers it (:class:`~otelhooks.core.outcome.Deferred`); otherwise a defer is an ask."""
    approver: Approver | None
    """Who answers this call's asks, instead of the executor's approver (a session's host, a
    resumed call's decision)."""


class CallState:
    """What one call runs with, fixed when it starts (nothing changes it afterwards): the call,
    its tool (``None`` when unknown) and its plan, the hooks of each phase, its trace, the run's
    signal, the tools it was resolved in and the caller's options (read where they matter); and
    how it ended, once it did (:attr:`ended`, set once by :func:`end_outcome`).

    The signal is the caller's; without one, a signal of the call's own is made when something
    first asks for it (:attr:`signal`: a hook's context, a tool's :class:`ToolContext`), and
    until then nothing can have cancelled the call (:attr:`made_signal` is ``None``)."""

    __slots__ = (
        "call",
        "duration_ms",
        "ended",
        "hooks",
        "made_signal",
        "options",
        "plan",
        "started",
        "tool",
        "tools",
        "trace",
        "watched",
    )

    def __init__(
        self,
        call: ToolCall,
        tool: Tool | None,
        plan: CallPlan | None,
        hooks: PhaseHooks,
        trace: CallTrace,
        signal: CancelSignal | None,
        tools: ToolSet,
        options: CallOptions,
    ) -> None:
        self.call = call
        self.tool = tool
        self.plan = plan
        """What every call of the tool shares (``None`` for an unknown tool)."""
        self.hooks = hooks
        self.trace = trace
        self.watched = signal is not None
        """A caller's signal: cancelling it cancels the call's task."""
        self.made_signal = signal
        """The call's signal once there is one (the caller's, or the call's own once asked
        for); ``None``: nobody can have cancelled the call."""
        self.tools = tools
        self.options = options
        self.started = time.perf_counter()
        self.ended: Outcome | None = None
        """The call's outcome, once it ended."""
        self.duration_ms = 0.0
        """How long the call took, once it ended."""

    @property
    def signal(self) -> CancelSignal:
        """The call's signal: the caller's, else the call's own (made now when it is first
        asked for; the same object from then on)."""
        signal = self.made_signal
        if signal is None:
            signal = self.made_signal = CancelSignal()
        return signal

    @property
    def context(self) -> AgentContext:
        """The run's snapshot (hooks see it)."""
        return self.options.get("context") or _EMPTY_CONTEXT

    @property
    def assistant_message(self) -> AssistantMessage | None:
        """The message that asked for the call (hooks see it)."""
        return self.options.get("assistant_message")

    @property
    def on_update(self) -> UpdateCallback | None:
        """Called with each progress update the tool reports."""
        return self.options.get("on_update")

    @property
    def timeout(self) -> float | None:
        """The caller's bound for this call (``0`` disables)."""
        return self.options.get("timeout")

    @property
    def identity(self) -> CallIdentity | None:
        """Who asks (default: the context's agent and run)."""
        return self.options.get("identity")

    @property
    def deferrable(self) -> bool:
        """A loop that can end the run with the call pending asked for it."""
        return self.options.get("deferrable", False)

    @property
    def approver(self) -> Approver | None:
        """The call's own approver (else the executor's)."""
        return self.options.get("approver")

    def asking(self) -> CallIdentity:
        """The identity an approval of this call is bound to."""
        identity = self.identity
        if identity is not None:
            return identity
        context = self.context
        return CallIdentity(context.agent_name, context.run_id)


class Allowed(NamedTuple):
    """The before phase let the call through: the handler gets ``arguments`` (validated, as
    the before-hooks left them); ``rewritten`` and ``deciding_hook`` say whether and by whom
    they were rewritten; ``approval`` who approved it when a hook asked."""

    state: CallState
    tool: Tool
    arguments: Mapping[str, Any]
    rewritten: bool
    deciding_hook: str | None
    approval: ApprovalOutcome | None = None

    @property
    def call(self) -> ToolCall:
        """The call."""
        return self.state.call


class Ended(NamedTuple):
    """A call that ended: its outcome (observers have seen it, its span has ended)."""

    call: ToolCall
    outcome: Outcome
    duration_ms: float

    @property
    def result(self) -> ToolResult:
        """What the model gets."""
        return self.outcome.result

    @property
    def record(self) -> ToolCallRecord:
        """The call's record, as observers got it."""
        return self.outcome.record(self.call, self.duration_ms)


class Deferred(NamedTuple):
    """A call a before-hook deferred: it did not run, observers have seen its outcome
    (``decision=defer``) and its span has ended. ``request`` is what an approver would be
    asked; the loop ends the run after this batch with it pending."""

    call: ToolCall
    outcome: Outcome
    duration_ms: float
    request: ApprovalRequest

    @property
    def result(self) -> ToolResult:
        """What the model would get, were the run not ended: ``deferred: <reason>``."""
        return self.outcome.result


Prepared: TypeAlias = Allowed | Ended | Deferred
"""What :meth:`~otelhooks.core.execute.ToolExecutor.prepare` returns."""


def end_call(state: CallState, outcome: Outcome) -> Ended:
    """End the call with ``outcome`` (:func:`end_outcome`); the call as it ended."""
    outcome = end_outcome(state, outcome)
    return Ended(state.call, outcome, state.duration_ms)


def end_outcome(state: CallState, outcome: Outcome) -> Outcome:
    """End the call with ``outcome``: the observers see its record (while the call's span is
    current; one that raises, or is async, is recorded on the span and ignored), its span ends
    and it is counted. A call that ended already keeps its first outcome, which is returned."""
    first = state.ended
    if first is not None:
        return first
    seconds = time.perf_counter() - state.started
    state.ended = outcome
    state.duration_ms = duration_ms = seconds * 1000.0
    observers = state.hooks.observers
    trace = state.trace
    trace.end(outcome, state.plan, seconds, not observers)
    if observers:  # while the call's span is open: what they add goes on it
        _notify(state, outcome.record(state.call, duration_ms))
        trace.close()
    return outcome


def _notify(state: CallState, record: ToolCallRecord) -> None:
    context = state.trace.context
    token = otel_context.attach(context) if context is not None else None
    try:
        for hook in state.hooks.observers:
            assert hook.observe is not None
            try:
                value = hook.observe(record)
                if value is not None and inspect.isawaitable(value):  # observers are sync
                    close = getattr(value, "close", None)
                    if close is not None:
                        close()
                    raise TypeError("on_tool_call_end must not be async")
            except Exception as exc:
                state.trace.observer_failed(exc, hook.name)
    finally:
        if token is not None:
            otel_context.detach(token)


def refused(state: CallState, phase: Phase | NoPhase, error_type: str, message: str) -> Outcome:
    """The call ends in its before phase with an error (unknown tool, invalid arguments)."""
    phase.fail(error_type, message)
    result = state.trace.for_model(error_result(state.call, f"error: {message}"))
    return Outcome(result, None, error_type)


def blocked(
    state: CallState, scrubber: Scrubber, phase: Phase | NoPhase | None, verdict: Blocked
) -> Outcome:
    """A before-hook blocked the call (or failed closed; ``phase`` is marked failed then)."""
    reason, found = scrubber.redact_text(verdict.reason or "blocked", A.BLOCK_REASON)
    state.trace.redacted((A.BLOCK_REASON,) if found else ())
    call = state.call
    result = ToolResult(call.id, call.name, f"blocked: {reason}", None, True, verdict.terminate)
    error_type = None
    if verdict.failure is not None:
        error_type = verdict.failure.error_type
        if phase is not None:
            phase.fail(error_type, str(verdict.failure))
    return Outcome(
        result,
        A.DECISION_BLOCK,
        error_type,
        verdict.hook,
        reason,
        verdict.rewritten,
        verdict.args,
        verdict="block",
        policies=verdict.policies,
    )
