"""The agent loop: ask the provider, execute the tool calls it asks for, feed the results back.

Read top to bottom in the order things happen: a run (``invoke_agent`` span) is a sequence of
turns; a turn takes a snapshot of the agent (tools, model, hooks), streams one assistant message
from the provider (``chat`` span), executes its tool calls through the hook boundary (one
``execute_tool`` span each, children of the run, linked to the ``chat`` span that asked for them),
then decides whether another turn follows.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
from collections import deque
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal, TypedDict, Unpack

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import Link, TracerProvider

from ..telemetry.content import Capture, capture_from_env, parse_capture
from ..telemetry.instruments import Instruments
from .approvals import (
    DEFAULT_APPROVAL_TTL,
    ApprovalDecision,
    ApprovalRequest,
    ApprovalSettings,
    Approver,
    CallIdentity,
    Deny,
)
from .cancel import CancelSignal
from .events import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    MessageEnd,
    MessageStart,
    TextDelta,
    ToolCallRequested,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
)
from .execute import DEFAULT_TOOL_TIMEOUT, ToolExecutor
from .hooks import HookChain, Hooks
from .messages import (
    AgentContext,
    AgentMessage,
    AssistantMessage,
    Message,
    StopReason,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from .outcome import Allowed, Deferred, Ended, Prepared
from .provider import (
    Done,
    ModelParams,
    Provider,
    ProviderRequest,
    TextChunk,
    ToolCallChunk,
)
from .resume import (
    PendingCall,
    ResumeApprover,
    ResumeRow,
    RunState,
    StateError,
    check_seal,
    resume_calls,
    seal_state,
)
from .run_span import RunRecorder
from .scrub import NO_SCRUBBING, Scrubber
from .tool_span import DEFAULT_TOOL_CONTENT_LENGTH, ToolCallRecorder
from .tools import ToolRegistry, ToolSet

logger = logging.getLogger(__name__)

ToolExecution = Literal["parallel", "sequential"]
QueueMode = Literal["one-at-a-time", "all"]
ChatSpans = Literal["auto", "always", "never"]
Subscriber = Callable[[AgentEvent], Any]
TransformContext = Callable[
    [list[AgentMessage], CancelSignal], Awaitable[Sequence[AgentMessage]] | Sequence[AgentMessage]
]
ConvertMessages = Callable[[Sequence[AgentMessage]], Sequence[Message]]

SKIPPED_FOR_STEERING = "Skipped due to queued user message."
Resumed = tuple[RunState, list[ResumeRow]]


def truncated_call_message(name: str) -> str:
    """The error result of a tool call from a message cut by the token limit (Pi's wording)."""
    return (
        f'Tool call "{name}" was not executed: the response hit the output token limit, so its '
        "arguments may be truncated. Re-issue the tool call with complete arguments."
    )


def keep_provider_messages(messages: Sequence[AgentMessage]) -> list[Message]:
    """The default ``convert_messages``: user, assistant and tool-result messages pass; an
    application's own message types (:class:`~otelhooks.messages.CustomMessage`) are dropped."""
    return [m for m in messages if isinstance(m, (UserMessage, AssistantMessage, ToolResult))]


class AgentStateError(RuntimeError):
    """The agent cannot do what was asked in its current state (nothing to continue from, or a
    run already in progress). Nothing was sent to the provider."""


@dataclass(frozen=True, slots=True)
class RunResult:
    """What one run did: the messages it added (the prompt, queued messages, assistant messages
    and tool results, in order), its last assistant message and the usage summed over its turns;
    a run that ended with deferred calls also holds the state to resume it from.
    ``text``, ``stop_reason``, ``error_message`` and ``tool_calls`` are the last message's."""

    run_id: str
    messages: tuple[AgentMessage, ...]
    final: AssistantMessage
    usage: Usage
    state: RunState | None = None
    """When a call was deferred: what :meth:`Agent.resume` takes (JSON through
    :meth:`~otelhooks.core.resume.RunState.to_json`); ``None`` when the run ended otherwise."""

    @property
    def pending(self) -> tuple[ApprovalRequest, ...]:
        """The requests of the calls that wait for a decision (empty unless deferred)."""
        return tuple(p.request for p in self.state.pending) if self.state is not None else ()

    @property
    def text(self) -> str:
        """The final assistant message's text."""
        return self.final.text

    @property
    def stop_reason(self) -> StopReason:
        """Why the run stopped: ``stop``, ``length``, ``error``, ``aborted`` (``toolUse`` when a
        tool ended it)."""
        return self.final.stop_reason

    @property
    def error_message(self) -> str | None:
        """What went wrong, when the run ended with an error."""
        return self.final.error_message

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """Every tool call the run's assistant messages asked for, in order."""
        return self.final.tool_calls


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """What an :class:`Agent` is made of, besides its provider (Pi passes one config); every
    field has a default. ``Agent(provider, config)`` takes it whole; ``Agent(provider,
    tools=..., hooks=...)`` is the same with the keywords filled into a default one.

    ``tool_execution`` is ``"parallel"`` (before-hooks run in source order, allowed tools then run
    concurrently, results are emitted in source order; a tool marked ``execution="sequential"``
    runs alone between the others) or ``"sequential"``. ``steering_mode`` and
    ``follow_up_mode`` (``"one-at-a-time"``, Pi's default, or ``"all"``) say how many queued
    messages enter per turn. ``transform_context(messages, signal)`` may prune or add to the
    messages before each provider request (the agent's own history is not changed);
    ``convert_messages`` turns them, custom message types included, into the messages the
    provider gets (default: drop custom types). ``tool_timeout`` bounds tools without a timeout
    of their own (``None`` disables). ``conversation_id`` is recorded as
    ``gen_ai.conversation.id`` on the run's spans. ``scrubber`` (a
    :class:`~otelhooks.core.scrub.Scrubber`, such as :class:`otelhooks.builtin.Redactor`)
    removes secrets from what the runtime hands the model and writes on spans. ``approver``
    answers the calls a before-hook asks about (an async callable; without one an ask blocks),
    ``approval_ttl`` is how long an approval and the wait for one last (seconds), and
    ``approval_secret`` keys the argument digests approvals are bound to (give the same one to
    every process that resumes this agent's deferred runs; default: a random key per agent).
    """

    tools: ToolRegistry | None = None
    hooks: Hooks | None = None
    model: str = ""
    name: str = "agent"
    system_prompt: str = ""
    tool_execution: ToolExecution = "parallel"
    steering_mode: QueueMode = "one-at-a-time"
    follow_up_mode: QueueMode = "one-at-a-time"
    transform_context: TransformContext | None = None
    convert_messages: ConvertMessages = keep_provider_messages
    tracer_provider: TracerProvider | None = None
    capture_content: bool | str | Capture | None = None
    tool_timeout: float | None = DEFAULT_TOOL_TIMEOUT
    max_turns: int = 50
    messages: Iterable[AgentMessage] = ()
    conversation_id: str | None = None
    agent_id: str | None = None
    params: ModelParams | None = None
    meter_provider: MeterProvider | None = None
    chat_spans: ChatSpans = "auto"
    max_content_length: int = 16384
    scrubber: Scrubber | None = None
    approver: Approver | None = None
    approval_ttl: float = DEFAULT_APPROVAL_TTL
    approval_secret: bytes | None = None

    def __post_init__(self) -> None:
        if self.tool_execution not in ("parallel", "sequential"):
            raise ValueError("tool_execution must be 'parallel' or 'sequential'")
        if self.chat_spans not in ("auto", "always", "never"):
            raise ValueError("chat_spans must be 'auto', 'always' or 'never'")


class AgentOptions(TypedDict, total=False):
    """The fields of :class:`AgentConfig`, as keywords of :class:`Agent`."""

    tools: ToolRegistry | None
    hooks: Hooks | None
    model: str
    name: str
    system_prompt: str
    tool_execution: ToolExecution
    steering_mode: QueueMode
    follow_up_mode: QueueMode
    transform_context: TransformContext | None
    convert_messages: ConvertMessages
    tracer_provider: TracerProvider | None
    capture_content: bool | str | Capture | None
    tool_timeout: float | None
    max_turns: int
    messages: Iterable[AgentMessage]
    conversation_id: str | None
    agent_id: str | None
    params: ModelParams | None
    meter_provider: MeterProvider | None
    chat_spans: ChatSpans
    max_content_length: int
    scrubber: Scrubber | None
    approver: Approver | None
    approval_ttl: float
    approval_secret: bytes | None


@dataclass(frozen=True, slots=True)
class _Turn:
    """What one turn uses, fixed when it starts: its tools and hooks as they were then."""

    index: int
    context: AgentContext
    tools: ToolSet
    hooks: HookChain


@dataclass(slots=True)
class _Run:
    """The state of the run in progress."""

    run_id: str
    signal: CancelSignal
    context: otel_context.Context
    added: list[AgentMessage]
    identity: CallIdentity
    usage: Usage = field(default_factory=Usage)
    deferred: RunState | None = None  # set when a call of a batch was deferred


class _QueueModeSetting:
    """An agent's ``steering_mode`` or ``follow_up_mode``: ``one-at-a-time`` or ``all``, checked
    when set (it may be changed while the agent runs)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name, self.slot = name, f"_{name}"

    def __get__(self, agent: object, owner: type | None = None) -> QueueMode:
        return getattr(agent, self.slot)  # type: ignore[no-any-return]

    def __set__(self, agent: object, mode: QueueMode) -> None:
        if mode not in ("one-at-a-time", "all"):
            raise ValueError(f"{self.name} must be 'one-at-a-time' or 'all', got {mode!r}")
        setattr(agent, self.slot, mode)


class Agent:
    """An evented tool loop over a :class:`~otelhooks.providers.Provider`.

    ``Agent(provider, config)`` or ``Agent(provider, tools=..., hooks=..., ...)``: the settings
    are the fields of :class:`AgentConfig`, and each is an attribute of the agent that may be
    changed between runs (``steering_mode`` and ``follow_up_mode`` even while it runs).
    ``messages`` is the conversation so far; ``run()`` appends to it. Subscribers are called
    synchronously with every event; one that raises is logged and ignored. The agent executes
    its tool calls with one :class:`~otelhooks.ToolExecutor`, giving each turn the tools and the
    hooks as they were when the turn started.
    """

    steering_mode = _QueueModeSetting()
    """How queued steering messages are delivered: ``one-at-a-time`` or ``all``."""
    follow_up_mode = _QueueModeSetting()
    """How queued follow-up messages are delivered: ``one-at-a-time`` or ``all``."""

    def __init__(
        self,
        provider: Provider,
        config: AgentConfig | None = None,
        /,
        **options: Unpack[AgentOptions],
    ) -> None:
        config = replace(config or AgentConfig(), **options)
        self.config = config
        self.provider = provider
        self.tools = config.tools if config.tools is not None else ToolRegistry()
        self.hooks = config.hooks if config.hooks is not None else Hooks()
        self.model = config.model
        self.name = config.name
        self.system_prompt = config.system_prompt
        self.tool_execution: ToolExecution = config.tool_execution
        self.steering_mode = config.steering_mode
        self.follow_up_mode = config.follow_up_mode
        self.transform_context = config.transform_context
        self.convert_messages = config.convert_messages
        self.capture = (
            capture_from_env()
            if config.capture_content is None
            else parse_capture(config.capture_content)
        )
        self.max_turns = config.max_turns
        self.messages: list[AgentMessage] = list(config.messages)
        self.conversation_id = config.conversation_id
        self.agent_id = config.agent_id
        self.params = config.params or ModelParams()
        self.chat_spans: ChatSpans = config.chat_spans
        self.max_content_length = config.max_content_length
        instruments = Instruments(config.meter_provider)
        self._executor = ToolExecutor(
            self.tools,
            self.hooks,
            tool_timeout=config.tool_timeout,
            recorder=ToolCallRecorder(
                config.tracer_provider,
                capture=self.capture,
                max_content_length=DEFAULT_TOOL_CONTENT_LENGTH,
                instruments=instruments,
                scrubber=config.scrubber,
            ),
            approver=ApprovalSettings(config.approver, config.approval_ttl, config.approval_secret),
        )
        self._recorder = RunRecorder(
            config.tracer_provider,
            capture=self.capture,
            max_content_length=config.max_content_length,
            instruments=instruments,
            scrubber=config.scrubber,
        )
        self._subscribers: list[Subscriber] = []
        self._steering: deque[UserMessage] = deque()
        self._follow_ups: deque[UserMessage] = deque()
        self._signal: CancelSignal | None = None

    @property
    def tool_timeout(self) -> float | None:
        """Seconds a tool without a timeout of its own may run (``None``: no bound)."""
        return self._executor.tool_timeout

    @tool_timeout.setter
    def tool_timeout(self, seconds: float | None) -> None:
        self._executor.tool_timeout = seconds

    @property
    def scrubber(self) -> Scrubber:
        """What removes secrets from the text the runtime writes."""
        return self._executor.scrubber

    # -- the outside world --------------------------------------------------------------------

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback`` with every event; returns a function that unsubscribes."""
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback) if callback in self._subscribers else None

    def steer(self, message: str | UserMessage) -> None:
        """Queue a message for the running turn: the tool calls not yet started (prepared ones
        included) are skipped and the message reaches the provider on the next call."""
        self._steering.append(_user(message))

    def follow_up(self, message: str | UserMessage) -> None:
        """Queue a message for when the agent would stop: it starts another turn instead."""
        self._follow_ups.append(_user(message))

    def abort(self, reason: str = "aborted") -> None:
        """Cancel the running run: tools and hooks stop, the run ends with ``aborted``."""
        if self._signal is not None:
            self._signal.cancel(reason)

    @property
    def running(self) -> bool:
        """Whether a run is in progress."""
        return self._signal is not None

    async def run(
        self,
        prompt: str | UserMessage | None = None,
        *,
        signal: CancelSignal | None = None,
        user: str | None = None,
    ) -> RunResult:
        """Run until the provider stops; return what this run added.

        ``user`` names the person the run acts for: approvals of its calls are bound to it
        (with the agent and the run).

        With no ``prompt`` the run continues from the existing messages (a retry): the provider
        is asked again without re-sending anything. When the last message is the assistant's,
        queued steering messages, else queued follow-ups, are sent first; with nothing queued
        that is an :class:`AgentStateError` and nothing is sent.
        """
        if self._signal is not None:
            raise AgentStateError("this agent is already running; use steer() or follow_up()")
        steered = False
        if prompt is not None:
            new = [_user(prompt)]
        else:
            new, steered = self._continuation()
        self._signal = signal or CancelSignal()
        try:
            return await self._run(new, self._signal, poll_steering=not steered, user=user)
        finally:
            self._signal = None

    def _continuation(self) -> tuple[list[UserMessage], bool]:
        """The messages a continued run starts with (see :meth:`run`), and whether they came
        from the steering queue: the first turn then takes no more from it (Pi's
        ``skipInitialSteeringPoll``), so that one-at-a-time means one per turn."""
        if not self.messages:
            raise AgentStateError("cannot continue: there are no messages; give a prompt")
        if not isinstance(self.messages[-1], AssistantMessage):
            return [], False
        if self._steering:
            return _take(self._steering, self.steering_mode), True
        if self._follow_ups:
            return _take(self._follow_ups, self.follow_up_mode), False
        raise AgentStateError(
            "cannot continue from an assistant message with nothing queued: give a prompt, "
            "or queue one with steer() or follow_up()"
        )

    async def stream(
        self, prompt: str | UserMessage | None = None, *, signal: CancelSignal | None = None
    ) -> AsyncIterator[AgentEvent]:
        """Run and yield the events as they happen. Leaving the iteration early cancels the run."""
        async for event in _events(self, lambda: self.run(prompt, signal=signal)):
            yield event

    async def resume(
        self,
        state: RunState | Mapping[str, Any] | str,
        decisions: Mapping[str, ApprovalDecision] | None = None,
        *,
        signal: CancelSignal | None = None,
    ) -> RunResult:
        """Resume a deferred run (its :attr:`RunResult.state`, or that state's JSON) with one
        decision per pending call, by call id (see :mod:`otelhooks.core.resume`): the pending
        calls run (or are refused) as decided, the calls of their batch that ran are not run
        again, and the conversation goes on under the same run id."""
        if self._signal is not None:
            raise AgentStateError("this agent is already running; use steer() or follow_up()")
        state = state if isinstance(state, RunState) else RunState.from_json(state)
        check_seal(state, self._executor.approvals.settings.key)  # changed, or another key
        if state.agent != (self.agent_id or self.name):
            raise StateError(
                f"a run state of agent {state.agent!r} cannot be resumed by agent "
                f"{self.agent_id or self.name!r}"
            )
        rows = resume_calls(state, decisions or {})  # a decision naming no pending call stops here
        self.messages = list(state.messages)
        self._signal = signal or CancelSignal()
        try:
            return await self._run([], self._signal, poll_steering=False, resumed=(state, rows))
        finally:
            self._signal = None

    # -- a run --------------------------------------------------------------------------------

    async def _run(
        self,
        new: list[UserMessage],
        signal: CancelSignal,
        *,
        poll_steering: bool,
        user: str | None = None,
        resumed: Resumed | None = None,
    ) -> RunResult:
        self.hooks.check_tools(self.tools.specs())  # a typo stops the run here
        self.hooks.snapshot().check_scrubber(self.scrubber is not NO_SCRUBBING)
        run_id = uuid.uuid4().hex[:16] if resumed is None else resumed[0].run_id
        link = resumed[0].link() if resumed is not None else None
        trace_ = self._recorder.run(
            self.name,
            model=self.model,
            provider=self.provider,
            agent_id=self.agent_id,
            conversation_id=self.conversation_id,
            links=(link,) if link is not None else (),
        )
        user = resumed[0].user if resumed is not None else user
        identity = CallIdentity(self.agent_id or self.name, run_id, user)
        run = _Run(run_id, signal, trace_.context, [], identity)
        token = otel_context.attach(run.context)
        final = AssistantMessage(stop_reason="aborted")
        self._emit(AgentStart(run_id))
        try:
            self._add_messages(run, new)
            final = await self._turns(run, poll_steering, resumed)
            return RunResult(run_id, tuple(run.added), final, run.usage, run.deferred)
        except asyncio.CancelledError:
            trace_.cancelled()
            raise
        finally:
            trace_.finished(final, run.usage)
            self._emit(AgentEnd(run_id, final.stop_reason, tuple(run.added)))
            otel_context.detach(token)
            trace_.end()

    async def _turns(
        self, run: _Run, poll_steering: bool, resumed: Resumed | None
    ) -> AssistantMessage:
        """Turns until the provider stops; ``poll_steering`` says whether the first turn takes
        queued steering messages (not when the run started with one). A resumed run first
        finishes the deferred batch of ``resumed``."""
        index = resumed[0].turn if resumed is not None else 0
        while True:
            if resumed is not None:
                message = resumed[0].message
                batch = self._batch(self._snapshot(run, index), message, run, None)
                results = await execute_resumed(batch, resumed[1])
                resumed = None
            else:
                index += 1
                if index > self.max_turns:
                    return AssistantMessage(
                        stop_reason="error", error_message=f"stopped after {self.max_turns} turns"
                    )
                message, results = await self._turn(run, index, poll_steering)
                if run.deferred is not None:
                    self._emit(TurnEnd(index, message, ()))
                    return message
            for result in results:
                self._add(run, result)
            self._emit(TurnEnd(index, message, results))
            if message.stop_reason in ("error", "aborted"):
                return message
            if run.signal.cancelled:
                return replace(message, stop_reason="aborted", error_message=run.signal.reason)
            terminated = bool(results) and all(r.terminate for r in results)
            if (message.tool_calls and not terminated) or self._steering:
                continue
            if self._follow_ups:
                self._add_messages(run, _take(self._follow_ups, self.follow_up_mode))
                continue
            return message

    async def _turn(
        self, run: _Run, index: int, poll_steering: bool
    ) -> tuple[AssistantMessage, tuple[ToolResult, ...]]:
        """One new turn: the provider's message and the results of its tool calls (none when
        a call was deferred: ``run.deferred`` holds the state then)."""
        self._emit(TurnStart(index))
        if index > 1 or poll_steering:
            self._add_messages(run, _take(self._steering, self.steering_mode))
        turn = self._snapshot(run, index)
        message, chat_link = await _ask_provider(self, self._recorder, self._emit, turn, run)
        self._add(run, message)
        if message.usage is not None:
            run.usage = run.usage + message.usage
        if message.stop_reason in ("error", "aborted") or not message.tool_calls:
            return message, ()
        context = replace(turn.context, messages=(*turn.context.messages, message))
        batch = self._batch(replace(turn, context=context), message, run, chat_link)
        if message.stop_reason == "length":
            return message, skip_truncated(batch)
        if self.tool_execution == "sequential":
            await execute_sequential(batch)
        else:
            await execute_parallel(batch)
        if batch.deferred:
            run.deferred = deferred_state(batch, index, self.messages)
            return message, ()
        return message, batch.emit_results()

    def _snapshot(self, run: _Run, index: int) -> _Turn:
        tools = self.tools.snapshot()
        context = AgentContext(
            run_id=run.run_id,
            user=run.identity.user,
            agent_name=self.name,
            model=self.model,
            system_prompt=self.system_prompt,
            messages=tuple(self.messages),
            tools=tuple(tools.specs()),
            turn_index=index,
        )
        return _Turn(index, context, tools, self.hooks.snapshot())

    # -- the tool calls of one message --------------------------------------------------------

    def _batch(
        self, turn: _Turn, message: AssistantMessage, run: _Run, chat_link: Link | None
    ) -> _Batch:
        return _Batch(
            self._executor,
            self._emit,
            lambda: self._interrupted(run),
            turn,
            message,
            run,
            chat_link,
        )

    def _interrupted(self, run: _Run) -> str | None:
        """Why the tool calls not yet started are skipped, or ``None``: the run was aborted,
        or a steering message is queued (Pi's rule)."""
        if run.signal.cancelled:
            return f"error: cancelled: {run.signal.reason}"
        return SKIPPED_FOR_STEERING if self._steering else None

    # -- helpers ------------------------------------------------------------------------------

    def _add(self, run: _Run, message: AgentMessage) -> None:
        self.messages.append(message)
        run.added.append(message)

    def _add_messages(self, run: _Run, messages: Sequence[UserMessage]) -> None:
        for message in messages:
            self._add(run, message)
            self._emit(MessageStart("user"))
            self._emit(MessageEnd(message))

    def _emit(self, event: AgentEvent) -> None:
        for subscriber in list(self._subscribers):
            try:
                subscriber(event)
            except Exception:  # a consumer's bug must not stop the agent
                logger.exception("event subscriber raised on %s", event.type)


async def _ask_provider(
    agent: Agent, recorder: RunRecorder, emit: Subscriber, turn: _Turn, run: _Run
) -> tuple[AssistantMessage, Link | None]:
    """One provider call of ``agent`` (its spans started by ``recorder``, its events given to
    ``emit``): stream the assistant's message (an error or an abort ends it as a message, never
    a raise)."""
    model = turn.context.model
    # An instrumented provider traces (and counts) its own requests: no second chat span.
    auto_off = agent.chat_spans == "auto" and bool(getattr(agent.provider, "instrumented", False))
    chat = recorder.chat(
        run.context,
        turn_index=turn.index,
        model=model,
        provider=agent.provider,
        params=agent.params,
        span_wanted=agent.chat_spans != "never" and not auto_off,
        metrics_wanted=not auto_off,
    )
    emit(MessageStart("assistant"))
    text: list[str] = []
    calls: list[ToolCall] = []
    message: AssistantMessage | None = None
    signal = run.signal
    token = otel_context.attach(chat.context)
    try:
        with signal.watching():
            request = ProviderRequest(
                model=model,
                system_prompt=turn.context.system_prompt,
                messages=await provider_messages(
                    turn.context.messages,
                    signal,
                    agent.transform_context,
                    agent.convert_messages,
                ),
                tools=turn.context.tools,
                signal=signal,
                params=agent.params,
            )
            chat.request(request)
            message = await consume_stream(agent.provider, request, emit, text, calls)
    except asyncio.CancelledError as exc:
        if not signal.absorbs(exc):
            chat.cancelled()
            otel_context.detach(token)
            raise
        message = AssistantMessage(
            "".join(text), (), "aborted", model, None, signal.reason or "aborted"
        )
    except Exception as exc:
        chat.exception(exc)
        message = AssistantMessage(
            "".join(text),
            (),
            "error",
            model,
            None,
            f"{type(exc).__name__}: {exc}",
            error_type=type(exc).__qualname__,
        )
    otel_context.detach(token)
    if message is None:
        message = AssistantMessage(
            "".join(text),
            (),
            "error",
            model,
            None,
            "the provider's stream ended without a final message",
        )
    message = _with_unique_call_ids(message, turn.index)
    chat.end(message)
    emit(MessageEnd(message))
    return message, chat.link


async def provider_messages(
    messages: Sequence[AgentMessage],
    signal: CancelSignal,
    transform_context: TransformContext | None,
    convert_messages: ConvertMessages,
) -> tuple[Message, ...]:
    """The messages the provider gets: the turn's snapshot, through ``transform_context`` and
    ``convert_messages``."""
    if transform_context is not None:
        transformed = transform_context(list(messages), signal)
        if inspect.isawaitable(transformed):
            transformed = await transformed
        messages = transformed
    return tuple(convert_messages(messages))


async def consume_stream(
    provider: Provider,
    request: ProviderRequest,
    emit: Callable[[AgentEvent], None],
    text: list[str],
    calls: list[ToolCall],
) -> AssistantMessage | None:
    """Read the provider's stream: text deltas and tool calls as events (collected into
    ``text`` and ``calls``), until the final message (``None`` when the stream ends without
    one)."""
    stream = provider.stream(request)
    try:
        async for event in stream:
            if isinstance(event, TextChunk):
                text.append(event.text)
                emit(TextDelta(event.text))
            elif isinstance(event, ToolCallChunk):
                calls.append(event.tool_call)
                emit(ToolCallRequested(event.tool_call))
            elif isinstance(event, Done):
                return event.message
            else:
                raise TypeError(f"provider yielded {type(event).__name__}, not a StreamEvent")
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
    return None


class _Batch:
    """The tool calls of one assistant message, and their results as they come."""

    def __init__(
        self,
        executor: ToolExecutor,
        emit: Callable[[AgentEvent], None],
        interrupted: Callable[[], str | None],
        turn: _Turn,
        message: AssistantMessage,
        run: _Run,
        chat_link: Link | None,
    ) -> None:
        self.executor = executor
        self.emit = emit
        self.interrupted = interrupted
        """Why the calls not yet started are skipped (see :meth:`Agent._interrupted`)."""
        self.turn = turn
        self.message = message
        self.run = run
        self.calls = message.tool_calls
        self.links = (chat_link,) if chat_link is not None else ()
        self.results: list[ToolResult | None] = [None] * len(self.calls)
        self.deferred: dict[int, Deferred] = {}

    async def prepare(self, i: int, approver: Approver | None = None) -> Prepared:
        """Call ``i``'s before phase (``tool_execution_start`` first): deferrable, or answered
        by ``approver`` (a resumed call's decision) instead of the executor's approver."""
        call = self.calls[i]
        self.emit(ToolExecutionStart(call))
        return await self.executor.prepare(
            call,
            assistant_message=self.message,
            context=self.turn.context,
            signal=self.run.signal,
            on_update=self.update,
            hooks=self.turn.hooks,
            tools=self.turn.tools,
            parent=self.run.context,
            links=self.links,
            identity=self.run.identity,
            deferrable=approver is None,
            approver=approver,
        )

    def update(self, call: ToolCall, update: Any) -> None:
        """A tool's progress, as an event."""
        self.emit(ToolExecutionUpdate(call, update))

    def skip(self, i: int, reason: str) -> None:
        """Call ``i`` will not run: it ends with ``reason``."""
        result = self.executor.skip(
            self.calls[i],
            reason,
            parent=self.run.context,
            context=self.turn.context,
            hooks=self.turn.hooks,
            tools=self.turn.tools,
            links=self.links,
        )
        self.done(i, result)

    def done(self, i: int, prepared: Prepared | ToolResult) -> None:
        """Call ``i`` ended (``tool_execution_end``), or was deferred."""
        if isinstance(prepared, Deferred):
            self.deferred[i] = prepared
            return
        result = prepared.result if isinstance(prepared, Ended) else prepared
        assert isinstance(result, ToolResult), "an allowed call is finished first"
        self.results[i] = result
        self.emit(ToolExecutionEnd(self.calls[i], result))

    def emit_results(self) -> tuple[ToolResult, ...]:
        """The results in source order, each as a ``tool_result`` event."""
        final = tuple(r for r in self.results if r is not None)
        for result in final:
            self.emit(ToolResultEvent(result))
        return final


def skip_truncated(batch: _Batch) -> tuple[ToolResult, ...]:
    """A message cut by the token limit: none of its calls runs (their arguments may be cut);
    each gets an error result saying so, and the run goes on (Pi's behaviour)."""
    for i, call in enumerate(batch.calls):
        batch.emit(ToolExecutionStart(call))
        batch.skip(i, truncated_call_message(str(call.name)))
    return batch.emit_results()


async def execute_sequential(batch: _Batch) -> None:
    """Each call prepared, run and finished before the next one starts; once the run is
    interrupted (:meth:`Agent._interrupted`), the calls left are skipped."""
    for i in range(len(batch.calls)):
        reason = batch.interrupted()
        if reason is not None:
            batch.skip(i, reason)
            continue
        prepared = await batch.prepare(i)
        batch.done(
            i, prepared if isinstance(prepared, Deferred) else await batch.executor.finish(prepared)
        )


async def execute_parallel(batch: _Batch) -> None:
    """Every call prepared in source order (its before-hooks), then the allowed ones run at
    once, a tool marked ``execution="sequential"`` alone between the others. Once the run is
    interrupted, the calls not yet started are skipped, prepared ones included; a call that
    started records its own outcome, whatever stops it."""
    allowed: list[tuple[int, Allowed]] = []
    for i in range(len(batch.calls)):
        reason = batch.interrupted()
        if reason is not None:
            batch.skip(i, reason)
            continue
        prepared = await batch.prepare(i)
        if isinstance(prepared, Allowed):
            allowed.append((i, prepared))
        else:
            batch.done(i, prepared)
    executor = batch.executor
    try:
        for group in _groups(allowed):
            reason = batch.interrupted()
            if reason is not None:  # steered or aborted before this group started
                for i, prepared in group:
                    batch.done(i, executor.skip_prepared(prepared, reason))
                continue
            await _run_together(batch, group)
    finally:  # an asyncio cancellation: end the calls that never started
        for _, prepared in allowed:
            executor.skip_prepared(prepared, "error: cancelled")


async def execute_resumed(batch: _Batch, rows: list[ResumeRow]) -> tuple[ToolResult, ...]:
    """The deferred batch of a resumed run: the calls that ran keep their results, each pending
    one goes through the executor again answered by its decision (one at a time, in source
    order); the results in source order."""
    approvals = batch.executor.approvals
    for i, _, entry, decision in rows:
        if isinstance(entry, ToolResult):
            batch.results[i] = entry
            continue
        if not approvals.spend(entry.request.id):  # this process resumed it already
            decision = Deny("resume", "resume", "this deferred call was resumed already")
        prepared = await batch.prepare(i, ResumeApprover(entry, decision, approvals.settings))
        batch.done(i, await batch.executor.finish(prepared))
    return batch.emit_results()


def deferred_state(batch: _Batch, turn: int, messages: Sequence[AgentMessage]) -> RunState:
    """The state a run ends with when calls of ``batch`` were deferred."""
    span = trace.get_current_span(batch.run.context).get_span_context()
    done = {batch.calls[i].id: r for i, r in enumerate(batch.results) if r is not None}
    identity = batch.run.identity
    pending = tuple(
        PendingCall(d.request, d.outcome.arguments) for _, d in sorted(batch.deferred.items())
    )
    state = RunState(
        batch.run.run_id, identity.agent, identity.user, turn, tuple(messages),
        MappingProxyType(done), pending, batch.run.usage, span.trace_id, span.span_id,
    )  # fmt: skip
    return seal_state(state, batch.executor.approvals.settings.key)


def _groups(allowed: list[tuple[int, Allowed]]) -> list[list[tuple[int, Allowed]]]:
    """The calls that run together: a sequential tool's call alone, the others between."""
    groups: list[list[tuple[int, Allowed]]] = [[]]
    for item in allowed:
        if item[1].tool.execution == "sequential":
            groups += [[item], []]
        else:
            groups[-1].append(item)
    return [group for group in groups if group]


async def _run_together(batch: _Batch, group: list[tuple[int, Allowed]]) -> None:
    """Finish the calls of ``group`` concurrently; on a cancellation the others are cancelled
    too and each records its own outcome before it goes on."""

    async def run_one(i: int, prepared: Allowed) -> None:
        batch.done(i, await batch.executor.finish(prepared))

    if len(group) == 1:
        await run_one(*group[0])
        return
    tasks = [asyncio.create_task(run_one(i, p)) for i, p in group]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _events(
    agent: Agent, start: Callable[[], Coroutine[Any, Any, RunResult]]
) -> AsyncIterator[AgentEvent]:
    """The events of the run ``start`` starts, as they happen; leaving early cancels it."""
    queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
    unsubscribe = agent.subscribe(queue.put_nowait)
    task = asyncio.create_task(start())
    task.add_done_callback(lambda _: queue.put_nowait(None))
    try:
        while (event := await queue.get()) is not None:
            yield event
        await task
    finally:
        unsubscribe()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def _take(queue: deque[UserMessage], mode: QueueMode) -> list[UserMessage]:
    """The queued messages that enter now: one, or all of them."""
    if not queue:
        return []
    if mode == "one-at-a-time":
        return [queue.popleft()]
    items = list(queue)
    queue.clear()
    return items


def _user(message: str | UserMessage) -> UserMessage:
    return message if isinstance(message, UserMessage) else UserMessage(str(message))


def _with_unique_call_ids(message: AssistantMessage, turn: int) -> AssistantMessage:
    """Give tool calls without an id, or with a repeated one, an id of their own."""
    seen: set[str] = set()
    fixed: list[ToolCall] = []
    changed = False
    for i, call in enumerate(message.tool_calls):
        call_id = call.id if isinstance(call.id, str) and call.id else ""
        if not call_id or call_id in seen:
            call_id = f"{call_id or 'call'}-t{turn}-{i}"
            changed = True
        seen.add(call_id)
        fixed.append(call if call_id == call.id else replace(call, id=call_id))
    return replace(message, tool_calls=tuple(fixed)) if changed else message
