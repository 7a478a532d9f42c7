"""``otelhooks mcp proxy``: an MCP server that puts the hook boundary in front of others, and with
``[auth]`` a gateway that a team shares.

The proxy connects to one or more upstream servers and serves their tools to hosts (Claude
Code, Claude Desktop, VS Code, any MCP client) over stdio or Streamable HTTP. Every
``tools/call`` runs through before -> run -> after with the policy's hooks (see
:mod:`otelhooks.integrations.mcp.policy`) and redaction on by default: a blocked call answers
``isError: true`` with the reason and never reaches the upstream.

Per host, the upstream sessions declare exactly the capabilities the host declared (see
:mod:`~otelhooks.integrations.mcp.upstreams`), so a host is offered what it can take. Resources,
resource templates, prompts and completion are passed through to the upstream that offers them,
with secrets redacted from the text; so are, in the protocol era the host speaks, log messages
and log levels, resource subscriptions and updates, list changes, and an upstream's sampling,
elicitation and roots requests (to the host whose call they belong to). Tasks are not passed on:
the proxy does not declare them, and a host sees none.

As a gateway (``--listen`` with ``[auth]``): no request without a valid bearer token (401 with
``WWW-Authenticate`` and the protected resource metadata of RFC 9728; 403 without the required
scopes); ``Origin`` and ``Host`` checked on every request; each caller's identity rules applied,
its identity (or a pseudonym) on every ``execute_tool`` span and structlog event, and every call
in the audit log. Tool definitions are pinned (:mod:`~otelhooks.integrations.mcp.pinning`).

Tracing: a host session's session-level messages share one trace
(:mod:`~otelhooks.integrations.mcp.session_trace`); each call is a trace of its own (or part of
the host's, whose ``params._meta.traceparent`` is then the parent), with otelhooks'
``execute_tool`` span inside the SDK's server span, and the proxy's context injected into the
upstream request, so host -> proxy -> server is one trace. With stdio, nothing but protocol is
written to stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import fnmatch
import ipaddress
import logging
import os
import time
import uuid
import warnings
import weakref
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import mcp.types as mcp_types
import structlog
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import TracerProvider
from pydantic import BaseModel, ValidationError

from ...builtin import RedactionHook, StructlogEvents
from ...builtin.audit import AuditKeys, AuditLog, AuditLogError, load_secret
from ...builtin.policy import check_guards
from ...builtin.store import default_store_file
from ...core import (
    DEFAULT_TOOL_TIMEOUT,
    AgentContext,
    Hooks,
    ToolCall,
    ToolCallRecord,
    ToolCallRecorder,
    ToolResult,
    UnmatchedToolPattern,
    UnmatchedToolPatternError,
)
from ...telemetry import attributes as A
from ...telemetry.content import capture_from_env
from ...telemetry.instruments import Instruments
from .access import CALLER, Caller, IdentityRules
from .auth import (
    LOCAL_STDIO,
    LOOPBACK,
    VIA_CLAIM,
    GatewayVerifier,
    Identity,
    LoginRefusals,
    RefusalAudit,
)
from .client import MCPServerTools, progress_to, rebuilt_result, wire_result
from .pinning import Pinning, open_pins, pin_scope, upstream_key
from .policy import ProxyPolicy, UpstreamConfig
from .session_trace import SessionTraces
from .upstreams import Callbacks, HostProfile, UpstreamSet

logger = logging.getLogger("otelhooks.mcp.proxy")

ModelT = TypeVar("ModelT", bound=BaseModel)

IDLE_TIMEOUT = 1800.0
"""Seconds after which upstream sessions opened for a caller (2026-07-28 era) nobody used
are closed."""

# What the proxy writes on an execute_tool span about its host and caller.
USER_ID = "user.id"
USER_HASH = "user.hash"
USER_ROLES = "user.roles"
UPSTREAM = "otelhooks.mcp.upstream"
IDENTITY_VIA = "otelhooks.identity.via"
IDENTITY_RULE = "otelhooks.identity.rule"


class ProxyStartError(RuntimeError):
    """The proxy cannot serve: no upstream started, the policy does not fit the tools, or a
    listener would be open without authentication."""


@dataclass(slots=True)
class _HostCall:
    """A host's ``tools/call`` in flight: where an upstream's requests for it are sent."""

    session: Any
    request_id: Any


_HOST: contextvars.ContextVar[_HostCall | None] = contextvars.ContextVar(
    "otelhooks_proxy_host_call", default=None
)


def connection_of(session: Any) -> Any:
    """The host connection a request's session belongs to (the ``mcp`` SDK makes a session
    object per request; its connection lives as long as the host stays connected)."""
    return getattr(session, "_connection", session)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class MCPProxy:
    """The tools of ``upstreams`` (and the policy's own), served through the hook boundary.

    ``policy`` gives the hooks, limits, redaction, authentication and audit (default: every
    tool allowed, redaction on, definitions pinned); ``hooks`` are more hook objects, run after
    the policy's. ``tracer_provider`` defaults to the global one. Use :meth:`start` /
    :meth:`close` around :meth:`serve_stdio`, :meth:`serve_http` or :meth:`server` (an ``mcp``
    low-level ``Server`` to run yourself).
    """

    def __init__(
        self,
        policy: ProxyPolicy | None = None,
        upstreams: Sequence[UpstreamConfig] = (),
        *,
        hooks: Iterable[Any] = (),
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.policy = policy or ProxyPolicy()
        self.configs = [*self.policy.upstreams, *upstreams]
        if not self.configs:
            raise ValueError("the proxy needs at least one upstream server")
        names = [c.name for c in self.configs]
        if len(set(names)) != len(names):
            raise ValueError(f"upstream names must differ: {names}")
        prefix = self.policy.prefix
        self.prefixed = prefix if prefix is not None else len(self.configs) > 1
        self.pinning = self._pinning()
        self.identity_rules = (
            IdentityRules(self.policy.identities, unmatched=self.policy.auth.unmatched)
            if self.policy.identities and self.policy.auth is not None
            else None
        )
        self.verifier = GatewayVerifier.of(self.policy.auth) if self.policy.auth else None
        self.audit = self._audit()
        self.refusals = LoginRefusals(self.audit.append if self.audit is not None else None)
        self._pseudonym_key = self._pseudonyms()
        self._guards: list[Any] = []
        self.guard_notes: dict[str, list[str]] = {}
        self.hooks = self._hooks(hooks)
        self.recorder = ToolCallRecorder(
            tracer_provider,
            capture=capture_from_env(),
            max_content_length=4096,
            instruments=Instruments(None),
        )
        self.tracer = trace.get_tracer("otelhooks.mcp.proxy", tracer_provider=tracer_provider)
        self.session_traces = SessionTraces()
        self.base: UpstreamSet | None = None  # started by start(): checks, pins, first host
        self._base_taken = False
        self._keyed: dict[Any, UpstreamSet] = {}  # caller- or profile-keyed upstream sessions
        self._host_sets: weakref.WeakKeyDictionary[Any, UpstreamSet] = weakref.WeakKeyDictionary()
        self._opening: dict[Any, asyncio.Future[UpstreamSet]] = {}
        self._in_flight: list[_HostCall] = []
        self._run_ids: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self._subscribed: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
        self._authenticated = False
        self._one_host = False  # stdio: the only host
        self._result_limit: int | None = None
        self._closing: set[asyncio.Task[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    def _pinning(self) -> Pinning | None:
        config = self.policy.pinning
        if not config.enabled:
            return None
        store = open_pins(self.policy.store.file)
        if config.import_file:
            count = store.import_file(config.import_file)
            if count:
                logger.info("imported %d pins of %s into the store", count, config.import_file)
        return Pinning(store, approved=config.approve, new_tools=config.new_tools)

    def _audit(self) -> AuditLog | None:
        """The audit log; its secret from ``key_env`` (then taken out of this process's
        environment, so that no upstream inherits it), else its key file."""
        config = self.policy.audit
        if config is None:
            return None
        secret = None
        if config.key_env:
            secret = os.environ.pop(config.key_env, "").encode() or None
            if secret is None:
                raise ProxyStartError(
                    f"{self.policy.source}: [audit] key_env names {config.key_env}, which is "
                    "not set"
                )
        try:
            return AuditLog(
                config.file,
                fields=self._audit_fields,
                secret=secret,
                key_file=config.key_file,
                fsync=config.fsync,
                record_gap=config.record_gap,
            )
        except AuditLogError as exc:
            raise ProxyStartError(str(exc)) from None

    def _pseudonyms(self) -> bytes:
        """The key of the pseudonyms telemetry shows (``user.hash``): the audit log's, else one
        kept beside the store."""
        if self.audit is not None:
            return self.audit.keys.pseudonym
        if self.policy.auth is None or self.policy.auth.identity_in_telemetry != "hash":
            return b"unused"
        store = self.policy.store.file or default_store_file()
        try:
            return AuditKeys.of(load_secret(f"{store}.key")).pseudonym
        except AuditLogError as exc:
            raise ProxyStartError(str(exc)) from None

    def _hooks(self, extra: Iterable[Any]) -> Hooks:
        """Pinning first (a changed tool never runs), then the identity rules, redaction, the
        policy's hooks and the caller's own; observers: the caller's attributes on the span, the
        structlog event, the audit line."""
        hooks = Hooks()
        policy = self.policy
        if self.pinning is not None:
            hooks.add(self.pinning)
        if self.identity_rules is not None:
            hooks.add(self.identity_rules)
        if policy.redaction:
            hooks.add(RedactionHook(policy.redactor))
        for spec in policy.hook_specs():
            hooks.add(
                spec.hook,
                tools=spec.tools,
                timeout=spec.timeout,
                before_failure=spec.before_failure or policy.before_failure,  # type: ignore[arg-type]
                after_failure=spec.after_failure or policy.after_failure,  # type: ignore[arg-type]
            )
        for hook in extra:
            hooks.add(hook)
        self._guards = [
            *(spec.hook for spec in policy.hook_specs()),
            *(guard for rule in policy.identities for guard in rule.guards),
            *extra,
        ]
        hooks.add(observe=self._caller_attributes, name="caller")
        hooks.add(StructlogEvents())
        if self.audit is not None:
            hooks.add(self.audit)
        return hooks

    # -- life --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start every upstream once (for the first host, the policy check and the pins). An
        upstream that fails is logged and tried again when a host next lists tools; none
        starting is a :class:`ProxyStartError`, and so is a policy tool pattern that matches no
        tool (a warning when the policy is not strict)."""
        self._loop = asyncio.get_running_loop()
        with self.tracer.start_as_current_span("mcp proxy start", attributes=_START_ATTRS):
            self.base = self._new_set(HostProfile())
            try:
                await self.base.start()
            except RuntimeError as exc:
                raise ProxyStartError(str(exc)) from None
        self._review(self.base)
        self.check_policy()

    def check_policy(self) -> list[str]:
        """Warn (as log lines naming the tools there are) about policy tool patterns that
        match no tool; raise :class:`ProxyStartError` for them when the policy is strict."""
        registry = self.base.registry if self.base is not None else None
        names = [t.name for t in registry] if registry is not None else []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UnmatchedToolPattern)
            try:
                unmatched = self.hooks.check_tools(names, strict=self.policy.strict)
            except UnmatchedToolPatternError as exc:
                raise ProxyStartError(
                    f"{self.policy.source}: {exc} (a typo would leave the tool it meant "
                    "unguarded; strict = false in [proxy] lets the proxy start anyway)"
                ) from None
        for warning in caught:
            logger.warning("%s: %s", self.policy.source, warning.message)
        self._check_guards()
        return unmatched

    def _check_guards(self) -> None:
        """Refuse a guard whose argument no tool it applies to takes; note the tools whose
        path-like arguments a guard leaves unchecked (their calls are blocked); check the
        paths of URL upstreams' tools lexically (they mean nothing on this filesystem)."""
        base = self.base
        if base is None:
            return
        tools = list(base.registry)
        remote = [
            entry.name
            for config in self.configs
            if config.url is not None
            for entry in base.servers[config.name].listings
        ]
        for guard in self._guards:
            lexical_for = getattr(guard, "lexical_for", None)
            if remote and lexical_for is not None:
                lexical_for(remote)
        errors, self.guard_notes = check_guards(self._guards, tools)
        if errors:
            raise ProxyStartError(f"{self.policy.source}: {'; '.join(errors)}")
        for tool, notes in self.guard_notes.items():
            for note in notes:
                logger.warning("%s: %s: %s", self.policy.source, tool, note)

    async def close(self) -> None:
        """Stop every upstream session, and close the audit log."""
        sets = {id(s): s for s in (self.base, *self._keyed.values(), *self._host_sets.values())}
        await asyncio.gather(
            *(s.close() for s in sets.values() if s is not None), return_exceptions=True
        )
        await asyncio.gather(*self._closing, return_exceptions=True)
        self.refusals.close()
        if self.audit is not None:
            self.audit.close()

    async def __aenter__(self) -> MCPProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- upstream sessions per host ----------------------------------------------------------

    def _new_set(self, profile: HostProfile) -> UpstreamSet:
        holder: list[UpstreamSet] = []

        def tools_changed(server: MCPServerTools) -> Awaitable[None]:
            return self._tools_changed(holder[0], server)

        callbacks = Callbacks(
            sampling=self._forward_sampling,
            elicitation=self._forward_elicitation,
            roots=self._forward_roots,
            logging=lambda params: self._forward_log(holder[0], params),
            message=lambda note: self._forward_notification(holder[0], note),
            tools_changed=tools_changed,
        )
        created = UpstreamSet(
            self.policy,
            self.configs,
            profile,
            prefixed=self.prefixed,
            hooks=self.hooks,
            recorder=self.recorder,
            callbacks=callbacks,
            tool_timeout=self.policy.timeout or DEFAULT_TOOL_TIMEOUT,
            max_result_bytes=self._result_limit,
            trace_context=otel_context.get_current(),
        )
        holder.append(created)
        return created

    def _key(self, ctx: ServerRequestContext[Any], profile: HostProfile) -> Any:
        """Whose upstream sessions a request uses: its connection's, in the handshake era; in
        the 2026-07-28 era (no sessions: each request says who it is and what it can take),
        its caller's with those capabilities; with ``isolation = "shared"``, everyone's with
        those capabilities."""
        if self.policy.isolation == "shared":
            return ("shared", profile)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            identity, _, transport = self._identity(ctx)
            return ("caller", transport, identity.digest(), profile)
        return connection_of(ctx.session)

    async def _set_for(self, ctx: ServerRequestContext[Any]) -> UpstreamSet:
        """The upstream sessions a request uses (see :meth:`_key`), opened on first need with
        the capabilities it declared."""
        connection = connection_of(ctx.session)
        found = self._host_sets.get(connection)
        if found is not None:
            return found
        profile = HostProfile.of(getattr(ctx.session, "client_capabilities", None))
        key = self._key(ctx, profile)
        chosen = self._keyed.get(key) if key is not connection else None
        if chosen is None:
            opening = self._opening.get(key)
            if opening is None:
                opening = asyncio.ensure_future(self._open_set(profile))
                self._opening[key] = opening
            try:
                chosen = await asyncio.shield(opening)
            finally:
                if opening.done():
                    self._opening.pop(key, None)
            if key is connection:
                if connection not in self._host_sets:
                    self._host_sets[connection] = chosen
                    chosen.sessions += 1
                    weakref.finalize(connection, self._session_gone, chosen)
            else:
                self._keyed[key] = chosen
        chosen.last_used = time.monotonic()
        return chosen

    async def _open_set(self, profile: HostProfile) -> UpstreamSet:
        base = self.base
        if base is not None and base.profile == profile and not self._base_taken:
            self._base_taken = True  # the connections made at start serve the first such host
            return base
        if base is not None and self._one_host and not self._base_taken:
            self._base_taken = True  # the only host has other capabilities: let them go
            self._close_soon(base)
        chosen = self._new_set(profile)
        logger.info("opening upstream sessions for a host declaring %s", profile.describe())
        try:
            await chosen.start()
        except RuntimeError as exc:
            await chosen.close()
            raise MCPError(mcp_types.INTERNAL_ERROR, f"otelhooks proxy: {exc}") from None
        self._review(chosen)
        self._sweep_idle()
        return chosen

    def _session_gone(self, uset: UpstreamSet) -> None:
        """A handshake-era host connection ended: its upstream sessions close."""
        uset.sessions -= 1
        if uset.sessions <= 0:
            self._close_soon(uset)

    def _sweep_idle(self) -> None:
        """Close the caller-keyed upstream sessions nobody used for ``IDLE_TIMEOUT``."""
        now = time.monotonic()
        for key, uset in list(self._keyed.items()):
            if uset is not self.base and now - uset.last_used > IDLE_TIMEOUT:
                del self._keyed[key]
                self._close_soon(uset)

    def _close_soon(self, uset: UpstreamSet) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return

        def close() -> None:
            task = asyncio.ensure_future(uset.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

        loop.call_soon_threadsafe(close)

    def _review(self, uset: UpstreamSet) -> None:
        """Check the listings of a set's upstreams against the pins."""
        if self.pinning is None:
            return
        for config in self.configs:
            server = uset.servers[config.name]
            key = upstream_key(config.name, config.url or " ".join(config.command))
            self.pinning.review(key, [(e.name, e.listing) for e in server.listings], owner=uset)

    # -- serving -----------------------------------------------------------------------------

    def server(self) -> Server[Any]:
        """A low-level ``mcp`` server over the proxy: tools always; resources, prompts,
        completion, logging and subscriptions when an upstream offers them."""
        handlers: dict[str, Any] = {
            "on_list_tools": self._list_tools,
            "on_call_tool": self._call_tool,
            "on_subscriptions_listen": self._listen,
        }
        base = self.base
        capabilities = [] if base is None else [base.capabilities(s) for s in base.servers.values()]

        def offered(what: str) -> bool:
            return any(c is not None and getattr(c, what) is not None for c in capabilities)

        if offered("resources"):
            handlers["on_list_resources"] = self._list_resources
            handlers["on_list_resource_templates"] = self._list_resource_templates
            handlers["on_read_resource"] = self._read_resource
            if any(c is not None and c.resources is not None and c.resources.subscribe
                   for c in capabilities):  # fmt: skip
                handlers["on_subscribe_resource"] = self._subscribe
                handlers["on_unsubscribe_resource"] = self._unsubscribe
        if offered("prompts"):
            handlers["on_list_prompts"] = self._list_prompts
            handlers["on_get_prompt"] = self._get_prompt
        if offered("completions"):
            handlers["on_completion"] = self._complete
        with warnings.catch_warnings():  # logging is deprecated in 2026-07-28, not gone
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            if offered("logging"):
                handlers["on_set_logging_level"] = self._set_logging_level
            server: Server[Any] = Server(self.policy.name, version=_version(), **handlers)
        server.middleware.insert(0, self.session_traces.outer)
        server.middleware.append(self.session_traces.inner)
        self._list_changes = NotificationOptions(
            tools_changed=True,
            prompts_changed=offered("prompts"),
            resources_changed=offered("resources"),
        )
        return server

    def initialization_options(self, server: Server[Any]) -> Any:
        """The options ``server.run`` takes: list changes announced."""
        return server.create_initialization_options(self._list_changes)

    async def serve_stdio(self) -> None:
        """Serve one host over this process's stdin/stdout until it closes them."""
        from .stdio import stdio_server

        self._one_host = True
        config = self._relayed()
        if config is not None:
            from .relay import StdioRelay
            from .stdio import stdio_pipes

            async with stdio_pipes() as pipes:
                if pipes is not None:
                    if self.base is not None:
                        self._base_taken = True
                        await self.base.close()  # checked and pinned; the relay starts its own
                    await StdioRelay(self, config, *pipes).run()
                    return
        server = self.server()
        async with stdio_server() as (read, write):
            await server.run(read, write, self.initialization_options(server))

    def _relayed(self) -> UpstreamConfig | None:
        """The upstream a stdio host is relayed to (see :mod:`~otelhooks.integrations.mcp.relay`):
        the only one, when it is a command line."""
        if len(self.configs) != 1 or self.base is None:
            return None
        config = self.configs[0]
        return config if config.command and not config.url else None

    async def serve_http(
        self, host: str = "127.0.0.1", port: int = 8765, path: str = "/mcp"
    ) -> None:
        """Serve hosts over Streamable HTTP at ``http://{host}:{port}{path}``.

        Without ``[auth]`` only a loopback address is served (anything else is a
        :class:`ProxyStartError` saying how to configure authentication). ``Host`` and
        ``Origin`` are checked on every request (``[http] allowed_hosts`` and
        ``allowed_origins``; by default the listen address and no browser origin).
        """
        import uvicorn

        app = self.http_app(host, port, path)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        await uvicorn.Server(config).serve()

    def check_listen(self, host: str, port: int) -> None:
        """Refuse (:class:`ProxyStartError`) to listen on an address other machines reach
        without authentication, or on every address without knowing the names hosts use."""
        auth = self.policy.auth
        if auth is None and not is_loopback(host):
            raise ProxyStartError(
                f"--listen {host}:{port} is reachable from other machines, and the policy has "
                'no [auth]: add [auth] with tokens = "tokens.toml" (otelhooks mcp token add) '
                "or issuer, jwks_url and audience (JWTs) to the --policy file"
            )
        everywhere = host in ("0.0.0.0", "::", "[::]")
        if everywhere and not self.policy.http.allowed_hosts and not (auth and auth.resource):
            raise ProxyStartError(
                f"--listen {host}:{port} answers on every address: name the addresses hosts "
                "reach it by in [http] allowed_hosts (Host header values), or [auth] resource"
            )

    def describe_auth(self) -> str:
        """How callers authenticate, in a few words (for the start-up line)."""
        auth = self.policy.auth
        if auth is None:
            return "no authentication: loopback only"
        ways = []
        if auth.issuer is not None:
            ways.append(f"JWTs from {auth.issuer}")
        if auth.tokens is not None:
            ways.append(f"tokens of {auth.tokens}")
        return "bearer tokens: " + ", ".join(ways)

    def http_app(self, host: str, port: int, path: str = "/mcp") -> Any:
        """The ASGI app :meth:`serve_http` runs (see there)."""
        from mcp.server.auth.settings import AuthSettings
        from mcp.server.transport_security import TransportSecuritySettings

        self.check_listen(host, port)
        policy, http = self.policy, self.policy.http
        auth = policy.auth
        self._result_limit = http.max_result_bytes if http.responses == "sse" else None
        for uset in self._all_sets():
            for upstream in uset.servers.values():
                upstream.max_result_bytes = self._result_limit
        hosts = list(http.allowed_hosts)
        origins = list(http.allowed_origins)
        if not hosts:
            if is_loopback(host):
                hosts = list(_LOOPBACK_HOSTS)
            elif host not in ("0.0.0.0", "::", "[::]"):
                hosts = [f"{host}:{port}"]
            if auth is not None and auth.resource:
                from urllib.parse import urlsplit

                hosts.append(urlsplit(auth.resource).netloc)
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
        )
        settings = None
        if auth is not None:
            resource = auth.resource or f"http://{host}:{port}{path}"
            settings = AuthSettings(  # RFC 9728 metadata and resource_metadata, tokens or JWTs
                issuer_url=auth.issuer or resource,
                resource_server_url=resource,
                required_scopes=list(auth.required_scopes) or None,
                validate_token_resource=False,  # the JWT verifier checks the audience
            )
            self._authenticated = True
        app = self.server().streamable_http_app(
            streamable_http_path=path,
            host=host,
            json_response=http.responses == "json",
            transport_security=security,
            auth=settings,
            token_verifier=self.verifier,
        )
        return RefusalAudit(app, self.refusals) if auth is not None else app

    def _all_sets(self) -> list[UpstreamSet]:
        sets = {id(s): s for s in (self.base, *self._keyed.values(), *self._host_sets.values())}
        return [s for s in sets.values() if s is not None]

    # -- who is calling ----------------------------------------------------------------------

    def _identity(self, ctx: ServerRequestContext[Any]) -> tuple[Identity, str | None, str]:
        """The caller, the host's MCP session id and the transport of the host's connection."""
        request = ctx.request
        scope = getattr(request, "scope", None)
        if not isinstance(scope, dict):
            return LOCAL_STDIO, None, "pipe"
        session_id = getattr(connection_of(ctx.session), "session_id", None) or (
            request.headers.get("mcp-session-id") if request is not None else None
        )
        user = scope.get("user")
        token = getattr(user, "access_token", None)
        if token is not None:
            via = str((token.claims or {}).get(VIA_CLAIM, "jwt"))
            return Identity.of(token, via), session_id, "tcp"
        return LOOPBACK, session_id, "tcp"

    def _caller_attributes(self, record: ToolCallRecord) -> None:
        """The host's and the caller's attributes on the call's span (an observer: the span is
        current and not yet ended)."""
        caller = CALLER.get()
        span = trace.get_current_span()
        if caller is None or not span.is_recording():
            return
        attrs: dict[str, Any] = {A.NETWORK_TRANSPORT: caller.transport}
        if caller.transport == "tcp":
            attrs[A.NETWORK_PROTOCOL_NAME] = "http"
        if caller.session_id:
            attrs[A.MCP_SESSION_ID] = caller.session_id
        if caller.upstream:
            attrs[UPSTREAM] = caller.upstream
        if caller.rule:
            attrs[IDENTITY_RULE] = caller.rule
        attrs.update(self._identity_attributes(caller.identity))
        span.set_attributes(attrs)

    def _identity_attributes(self, identity: Identity | None) -> dict[str, Any]:
        """The identity as telemetry shows it: plain, a pseudonym, or nothing (``[auth]
        identity_in_telemetry``; a proxy without ``[auth]`` shows how the host came in)."""
        if identity is None:
            return {}
        mode = self.policy.auth.identity_in_telemetry if self.policy.auth else "plain"
        attrs: dict[str, Any] = {IDENTITY_VIA: identity.via}
        if mode == "plain":
            attrs[USER_ID] = identity.label
            if identity.groups:
                attrs[USER_ROLES] = identity.groups
        elif mode == "hash":
            attrs[USER_HASH] = identity.pseudonym(self._pseudonym_key)
        return attrs

    def _audit_fields(self, record: ToolCallRecord) -> dict[str, Any]:
        caller = CALLER.get()
        if caller is None:
            return {}
        identity = caller.identity
        return {
            "identity": identity.label if identity is not None else None,
            "identity_via": identity.via if identity is not None else None,
            "issuer": identity.issuer if identity is not None else None,
            "session": caller.session_id,
            "upstream": caller.upstream,
            "rule": caller.rule or record.deciding_hook,
        }

    # -- tools -------------------------------------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        uset = await self._set_for(ctx)
        await uset.retry_down()
        identity, _, _ = self._identity(ctx)
        listed: list[mcp_types.Tool] = []
        for server in uset.servers.values():
            for entry in server.listings:
                if self.policy.denies(entry.name) and not self.policy.list_denied:
                    continue
                if self.pinning is not None and self.pinning.refused(entry.name, uset):
                    continue
                rules = self.identity_rules
                if rules is not None and not rules.allows(identity, entry.name):
                    continue
                listed.append(entry.listing.model_copy(update={"name": entry.name}))
        return mcp_types.ListToolsResult(tools=listed)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        uset = await self._set_for(ctx)
        identity, session_id, transport = self._identity(ctx)
        upstream = uset.server_of(params.name)
        caller = Caller(identity, session_id, transport, upstream.name if upstream else None)
        host = _HostCall(ctx.session, ctx.request_id)
        call_id = str(ctx.request_id) if ctx.request_id is not None else uuid.uuid4().hex

        async def forward_progress(done: float, total: float | None, message: str | None) -> None:
            try:
                await ctx.session.report_progress(done, total, message)
            except Exception:  # the host went away: the call goes on
                logger.debug("progress not delivered to the host", exc_info=True)

        link = self.session_traces.link_to(connection_of(ctx.session))
        tokens = (_HOST.set(host), CALLER.set(caller))
        log_fields = {
            k: v for k, v in self._identity_attributes(identity).items() if k != IDENTITY_VIA
        }
        self._in_flight.append(host)
        try:
            with (
                pin_scope(uset),
                progress_to(forward_progress),
                structlog.contextvars.bound_contextvars(
                    **{k.replace(".", "_"): v for k, v in log_fields.items()}
                ),
            ):
                prepared = await uset.executor.prepare(
                    ToolCall(call_id, params.name, dict(params.arguments or {})),
                    context=AgentContext(
                        run_id=self._run_id(connection_of(ctx.session)),
                        agent_name=self.policy.name,
                    ),
                    timeout=self._timeout_for(params.name),
                    links=[link] if link is not None else None,
                )
                result = await uset.executor.finish(prepared)
        finally:
            self._in_flight.remove(host)
            CALLER.reset(tokens[1])
            _HOST.reset(tokens[0])
        return call_tool_result(result)

    def _timeout_for(self, tool: str) -> float | None:
        for pattern, seconds in self.policy.tool_timeouts.items():
            if fnmatch.fnmatchcase(tool, pattern):
                return seconds
        return None

    def _run_id(self, session: Any) -> str:
        """One run per host connection: call limits count per connection."""
        run_id = self._run_ids.get(session)
        if run_id is None:
            run_id = self._run_ids[session] = uuid.uuid4().hex
        return run_id

    async def _tools_changed(self, uset: UpstreamSet, server: MCPServerTools) -> None:
        self._review(uset)
        await self._tell_hosts(uset, ToolsListChanged())

    # -- notifications to hosts --------------------------------------------------------------

    def _hosts_of(self, uset: UpstreamSet) -> list[Any]:
        """The handshake-era host connections that use ``uset``."""
        return [host for host, owned in list(self._host_sets.items()) if owned is uset]

    async def _tell_hosts(self, uset: UpstreamSet, event: ServerEvent) -> None:
        """An event for the hosts of ``uset``: on their listen streams (2026-07-28; each
        stream keeps what it asked for), and as the handshake era's notification to each
        connection that uses the set (a resource update only to those subscribed to it)."""
        await uset.bus.publish(event)
        for host in self._hosts_of(uset):
            if isinstance(event, ResourceUpdated) and event.uri not in self._subscribed.get(
                host, set()
            ):
                continue
            with contextlib.suppress(Exception):  # a host that left
                if isinstance(event, ToolsListChanged):
                    await host.send_tool_list_changed()
                elif isinstance(event, PromptsListChanged):
                    await host.send_prompt_list_changed()
                elif isinstance(event, ResourcesListChanged):
                    await host.send_resource_list_changed()
                else:
                    await host.send_resource_updated(event.uri)

    async def _forward_notification(self, uset: UpstreamSet, notification: Any) -> None:
        if isinstance(notification, mcp_types.ResourceUpdatedNotification):
            await self._tell_hosts(uset, ResourceUpdated(str(notification.params.uri)))
        elif isinstance(notification, mcp_types.ResourceListChangedNotification):
            await self._tell_hosts(uset, ResourcesListChanged())
        elif isinstance(notification, mcp_types.PromptListChangedNotification):
            await self._tell_hosts(uset, PromptsListChanged())

    async def _forward_log(
        self, uset: UpstreamSet, params: mcp_types.LoggingMessageNotificationParams
    ) -> None:
        """An upstream's log message, redacted, to its hosts: during a call, to that call's
        host on the call's stream; otherwise to every host of the set (handshake era only)."""
        data = params.data
        if self.policy.redaction:
            data, _ = self.policy.redactor.redact(data, "log")
        host = self._host()
        with contextlib.suppress(Exception), warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            if host is not None:  # on the call's own stream (the only one 2026-07-28 allows)
                await host.session.send_log_message(
                    params.level, data, params.logger, host.request_id
                )
                return
        for connection in self._hosts_of(uset):
            with contextlib.suppress(Exception):
                await connection.log(params.level, data, params.logger)

    async def _listen(
        self, ctx: ServerRequestContext[Any], params: mcp_types.SubscriptionsListenRequestParams
    ) -> mcp_types.SubscriptionsListenResult:
        """``subscriptions/listen`` (2026-07-28): a stream of the events of this caller's
        upstream sessions only; the resources it names are subscribed upstream."""
        uset = await self._set_for(ctx)
        for uri in params.notifications.resource_subscriptions or ():
            await self._subscribe_upstream(uset, None, str(uri))
        return await uset.listen(ctx, params)

    async def _subscribe(
        self, ctx: ServerRequestContext[Any], params: mcp_types.SubscribeRequestParams
    ) -> mcp_types.EmptyResult:
        uset = await self._set_for(ctx)
        await self._subscribe_upstream(uset, connection_of(ctx.session), str(params.uri))
        return mcp_types.EmptyResult()

    async def _subscribe_upstream(self, uset: UpstreamSet, session: Any, uri: str) -> None:
        if session is not None:
            self._subscribed.setdefault(session, set()).add(uri)
        for server in self._owners(uset, uri):
            client = await server.client()
            with contextlib.suppress(MCPError):
                await client.subscribe_resource(uri)
                return

    async def _unsubscribe(
        self, ctx: ServerRequestContext[Any], params: mcp_types.UnsubscribeRequestParams
    ) -> mcp_types.EmptyResult:
        uset, uri = await self._set_for(ctx), str(params.uri)
        self._subscribed.get(connection_of(ctx.session), set()).discard(uri)
        still = any(uri in self._subscribed.get(s, set()) for s in self._hosts_of(uset))
        if not still:
            for server in self._owners(uset, uri):
                client = await server.client()
                with contextlib.suppress(MCPError):
                    await client.unsubscribe_resource(uri)
        return mcp_types.EmptyResult()

    async def _set_logging_level(
        self, ctx: ServerRequestContext[Any], params: mcp_types.SetLevelRequestParams
    ) -> mcp_types.EmptyResult:
        uset = await self._set_for(ctx)
        for server in uset.offering("logging"):
            client = await server.client()
            with contextlib.suppress(MCPError), warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.set_logging_level(params.level)
        return mcp_types.EmptyResult()

    # -- pass-through ------------------------------------------------------------------------

    def _owners(self, uset: UpstreamSet, uri: str) -> list[MCPServerTools]:
        owner = uset.routes.resources.get(uri)
        return [owner] if owner is not None else uset.offering("resources")

    def _scrub(self, model: ModelT) -> ModelT:
        """``model`` with secrets redacted from its text (unchanged when redaction is off)."""
        if not self.policy.redaction:
            return model
        data = model.model_dump(mode="json", by_alias=True, exclude_none=True)
        clean, paths = self.policy.redactor.redact(data, "result")
        return model if not paths else type(model).model_validate(clean)

    async def _list_resources(
        self, ctx: ServerRequestContext[Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListResourcesResult:
        uset = await self._set_for(ctx)
        resources: list[mcp_types.Resource] = []
        for server in uset.offering("resources"):
            client = await server.client()
            for item in await _all_pages(client.list_resources, "resources"):
                uset.routes.resources[str(item.uri)] = server
                resources.append(item)
        return self._scrub(mcp_types.ListResourcesResult(resources=resources))

    async def _list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListResourceTemplatesResult:
        uset = await self._set_for(ctx)
        templates: list[mcp_types.ResourceTemplate] = []
        for server in uset.offering("resources"):
            client = await server.client()
            pages = await _all_pages(client.list_resource_templates, "resource_templates")
            for item in pages:
                uset.routes.templates[item.uri_template] = server
                templates.append(item)
        return mcp_types.ListResourceTemplatesResult(resource_templates=templates)

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: mcp_types.ReadResourceRequestParams
    ) -> mcp_types.ReadResourceResult:
        uset, uri = await self._set_for(ctx), str(params.uri)
        last: MCPError | None = None
        for server in self._owners(uset, uri):
            client = await server.client()
            try:
                return self._scrub(await client.read_resource(uri, cache_mode="bypass"))
            except MCPError as exc:
                last = exc
        if last is not None:
            raise last
        raise MCPError(mcp_types.INVALID_PARAMS, f"no upstream offers the resource {uri}")

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any] | None, params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListPromptsResult:
        assert ctx is not None
        uset = await self._set_for(ctx)
        prompts: list[mcp_types.Prompt] = []
        for server in uset.offering("prompts"):
            client = await server.client()
            for item in await _all_pages(client.list_prompts, "prompts"):
                name = (
                    f"{server.prefix}_{item.name}" if self.prefixed and server.prefix else item.name
                )
                uset.routes.prompts[name] = (server, item.name)
                prompts.append(item.model_copy(update={"name": name}))
        return mcp_types.ListPromptsResult(prompts=prompts)

    async def _prompt_route(
        self, ctx: ServerRequestContext[Any], name: str
    ) -> tuple[MCPServerTools, str]:
        uset = await self._set_for(ctx)
        route = uset.routes.prompts.get(name)
        if route is None:
            await self._list_prompts(ctx, None)
            route = uset.routes.prompts.get(name)
        if route is None:
            raise MCPError(mcp_types.INVALID_PARAMS, f"unknown prompt {name!r}")
        return route

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any], params: mcp_types.GetPromptRequestParams
    ) -> mcp_types.GetPromptResult:
        server, name = await self._prompt_route(ctx, params.name)
        client = await server.client()
        return self._scrub(await client.get_prompt(name, params.arguments))

    async def _complete(
        self, ctx: ServerRequestContext[Any], params: mcp_types.CompleteRequestParams
    ) -> mcp_types.CompleteResult:
        uset = await self._set_for(ctx)
        ref = params.ref
        argument = {"name": params.argument.name, "value": params.argument.value}
        context = params.context.arguments if params.context is not None else None
        if isinstance(ref, mcp_types.PromptReference):
            server, name = await self._prompt_route(ctx, ref.name)
            ref = ref.model_copy(update={"name": name})
            candidates = [server]
        else:
            owner = uset.routes.templates.get(ref.uri)
            candidates = [owner] if owner is not None else uset.offering("completions")
        for server in candidates:
            client = await server.client()
            with contextlib.suppress(MCPError):
                return await client.complete(ref, argument, context_arguments=context)
        return mcp_types.CompleteResult(completion=mcp_types.Completion(values=[]))

    # -- requests from upstreams -------------------------------------------------------------

    def _host(self) -> _HostCall | None:
        """The host call an upstream's request belongs to: the current one, else the only one
        in flight (a request that arrives on the upstream's own channel)."""
        host = _HOST.get()
        if host is None and len(self._in_flight) == 1:
            host = self._in_flight[0]
        return host

    async def _ask_host(
        self, what: str, request: Any, result_type: type[ModelT]
    ) -> ModelT | mcp_types.ErrorData:
        host = self._host()
        if host is None or not getattr(host.session, "can_send_request", False):
            return mcp_types.ErrorData(
                code=mcp_types.INVALID_REQUEST,
                message=f"otelhooks proxy: the host cannot answer {what} requests on this call",
            )
        try:
            return await host.session.send_request(  # type: ignore[no-any-return]
                request,
                result_type,
                metadata=ServerMessageMetadata(related_request_id=host.request_id),
            )
        except MCPError as exc:
            return exc.error

    async def _forward_sampling(
        self, context: Any, params: mcp_types.CreateMessageRequestParams
    ) -> Any:
        result_type: type[BaseModel] = (
            mcp_types.CreateMessageResultWithTools
            if params.tools
            else mcp_types.CreateMessageResult
        )
        return await self._ask_host(
            "sampling", mcp_types.CreateMessageRequest(params=params), result_type
        )

    async def _forward_elicitation(self, context: Any, params: Any) -> Any:
        return await self._ask_host(
            "elicitation", mcp_types.ElicitRequest(params=params), mcp_types.ElicitResult
        )

    async def _forward_roots(self, context: Any) -> Any:
        return await self._ask_host(
            "roots", mcp_types.ListRootsRequest(), mcp_types.ListRootsResult
        )


_START_ATTRS: dict[str, Any] = {"mcp.method.name": "proxy/start"}
_LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")


def call_tool_result(result: ToolResult) -> mcp_types.CallToolResult:
    """A :class:`~otelhooks.ToolResult` as the host sees it (see :func:`wire_result`)."""
    try:
        return mcp_types.CallToolResult.model_validate(wire_result(result))
    except ValidationError:
        return mcp_types.CallToolResult.model_validate(rebuilt_result(result))


async def _all_pages(fetch: Callable[..., Awaitable[Any]], attribute: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(1000):  # a server that pages forever is cut off
        page = await fetch(cursor=cursor)
        items.extend(getattr(page, attribute))
        cursor = page.next_cursor
        if not cursor:
            break
    return items


def _version() -> str:
    from ...version import __version__

    return __version__
