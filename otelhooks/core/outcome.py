"""What the before phase decides, as values, and how a call ends.

:meth:`ToolExecutor.prepare <otelhooks.core.execute.ToolExecutor.prepare>` returns
:data:`Prepared`: :class:`Allowed` (the handler may run: :meth:`~otelhooks.core.execute.
ToolExecutor.finish` runs it and the after-hooks) or :class:`Ended` (the call ended in its
before phase: blocked, unknown tool, invalid arguments, cancelled; its outcome is final), as Pi's
``PreparedToolCall | ImmediateToolCallOutcome``. A new way for the before phase to end (a call
that waits for an approval, a call deferred) is a new variant of that union, not a new field.

Every call ends with one :class:`~otelhooks.core.hooks.Outcome`, built once where it was
decided; :func:`end_call` gives it to the observers (as a
:class:`~otelhooks.core.hooks.ToolCallRecord`), to the call's span and to the metrics, once.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeAlias

from opentelemetry import context as otel_context

from .cancel import CancelSignal
from .hooks import NO_ARGUMENTS, Outcome, PhaseHooks, ToolCallRecord
from .messages import AgentContext, AssistantMessage, ToolCall, ToolResult
from .tool_span import CallTrace
from .tools import Tool, ToolSet

UpdateCallback: TypeAlias = Callable[[ToolCall, Any], None]

__all__ = ["NO_ARGUMENTS", "Allowed", "CallState", "Ended", "Outcome", "Prepared", "end_call"]


@dataclass(slots=True)
class CallState:
    """What one call runs with, fixed when it starts (nothing changes it afterwards): the call,
    its tool (``None`` when unknown) and the hooks of each phase, its trace, the run's context
    and signal, and the caller's options."""

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


class Allowed(NamedTuple):
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


Prepared: TypeAlias = Allowed | Ended
"""What :meth:`~otelhooks.core.execute.ToolExecutor.prepare` returns."""


def end_call(state: CallState, outcome: Outcome) -> Ended:
    """End the call with ``outcome``: the observers see its record (while the call's span is
    current; one that raises, or is async, is recorded on the span and ignored), its span ends
    and it is counted. A call that ended already keeps its first outcome."""
    trace = state.trace
    first = trace.ended
    if first is not None:
        return Ended(state.call, first, trace.duration_ms)
    observers = state.hooks.observers
    duration_ms = trace.end(outcome, tool_known=state.tool is not None, close=not observers)
    if observers:  # while the call's span is open: what they add goes on it
        _notify(state, outcome.record(state.call, duration_ms))
        trace.close()
    return Ended(state.call, outcome, duration_ms)


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
