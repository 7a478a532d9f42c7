"""The stdio relay's tools: the server's listing (every page, again after a change) registered
under the names the policy gives them and reviewed against the pins, and each call sent to the
server with the host's request id and ``_meta`` and the proxy's trace context.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
from dataclasses import dataclass, field
from typing import Any, Final

import mcp.types as mcp_types
from opentelemetry import propagate

from ...core import (
    DEFAULT_TOOL_TIMEOUT,
    ToolContext,
    ToolExecutor,
    ToolOutput,
    ToolRegistry,
    make_tool,
)
from ...telemetry import attributes as A
from .access import Caller
from .client import MCPToolError, output_of, strict_schema
from .gateway import Gateway
from .naming import exposed_name
from .policy import UpstreamConfig
from .relay_link import Pending, UpstreamLink, dumps

logger = logging.getLogger("otelhooks.mcp.proxy")

MAX_PAGES: Final = 100
"""Pages of the server's tool listing read: a paginator that never ends is cut off there."""

HOST_REQUEST: contextvars.ContextVar[tuple[Any, dict[str, Any] | None, str | None]] = (
    contextvars.ContextVar("otelhooks_relay_request")
)
"""The host request a call serves: its id, its ``_meta`` and the session's protocol version."""


@dataclass
class Listing:
    """The server's tools as the relay last listed them: registered name -> listing (JSON)."""

    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    upstream_names: dict[str, str] = field(default_factory=dict)  # registered -> the server's


class RelayTools:
    """The tools of a relay's one server, for ``caller``, called over ``link``."""

    def __init__(
        self, gateway: Gateway, config: UpstreamConfig, link: UpstreamLink, caller: Caller
    ) -> None:
        self.gateway = gateway
        self.config = config
        self.link = link
        self.caller = caller
        self.key = caller.upstream_set or ""
        self.registry = ToolRegistry()
        self.executor = ToolExecutor(
            self.registry,
            gateway.hooks,
            tool_timeout=gateway.policy.timeout or DEFAULT_TOOL_TIMEOUT,
            recorder=gateway.recorder,
            approver=gateway.approvals,
        )
        self.listing = Listing()
        self.listing_task: asyncio.Future[None] | None = None
        self.progress: dict[Any, ToolContext] = {}  # progress token -> the call's context
        self.cancelled: set[Any] = set()  # calls the host itself cancelled upstream

    async def relist(self) -> None:
        """List (and review) the tools again (the server announced a change)."""
        self.listing_task = asyncio.ensure_future(self.list_upstream())
        await asyncio.shield(self.listing_task)

    def shown(self, name: str) -> bool:
        """Whether the caller may see ``name``: its grant shows it and no pin holds it back."""
        grant = self.caller.grant
        assert grant is not None
        return self.gateway.shows_tool(grant, name) and not self.gateway.held_back(name, self.key)

    async def known(self, name: str) -> None:
        """List the server's tools when ``name`` is not one of those known (a host that calls
        without listing first)."""
        if name in self.listing.upstream_names:
            return
        if self.listing_task is None or self.listing_task.done():
            self.listing_task = asyncio.ensure_future(self.list_upstream())
        with contextlib.suppress(Exception):
            await asyncio.shield(self.listing_task)

    async def list_upstream(self) -> None:
        """List the server's tools (every page) and register them; also after the server
        announced a change."""
        listed: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):  # a paginator that never ends cannot hang us
            page = await self.link.request("tools/list", {"cursor": cursor} if cursor else {})
            tools = page.get("tools")
            if isinstance(tools, list):
                listed.extend(t for t in tools if isinstance(t, dict))
            cursor = page.get("nextCursor")
            if not cursor:
                break
        self.register(listed, whole=True)

    def register(
        self, listed: list[dict[str, Any]], *, whole: bool
    ) -> list[tuple[str, dict[str, Any]]]:
        """Register the tools of a listing (``whole``: all of them, so that tools gone are
        removed) and review them against the pins; (registered name, listing) of each."""
        models: list[tuple[str, mcp_types.Tool]] = []
        out: list[tuple[str, dict[str, Any]]] = []
        listing = Listing() if whole else self.listing
        for data in listed:
            try:
                model = mcp_types.Tool.model_validate(data)
            except ValueError:
                logger.warning(
                    "upstream %r listed a malformed tool: %.200s", self.config.name, data
                )
                continue
            registered = exposed_name(model.name, self.config.prefix)
            listing.tools[registered] = data
            listing.upstream_names[registered] = model.name
            models.append((registered, model))
            out.append((registered, data))
        if whole:
            for name in self.listing.tools:
                if name not in listing.tools:
                    self.registry.remove(name)
            self.listing = listing
        for registered, model in models:
            self.registry.add(self.make_tool(registered, model))
        self.gateway.review_listing(self.key, self.config, models)
        return out

    def make_tool(self, registered: str, listing: mcp_types.Tool) -> Any:
        """The registry's tool for the upstream's ``listing``, registered as ``registered``: its
        calls go to the upstream under the upstream's own name."""
        upstream = listing.name

        async def call(ctx: ToolContext, **arguments: Any) -> ToolOutput:
            return await self.call_upstream(upstream, arguments, ctx)

        call.__name__ = registered
        return make_tool(
            call,
            name=registered,
            description=listing.description or listing.title or upstream,
            parameters=strict_schema(listing.input_schema, False),
            timeout=self.config.timeout,
            output_schema=listing.output_schema,
        )

    async def call_upstream(
        self, upstream_name: str, arguments: dict[str, Any], ctx: ToolContext
    ) -> ToolOutput:
        """``tools/call`` on the server with the host's request id and ``_meta`` (progress
        token), and the current trace context."""
        request_id, host_meta, version = HOST_REQUEST.get()
        meta = dict(host_meta or {})
        propagate.inject(meta)
        token = meta.get("progressToken")
        if token is not None:
            self.progress[_hashable(token)] = ctx
        attributes: dict[str, Any] = {
            A.NETWORK_TRANSPORT: "pipe",
            A.MCP_METHOD_NAME: "tools/call",
            A.JSONRPC_REQUEST_ID: str(request_id),
        }
        if version:
            attributes[A.MCP_PROTOCOL_VERSION] = version
        request = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": upstream_name, "arguments": arguments, "_meta": meta},
        }
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.link.pending[request_id] = Pending(future=future)
        upstream = await self.link.ensure()
        upstream.send(dumps(request))
        try:
            answer = await future
        except asyncio.CancelledError:
            if request_id not in self.cancelled and self.link.upstream is upstream:
                upstream.send(_cancelled(request_id, "otelhooks proxy: the call was cancelled"))
            raise
        finally:
            self.link.pending.pop(request_id, None)
            if token is not None:
                self.progress.pop(_hashable(token), None)
        error = answer.get("error")
        if isinstance(error, dict):
            code = str(error.get("code"))
            raise MCPToolError(
                f"MCP error {code}: {error.get('message')}",
                error_type=code,
                attributes={**attributes, A.RPC_RESPONSE_STATUS_CODE: code},
            )
        result = answer.get("result")
        ctx.set_attributes(attributes)
        return output_of(result if isinstance(result, dict) else {})

    def progressed(self, message: dict[str, Any]) -> None:
        """A progress notification of a call in flight: recorded on the call's span."""
        params = message.get("params")
        if not isinstance(params, dict) or "progressToken" not in params:
            return
        ctx = self.progress.get(_hashable(params["progressToken"]))
        if ctx is not None:
            ctx.progress(
                {
                    "progress": params.get("progress"),
                    "total": params.get("total"),
                    "message": params.get("message"),
                }
            )


def _hashable(value: Any) -> Any:
    return value if isinstance(value, (str, int, float)) else json.dumps(value, sort_keys=True)


def _cancelled(request_id: Any, reason: str) -> bytes:
    params = {"requestId": request_id, "reason": reason}
    return dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
