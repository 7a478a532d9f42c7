"""Pydantic AI's tool calls through the hook boundary (the ``pydantic-ai`` extra).

::

    agent = Agent(model, tools=[...], capabilities=[OtelhooksCapability(hooks)])

:class:`OtelhooksCapability` is a Pydantic AI capability (the framework's extension point for
tool execution): every tool call of the agent runs through before -> run -> after as an
``execute_tool`` span, nested under Pydantic AI's own tool span when the agent is instrumented.
Hooks see the arguments Pydantic AI validated (as JSON values) and ``ctx.context.framework``,
the run's ``RunContext``. A blocked call returns ``blocked: <reason>`` as the tool's result: the
model reads it and the run goes on; a tool that raises returns ``error: ...`` the same way. A
tool's result that no hook changed reaches the model as the tool returned it; one a hook changed
(redaction included) as the hook's text. Rewritten arguments reach the tool as JSON values.
Pydantic AI's own control flow (``ModelRetry``, deferral, approval, skipping) passes through.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider
from pydantic_ai import exceptions as pai_exceptions
from pydantic_ai.capabilities import AbstractCapability, ValidatedToolArgs, WrapToolExecuteHandler
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_core import to_jsonable_python

from ..core.execute import DEFAULT_TOOL_TIMEOUT
from ..core.hooks import Hooks
from ..core.scrub import Scrubber
from ._boundary import FrameworkBoundary

PASSTHROUGH: tuple[type[BaseException], ...] = tuple(
    getattr(pai_exceptions, name)
    for name in ("ModelRetry", "CallDeferred", "ApprovalRequired", "SkipToolExecution")
    if hasattr(pai_exceptions, name)
)


@dataclass
class OtelhooksCapability(AbstractCapability[Any]):
    """Runs every tool call of a Pydantic AI agent through otelhooks' hooks.

    ``hooks`` are the otelhooks hooks (the same object works with the other integrations);
    ``tracer_provider`` and ``meter_provider`` default to the global ones;
    ``capture_content`` and ``scrubber`` as for :class:`~otelhooks.ToolExecutor`.
    """

    hooks: Hooks | None = None
    _: KW_ONLY
    tracer_provider: TracerProvider | None = None
    meter_provider: MeterProvider | None = None
    capture_content: Any = None
    tool_timeout: float | None = DEFAULT_TOOL_TIMEOUT
    scrubber: Scrubber | None = None
    id: str | None = "otelhooks"
    boundary: FrameworkBoundary = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.boundary = FrameworkBoundary(
            self.hooks,
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
            capture_content=self.capture_content,
            tool_timeout=self.tool_timeout,
            passthrough=PASSTHROUGH,
            scrubber=self.scrubber,
        )

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        """Run the call through before -> run -> after; Pydantic AI's execution is the run."""
        self.boundary.ensure_tool(
            tool_def.name, tool_def.description or "", tool_def.parameters_json_schema
        )
        arguments = to_jsonable_python(args)

        async def invoke(given: dict[str, Any], rewritten: bool) -> Any:
            return await handler(given if rewritten else args)

        agent = getattr(ctx, "agent", None)
        result, invocation = await self.boundary.call(
            call.tool_call_id or tool_def.name,
            tool_def.name,
            arguments if isinstance(arguments, dict) else {},
            invoke,
            framework=ctx,
            agent_name=str(getattr(agent, "name", None) or ""),
            run_id=str(getattr(ctx, "run_id", None) or ""),
        )
        return invocation.native(result)
