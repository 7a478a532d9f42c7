"""The proxy over stdio in front of one stdio server: messages relayed as lines, and only what
the policy needs parsed.

A host and a server that speak the initialize handshake need no MCP session in between: the
relay passes each line on as it came, except

* ``initialize``: the ``tasks`` capability taken out of the host's request and the server's
  answer (the proxy does not pass tasks on); everything else the host declared reaches the
  server as declared, so the server offers what the host can take;
* ``tools/list``: answered from the relay's own listing of the server's tools (all pages), with
  denied, unpinned and (with identity rules) forbidden tools left out; the listing is made after
  the handshake and again whenever the server announces ``notifications/tools/list_changed``,
  and reviewed against the pins each time;
* ``tools/call``: through before -> run -> after (the policy's hooks, redaction, limits,
  timeouts, the structlog event and the audit line); the request the server gets carries the
  proxy's trace context in ``params._meta``; a timeout or a host's ``notifications/cancelled``
  cancels it upstream;
* the results of ``resources/list``, ``resources/templates/list``, ``resources/read``,
  ``prompts/list`` and ``prompts/get``, and the data of ``notifications/message``: redacted;
* a method the gateway does not serve (:data:`~otelhooks.integrations.mcp.gateway.METHODS`,
  :data:`~otelhooks.integrations.mcp.gateway.PROTOCOL`) is answered ``-32601`` and never
  reaches the server; a request whose id is neither a string nor a number is refused;
* ``roots/list`` from the server: answered from the upstream's configured ``roots``, narrowed
  by the host's own answer when it declared roots (a host may narrow them, never widen them);
  without configured roots the server is not offered the capability.

The server's progress notifications for a call are recorded on its span (and passed on).
Sampling and elicitation requests go to the host (the only one), and subscriptions, completion
and the host's answers pass unchanged. Each host request has the ``SERVER`` span the ``mcp``
SDK's server would give it, the session's messages share the ``initialize`` span's trace and
each call is a trace of its own (see :mod:`~otelhooks.integrations.mcp.session_trace`). A server
that dies fails what was in flight (a call with ``isError: true``, any other request with a
JSON-RPC error) and is started again, handshake replayed, on the host's next message.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, Final

import mcp.types as mcp_types
import structlog
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Link, Span, SpanKind, StatusCode

from ...telemetry import attributes as A
from .access import CALLER, Caller, Grant
from .auth import LOCAL_STDIO
from .client import (
    MCPToolError,
)
from .gateway import (
    NOTIFICATIONS,
    Gateway,
)
from .host_approval import HOST, HostAsk, declares_form, host_label
from .policy import UpstreamConfig
from .relay_host import OwnRequests, target_refused
from .relay_link import Pending, UpstreamLink, UpstreamProcess, dumps
from .relay_tools import HOST_REQUEST, RelayTools
from .session_trace import CALLS
from .upstreams import narrow_roots

logger = logging.getLogger("otelhooks.mcp.proxy")

SCRUBBED: Final = frozenset(
    {
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
    }
)
"""Requests whose results reach the host redacted."""
_NO_ID: Final = object()
_VERSION: Final = "io.modelcontextprotocol/protocolVersion"  # in _meta: the 2026-07-28 era
_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"


class StdioRelay:
    """The proxy's tools of one stdio upstream, relayed to the host on ``reader``/``writer``
    (see the module's docs)."""

    def __init__(
        self,
        gateway: Gateway,
        config: UpstreamConfig,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.gateway = gateway
        self.policy = gateway.policy
        self.config = config
        self.reader = reader
        self.writer = writer
        self.tracer = gateway.tracer
        self.protocol_version: str | None = None
        self._calls: dict[Any, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._offered: dict[str, Any] | None = None  # the host's initialize, as sent upstream
        self._host_roots = False  # the host said it answers roots
        self._asked: dict[Any, str] = {}  # the server's requests to the host, by id
        self.own = OwnRequests(self._to_host)  # the relay's own requests to the host
        self._host_form = False  # the host declared form elicitation
        self._session: otel_context.Context | None = None
        self.link = UpstreamLink(config, lambda: gateway.environment(config), self, self._spawn)
        self.run_id = uuid.uuid4().hex
        self.key = uuid.uuid4().hex  # the relay's one server, as an upstream set of its own
        self.caller = Caller(
            LOCAL_STDIO,
            None,
            "pipe",
            config.name,
            grant=gateway.grant(LOCAL_STDIO),
            upstream_set=self.key,
        )
        self.tools = RelayTools(gateway, config, self.link, self.caller)
        self._log_fields = gateway.log_fields(LOCAL_STDIO)

    # -- life --------------------------------------------------------------------------------

    async def run(self) -> None:
        """Relay until the host closes stdin; then stop the server."""
        # One host, one caller: bound once for every call's hooks, structlog events and audit.
        caller = CALLER.set(self.caller)
        bound = structlog.contextvars.bind_contextvars(**self._log_fields)
        try:
            await self.link.ensure()
            while line := await self.reader.readline():
                await self._from_host(line)
        finally:
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self.link.stop()
            structlog.contextvars.reset_contextvars(**bound)
            CALLER.reset(caller)

    def _spawn(self, work: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _to_host(self, message: Any) -> None:
        self.writer.write(message if isinstance(message, bytes) else dumps(message))

    # -- what the link hands over --------------------------------------------------------------

    def not_json(self, line: bytes) -> None:
        """A line from the upstream that is not JSON: passed to the host as it came."""
        self._to_host(line)

    async def drain(self) -> None:
        """Wait until the host's stream has taken what was written to it."""
        await self.writer.drain()

    def request_gone(self, request_id: Any, pending: Pending, text: str) -> None:
        """Answer the host's pending request with a connection-closed error (its upstream went
        away)."""
        self._answer_error(request_id, pending.span, mcp_types.CONNECTION_CLOSED, text)

    # -- from the host -----------------------------------------------------------------------

    async def _from_host(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            if line.strip():
                self._answer_error(None, None, mcp_types.PARSE_ERROR, "the message is not JSON")
            return
        if not isinstance(message, dict) or (
            "method" in message and not isinstance(message["method"], str)
        ):
            # A batch (or any other shape) could carry a tools/call past the boundary: refused.
            self._answer_error(
                None, None, mcp_types.INVALID_REQUEST, "one JSON-RPC object per line"
            )
            return
        request_id = message.get("id", _NO_ID)
        if request_id is not _NO_ID and not _valid_id(request_id):
            self._answer_error(
                None, None, mcp_types.INVALID_REQUEST, "a request id is a string or a number"
            )
            return
        try:
            upstream = await self.link.ensure()
        except MCPToolError as unstarted:
            logger.warning("%s", unstarted)
            if request_id is not _NO_ID and "method" in message:
                self._answer_error(request_id, None, mcp_types.CONNECTION_CLOSED, str(unstarted))
            return
        if "method" not in message:
            if self.own.answered(request_id, message):  # an answer to the relay's own request
                return
            asked = self._asked.pop(request_id, None) if request_id is not _NO_ID else None
            if asked == "roots/list":
                upstream.send(dumps(_narrowed(message, self.config.roots)))
            else:
                upstream.send(line)  # the host's answer to a request of the server's
            return
        method: str = message["method"]
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        if isinstance(meta, dict) and _VERSION in meta:
            if b'"tasks"' in line:
                message, line = _tasks_dropped(message)
                meta = message["params"]["_meta"]
            self.link.meta = meta
            version = meta.get(_VERSION)
            self.protocol_version = version if isinstance(version, str) else None
        if request_id is _NO_ID:
            self._notification(upstream, method, message, line)
            return
        grant = self.caller.grant
        assert grant is not None
        refused = self.gateway.refusal(grant, method)
        if refused is None:
            refused = target_refused(
                self.gateway, self.caller, self.config, method, _target(params)
            )
        if refused is not None:
            span = self._server_span(method, message)
            with trace.use_span(span, end_on_exit=True):
                await self.gateway.refuse(
                    self.caller, method, _target(params), refused, "not allowed"
                )
            error = {"code": refused.code, "message": refused.message}
            self._to_host({"jsonrpc": "2.0", "id": request_id, "error": error})
        elif method == "tools/call":
            self._calls[request_id] = self._spawn(self._call(request_id, message))
        elif method == "tools/list":
            span = self._server_span(method, message)
            paged = isinstance(params, dict) and bool(params.get("cursor"))
            self.link.pending[request_id] = Pending(
                span=span, answer=lambda answer: self._listed_to_host(answer, paged)
            )
            upstream.send(line)
        elif method == "initialize":
            self._initialize(upstream, request_id, message)
        else:
            span = self._server_span(method, message)
            answer = (
                (lambda answer, method=method: self._scrub_answer(answer, method))
                if method in SCRUBBED
                else self._discover_answer
                if method == "server/discover"
                else None
            )
            self.link.pending[request_id] = Pending(span=span, answer=answer)
            upstream.send(line)

    def _notification(
        self, upstream: UpstreamProcess, method: str, message: dict[str, Any], line: bytes
    ) -> None:
        if not method.startswith("notifications/"):
            # A request without an id (tools/call among them) would run unanswered and unseen.
            logger.warning("dropped a %s request without an id from the host", method)
            return
        if method not in NOTIFICATIONS:
            logger.debug("dropped the host's %s notification", method)
            return
        upstream.send(line)
        if method == "notifications/initialized":
            self.link.initialized = True
        elif method == "notifications/cancelled":
            params = message.get("params")
            request_id = params.get("requestId") if isinstance(params, dict) else None
            call = self._calls.get(request_id)
            if call is not None:
                self.tools.cancelled.add(request_id)  # the server was told by the host itself
                call.cancel()

    def _initialize(
        self, upstream: UpstreamProcess, request_id: Any, message: dict[str, Any]
    ) -> None:
        params = message.get("params")
        if isinstance(params, dict):
            capabilities = params.get("capabilities")
            if isinstance(capabilities, dict):
                self._host_roots = "roots" in capabilities
                self._host_form = declares_form(capabilities)
                declared = _without_tasks(capabilities)
                declared.pop("roots", None)
                if self.config.roots:  # the server may ask; the relay answers (narrowed)
                    declared["roots"] = {}
                params = {**params, "capabilities": declared}
                message = {**message, "params": params}
            self._offered = params
        span = self._server_span("initialize", message, session_level=False)
        self._session = trace.set_span_in_context(span)
        self.link.pending[request_id] = Pending(span=span, answer=self._initialized_answer)
        upstream.send(dumps(message))

    def _initialized_answer(self, message: dict[str, Any]) -> None:
        result = message.get("result")
        if isinstance(result, dict):
            # Replayed on a restart only once accepted: an initialize the server refused (a
            # host that fell back to the handshake after a slow server/discover, on a server
            # already in the 2026-07-28 era) would put the next server in the wrong era.
            self.link.handshake = self._offered
            version = result.get("protocolVersion")
            self.protocol_version = version if isinstance(version, str) else None
        self._discovered(message)

    def _discover_answer(self, message: dict[str, Any]) -> None:
        if isinstance(message.get("result"), dict):
            self.link.handshake = None  # the 2026-07-28 era: each request carries its envelope
        self._discovered(message)

    def _discovered(self, message: dict[str, Any]) -> None:
        """The server's capabilities (``initialize``, ``server/discover``) without tasks."""
        result = message.get("result")
        if isinstance(result, dict):
            capabilities = result.get("capabilities")
            if isinstance(capabilities, dict) and "tasks" in capabilities:
                message["result"] = {**result, "capabilities": _without_tasks(capabilities)}
        self._to_host(message)

    async def _scrub_answer(self, message: dict[str, Any], method: str) -> None:
        result = message.get("result")
        if isinstance(result, dict):
            grant = self.caller.grant
            assert grant is not None
            result = _filtered(grant, method, result)
            message["result"] = self.gateway.scrub_data(result, "result")
        self._to_host(message)

    # -- roots -------------------------------------------------------------------------------

    def _server_asks_roots(self, message: dict[str, Any], upstream: UpstreamProcess) -> None:
        """The server's ``roots/list``: to the host when it answers roots (its answer is
        narrowed on the way back), else answered here from the configuration."""
        request_id = message.get("id")
        if self._host_roots and self.config.roots:
            self._asked[request_id] = "roots/list"
            self._to_host(message)
            return
        answer = {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {"roots": _roots(self.config.roots)},
        }
        upstream.send(dumps(answer))

    # -- tools -------------------------------------------------------------------------------

    def _listed_to_host(self, message: dict[str, Any], paged: bool) -> None:
        """The server's answer to the host's ``tools/list``: its tools registered (the pins
        reviewed), and the host shown those it may see, under their registered names."""
        result = message.get("result")
        tools = result.get("tools") if isinstance(result, dict) else None
        if isinstance(result, dict) and isinstance(tools, list):
            whole = not paged and not result.get("nextCursor")
            registered = self.tools.register([t for t in tools if isinstance(t, dict)], whole=whole)
            shown = [
                data if data.get("name") == name else {**data, "name": name}
                for name, data in registered
                if self.tools.shown(name)
            ]
            message["result"] = {**result, "tools": shown}
        self._to_host(message)

    async def _call(self, request_id: Any, message: dict[str, Any]) -> None:
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        name = str(params.get("name"))
        arguments = params.get("arguments")
        meta = params.get("_meta")
        meta = meta if isinstance(meta, dict) else None
        span = self._server_span("tools/call", message)
        host = HOST_REQUEST.set((request_id, meta, self.protocol_version))
        asking = HOST.set(HostAsk(self._host_form, self.own.ask, host_label(self.caller)))
        try:
            with trace.use_span(span, end_on_exit=False):
                await self.tools.known(name)
                link = self._session_link()
                answer = await self.gateway.call_tool(
                    self.caller,
                    self.tools.executor,
                    name,
                    arguments if isinstance(arguments, dict) else None,
                    call_id=str(request_id),
                    run_id=self.run_id,
                    links=[link] if link is not None else None,
                )
            if answer.error is not None:
                error = {"code": answer.error.code, "message": answer.error.message}
                _end(span, {"error": error}, end=False)
                self._to_host({"jsonrpc": "2.0", "id": request_id, "error": error})
                return
            data = answer.result or {}
            if self.protocol_version in MODERN_PROTOCOL_VERSIONS and "resultType" not in data:
                data = {**data, "resultType": "complete"}  # a result of the proxy's own
            if data.get("isError") is True:
                span.set_attribute(A.ERROR_TYPE, A.ERR_TOOL_ERROR)
                span.set_status(StatusCode.ERROR)
            self._to_host({"jsonrpc": "2.0", "id": request_id, "result": data})
        finally:
            HOST.reset(asking)
            HOST_REQUEST.reset(host)
            self._calls.pop(request_id, None)
            self.tools.cancelled.discard(request_id)
            span.end()

    # -- from the server ---------------------------------------------------------------------

    def upstream_message(
        self, upstream: UpstreamProcess, message: dict[str, Any], line: bytes
    ) -> Awaitable[None] | None:
        """A message of the upstream's own (a request or notification, not an answer): roots are
        answered from the configuration, the rest goes to this relay's host; returns what to await,
        if anything."""
        method = message.get("method")
        if method == "roots/list" and "id" in message:
            self._server_asks_roots(message, upstream)
            return None
        if method == "notifications/progress":
            self.tools.progressed(message)
        if method is None:
            pending = self.link.pending.pop(message.get("id"), None)
            if pending is None:
                self._to_host(line)
                return None
            if pending.span is not None:
                _end(pending.span, message)
            if pending.future is not None:
                if not pending.future.done():
                    pending.future.set_result(message)
                return None
            if pending.answer is not None:
                return pending.answer(message)
            self._to_host(line)
        elif method == "notifications/message":
            params = message.get("params")
            grant = self.caller.grant
            if grant is None or not grant.may("logging"):
                return None
            if isinstance(params, dict) and "data" in params and self.policy.redaction:
                clean = self.gateway.scrub_data(params["data"], "log")
                if clean is not params["data"]:
                    message["params"] = {**params, "data": clean}
                    line = dumps(message)
            self._to_host(line)
        elif method == "notifications/tools/list_changed":
            self._spawn(self._tools_changed(line))
        else:
            self._to_host(line)
        return None

    async def _tools_changed(self, line: bytes) -> None:
        """List (and review) the tools again, then tell the host."""
        try:
            await self.tools.relist()
        except Exception:
            logger.warning("listing the tools of %r again failed", self.config.name, exc_info=True)
        self._to_host(line)

    # -- spans -------------------------------------------------------------------------------

    def _server_span(
        self, method: str, message: dict[str, Any], *, session_level: bool = True
    ) -> Span:
        session = self._session if session_level else None
        return _server_span(self.tracer, method, message, self.protocol_version, session)

    def _session_link(self) -> Link | None:
        if self._session is None:
            return None
        context = trace.get_current_span(self._session).get_span_context()
        return Link(context) if context.is_valid else None

    def _answer_error(self, request_id: Any, span: Span | None, code: int, text: str) -> None:
        error = {"code": code, "message": f"otelhooks proxy: {text}"}
        message = {"jsonrpc": "2.0", "id": request_id, "error": error}
        if span is not None:
            _end(span, message, end=False)
        self._to_host(message)


def _valid_id(request_id: Any) -> bool:
    """A JSON-RPC id the relay accepts: a string or a number (not a boolean)."""
    return isinstance(request_id, (str, int, float)) and not isinstance(request_id, bool)


def _target(params: Any) -> str | None:
    """What a request names: a resource's URI or a prompt's name."""
    if not isinstance(params, dict):
        return None
    found = params.get("uri", params.get("name"))
    return found if isinstance(found, str) else None


def _without_tasks(capabilities: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in capabilities.items() if k != "tasks"}


def _tasks_dropped(message: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    """A 2026-07-28 request without ``tasks`` in the client capabilities of its ``_meta``."""
    params = message["params"]
    meta = dict(params["_meta"])
    capabilities = meta.get(_CAPABILITIES)
    if not isinstance(capabilities, dict) or "tasks" not in capabilities:
        return message, dumps(message)
    meta[_CAPABILITIES] = _without_tasks(capabilities)
    message = {**message, "params": {**params, "_meta": meta}}
    return message, dumps(message)


def _extracted(meta: Any) -> otel_context.Context | None:
    """The trace context a host sent in ``params._meta`` (``None`` without a valid one)."""
    if not isinstance(meta, dict) or "traceparent" not in meta:
        return None
    context = propagate.extract(meta)
    return context if trace.get_current_span(context).get_span_context().is_valid else None


def _end(span: Span, answer: dict[str, Any], *, end: bool = True) -> None:
    """End a request's span with what the answer says (a JSON-RPC error as the SDK's server
    records it)."""
    error = answer.get("error")
    if isinstance(error, dict):
        code = str(error.get("code"))
        span.set_attributes({A.ERROR_TYPE: code, A.RPC_RESPONSE_STATUS_CODE: code})
        span.set_status(StatusCode.ERROR, str(error.get("message")))
    if end:
        span.end()


def _filtered(grant: Grant, method: str, result: dict[str, Any]) -> dict[str, Any]:
    """A listing cut to what ``grant`` may see."""
    if grant.everything:
        return result
    if method == "resources/list" and isinstance(result.get("resources"), list):
        items = [r for r in result["resources"] if grant.resource(str(r.get("uri")))]
        return {**result, "resources": items}
    if method == "resources/templates/list" and isinstance(result.get("resourceTemplates"), list):
        templates = [
            t for t in result["resourceTemplates"] if grant.resource(str(t.get("uriTemplate")))
        ]
        return {**result, "resourceTemplates": templates}
    if method == "prompts/list" and isinstance(result.get("prompts"), list):
        prompts = [p for p in result["prompts"] if grant.prompt(str(p.get("name")))]
        return {**result, "prompts": prompts}
    return result


def _narrowed(answer: dict[str, Any], configured: tuple[str, ...]) -> dict[str, Any]:
    """The host's answer to ``roots/list`` with only the roots inside configured ones
    (the configured ones when none is left)."""
    result = answer.get("result")
    given = result.get("roots") if isinstance(result, dict) else None
    uris = [str(r.get("uri")) for r in given if isinstance(r, dict)] if given else []
    kept = narrow_roots(uris, configured)
    roots = [{"uri": uri} for uri in kept] or _roots(configured)
    return {"jsonrpc": "2.0", "id": answer.get("id"), "result": {"roots": roots}}


def _roots(configured: tuple[str, ...]) -> list[dict[str, str]]:
    return [{"uri": Path(root).as_uri()} for root in configured]


def _server_span(
    tracer: trace.Tracer,
    method: str,
    message: dict[str, Any],
    version: str | None,
    session: otel_context.Context | None,
) -> Span:
    """The span the ``mcp`` SDK's server middleware gives a request: a call's own trace
    (or the host's, from ``params._meta``), a session message's in ``session``'s trace."""
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    name = params.get("name")
    target = name if isinstance(name, str) else None
    attributes: dict[str, Any] = {A.MCP_METHOD_NAME: method}
    if version:
        attributes[A.MCP_PROTOCOL_VERSION] = version
    request_id = message.get("id")
    if request_id is not None:
        attributes[A.JSONRPC_REQUEST_ID] = str(request_id)
    if method == "tools/call":
        attributes[A.GEN_AI_OPERATION_NAME] = A.OP_EXECUTE_TOOL
        if target is not None:
            attributes[A.GEN_AI_TOOL_NAME] = target
    elif method == "prompts/get" and target is not None:
        attributes[A.GEN_AI_PROMPT_NAME] = target
    meta = params.get("_meta")
    parent = _extracted(meta)
    if parent is None and method not in CALLS:
        parent = session
    if parent is None:
        parent = otel_context.Context()
    return tracer.start_span(
        f"{method} {target}" if target else method,
        context=parent,
        kind=SpanKind.SERVER,
        attributes=attributes,
    )
