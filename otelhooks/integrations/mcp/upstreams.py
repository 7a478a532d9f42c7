"""The upstream connections a host uses: one :class:`UpstreamSet` per host (or per capability
profile, when hosts share them), declaring upstream exactly the capabilities the host declared.

An upstream lists and does what its client says it can take: server-everything, say, offers its
sampling and elicitation tools only to a client that declared those capabilities. The proxy
therefore connects to its upstreams on behalf of a host with the host's own capabilities
(:class:`HostProfile`), and forwards what the upstream asks back to that host.

Isolation (``[proxy] isolation``): ``"host"`` (default) gives every host session its own
upstream sessions, so one host's subscriptions, log level, roots and server-side state are never
another's; ``"shared"`` lets every host with the same capabilities share them (fewer processes,
but notifications and log levels are then common to those hosts).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import mcp.types as mcp_types
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from opentelemetry import context as otel_context

from ...core import HookChain, Hooks, ToolCallRecorder, ToolExecutor, ToolRegistry
from .client import MCPServerTools
from .policy import ProxyPolicy, UpstreamConfig

logger = logging.getLogger("otelhooks.mcp.proxy")


@dataclass(frozen=True, slots=True)
class HostProfile:
    """What a host declared it can answer: the capabilities its upstream sessions declare."""

    sampling: bool = False
    sampling_tools: bool = False  # sampling with tools (``sampling.tools``)
    elicitation: bool = False
    roots: bool = False

    @classmethod
    def of(cls, capabilities: mcp_types.ClientCapabilities | None) -> HostProfile:
        """The profile of a host's declared capabilities (none: a profile with nothing)."""
        if capabilities is None:
            return cls()
        sampling = capabilities.sampling
        return cls(
            sampling=sampling is not None,
            sampling_tools=sampling is not None and sampling.tools is not None,
            elicitation=capabilities.elicitation is not None,
            roots=capabilities.roots is not None,
        )

    def describe(self) -> str:
        """The declared capabilities as a word list (``none`` when there are none)."""
        names = [
            name
            for name, on in (
                ("sampling", self.sampling),
                ("sampling.tools", self.sampling_tools),
                ("elicitation", self.elicitation),
                ("roots", self.roots),
            )
            if on
        ]
        return ", ".join(names) or "none"


@dataclass(frozen=True, slots=True)
class Callbacks:
    """What an upstream may ask of the host, forwarded by the proxy."""

    sampling: Callable[..., Awaitable[Any]]
    elicitation: Callable[..., Awaitable[Any]]
    roots: Callable[..., Awaitable[Any]]
    logging: Callable[..., Awaitable[None]]
    message: Callable[..., Awaitable[None]]  # notifications the upstream sends (list changes...)
    tools_changed: Callable[[MCPServerTools], Any]


@dataclass
class Routes:
    """Which upstream serves a prompt or a resource the host asks for."""

    prompts: dict[str, tuple[MCPServerTools, str]] = field(default_factory=dict)
    resources: dict[str, MCPServerTools] = field(default_factory=dict)
    templates: dict[str, MCPServerTools] = field(default_factory=dict)


class UpstreamSet:
    """One connection to each upstream, with the registry and executor of their tools."""

    def __init__(
        self,
        policy: ProxyPolicy,
        configs: Iterable[UpstreamConfig],
        profile: HostProfile,
        *,
        prefixed: bool,
        hooks: Hooks | HookChain,
        recorder: ToolCallRecorder,
        callbacks: Callbacks,
        tool_timeout: float,
        max_result_bytes: int | None = None,
        trace_context: otel_context.Context | None = None,
    ) -> None:
        self.profile = profile
        self.servers: dict[str, MCPServerTools] = {
            c.name: MCPServerTools(
                c.url if c.url else list(c.command),
                prefix=(c.prefix or c.name) if prefixed else c.prefix,
                name=c.name,
                timeout=c.timeout,
                env=c.environment(),
                cwd=c.cwd,
                headers=c.headers,
                sampling_callback=callbacks.sampling if profile.sampling else None,
                sampling_capabilities=(
                    mcp_types.SamplingCapability(tools=mcp_types.SamplingToolsCapability())
                    if profile.sampling_tools
                    else None
                ),
                elicitation_callback=callbacks.elicitation if profile.elicitation else None,
                list_roots_callback=callbacks.roots if profile.roots else None,
                logging_callback=callbacks.logging,
                message_callback=callbacks.message,
                on_tools_changed=callbacks.tools_changed,
                mode=c.mode,
                start_timeout=c.start_timeout,
                max_result_bytes=max_result_bytes,
                trace_context=trace_context,
            )
            for c in configs
        }
        self.registry = ToolRegistry()
        self.executor = ToolExecutor(
            self.registry, hooks, tool_timeout=tool_timeout, recorder=recorder
        )
        self.routes = Routes()
        self.down: set[str] = set()
        self.sessions = 0  # handshake-era host connections using the set
        self.last_used = time.monotonic()
        self.bus = InMemorySubscriptionBus()  # events for the set's 2026-07-28 listen streams
        self.listen = ListenHandler(self.bus)
        self._retry_lock = asyncio.Lock()

    async def start(self) -> None:
        """Connect every upstream and register its tools; one that fails is logged and tried
        again later. Raises ``RuntimeError`` when none started."""
        servers = list(self.servers.values())
        outcomes = await asyncio.gather(*(s.connect() for s in servers), return_exceptions=True)
        for server, outcome in zip(servers, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                logger.error("upstream %r did not start: %s", server.name, outcome)
                self.down.add(server.name)
            else:
                server.register(self.registry)
        if len(self.down) == len(servers):
            raise RuntimeError("no upstream MCP server started (see the errors above)")

    async def retry_down(self) -> None:
        """Try the upstreams that are down again."""
        if not self.down:
            return
        async with self._retry_lock:
            for name in list(self.down):
                server = self.servers[name]
                try:
                    await server.connect()
                except Exception as exc:
                    logger.warning("upstream %r is still down: %s", name, exc)
                    continue
                self.down.discard(name)
                server.register(self.registry)
                logger.info("upstream %r is up", name)

    async def close(self) -> None:
        """Stop every upstream (a command line's whole process group), and end the listen
        streams."""
        self.listen.close()
        await asyncio.gather(*(s.close() for s in self.servers.values()), return_exceptions=True)

    def capabilities(self, server: MCPServerTools) -> mcp_types.ServerCapabilities | None:
        """What an upstream declared (``None`` when it is not connected)."""
        client = server._client
        return client.server_capabilities if client is not None else None

    def offering(self, what: str) -> list[MCPServerTools]:
        """The connected upstreams that declared ``what`` (``resources``, ``prompts``...)."""
        return [
            s
            for s in self.servers.values()
            if (c := self.capabilities(s)) is not None and getattr(c, what) is not None
        ]

    def server_of(self, tool: str) -> MCPServerTools | None:
        """The upstream whose tool is registered as ``tool``."""
        for server in self.servers.values():
            if any(entry.name == tool for entry in server.listings):
                return server
        return None
