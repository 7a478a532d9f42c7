"""LangChain and LangGraph tools and the hook boundary, both ways
(the ``langchain`` extra).

* :func:`from_langchain` makes any LangChain ``BaseTool`` an otelhooks tool: its argument schema
  (arguments it does not name are refused), run with ``ainvoke``.
* :func:`with_boundary` wraps LangChain tools so that a LangGraph ``ToolNode``, an agent built with
  ``langchain.agents.create_agent`` or any other caller of ``invoke``/``ainvoke`` runs them through
  before -> run -> after, as ``execute_tool`` spans nested under LangChain's own when it is
  traced. Hooks see the arguments and ``ctx.context.framework``, the call's ``RunnableConfig``. A
  blocked call answers a ``ToolMessage`` with ``blocked: <reason>`` and ``status="error"``: the
  model reads it and the graph goes on; a tool that raises answers ``error: ...`` the same way.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider
from pydantic import ConfigDict
from pydantic_core import to_jsonable_python

from ..core.execute import DEFAULT_TOOL_TIMEOUT
from ..core.hooks import Hooks
from ..core.scrub import Scrubber
from ..core.tools import Tool, make_tool
from ._boundary import FrameworkBoundary


def tool_schema(tool: BaseTool) -> dict[str, Any]:
    """The JSON schema of the arguments the model gives ``tool`` (closed to other properties)."""
    schema = tool.tool_call_schema
    raw: dict[str, Any] = (
        dict(schema) if isinstance(schema, dict) else schema.model_json_schema()  # type: ignore[union-attr]
    )
    raw.pop("title", None)
    raw.pop("description", None)
    raw.setdefault("type", "object")
    raw.setdefault("properties", {})
    raw.setdefault("additionalProperties", False)
    return raw


def from_langchain(tool: BaseTool, *, name: str | None = None) -> Tool:
    """``tool`` as an otelhooks :class:`~otelhooks.Tool` (for an otelhooks agent or executor)."""

    async def run(**arguments: Any) -> Any:
        return await tool.ainvoke(arguments)

    return make_tool(
        run,
        name=name or tool.name,
        description=tool.description or tool.name,
        parameters=tool_schema(tool),
    )


class BoundaryTool(BaseTool):
    """A LangChain tool whose calls run through an otelhooks boundary (see
    :func:`with_boundary`)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    inner: BaseTool
    boundary: Any

    def _run(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - invoke is overridden
        raise NotImplementedError("BoundaryTool runs through invoke/ainvoke")

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Run the call through the boundary (in a loop of its own when called synchronously)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.ainvoke(input, config, **kwargs))
        raise RuntimeError(
            f"{self.name}: call ainvoke from async code (invoke would block the event loop)"
        )

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """A tool call (``{"name", "args", "id", "type": "tool_call"}``) answers a
        ``ToolMessage``; plain arguments answer the tool's output."""
        tool_call = isinstance(input, dict) and input.get("type") == "tool_call"
        call_id = str(input.get("id") or "") if tool_call else ""
        given = input["args"] if tool_call else input
        if isinstance(given, str):
            given = {next(iter(tool_schema(self.inner)["properties"]), "input"): given}
        arguments = to_jsonable_python(given) if isinstance(given, dict) else {}
        answered: list[Any] = []

        async def invoke(args: dict[str, Any], rewritten: bool) -> Any:
            payload = args if rewritten else given
            if tool_call:  # the inner tool answers a ToolMessage for the same call
                payload = {**input, "args": payload}
            value = await self.inner.ainvoke(payload, config, **kwargs)
            answered.append(value)
            return value.content if isinstance(value, ToolMessage) else value

        result, invocation = await self.boundary.call(
            call_id or f"call_{uuid.uuid4().hex[:12]}",
            self.inner.name,
            arguments,
            invoke,
            framework=config,
        )
        native = invocation.native(result)
        if invocation.ran and native is invocation.raw:
            return answered[-1] if answered else native
        if not tool_call:
            return native
        return ToolMessage(
            content=native,
            tool_call_id=call_id,
            name=self.inner.name,
            status="error" if result.is_error else "success",
        )


def with_boundary(
    tools: Iterable[BaseTool],
    hooks: Hooks | None = None,
    *,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    capture_content: Any = None,
    tool_timeout: float | None = DEFAULT_TOOL_TIMEOUT,
    scrubber: Scrubber | None = None,
) -> list[BaseTool]:
    """``tools`` wrapped so that every call runs through ``hooks`` (one boundary for all)."""
    boundary = FrameworkBoundary(
        hooks,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        capture_content=capture_content,
        tool_timeout=tool_timeout,
        scrubber=scrubber,
    )
    wrapped: list[BaseTool] = []
    for tool in tools:
        boundary.ensure_tool(tool.name, tool.description or tool.name, tool_schema(tool))
        wrapped.append(
            BoundaryTool(
                name=tool.name,
                description=tool.description,
                args_schema=tool.args_schema,
                return_direct=tool.return_direct,
                inner=tool,
                boundary=boundary,
            )
        )
    return wrapped
