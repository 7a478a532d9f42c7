"""What the before phase decides, as values, and how a call ended.

:meth:`ToolExecutor.prepare <otelhooks.core.execute.ToolExecutor.prepare>` returns
:data:`Prepared`: :class:`Allowed` (the handler may run: :meth:`~otelhooks.core.execute.
ToolExecutor.finish` runs it and the after-hooks) or :class:`Ended` (the call ended in its
before phase: blocked, unknown tool, invalid arguments, cancelled; its record is final), as Pi's
``PreparedToolCall | ImmediateToolCallOutcome``. A new way for the before phase to end (a call
that waits for an approval, a call deferred) is a new variant of that union, not a new field.

Every call ends with one :class:`Outcome`, built once where it was decided; the call's record,
span and metrics are made from it and nothing else.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, TypeAlias

from opentelemetry import context as otel_context

from .cancel import CancelSignal
from .hooks import Decision, PhaseHooks, ToolCallRecord
from .messages import AgentContext, AssistantMessage, ToolCall, ToolResult
from .tool_span import CallTrace
from .tools import Tool, ToolSet

UpdateCallback: TypeAlias = Callable[[ToolCall, Any], None]
NO_ARGUMENTS: Final[Mapping[str, Any]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a call ended: everything its record, its span and its metrics say.

    ``decision`` is ``allow`` (the handler was asked to run), ``block`` or ``skip``, or ``None``
    when the call ended before any decision (unknown tool, invalid arguments, cancelled in its
    before phase). ``error_type`` is set exactly when the call failed: a refusal, a block by a
    failing hook, a handler that raised or timed out, a result that says it is an error, a
    cancellation, the runtime's own ``failure``. ``overridden`` is ``None`` when no after-hook
    ran.
    """

    result: ToolResult
    decision: Decision | None
    error_type: str | None = None
    deciding_hook: str | None = None
    block_reason: str | None = None
    rewritten: bool = False
    arguments: Mapping[str, Any] = field(default_factory=lambda: NO_ARGUMENTS)
    overridden: bool | None = None
    failure: BaseException | None = None


@dataclass(frozen=True, slots=True)
class CallState:
    """What one call runs with, fixed when it starts: the call, its tool (``None`` when unknown)
    and the hooks of each phase, its trace, the run's context and signal, and the caller's
    options."""

    call: ToolCall
    tool: Tool | None
    hooks: PhaseHooks
    trace: CallTrace
    context: AgentContext
    signal: CancelSignal
    watched: bool  # a caller's signal: cancelling it cancels the call's task
    assistant_message: AssistantMessage | None
    on_update: UpdateCallback | None
    timeout: float | None  # the caller's bound for this call (0 disables)
    tools: ToolSet


@dataclass(frozen=True, slots=True)
class Allowed:
    """The before phase let the call through: the handler gets ``arguments`` (validated, as
    the before-hooks left them); ``rewritten`` and ``deciding_hook`` say whether and by whom
    they were rewritten."""

    state: CallState
    tool: Tool
    arguments: Mapping[str, Any]
    rewritten: bool
    deciding_hook: str | None

    @property
    def call(self) -> ToolCall:
        """The call."""
        return self.state.call


@dataclass(frozen=True, slots=True)
class Ended:
    """A call that ended: its record (observers have seen it, its span has ended)."""

    record: ToolCallRecord

    @property
    def call(self) -> ToolCall:
        """The call."""
        return self.record.tool_call

    @property
    def result(self) -> ToolResult:
        """What the model gets."""
        return self.record.result


Prepared: TypeAlias = Allowed | Ended
"""What :meth:`~otelhooks.core.execute.ToolExecutor.prepare` returns."""


def end_call(state: CallState, outcome: Outcome) -> Ended:
    """The call's record, built once from its outcome: to the observers (while the call's span
    is current; one that raises, or is async, is recorded on the span and ignored), on its span,
    in the metrics. A call that ended already keeps its first record."""
    trace = state.trace
    if trace.ended is not None:
        return Ended(trace.ended)
    call, args = state.call, outcome.arguments
    record = ToolCallRecord(
        tool_call=call,
        tool_name=str(call.name),
        result=outcome.result,
        decision=outcome.decision,
        deciding_hook=outcome.deciding_hook,
        block_reason=outcome.block_reason,
        arguments_rewritten=outcome.rewritten,
        error_type=outcome.error_type,
        duration_ms=trace.elapsed_ms(),
        arguments=MappingProxyType(args) if type(args) is dict else args,
    )
    if state.hooks.observers:
        _notify(state, record)
    trace.end(
        record,
        tool_known=state.tool is not None,
        overridden=outcome.overridden,
        failure=outcome.failure,
    )
    return Ended(record)


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
