"""What the ``run`` phase decides around a handler: the bound it runs under, whether it runs in a
worker thread, its value as a result, and what the model reads when it raised. No spans here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from ..telemetry.content import to_json_text
from .messages import ToolCall, ToolResult
from .tools import Tool, ToolOutput

TIMEOUT_ARGUMENT: Final = "timeout"
"""A tool whose parameters include a numeric ``timeout`` (seconds) lets each call ask for a
shorter bound, as in Pi; never a longer one, and ``0`` from the model disables nothing."""


def call_bound(
    override: float | None, args: Mapping[str, Any], tool: Tool, default: float | None
) -> tuple[float | None, bool]:
    """The bound of one call. The limit is the caller's ``override`` (``0`` disables), else the
    tool's own ``timeout``, else the executor-wide ``default``. A numeric ``timeout`` argument
    the tool declares (the model's choice) only narrows it: a positive number below the limit
    replaces it; a larger one, ``0``, a negative or a non-number leaves it as it is.

    A sync handler runs in a worker thread when it is marked ``blocking`` or its bound is not
    the executor-wide default (its own, the caller's or the model's): inline it would hold the
    event loop and no timer could fire. A sync handler that runs inline is not bounded.

    Returns the timeout the handler runs under (``None``: none) and whether it runs in a worker
    thread."""
    own = override is not None or tool.timeout is not None
    if override is not None:
        limit = override or None
    elif tool.timeout is not None:
        limit = tool.timeout
    else:
        limit = default
    asked = args.get(TIMEOUT_ARGUMENT) if TIMEOUT_ARGUMENT in args else None
    if (
        isinstance(asked, (int, float))
        and not isinstance(asked, bool)
        and math.isfinite(asked)
        and asked > 0
        and (limit is None or asked < limit)
    ):
        limit, own = float(asked), True
    if tool.is_async:
        return limit, False
    in_thread = tool.blocking or (own and limit is not None)
    return (limit if in_thread else None), in_thread


def takes_timeout(tool: Tool) -> bool:
    """Whether a call's validated arguments may hold a ``timeout`` (:data:`TIMEOUT_ARGUMENT`)
    that narrows its bound: ``False`` only for a tool validated by its signature's model, with
    no such parameter (a JSON Schema may let any property through)."""
    return tool.may_receive(TIMEOUT_ARGUMENT)


def as_result(call: ToolCall, value: Any) -> ToolResult:
    """A handler's return value as the call's result."""
    name = call.name
    if type(value) is str:
        return ToolResult(call.id, name, value)
    if isinstance(value, ToolOutput):
        return ToolResult(
            call.id,
            name,
            value.content,
            value.details,
            value.is_error,
            value.terminate,
            value.media,
        )
    if isinstance(value, str):
        return ToolResult(call.id, name, value)
    if value is None:
        return ToolResult(call.id, name, "")
    return ToolResult(call.id, name, to_json_text(value), value)


def error_result(call: ToolCall, content: str) -> ToolResult:
    """An error result for ``call``."""
    return ToolResult(call.id, str(call.name), content, None, True)


def error_text(exc: BaseException) -> str:
    """What the model reads when a handler raised ``exc``: its message, else its type."""
    message = str(exc)
    return f"error: {message}" if message else f"error: {type(exc).__name__}"
