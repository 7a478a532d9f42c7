"""The proxy as an ``mcp`` SDK server: each MCP method a thin handler over the gateway core
(:mod:`~otelhooks.integrations.mcp.gateway`), with an SDK client per upstream
(:mod:`~otelhooks.integrations.mcp.upstreams`). Served over stdio here, and over Streamable
HTTP by :mod:`~otelhooks.integrations.mcp.http`.

Every request first passes :meth:`SDKServer.guard` (a middleware of the SDK server): the
caller is established (its identity from the bearer token, or the local host), a method its
grant does not cover is refused (recorded on the request's span and in the audit log), and the
``initialize`` answer advertises only the capabilities the caller may use. The handlers then
open (or find) the caller's upstream set, list what its grant shows, and call through the core.

Resources, resource templates, prompts and completion go to the upstream that offers them,
their text redacted; log messages, resource updates and list changes go to the hosts of the
set they came from, as the host's protocol era allows. Tasks are not passed on.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import uuid
import warnings
import weakref
from typing import Any, Final

import mcp.types as mcp_types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry import context as otel_context

from ...core import DEFAULT_TOOL_TIMEOUT
from .access import Caller, Grant
from .auth import LOCAL_STDIO, REQUEST_SCOPE, Identity, identity_in
from .client import progress_to
from .gateway import (
    NOTIFICATIONS,
    Gateway,
    ProxyStartError,
    Refused,
    call_tool_result,
    unknown_tool,
    upstream_of,
)
from .host_approval import HostAsk, declares_form, host_asking, host_label
from .server_content import ContentHandlers
from .server_hosts import HostMessages, connection_of, send
from .session_trace import SessionTraces
from .upstreams import (
    START_GRACE,
    Callbacks,
    HostProfile,
    HostRoute,
    SessionLimit,
    UpstreamPool,
    UpstreamSet,
    check_commands,
)

logger = logging.getLogger("otelhooks.mcp.proxy")

SESSIONS_REFUSED: Final = -32603
"""The JSON-RPC code of a session refused because the limits are reached (the SDK's own)."""
_CAPABILITY_KEYS: Final = {
    "tools": "tools",
    "resources": "resources",
    "prompts": "prompts",
    "completion": "completions",
    "logging": "logging",
}

_CALLER: contextvars.ContextVar[Caller | None] = contextvars.ContextVar(
    "otelhooks_sdk_caller", default=None
)


def identity_of(ctx: ServerRequestContext[Any]) -> tuple[Identity, str | None, str]:
    """The caller of a request, the host's MCP session id and the transport of its
    connection: the bearer token's identity over HTTP, the local host over stdio."""
    request = ctx.request
    scope = getattr(request, "scope", None)
    if not isinstance(scope, dict):
        return LOCAL_STDIO, None, "pipe"
    session_id = getattr(connection_of(ctx.session), "session_id", None) or (
        request.headers.get("mcp-session-id") if request is not None else None
    )
    return identity_in(scope), session_id, "tcp"


class SDKServer:
    """The proxy's MCP methods as an ``mcp`` SDK ``Server`` over the gateway core."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.policy = gateway.policy
        self.session_traces = SessionTraces()
        self.pool = UpstreamPool(
            self._open_set,
            max_sessions=self.policy.max_sessions,
            max_per_identity=self.policy.max_sessions_per_identity,
            idle_timeout=self.policy.idle_timeout,
        )
        self.base: UpstreamSet | None = None
        self.one_host = False  # stdio: the only host may have the connections made at start
        self.result_limit: int | None = None
        self._capabilities: list[mcp_types.ServerCapabilities] = []
        self.hosts = HostMessages(gateway)
        self.content = ContentHandlers(gateway, self, self.hosts)
        self._run_ids: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self._list_changes = NotificationOptions(tools_changed=True)

    # -- life --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start every upstream once, for the policy check, the pins and what the upstreams
        offer. An upstream that fails is logged and tried again later; none starting is a
        :class:`ProxyStartError`, and so is a policy tool pattern that matches no tool."""
        try:
            check_commands(self.gateway.configs)
        except ValueError as exc:
            raise ProxyStartError(str(exc)) from None
        base = self._new_set(HostProfile(), None, HostRoute(None, False))
        try:
            await base.start()
        except RuntimeError as exc:
            await base.close()
            raise ProxyStartError(str(exc)) from None
        self.base = base
        self._capabilities = [
            c for c in (base.capabilities(s) for s in base.servers.values()) if c is not None
        ]
        self.gateway.review(base)
        self.gateway.check_policy(base)

    def release_base(self) -> None:
        """Stop the upstream sessions made at start (a shared listener owns none: each host
        gets its own)."""
        base, self.base = self.base, None
        if base is not None:
            self.pool.close_soon(base)

    async def close(self) -> None:
        """Stop every upstream session."""
        await self.pool.close()
        if self.base is not None:
            await self.base.close()

    # -- upstream sets -----------------------------------------------------------------------

    def _new_set(self, profile: HostProfile, identity: str | None, route: HostRoute) -> UpstreamSet:
        return UpstreamSet(
            self.gateway.configs,
            profile,
            hooks=self.gateway.hooks,
            recorder=self.gateway.recorder,
            approver=self.gateway.approvals,
            callbacks=Callbacks(
                ask=self.hosts.ask,
                logging=self.hosts.forward_log,
                message=self.hosts.forward_notification,
                tools_changed=self.hosts.tools_changed,
            ),
            tool_timeout=self.policy.timeout or DEFAULT_TOOL_TIMEOUT,
            environment=self.gateway.environment,
            route=route,
            identity=identity,
            max_result_bytes=self.result_limit,
            trace_context=otel_context.get_current(),
        )

    async def _open_set(
        self, profile: HostProfile, identity: str | None, route: HostRoute
    ) -> UpstreamSet:
        base = self.base
        if self.one_host and base is not None and base.profile == profile:
            self.base = None  # the connections made at start serve the only host
            base.route = route
            base.identity = identity
            return base
        if self.one_host and base is not None:
            self.base = None  # the only host has other capabilities: let them go
            await base.close()
        chosen = self._new_set(profile, identity, route)
        logger.info("opening upstream sessions for a host declaring %s", profile.describe())
        try:
            await chosen.start(grace=START_GRACE)
        except RuntimeError as exc:
            await chosen.close()
            raise MCPError(mcp_types.INTERNAL_ERROR, f"otelhooks proxy: {exc}") from None
        self.gateway.review(chosen)
        return chosen

    def _key(self, ctx: ServerRequestContext[Any], caller: Caller, profile: HostProfile) -> Any:
        """Whose upstream set a request uses: its host session's (the handshake era; a
        2026-07-28 caller's with these capabilities, which has no session); with
        ``isolation = "shared"``, its identity's with these capabilities."""
        digest = caller.identity.digest() if caller.identity is not None else None
        if self.policy.isolation == "shared":
            return ("shared", digest, profile)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return ("caller", digest, caller.transport, profile)
        return ("host", id(connection_of(ctx.session)))

    async def set_for(self, ctx: ServerRequestContext[Any], caller: Caller) -> UpstreamSet:
        """The caller's upstream set (see :meth:`_key`), opened on first need with the
        capabilities its host declared; :class:`Refused` when the limits do not let one open."""
        connection = connection_of(ctx.session)
        profile = HostProfile.of(getattr(ctx.session, "client_capabilities", None))
        key = self._key(ctx, caller, profile)
        found = self.pool.sets.get(key)
        if found is not None and not found.closed:
            return found
        shared = key[0] != "host"
        capabilities = getattr(connection, "client_capabilities", None)
        route = HostRoute(
            None if shared else ctx.session,
            not shared and capabilities is not None and capabilities.roots is not None,
        )
        digest = caller.identity.digest() if caller.identity is not None else None
        try:
            chosen = await self.pool.get(key, profile, digest, route)
        except SessionLimit as exc:
            refused = Refused(SESSIONS_REFUSED, f"otelhooks proxy: no upstream session: {exc}")
            await self.gateway.refuse(caller, ctx.method, None, refused, str(exc))
            raise refused from None
        if key[0] == "host":
            self._hold(connection, key, chosen)
        elif ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self._hold(connection, key, chosen, shared=True)
        return chosen

    def _hold(self, connection: Any, key: Any, uset: UpstreamSet, *, shared: bool = False) -> None:
        """``connection`` uses ``uset`` until it ends; a host session's own set closes then
        (a shared one when its last host ends)."""
        if connection in uset.hosts:
            return
        uset.hosts.add(connection)

        def gone() -> None:
            uset.hosts.discard(connection)
            if not shared or not uset.hosts:
                self.pool.release(key)

        stack = getattr(connection, "exit_stack", None)
        if stack is not None:
            stack.callback(gone)

    # -- the caller --------------------------------------------------------------------------

    def caller(self, ctx: ServerRequestContext[Any]) -> Caller:
        """The caller of the request in progress (made by :meth:`guard`)."""
        found = _CALLER.get()
        if found is not None:
            return found
        identity, session_id, transport = identity_of(ctx)
        return Caller(identity, session_id, transport, grant=self.gateway.grant(identity))

    async def guard(self, ctx: ServerRequestContext[Any], call_next: CallNext) -> HandlerResult:
        """The middleware every request passes: the caller established, a method its grant
        does not cover refused (a JSON-RPC error, on the span, in the audit log), the
        capabilities advertised at ``initialize`` cut to what the caller may use."""
        method = ctx.method
        if ctx.request_id is None and method.startswith("notifications/"):
            if method not in NOTIFICATIONS:
                return None  # a notification the proxy does not take: dropped
            return await call_next(ctx)
        caller = self.caller(ctx)
        assert caller.grant is not None
        refused = self.gateway.refusal(caller.grant, method)
        if refused is not None:
            await self.gateway.refuse(caller, method, None, refused, "method not allowed")
            raise MCPError(refused.code, refused.message)
        connection = connection_of(ctx.session)
        with contextlib.suppress(TypeError):
            self.hosts.grants[connection] = caller.grant
        token = _CALLER.set(caller)
        try:
            result = await call_next(ctx)
        except Refused as exc:
            raise MCPError(exc.code, exc.message) from None
        finally:
            _CALLER.reset(token)
        if method == "initialize" and isinstance(result, dict):
            result = self._advertised(result, caller.grant)
        return result

    def _advertised(self, result: dict[str, Any], grant: Grant) -> dict[str, Any]:
        capabilities = result.get("capabilities")
        if isinstance(capabilities, dict):
            result["capabilities"] = {
                k: v
                for k, v in capabilities.items()
                if not any(k == key and not grant.may(c) for c, key in _CAPABILITY_KEYS.items())
            }
        return result

    async def _discover(
        self, ctx: ServerRequestContext[Any], params: mcp_types.RequestParams | None
    ) -> mcp_types.DiscoverResult:
        """``server/discover`` (2026-07-28), with what the caller may use."""
        assert self._server is not None
        grant = self.caller(ctx).grant
        assert grant is not None
        capabilities = self._server.get_capabilities(protocol_version=ctx.protocol_version)
        data = self._advertised(
            {"capabilities": capabilities.model_dump(by_alias=True, exclude_none=True)}, grant
        )
        return mcp_types.DiscoverResult(
            supported_versions=list(MODERN_PROTOCOL_VERSIONS),
            capabilities=mcp_types.ServerCapabilities.model_validate(data["capabilities"]),
        )

    # -- the SDK server ----------------------------------------------------------------------

    _server: Server[Any] | None = None

    def offered(self, what: str) -> bool:
        """Whether an upstream offered ``what`` at start (``resources``, ``prompts``...)."""
        return any(getattr(c, what) is not None for c in self._capabilities)

    def server(self) -> Server[Any]:
        """An ``mcp`` low-level ``Server`` over the gateway: tools always; resources, prompts,
        completion, logging and subscriptions when an upstream offers them."""
        handlers: dict[str, Any] = {
            "on_list_tools": self._list_tools,
            "on_call_tool": self._call_tool,
            "on_subscriptions_listen": self.content.listen,
        }
        content = self.content
        if self.offered("resources"):
            handlers["on_list_resources"] = content.list_resources
            handlers["on_list_resource_templates"] = content.list_resource_templates
            handlers["on_read_resource"] = content.read_resource
            if any(c.resources is not None and c.resources.subscribe for c in self._capabilities):
                handlers["on_subscribe_resource"] = content.subscribe
                handlers["on_unsubscribe_resource"] = content.unsubscribe
        if self.offered("prompts"):
            handlers["on_list_prompts"] = content.list_prompts
            handlers["on_get_prompt"] = content.get_prompt
        if self.offered("completions"):
            handlers["on_completion"] = content.complete
        with warnings.catch_warnings():  # logging is deprecated in 2026-07-28, not gone
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            if self.offered("logging"):
                handlers["on_set_logging_level"] = content.set_logging_level
            server: Server[Any] = Server(
                self.policy.name,
                version=_version(),
                get_tool_input_schema=self.input_schema,
                **handlers,
            )
        server.add_request_handler("server/discover", mcp_types.RequestParams, self._discover)
        server.middleware.insert(0, self.session_traces.outer)
        server.middleware.append(self.session_traces.inner)
        server.middleware.append(self.guard)
        self._list_changes = NotificationOptions(
            tools_changed=True,
            prompts_changed=self.offered("prompts"),
            resources_changed=self.offered("resources"),
        )
        self._server = server
        return server

    def initialization_options(self, server: Server[Any]) -> Any:
        """The options ``server.run`` takes: list changes announced."""
        return server.create_initialization_options(self._list_changes)

    async def serve_stdio(self) -> None:
        """Serve the one host on this process's stdin and stdout until it closes them (a line
        that is not JSON is answered ``-32700``, as the protocol asks)."""
        from .stdio import stdio_server

        self.one_host = True
        server = self.server()
        async with stdio_server() as (read, write):
            await server.run(read, write, self.initialization_options(server))

    # -- tools -------------------------------------------------------------------------------

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """The input schema the SDK checks a 2026-07-28 call's ``Mcp-Param-*`` headers
        against, before the middleware runs: that of the tool served as ``name`` as the
        calling identity's own upstream sets list it (:meth:`Gateway.tool_schema`), so that
        a call is checked without listing the tools again. ``None`` (the SDK then checks
        nothing, as for a tool its listing does not show) for a tool the caller may not see,
        and before the caller has an upstream set."""
        scope = REQUEST_SCOPE.get()
        if scope is None:
            return None
        identity = identity_in(scope)
        grant = self.gateway.grant(identity)
        digest = identity.digest()
        for uset in list(self.pool.sets.values()):
            if uset.identity == digest and not uset.closed:
                schema = self.gateway.tool_schema(grant, uset, name)
                if schema is not None:
                    return schema
        return None

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        caller = self.caller(ctx)
        assert caller.grant is not None
        if not caller.grant.may("tools"):
            return mcp_types.ListToolsResult(tools=[])
        uset = await self.set_for(ctx, caller)
        uset.retry_down()  # in the background: a listing never waits for an upstream that is down
        async with uset.using():
            return mcp_types.ListToolsResult(tools=self.gateway.visible_tools(caller.grant, uset))

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        caller = self.caller(ctx)
        assert caller.grant is not None
        connection = connection_of(ctx.session)
        call_id = str(ctx.request_id) if ctx.request_id is not None else uuid.uuid4().hex
        link = self.session_traces.link_to(connection)
        links = [link] if link is not None else None
        run_id = self._run_id(connection)
        if not caller.grant.may("tools"):  # no upstream for a caller that may call nothing
            refused = unknown_tool(params.name)
            await self.gateway.refuse(
                caller, "tools/call", params.name, refused, "may call no tool", hook="identity"
            )
            raise MCPError(refused.code, refused.message)
        uset = await self.set_for(ctx, caller)
        caller.upstream = upstream_of(uset, params.name)
        caller.upstream_set = uset.key

        async def forward_progress(done: float, total: float | None, text: str | None) -> None:
            try:
                await ctx.session.report_progress(done, total, text)
            except Exception:  # the host went away: the call goes on
                logger.debug("progress not delivered to the host", exc_info=True)

        session, request_id = ctx.session, ctx.request_id

        async def ask_host(request: Any, result_type: Any) -> Any:
            return await send(session, request, result_type, request_id)

        asking = HostAsk(  # a session of the 2026-07-28 era has no back-channel: the store
            declares_form(getattr(session, "client_capabilities", None))
            and getattr(session, "can_send_request", True) is not False,
            ask_host,
            host_label(caller),
        )
        with (
            uset.route.serving(ctx.session, ctx.request_id),
            progress_to(forward_progress),
            host_asking(asking),
        ):
            async with uset.using():
                answer = await self.gateway.call_tool(
                    caller,
                    uset.executor,
                    params.name,
                    params.arguments,
                    call_id=call_id,
                    run_id=run_id,
                    links=links,
                )
        if answer.error is not None:
            raise MCPError(answer.error.code, answer.error.message)
        assert answer.result is not None
        return call_tool_result(answer.result)

    def _run_id(self, connection: Any) -> str:
        """One run per host connection: call limits count per connection."""
        try:
            run_id = self._run_ids.get(connection)
            if run_id is None:
                run_id = self._run_ids[connection] = uuid.uuid4().hex
        except TypeError:
            return uuid.uuid4().hex
        return run_id

    async def ask_owner(self, uset: UpstreamSet, request: Any, result_type: Any) -> Any:
        """Send ``request`` to the host session that owns ``uset`` (the proxy's own
        elicitation, say); ``ErrorData`` when it has none or refuses."""
        return await self.hosts.ask_owner(uset, request, result_type)


def _version() -> str:
    from ...version import __version__

    return __version__
