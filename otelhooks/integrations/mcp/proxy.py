"""``otelhooks mcp proxy``: an MCP server that puts the hook boundary in front of others, and with
``[auth]`` a gateway that a team shares.

The proxy connects to one or more upstream servers and serves their tools to hosts (Claude
Code, Claude Desktop, VS Code, any MCP client) over stdio or Streamable HTTP. One core
(:mod:`~otelhooks.integrations.mcp.gateway`) decides for every serving path who may use which
method, runs each ``tools/call`` through before -> run -> after with the policy's hooks and
redaction, keeps an upstream's own requests with the host they belong to, and puts the caller
on spans, log events and the audit log. The serving paths are thin adapters over it:

* the stdio line relay (:mod:`~otelhooks.integrations.mcp.relay`), for one stdio upstream over
  stdio;
* an ``mcp`` SDK server (:mod:`~otelhooks.integrations.mcp.server`) over stdio, for several
  upstreams, a URL upstream, or standard streams that are not pipes;
* the same SDK server over Streamable HTTP (:mod:`~otelhooks.integrations.mcp.http`), with
  ``[auth]`` (bearer tokens), ``Host``/``Origin`` checks and bounded upstream sessions.

:class:`MCPProxy` picks the adapter and owns the core.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from typing import Any, Final

from mcp.server.lowlevel import Server
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from opentelemetry.trace import TracerProvider

from ...telemetry import attributes as A
from .access import Caller
from .auth import LOOPBACK, VIA_CLAIM, GatewayVerifier, Identity
from .gateway import Gateway, ProxyStartError, Refused
from .http import RESERVATION, new_reservation
from .policy import ProxyPolicy, UpstreamConfig
from .server import SDKServer, identity_of
from .server_hosts import connection_of
from .upstreams import SessionLimit, UpstreamSet

__all__ = ["MCPProxy", "ProxyStartError", "is_loopback"]

_START_ATTRS: Final[dict[str, Any]] = {A.MCP_METHOD_NAME: "proxy/start"}
_LOOPBACK_HOSTS: Final = ("127.0.0.1:*", "localhost:*", "[::1]:*")


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
        self.gateway = Gateway(policy, upstreams, hooks=hooks, tracer_provider=tracer_provider)
        self.policy = self.gateway.policy
        self.configs = self.gateway.configs
        auth = self.policy.auth
        # Made now: a token file that cannot be read stops the start, not the first request.
        self.verifier = GatewayVerifier.of(auth) if auth is not None else None
        self.sdk = SDKServer(self.gateway)
        self._http: Any = None  # the uvicorn server of serve_http

    @property
    def pinning(self) -> Any:
        """The tool definition pinning (``None`` when off)."""
        return self.gateway.pinning

    @property
    def base(self) -> UpstreamSet | None:
        """The upstream sessions made at start (the policy check, the pins)."""
        return self.sdk.base

    @property
    def audit(self) -> Any:
        """The audit log (``None`` without ``[audit]``)."""
        return self.gateway.audit

    @property
    def guard_notes(self) -> dict[str, list[str]]:
        """Per tool, the path-like arguments a guard leaves unchecked (its calls are
        blocked), as found at start."""
        return self.gateway.guard_notes

    # -- life --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start every upstream once (the policy check, the pins, what they offer). An
        upstream that fails is logged and tried again later; none starting is a
        :class:`ProxyStartError`, and so is a command that is not found or a policy tool
        pattern that matches no tool (a warning when the policy is not strict)."""
        with self.gateway.tracer.start_as_current_span("mcp proxy start", attributes=_START_ATTRS):
            await self.sdk.start()

    async def close(self) -> None:
        """Stop every upstream session, and close the audit log."""
        await self.sdk.close()
        await self.gateway.close()

    async def __aenter__(self) -> MCPProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- serving -----------------------------------------------------------------------------

    def server(self) -> Server[Any]:
        """A low-level ``mcp`` server over the gateway (see
        :class:`~otelhooks.integrations.mcp.server.SDKServer`)."""
        return self.sdk.server()

    async def serve_stdio(self) -> None:
        """Serve one host over this process's stdin/stdout until it closes them: line by line
        (the relay) when there is one stdio upstream and the streams are pipes, else through
        the SDK server."""
        config = self._relayed()
        if config is not None:
            from .relay import StdioRelay
            from .stdio import stdio_pipes

            async with stdio_pipes() as pipes:
                if pipes is not None:
                    base = self.sdk.base
                    if base is not None:
                        self.sdk.base = None
                        await base.close()  # checked and pinned; the relay starts its own
                    await StdioRelay(self.gateway, config, *pipes).run()
                    return
        await self.sdk.serve_stdio()

    def _relayed(self) -> UpstreamConfig | None:
        """The upstream a stdio host is relayed to: the only one, when it is a command line."""
        if len(self.configs) != 1:
            return None
        config = self.configs[0]
        return config if config.command and not config.url else None

    async def serve_http(
        self, host: str = "127.0.0.1", port: int = 8765, path: str = "/mcp"
    ) -> None:
        """Serve hosts over Streamable HTTP at ``http://{host}:{port}{path}`` until
        :meth:`stop` (see :meth:`http_app`)."""
        import uvicorn

        from .http import server_config

        app = self.http_app(host, port, path)
        config = server_config(app, host, port, self.policy.http.header_timeout)
        self._http = uvicorn.Server(config)
        await self._http.serve()

    def stop(self) -> None:
        """Ask :meth:`serve_http` to finish: no new connections, the requests in flight
        answered, then it returns."""
        if self._http is not None:
            self._http.should_exit = True

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
        """The ASGI app :meth:`serve_http` runs. Without ``[auth]`` only a loopback address is
        served. ``Host`` and ``Origin`` are checked on every request (``[http] allowed_hosts``
        and ``allowed_origins``; by default the listen address and no browser origin)."""
        from mcp.server.auth.settings import AuthSettings
        from mcp.server.transport_security import TransportSecuritySettings

        from .http import http_app

        self.check_listen(host, port)
        policy, http = self.policy, self.policy.http
        auth = policy.auth
        self.sdk.result_limit = http.max_result_bytes if http.responses == "sse" else None
        hosts = list(http.allowed_hosts)
        if not hosts:
            if is_loopback(host):
                hosts = list(_LOOPBACK_HOSTS)
            elif host not in ("0.0.0.0", "::", "[::]"):
                hosts = [f"{host}:{port}"]
            if auth is not None and auth.resource:
                from urllib.parse import urlsplit

                hosts.append(urlsplit(auth.resource).netloc)
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=hosts,
            allowed_origins=list(http.allowed_origins),
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
        server = self.sdk.server()
        server.middleware.append(self._take_reservation)
        self.sdk.release_base()  # checked and pinned; every host gets upstreams of its own
        return http_app(
            server,
            path=path,
            host=host,
            json_response=http.responses == "json",
            security=security,
            auth=settings,
            verifier=self.verifier,
            check=self._admit,
            release=self.sdk.pool.release,
            idle_timeout=policy.idle_timeout,
            refused=self._login_refused,
        )

    def _login_refused(self, scope: dict[str, Any], status: int, reason: str) -> None:
        """A refused login, counted per client address (a WARNING line and an audit line per
        address and interval, not per request)."""
        client = scope.get("client")
        self.gateway.refusals.refused(str(client[0]) if client else "(unknown)", status, reason)

    async def _admit(self, scope: dict[str, Any]) -> tuple[str | None, Any]:
        """Whether a request that opens an upstream session may: (why not, or ``None``; the
        reservation made for it). A caller that may use nothing opens none."""
        user = scope.get("user")
        token = getattr(user, "access_token", None)
        if token is not None:
            identity = Identity.of(token, str((token.claims or {}).get(VIA_CLAIM, "jwt")))
        else:
            identity = LOOPBACK
        grant = self.gateway.grant(identity)
        if grant.nothing:
            return None, None
        digest = identity.digest()
        pool = self.sdk.pool
        version = next(
            (v.decode() for k, v in scope.get("headers", ()) if k == b"mcp-protocol-version"),
            None,
        )
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            # 2026-07-28: no session; refused here only when the caller has no set yet
            refusal = pool.admits(digest) if pool.count(digest) == 0 else None
            reservation = None
        else:
            reservation = new_reservation()
            try:
                pool.reserve(reservation, digest)
                refusal = None
            except SessionLimit as exc:
                refusal, reservation = str(exc), None
        if refusal is not None:
            caller = Caller(identity, None, "tcp", grant=grant)
            await self.gateway.refuse(
                caller,
                "initialize",
                None,
                Refused(-32603, f"otelhooks proxy: {refusal}"),
                f"new session refused: {refusal}",
            )
        return refusal, reservation

    async def _take_reservation(self, ctx: Any, call_next: Any) -> Any:
        """At ``initialize``, the upstream session reserved for the request becomes the host
        session's own."""
        if ctx.method == "initialize" and ctx.request is not None:
            reservation = ctx.request.scope.get(RESERVATION)
            if reservation is not None:
                self.sdk.pool.rekey(reservation, ("host", id(connection_of(ctx.session))))
        return await call_next(ctx)

    # -- who is calling (for tests and tools) ------------------------------------------------

    def identity(self, ctx: Any) -> Identity:
        """The caller of a request (see :func:`~otelhooks.integrations.mcp.server.identity_of`)."""
        return identity_of(ctx)[0]
