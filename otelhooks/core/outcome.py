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

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, TypeAlias

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
