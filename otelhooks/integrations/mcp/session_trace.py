"""One trace per host session for its session-level messages, and tool-call traces of their own.

Without this, every message of a host session is a trace of its own: ``initialize``,
``notifications/initialized``, each ``tools/list``, each ``ping``, and the proxy's own requests
to its upstreams, so that in a long session the tool calls drown. Here the session's
``initialize`` span (made by the ``mcp`` SDK's server middleware) is the root of the session's
trace: the messages that only keep the session going (listing, pings, subscriptions,
notifications) and the upstream connections made for the session are its children. A call
(``tools/call``, ``prompts/get``, ``resources/read``) starts a trace of its own (or joins the
host's, when the host sent a ``traceparent``), and its ``execute_tool`` span links to the session.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any, Final

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link

Request = ServerRequestContext[Any, Any]

# Messages that are a call of their own: each is a trace (or a part of the host's).
CALLS: Final = frozenset({"tools/call", "prompts/get", "resources/read"})


class SessionTraces:
    """The trace context of each host connection (its ``initialize`` span), kept while the session
    lives; :meth:`outer` and :meth:`inner` are the two middlewares that make and use it."""

    def __init__(self) -> None:
        self._sessions: weakref.WeakKeyDictionary[Any, otel_context.Context] = (
            weakref.WeakKeyDictionary()
        )

    def context_of(self, session: Any) -> otel_context.Context | None:
        """The session's trace context (``None`` before its ``initialize``)."""
        try:
            return self._sessions.get(session)
        except TypeError:  # a session that cannot be weakly referenced
            return None

    def link_to(self, session: Any) -> Link | None:
        """A link from a call's span to its session's trace."""
        context = self.context_of(session)
        if context is None:
            return None
        span_context = trace.get_current_span(context).get_span_context()
        return Link(span_context) if span_context.is_valid else None

    async def outer(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Runs before the SDK's span middleware: a session-level message the host sent no
        ``traceparent`` with becomes part of the session's trace."""
        context = None
        if ctx.method not in CALLS and not _has_traceparent(ctx.meta):
            context = self.context_of(_connection(ctx.session))
        if context is None:
            return await call_next(ctx)
        token = otel_context.attach(context)
        try:
            return await call_next(ctx)
        finally:
            otel_context.detach(token)

    async def inner(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Runs inside the SDK's span: the ``initialize`` span is noted as the session's."""
        if ctx.method == "initialize":
            with contextlib.suppress(TypeError):
                self._sessions[_connection(ctx.session)] = otel_context.get_current()
        return await call_next(ctx)


def _connection(session: Any) -> Any:
    """The connection a request's session object belongs to (one per host connection)."""
    return getattr(session, "_connection", session)


def _has_traceparent(meta: Any) -> bool:
    if meta is None:
        return False
    if isinstance(meta, dict):
        return "traceparent" in meta
    return getattr(meta, "traceparent", None) is not None or "traceparent" in (
        getattr(meta, "model_extra", None) or {}
    )
