"""Calling a tool's handler: the timeout it runs under, whether it runs in a worker thread,
a generator's items gathered, its value as a result, and whatever it raises as an error result.

What the executor's ``run`` phase and a call nothing observes have in common; no spans here.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Callable, Mapping
from typing import Any, Final

from ..telemetry.content import to_json_text
from .cancel import CancelSignal
from .deadline import bounded
from .messages import ToolCall, ToolResult
from .tools import InvalidArguments, Tool, ToolOutput, ToolRegistry

TIMEOUT_ARGUMENT: Final = "timeout"
"""A tool whose parameters include a numeric ``timeout`` (seconds) lets each call set its own
bound, as in Pi: a positive number replaces the default for that call, ``0`` disables it."""

_UNWATCHED: Final = CancelSignal()  # never cancelled: the signal of a call nobody can cancel
_PLAIN: Final = frozenset({str, int, float, bool, dict, list, tuple, type(None), ToolOutput})


def call_timeout(
    override: float | None, args: Mapping[str, Any], tool: Tool, default: float | None
) -> tuple[float | None, bool]:
    """The call's timeout, and whether it is the call's or the tool's own (not the
    executor-wide ``default``): the caller's override, then a numeric ``timeout`` argument the
    tool declares, then the tool's, then the default. ``0`` disables."""
    if override is None and TIMEOUT_ARGUMENT in args:
        value = args[TIMEOUT_ARGUMENT]
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if number and math.isfinite(value) and value >= 0:
            override = float(value)
    if override is not None:
        return (override or None), True
    if tool.timeout is not None:
        return tool.timeout, True
    return default, False


def bound(
    override: float | None, args: Mapping[str, Any], tool: Tool, default: float | None
) -> tuple[float | None, bool]:
    """The timeout a handler runs under, and whether it runs in a worker thread (a sync
    handler with a timeout of its own, or marked blocking: an inline one holds the loop, so
    no timer could fire)."""
    timeout, own = call_timeout(override, args, tool, default)
    in_thread = tool.blocking or (own and timeout is not None and not tool.is_async)
    return (timeout if tool.is_async or in_thread else None), in_thread


async def run_unobserved(
    registry: ToolRegistry, call: ToolCall, tool: Tool, timeout: float | None, default: float | None
) -> ToolResult:
    """A call nothing records and no hook applies to, of a tool with no context parameter:
    validation, the handler and the result, with the outcomes of the traced path and none of its
    bookkeeping."""
    try:
        args = tool.validate(call.arguments)
    except InvalidArguments as exc:
        return error_result(call, f"error: invalid arguments for tool {tool.name!r}: {exc}")
    plain = timeout is None and tool.timeout is None and not tool.blocking
    if plain and TIMEOUT_ARGUMENT not in args:  # the executor's default, for async tools only
        limit, in_thread = (default if tool.is_async else None), False
    elif not plain or tool.is_async:
        limit, in_thread = bound(timeout, args, tool, default)
    else:  # a plain sync tool (its timeout argument, if any, cannot start a thread)
        limit, in_thread = None, False
    try:
        if not (tool.is_async or in_thread):  # inline: no coroutine to make
            value = tool.handler(**args)
            if type(value) not in _PLAIN and inspect.isawaitable(value):
                value = await value
        elif tool.is_async:
            value = await bounded(tool.handler(**args), limit)
        else:
            value = await bounded(
                registry.run(
                    tool, args, tool_call_id=call.id, signal=_UNWATCHED, in_thread=in_thread
                ),
                limit,
            )
        if type(value) is not str and (inspect.isgenerator(value) or inspect.isasyncgen(value)):
            value = await collect(value, None)
    except TimeoutError:
        return error_result(call, f"error: tool {tool.name!r} timed out after {limit}s")
    except Exception as exc:
        return error_result(call, error_text(exc))
    return as_result(call, value)


async def collect(gen: Any, report: Callable[[Any], None] | None) -> list[Any]:
    """A generator's items, as the result of a tool that returned it; each reported as progress
    when there is someone to report to."""
    items: list[Any] = []
    if inspect.isasyncgen(gen):
        async for item in gen:
            items.append(item)
            if report is not None:
                report(item)
        return items
    for item in gen:
        items.append(item)
        if report is not None:
            report(item)
        await asyncio.sleep(0)  # let timeouts and cancellation in between items
    return items


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
