"""A framework's tool call through before -> run -> after: what the framework adapters share.

The framework keeps its loop, its tools and its own validation; the adapter hands each call to
:meth:`FrameworkBoundary.call` with the arguments as JSON values, a function that runs the
framework's own execution, and the framework's context. The call becomes an ordinary
``execute_tool`` span (nested under the framework's span when it is instrumented), the hooks see
the arguments (``ctx.context.framework`` is the framework's context), and the adapter gets back
what the framework expects: the tool's own return value when no hook changed it, else the text
the hooks made (a block reason, an override, a redacted result, an error message). Exceptions
the framework uses for control flow (``passthrough``) leave the boundary unchanged.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider

from ..core.execute import DEFAULT_TOOL_TIMEOUT, ToolExecutor
from ..core.hooks import HookChain, Hooks
from ..core.messages import AgentContext, ToolCall, ToolResult
from ..core.scrub import Scrubber
from ..core.tools import ToolOutput, ToolRegistry, make_tool
from ..telemetry.content import to_json_text

Invoke = Callable[[dict[str, Any], bool], Awaitable[Any]]
"""Runs the framework's own execution with the arguments (and whether a hook rewrote them)."""


@dataclass
class Invocation:
    """One call in flight: how to run it, and what came back."""

    invoke: Invoke
    arguments: dict[str, Any]
    raw: Any = None
    text: str | None = None
    escaped: BaseException | None = None
    passthrough: tuple[type[BaseException], ...] = ()
    ran: bool = field(default=False)

    def native(self, result: ToolResult) -> Any:
        """What the framework gets: its tool's own value when the hooks left the result as the
        tool made it, else the result's text."""
        if (
            self.ran
            and not result.is_error
            and result.details is self.raw
            and result.content == self.text
        ):
            return self.raw
        return result.content


_CURRENT: contextvars.ContextVar[Invocation | None] = contextvars.ContextVar(
    "otelhooks_framework_call", default=None
)


def _text_of(value: Any) -> str:
    return value if isinstance(value, str) else to_json_text(value)


class FrameworkBoundary:
    """The executor and the registry of stand-in tools (one per framework tool name, with the
    framework's JSON schema) that a framework adapter runs calls through. Safe for concurrent
    calls: each call's state lives in its own context, nothing is shared between calls.
    ``scrubber`` removes secrets from what the runtime writes (see
    :class:`~otelhooks.ToolExecutor`)."""

    def __init__(
        self,
        hooks: Hooks | HookChain | None = None,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        capture_content: Any = None,
        tool_timeout: float | None = DEFAULT_TOOL_TIMEOUT,
        passthrough: tuple[type[BaseException], ...] = (),
        scrubber: Scrubber | None = None,
    ) -> None:
        self.registry = ToolRegistry()
        self.hooks = hooks if hooks is not None else Hooks()
        self.executor = ToolExecutor(
            self.registry,
            self.hooks,
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            capture_content=capture_content,
            tool_timeout=tool_timeout,
            scrubber=scrubber,
        )
        self.passthrough = passthrough
        self._schemas: dict[str, tuple[Mapping[str, Any], str, dict[str, Any]]] = {}

    def ensure_tool(
        self, name: str, description: str, schema: Mapping[str, Any], *, allow_extra: bool = False
    ) -> None:
        """Register (or update) the stand-in for the framework's tool ``name``. An object schema
        that does not say otherwise refuses properties it does not name, unless
        ``allow_extra``."""
        known = self._schemas.get(name)
        if known is not None and known[0] is schema and known[1] == description:
            return  # the same tool definition as last time: nothing to do
        source = schema
        schema = dict(schema)
        if schema.get("type", "object") == "object":  # say it: a schema that does not is closed
            schema.setdefault("additionalProperties", allow_extra)
        if known is not None and known[1] == description and known[2] == schema:
            self._schemas[name] = (source, description, schema)
            return

        async def stand_in(**arguments: Any) -> Any:
            invocation = _CURRENT.get()
            if invocation is None:
                raise RuntimeError(f"tool {name!r} runs only through its framework")
            rewritten = arguments != invocation.arguments
            try:
                value = await invocation.invoke(arguments, rewritten)
            except invocation.passthrough as exc:
                invocation.escaped = exc
                return ""
            invocation.ran = True
            invocation.raw = value
            invocation.text = _text_of(value)
            return ToolOutput(invocation.text, value)

        stand_in.__name__ = name
        if name in self._schemas:
            self.registry.remove(name)
        self.registry.add(
            make_tool(stand_in, name=name, description=description, parameters=schema)
        )
        self._schemas[name] = (source, description, schema)

    async def call(
        self,
        call_id: str,
        name: str,
        arguments: dict[str, Any],
        invoke: Invoke,
        *,
        framework: Any = None,
        agent_name: str = "",
        run_id: str = "",
    ) -> tuple[ToolResult, Invocation]:
        """Run one call through the boundary; re-raise a framework control-flow exception."""
        invocation = Invocation(invoke, arguments, passthrough=self.passthrough)
        token = _CURRENT.set(invocation)
        try:
            result = await self.executor.execute(
                ToolCall(call_id, name, arguments),
                context=AgentContext(run_id=run_id, agent_name=agent_name, framework=framework),
            )
        finally:
            _CURRENT.reset(token)
        if invocation.escaped is not None:
            raise invocation.escaped
        return result, invocation
