"""The proxy over Streamable HTTP: the SDK server of
:mod:`~otelhooks.integrations.mcp.server` behind bearer authentication, ``Host``/``Origin``
checks, a bound on how long a client may take to send its headers, and admission of new
sessions within the upstream limits.

Layers, outermost first:

* :class:`HeaderTimeoutProtocol`: uvicorn's HTTP/1.1 protocol, closing a connection whose
  request headers do not arrive within ``[http] header_timeout`` seconds (slow clients cannot
  hold connections open by trickling headers).
* :class:`Hygiene`: a ``GET`` asking to resume a stream (``Last-Event-ID``) is served as a new
  stream: the proxy keeps no event store, so there is nothing to replay.
* :class:`RefusalWatch` (with authentication): ``refused(scope, status, reason)`` is told of
  every 401 and 403, with the reason the token verifier noted (never the token);
* the SDK's bearer authentication (401 with ``WWW-Authenticate`` naming the resource metadata,
  403 for missing scopes);
* :class:`Admission`: a request that would open a new upstream session is refused with HTTP 503
  and a JSON-RPC error (and an audit line) when the limits are reached; a running session is
  never closed to make room;
* the SDK's Streamable HTTP session manager (sessions bound to the credential that opened them,
  a body limit, idle sessions closed after ``[proxy] idle_timeout``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Final

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from .auth import REQUEST_SCOPE, noting_refusal

logger = logging.getLogger("otelhooks.mcp.proxy")

RESERVATION: Final = "otelhooks.reservation"
"""The ASGI scope key of the upstream session reserved for a request that opens a session."""

Check = Callable[[dict[str, Any]], Awaitable[tuple[str | None, Any]]]
"""``check(scope)`` -> (why a new session is refused or ``None``, the reservation key)."""


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")  # type: ignore[no-any-return]
    return None


def opens_session(scope: dict[str, Any]) -> bool:
    """Whether a request would open an upstream session: a ``POST`` without a session id
    (the handshake era's ``initialize``) or any request of the 2026-07-28 era."""
    if scope.get("type") != "http" or scope.get("method") != "POST":
        return False
    version = _header(scope, b"mcp-protocol-version")
    modern = version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS
    return modern or _header(scope, b"mcp-session-id") is None


class Admission:
    """Refuses (503, a JSON-RPC error) a request that would open an upstream session beyond
    the limits; puts the reservation it made for one it admits in the scope."""

    def __init__(self, app: Any, check: Check, release: Callable[[Any], None]) -> None:
        self.app = app
        self.check = check
        self.release = release

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        token = REQUEST_SCOPE.set(scope)
        try:
            await self._admitted(scope, receive, send)
        finally:
            REQUEST_SCOPE.reset(token)

    async def _admitted(self, scope: Any, receive: Any, send: Any) -> None:
        if not opens_session(scope):
            await self.app(scope, receive, send)
            return
        refusal, reservation = await self.check(scope)
        if refusal is not None:
            body = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {"code": -32603, "message": f"otelhooks proxy: {refusal}"},
                }
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 503,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"retry-after", b"30"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        if reservation is None:
            await self.app(scope, receive, send)
            return
        scope[RESERVATION] = reservation
        try:
            await self.app(scope, receive, send)
        finally:
            self.release(reservation)  # a no-op once the session took it over


class Hygiene:
    """Requests the SDK would answer badly, made right before they reach it (see the
    module's docs)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") == "http" and scope.get("method") == "GET":
            headers = scope.get("headers", ())
            if any(k == b"last-event-id" for k, _ in headers):
                scope = {**scope, "headers": [(k, v) for k, v in headers if k != b"last-event-id"]}
        await self.app(scope, receive, send)


Refused = Callable[[dict[str, Any], int, str], None]
"""``refused(scope, status, reason)``: a request answered 401 or 403, and why."""


class RefusalWatch:
    """Tells ``refused(scope, status, reason)`` of every 401 and 403 the app answers; the
    reason is what the token verifier noted (:func:`~otelhooks.integrations.mcp.auth.refused`),
    else what the request lacked."""

    def __init__(self, app: Any, refused: Refused) -> None:
        self.app = app
        self.refused = refused

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        with noting_refusal() as note:

            async def watched(message: Any) -> None:
                if message.get("type") == "http.response.start":
                    status = int(message.get("status", 0))
                    if status in (401, 403):
                        self.refused(scope, status, note.reason or _lacking(scope, status))
                await send(message)

            await self.app(scope, receive, watched)


def _lacking(scope: dict[str, Any], status: int) -> str:
    if status == 403:
        return "forbidden (a missing scope, or an Origin not allowed)"
    if _header(scope, b"authorization") is None:
        return "no bearer token"
    return "not a bearer token"


def refused_login(scope: dict[str, Any], status: int, reason: str) -> None:
    """What is done with a refused login by default: a log line with the client address."""
    client = scope.get("client") or ("?", 0)
    logger.debug("login refused (%d) for %s: %s", status, client[0], reason)


def http_app(
    server: Any,
    *,
    path: str,
    host: str,
    json_response: bool,
    security: Any,
    auth: Any,
    verifier: Any,
    check: Check,
    release: Callable[[Any], None],
    idle_timeout: float,
    refused: Refused = refused_login,
) -> Any:
    """The ASGI app (see the module's docs) over ``server``, an ``mcp`` low-level ``Server``.
    ``auth`` (``mcp`` ``AuthSettings``) and ``verifier`` turn on bearer authentication."""
    from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
    from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
    from mcp.server.auth.routes import (
        build_resource_metadata_url,
        create_protected_resource_routes,
    )
    from mcp.server.streamable_http_manager import (
        StreamableHTTPASGIApp,
        StreamableHTTPSessionManager,
    )
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.authentication import AuthenticationMiddleware
    from starlette.routing import Route

    manager = StreamableHTTPSessionManager(
        app=server,
        json_response=json_response,
        security_settings=security,
        session_idle_timeout=idle_timeout,
    )
    server._session_manager = manager  # what Server.session_manager gives
    endpoint: Any = Admission(StreamableHTTPASGIApp(manager), check, release)
    routes: list[Any] = []
    middleware: list[Any] = []
    if verifier is not None and auth is not None:
        resource_url = auth.resource_server_url
        endpoint = RequireAuthMiddleware(
            endpoint,
            auth.required_scopes or [],
            build_resource_metadata_url(resource_url) if resource_url else None,
        )
        middleware = [
            Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(verifier)),
            Middleware(AuthContextMiddleware),
        ]
        if resource_url:
            routes.extend(
                create_protected_resource_routes(
                    resource_url=resource_url,
                    authorization_servers=[auth.issuer_url],
                    scopes_supported=auth.required_scopes,
                )
            )
    routes.insert(0, Route(path, endpoint=endpoint))
    app: Any = Starlette(routes=routes, middleware=middleware, lifespan=lambda _: manager.run())
    if verifier is not None and auth is not None:
        app = RefusalWatch(app, refused)  # outside the verifier: it notes its reason here
    return Hygiene(app)


KEEP_ALIVE: Final = 75.0
"""Seconds an idle connection is kept open: longer than clients keep theirs (httpx: 5 s), so a
request is never sent on a connection the server is closing at that moment (with equal limits,
such a request fails with a read error under load)."""


def server_config(app: Any, host: str, port: int, header_timeout: float) -> Any:
    """The uvicorn configuration the gateway listens with (a ``uvicorn.Config``)."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_keep_alive=int(KEEP_ALIVE),
        http=header_timeout_protocol(header_timeout),
    )


def header_timeout_protocol(seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol with a bound on the time to a request's complete headers."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderTimeoutProtocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is h11.IDLE:
                if self._header_timer is None:
                    self._arm()
            else:
                self._disarm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._header_timer = self.loop.call_later(seconds, self._expired)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _expired(self) -> None:
            self._header_timer = None
            idle = self.cycle is None or self.cycle.response_complete
            if self.conn.their_state is h11.IDLE and idle:
                logger.debug("closed a connection that sent no complete headers in %g s", seconds)
                self.transport.close()
            elif self.conn.their_state is h11.IDLE:
                self._arm()  # a response still being written: its next request gets its time

    return HeaderTimeoutProtocol


def new_reservation() -> Any:
    """A key for an upstream session reserved before its host session has an id."""
    return ("pending", uuid.uuid4().hex)
