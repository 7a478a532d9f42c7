"""The agent loop: ask the provider, execute the tool calls it asks for, feed the results back.

Read top to bottom in the order things happen: a run (``invoke_agent`` span) is a sequence of
turns; a turn takes a snapshot of the agent (tools, model, hooks), streams one assistant message
from the provider (``chat`` span), executes its tool calls through the hook boundary (one
``execute_tool`` span each, children of the run, linked to the ``chat`` span that asked for them),
then decides whether another turn follows.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, TracerProvider

from . import attributes as A
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
from .execute import PreparedCall, ToolExecutor
from .hooks import HookChain, Hooks
from .messages import (
    AgentContext,
    AssistantMessage,
    Message,
    ToolCall,
    ToolResult,
    UserMessage,
)
from .providers.base import Done, Provider, ProviderRequest, TextChunk, ToolCallChunk
from .tools import ToolRegistry
from .version import __version__

logger = logging.getLogger("otelhooks.loop")

ToolExecution = Literal["parallel", "sequential"]
Subscriber = Callable[[AgentEvent], Any]

SKIPPED_FOR_STEERING = "Skipped due to queued user message."


@dataclass(frozen=True, slots=True)
class _Turn:
    """What one turn uses, fixed when it starts."""

    index: int
    context: AgentContext
    executor: ToolExecutor
    hooks: HookChain


class Agent:
    """An evented tool loop over a :class:`~otelhooks.providers.Provider`.

    ``tool_execution`` is ``"parallel"`` (default: before-hooks run in source order, allowed
    tools then run concurrently, results are emitted in source order) or ``"sequential"``.
    ``messages`` is the conversation so far; ``run()`` appends to it. Subscribers are called
    synchronously with every event; one that raises is logged and ignored.
    """

    def __init__(
        self,
        provider: Provider,
        *,
        tools: ToolRegistry | None = None,
        hooks: Hooks | None = None,
        model: str = "",
        name: str = "agent",
        system_prompt: str = "",
        tool_execution: ToolExecution = "parallel",
        tracer_provider: TracerProvider | None = None,
        capture_content: bool | None = None,
        tool_timeout: float | None = None,
        max_turns: int = 50,
        messages: Iterable[Message] = (),
    ) -> None:
        if tool_execution not in ("parallel", "sequential"):
            raise ValueError("tool_execution must be 'parallel' or 'sequential'")
        self.provider = provider
        self.tools = tools if tools is not None else ToolRegistry()
        self.hooks = hooks if hooks is not None else Hooks()
        self.model = model
        self.name = name
        self.system_prompt = system_prompt
        self.tool_execution: ToolExecution = tool_execution
        self.capture_content = capture_content
        self.tool_timeout = tool_timeout
        self.max_turns = max_turns
        self.messages: list[Message] = list(messages)
        self._tracer_provider = tracer_provider
        self._tracer = trace.get_tracer("otelhooks", __version__, tracer_provider=tracer_provider)
        self._subscribers: list[Subscriber] = []
        self._steering: deque[UserMessage] = deque()
        self._follow_ups: deque[UserMessage] = deque()
        self._signal: CancelSignal | None = None

    # -- the outside world --------------------------------------------------------------------

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback`` with every event; returns a function that unsubscribes."""
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback) if callback in self._subscribers else None

    def steer(self, message: str | UserMessage) -> None:
        """Queue a message for the running turn: the tool calls not yet started are skipped and
        the message reaches the provider on the next call."""
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
        return self._signal is not None

    async def run(
        self, prompt: str | UserMessage | None = None, *, signal: CancelSignal | None = None
    ) -> AssistantMessage:
        """Run until the provider stops; return the last assistant message.

        With no ``prompt`` the run continues from the existing messages (a retry): the provider
        is asked again without re-sending anything.
        """
        if self._signal is not None:
            raise RuntimeError("this agent is already running; use steer() or follow_up()")
        new = [_user(prompt)] if prompt is not None else []
        if not new and not self.messages:
            raise ValueError("nothing to run: give a prompt or start from existing messages")
        self._signal = signal or CancelSignal()
        try:
            return await self._run(new, self._signal)
        finally:
            self._signal = None

    async def stream(
        self, prompt: str | UserMessage | None = None, *, signal: CancelSignal | None = None
    ) -> AsyncIterator[AgentEvent]:
        """Run and yield the events as they happen. Leaving the iteration early cancels the run."""
        queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        unsubscribe = self.subscribe(queue.put_nowait)
        task = asyncio.create_task(self.run(prompt, signal=signal))
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

    # -- a run --------------------------------------------------------------------------------

    async def _run(self, new: list[UserMessage], signal: CancelSignal) -> AssistantMessage:
        run_id = uuid.uuid4().hex[:16]
        span = self._tracer.start_span(
            f"{A.OP_INVOKE_AGENT} {self.name}",
            kind=SpanKind.INTERNAL,
            attributes={
                A.GEN_AI_OPERATION_NAME: A.OP_INVOKE_AGENT,
                A.GEN_AI_AGENT_NAME: self.name,
                A.GEN_AI_REQUEST_MODEL: self.model,
            },
        )
        run_ctx = trace.set_span_in_context(span)
        token = otel_context.attach(run_ctx)
        final = AssistantMessage(stop_reason="aborted")
        self._emit(AgentStart(run_id))
        try:
            self._add_user_messages(new)
            final = await self._turns(run_id, signal, run_ctx)
            return final
        except asyncio.CancelledError:
            span.set_attribute(A.CANCELLED, True)
            span.set_status(Status(StatusCode.ERROR, "cancelled"))
            span.set_attribute(A.ERROR_TYPE, A.ERR_CANCELLED)
            raise
        finally:
            if final.stop_reason in ("error", "aborted") and span.is_recording():
                span.set_attribute(A.ERROR_TYPE, final.stop_reason)
                span.set_status(Status(StatusCode.ERROR, final.error_message or final.stop_reason))
            span.set_attribute(A.GEN_AI_RESPONSE_FINISH_REASONS, (final.stop_reason,))
            self._emit(AgentEnd(run_id, final.stop_reason, tuple(self.messages)))
            otel_context.detach(token)
            span.end()

    async def _turns(
        self, run_id: str, signal: CancelSignal, run_ctx: otel_context.Context
    ) -> AssistantMessage:
        index = 0
        while True:
            index += 1
            if index > self.max_turns:
                return AssistantMessage(
                    stop_reason="error", error_message=f"stopped after {self.max_turns} turns"
                )
            self._emit(TurnStart(index))
            self._add_user_messages(_drain(self._steering))
            turn = self._snapshot(run_id, index)
            message, chat_link = await self._ask_provider(turn, signal, run_ctx)
            self.messages.append(message)
            results: tuple[ToolResult, ...] = ()
            if message.stop_reason not in ("error", "aborted") and message.tool_calls:
                results = await self._execute_tool_calls(turn, message, signal, run_ctx, chat_link)
                self.messages.extend(results)
            self._emit(TurnEnd(index, message, results))
            if message.stop_reason in ("error", "aborted"):
                return message
            if signal.cancelled:
                return replace(message, stop_reason="aborted", error_message=signal.reason)
            if message.tool_calls or self._steering:
                continue
            if self._follow_ups:
                self._add_user_messages(_drain(self._follow_ups))
                continue
            return message

    def _snapshot(self, run_id: str, index: int) -> _Turn:
        registry = ToolRegistry(list(self.tools))
        hooks = self.hooks.snapshot()
        context = AgentContext(
            run_id=run_id,
            agent_name=self.name,
            model=self.model,
            system_prompt=self.system_prompt,
            messages=tuple(self.messages),
            tools=tuple(registry.specs()),
            turn_index=index,
        )
        executor = ToolExecutor(
            registry,
            hooks,
            tracer_provider=self._tracer_provider,
            capture_content=self.capture_content,
            tool_timeout=self.tool_timeout,
        )
        return _Turn(index, context, executor, hooks)

    # -- one provider call --------------------------------------------------------------------

    async def _ask_provider(
        self, turn: _Turn, signal: CancelSignal, run_ctx: otel_context.Context
    ) -> tuple[AssistantMessage, Link]:
        model = turn.context.model
        span = self._tracer.start_span(
            f"{A.OP_CHAT} {model}".strip(),
            run_ctx,
            SpanKind.CLIENT,
            {
                A.GEN_AI_OPERATION_NAME: A.OP_CHAT,
                A.GEN_AI_REQUEST_MODEL: model,
                A.TURN_INDEX: turn.index,
            },
        )
        link = Link(span.get_span_context(), {A.TURN_INDEX: turn.index})
        request = ProviderRequest(
            model=model,
            system_prompt=turn.context.system_prompt,
            messages=turn.context.messages,
            tools=turn.context.tools,
            signal=signal,
        )
        self._emit(MessageStart("assistant"))
        text: list[str] = []
        calls: list[ToolCall] = []
        message: AssistantMessage | None = None
        token = otel_context.attach(trace.set_span_in_context(span, run_ctx))
        try:
            with signal.watching():
                message = await self._consume(request, text, calls)
        except asyncio.CancelledError as exc:
            if not signal.absorbs(exc):
                span.set_attribute(A.CANCELLED, True)
                span.set_status(Status(StatusCode.ERROR, "cancelled"))
                span.end()
                otel_context.detach(token)
                raise
            message = AssistantMessage(
                "".join(text), (), "aborted", model, None, signal.reason or "aborted"
            )
        except Exception as exc:
            span.record_exception(exc)
            message = AssistantMessage(
                "".join(text), (), "error", model, None, f"{type(exc).__name__}: {exc}"
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
        self._record_chat(span, message)
        span.end()
        self._emit(MessageEnd(message))
        return message, link

    async def _consume(
        self, request: ProviderRequest, text: list[str], calls: list[ToolCall]
    ) -> AssistantMessage | None:
        stream = self.provider.stream(request)
        try:
            async for event in stream:
                if isinstance(event, TextChunk):
                    text.append(event.text)
                    self._emit(TextDelta(event.text))
                elif isinstance(event, ToolCallChunk):
                    calls.append(event.tool_call)
                    self._emit(ToolCallRequested(event.tool_call))
                elif isinstance(event, Done):
                    return event.message
                else:
                    raise TypeError(f"provider yielded {type(event).__name__}, not a StreamEvent")
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        return None

    def _record_chat(self, span: Span, message: AssistantMessage) -> None:
        if not span.is_recording():
            return
        span.set_attribute(A.GEN_AI_RESPONSE_FINISH_REASONS, (message.stop_reason,))
        if message.usage is not None:
            span.set_attribute(A.GEN_AI_USAGE_INPUT_TOKENS, message.usage.input_tokens)
            span.set_attribute(A.GEN_AI_USAGE_OUTPUT_TOKENS, message.usage.output_tokens)
        if message.stop_reason in ("error", "aborted"):
            span.set_attribute(A.ERROR_TYPE, message.stop_reason)
            span.set_status(Status(StatusCode.ERROR, message.error_message or message.stop_reason))

    # -- the tool calls of one message --------------------------------------------------------

    async def _execute_tool_calls(
        self,
        turn: _Turn,
        message: AssistantMessage,
        signal: CancelSignal,
        run_ctx: otel_context.Context,
        chat_link: Link,
    ) -> tuple[ToolResult, ...]:
        executor = turn.executor
        links = (chat_link,)
        results: list[ToolResult | None] = [None] * len(message.tool_calls)
        runnable: list[tuple[int, PreparedCall]] = []
        skip_reason: str | None = None

        def on_update(call: ToolCall, update: Any) -> None:
            self._emit(ToolExecutionUpdate(call, update))

        def done(i: int, result: ToolResult) -> None:
            results[i] = result
            self._emit(ToolExecutionEnd(message.tool_calls[i], result))

        for i, call in enumerate(message.tool_calls):
            if skip_reason is None and signal.cancelled:
                skip_reason = f"error: cancelled: {signal.reason}"
            if skip_reason is not None:
                done(
                    i,
                    executor.skip(
                        call, skip_reason, parent=run_ctx, context=turn.context, links=links
                    ),
                )
                continue
            self._emit(ToolExecutionStart(call))
            prepared = await executor.prepare(
                call,
                assistant_message=message,
                context=turn.context,
                signal=signal,
                on_update=on_update,
                hooks=turn.hooks,
                parent=run_ctx,
                links=links,
            )
            if prepared.result is not None:
                done(i, prepared.result)
            elif self.tool_execution == "sequential":
                done(i, await executor.finish(prepared))
            else:
                runnable.append((i, prepared))
            if self._steering:
                skip_reason = SKIPPED_FOR_STEERING

        if runnable:

            async def run_one(i: int, prepared: PreparedCall) -> None:
                done(i, await executor.finish(prepared))

            tasks = [asyncio.create_task(run_one(i, p)) for i, p in runnable]
            try:
                await asyncio.gather(*tasks)
            finally:  # on cancellation: stop the others, let them end their spans, then go on
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

        final = tuple(r for r in results if r is not None)
        for result in final:
            self._emit(ToolResultEvent(result))
        return final

    # -- helpers ------------------------------------------------------------------------------

    def _add_user_messages(self, messages: Sequence[UserMessage]) -> None:
        for message in messages:
            self.messages.append(message)
            self._emit(MessageStart("user"))
            self._emit(MessageEnd(message))

    def _emit(self, event: AgentEvent) -> None:
        for subscriber in list(self._subscribers):
            try:
                subscriber(event)
            except Exception:  # a consumer's bug must not stop the agent
                logger.exception("event subscriber raised on %s", event.type)


def _user(message: str | UserMessage) -> UserMessage:
    return message if isinstance(message, UserMessage) else UserMessage(str(message))


def _drain(queue: deque[UserMessage]) -> list[UserMessage]:
    items = list(queue)
    queue.clear()
    return items


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
