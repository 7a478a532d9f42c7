"""What reaches the hosts of the SDK server from their upstreams: the requests an upstream
makes of its own (roots, sampling, elicitation), sent only to the host session that owns the
upstream's set or answered here, and the notifications and log messages it sends, passed on
to the hosts of its set that may see them (redacted).
"""

from __future__ import annotations

import asyncio
import contextlib
import warnings
import weakref
from pathlib import Path
from typing import Any

import mcp.types as mcp_types
from mcp.server.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import ServerMessageMetadata
from pydantic import BaseModel

from .access import Grant
from .client import MCPServerTools
from .gateway import Gateway
from .upstreams import ROOTS_TIMEOUT, UpstreamSet, narrow_roots


def connection_of(session: Any) -> Any:
    """The host connection a request's session belongs to (the ``mcp`` SDK makes a session
    object per request; its connection lives as long as the host stays connected)."""
    return getattr(session, "_connection", session)


class HostMessages:
    """The upstreams' messages to the hosts of their sets, and what each host connection may
    receive: its grant (set when it is served) and the resources it subscribed to."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.subscribed: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
        self.grants: weakref.WeakKeyDictionary[Any, Grant] = weakref.WeakKeyDictionary()

    async def tools_changed(self, uset: UpstreamSet, server: MCPServerTools) -> None:
        """An upstream's tool list changed: review it against the pins and tell the set's hosts."""
        self.gateway.review(uset)
        await self.tell_hosts(uset, ToolsListChanged())

    async def ask(self, uset: UpstreamSet, what: str, config: Any, params: Any) -> Any:
        """An upstream's request (roots, sampling, elicitation): to the host that owns its set
        and no other, or answered here (see :mod:`~otelhooks.integrations.mcp.upstreams`)."""
        if what == "roots":
            return await self.roots(uset, config)
        channel = uset.route.channel()
        if channel is None:
            return mcp_types.ErrorData(
                code=mcp_types.INVALID_REQUEST,
                message=f"otelhooks proxy: no host session to answer {what} requests (the "
                "upstream's session is shared, or its host has none)",
            )
        session, related = channel
        if what == "sampling":
            result_type: type[BaseModel] = (
                mcp_types.CreateMessageResultWithTools
                if params.tools
                else mcp_types.CreateMessageResult
            )
            request: Any = mcp_types.CreateMessageRequest(params=params)
        else:
            result_type, request = mcp_types.ElicitResult, mcp_types.ElicitRequest(params=params)
        return await send(session, request, result_type, related)

    async def ask_owner(self, uset: UpstreamSet, request: Any, result_type: Any) -> Any:
        """Send ``request`` to the host session that owns ``uset`` (the proxy's own
        elicitation, say); ``ErrorData`` when it has none or refuses."""
        channel = uset.route.channel()
        if channel is None:
            return mcp_types.ErrorData(
                code=mcp_types.INVALID_REQUEST, message="otelhooks proxy: no host session"
            )
        session, related = channel
        return await send(session, request, result_type, related)

    async def roots(self, uset: UpstreamSet, config: Any) -> mcp_types.ListRootsResult:
        """The upstream's configured roots, narrowed by the owning host when it answers roots:
        a root the host gives that is not inside a configured one is dropped."""
        configured = [mcp_types.Root(uri=Path(r).as_uri()) for r in config.roots]
        route = uset.route
        channel = route.channel() if route.host_roots else None
        if channel is None:
            return mcp_types.ListRootsResult(roots=configured)
        session, related = channel
        try:
            async with asyncio.timeout(ROOTS_TIMEOUT):
                answer = await send(
                    session, mcp_types.ListRootsRequest(), mcp_types.ListRootsResult, related
                )
        except TimeoutError:
            answer = None
        if not isinstance(answer, mcp_types.ListRootsResult):
            return mcp_types.ListRootsResult(roots=configured)
        narrowed = narrow_roots([str(r.uri) for r in answer.roots], config.roots)
        chosen = [mcp_types.Root(uri=uri) for uri in narrowed]
        return mcp_types.ListRootsResult(roots=chosen or configured)

    def hosts(self, uset: UpstreamSet) -> list[Any]:
        """The host sessions that own ``uset`` (only they hear from its upstreams)."""
        return list(uset.hosts)

    async def tell_hosts(self, uset: UpstreamSet, event: ServerEvent) -> None:
        """An event for the hosts of ``uset``: on their listen streams (2026-07-28), and as
        the handshake era's notification to each of its connections (a resource update only
        to those subscribed to it, and allowed it)."""
        await uset.bus.publish(event)
        for host in self.hosts(uset):
            if isinstance(event, ResourceUpdated):
                grant = self.grants.get(host)
                if event.uri not in self.subscribed.get(host, set()):
                    continue
                if grant is None or not grant.resource(event.uri):
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

    async def forward_notification(self, uset: UpstreamSet, notification: Any) -> None:
        """An upstream's notification (resource updated, a list changed, a log message) to the
        hosts of ``uset`` only."""
        if isinstance(notification, mcp_types.ResourceUpdatedNotification):
            await self.tell_hosts(uset, ResourceUpdated(str(notification.params.uri)))
        elif isinstance(notification, mcp_types.ResourceListChangedNotification):
            await self.tell_hosts(uset, ResourcesListChanged())
        elif isinstance(notification, mcp_types.PromptListChangedNotification):
            await self.tell_hosts(uset, PromptsListChanged())

    async def forward_log(
        self, uset: UpstreamSet, params: mcp_types.LoggingMessageNotificationParams
    ) -> None:
        """An upstream's log message, redacted, to the hosts of its set that may use logging:
        during a call, on that call's stream; otherwise to each host (handshake era only)."""
        data = self.gateway.scrub_data(params.data, "log")
        channel = uset.route.channel() if uset.route.calls else None
        with contextlib.suppress(Exception), warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            if channel is not None:
                session, related = channel
                grant = self.grants.get(connection_of(session))
                if grant is not None and grant.may("logging"):
                    await session.send_log_message(params.level, data, params.logger, related)
                return
        for host in self.hosts(uset):
            grant = self.grants.get(host)
            if grant is None or not grant.may("logging"):
                continue
            with contextlib.suppress(Exception):
                await host.log(params.level, data, params.logger)


async def send(session: Any, request: Any, result_type: Any, related: Any) -> Any:
    """Send ``request`` to a host session, related to the host's request ``related`` when given;
    the host's JSON-RPC error is returned as the answer, not raised."""
    metadata = ServerMessageMetadata(related_request_id=related) if related is not None else None
    try:
        return await session.send_request(request, result_type, metadata=metadata)
    except MCPError as exc:
        return exc.error
    except Exception as exc:  # no back-channel, a host that left
        return mcp_types.ErrorData(
            code=mcp_types.INTERNAL_ERROR,
            message=f"otelhooks proxy: the host could not be asked ({type(exc).__name__})",
        )
