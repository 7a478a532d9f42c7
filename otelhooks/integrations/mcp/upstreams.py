"""The upstream connections of the proxy: one :class:`UpstreamSet` (a connection to each
upstream, and the registry of their tools) per owner, in a bounded :class:`UpstreamPool`.

An upstream lists and does what its client says it can take: server-everything, say, offers its
sampling and elicitation tools only to a client that declared those capabilities. The proxy
therefore connects on behalf of a host with the host's own capabilities (:class:`HostProfile`).

Who owns a set (``[proxy] isolation``):

* ``"host"`` (default): each host session (each caller with its capabilities, in the 2026-07-28
  era, which has no sessions) has its own; one host's subscriptions, log level, roots and
  server-side state are never another's.
* ``"shared"``: the sessions of one identity with the same capabilities share one.

A set is never shared by two identities, and none is opened for an identity that may use
nothing. The pool holds at most ``max_sessions`` sets, ``max_sessions_per_identity`` of them
for one identity: a new owner beyond either is refused (:class:`SessionLimit`), and a running
set is never closed to make room. A set nobody used for ``idle_timeout`` seconds is closed (its
processes stopped); so is a host session's set when the session ends.

Requests an upstream sends (roots, sampling, elicitation) go through the set's :class:`HostRoute`:
only to the host session that owns the set, never to another, or are answered by the proxy
itself. An upstream's roots are what the operator configured (``[[upstream]] roots``): a host
that owns the set may narrow them, never widen them; with shared sets, or a host that does not
answer roots, the proxy answers from the configuration; an upstream without ``roots`` is not
offered the roots capability at all (it keeps its own directories).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import shutil
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol
from urllib.parse import unquote, urlsplit

import mcp.types as mcp_types
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from opentelemetry import context as otel_context

from ...core import HookChain, Hooks, ToolCallRecorder, ToolExecutor, ToolRegistry
from .client import MCPServerTools
from .naming import ToolRef
from .policy import UpstreamConfig

logger = logging.getLogger("otelhooks.mcp.proxy")

ROOTS_TIMEOUT: Final = 10.0
"""Seconds a host has to answer the roots an upstream asks for, before the configured ones."""
RETRY_AFTER: Final = (1.0, 2.0, 5.0, 15.0, 30.0, 60.0)
MAX_STARTING: Final = 4
"""Upstream sets started at once (the others wait their turn, not their start timeout)."""
START_GRACE: Final = 2.0
"""Seconds a host's new session waits for its other upstreams once one is up."""
"""Seconds between attempts to start an upstream that is down (the last repeats)."""


@dataclass(frozen=True, slots=True)
class HostProfile:
    """What a host declared it can answer: the capabilities its upstream sessions declare."""

    sampling: bool = False
    sampling_tools: bool = False  # sampling with tools (``sampling.tools``)
    elicitation: bool = False

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
        )

    def describe(self) -> str:
        """The declared capabilities as a word list (``none`` when there are none)."""
        names = [
            name
            for name, on in (
                ("sampling", self.sampling),
                ("sampling.tools", self.sampling_tools),
                ("elicitation", self.elicitation),
            )
            if on
        ]
        return ", ".join(names) or "none"


class HostChannel(Protocol):
    """A host session the proxy can send a request to (the ``mcp`` SDK's server session)."""

    async def send_request(self, request: Any, result_type: Any, **options: Any) -> Any:
        """Send ``request`` to the host and return its result as ``result_type``."""


@dataclass(slots=True)
class InFlight:
    """A host's request being served with a set: where requests for it may go."""

    session: Any
    request_id: Any


class HostRoute:
    """Where the requests of a set's upstreams go: the owning host session (``owner``: its
    session object, any request's), preferring the request of it in flight so the host sees
    them on that request's stream; or nowhere (shared sets, and the 2026-07-28 era's callers,
    which have no session to send to): the proxy answers."""

    def __init__(self, owner: Any | None, host_roots: bool) -> None:
        self.owner = owner
        self.host_roots = host_roots  # the owner said it answers roots
        self.calls: list[InFlight] = []

    def channel(self) -> tuple[Any, Any] | None:
        """(session, related request id or ``None``) to send a request to the owner."""
        if self.calls:
            call = self.calls[-1]
            return call.session, call.request_id
        if self.owner is not None:
            return self.owner, None
        return None

    @contextlib.contextmanager
    def serving(self, session: Any, request_id: Any) -> Any:
        """Within the block, the owner's request ``request_id`` is in flight."""
        call = InFlight(session, request_id)
        self.calls.append(call)
        try:
            yield call
        finally:
            self.calls.remove(call)


@dataclass(frozen=True, slots=True)
class Callbacks:
    """What the proxy does with what an upstream sends of its own."""

    ask: Callable[[UpstreamSet, str, Any, Any], Awaitable[Any]]  # (set, what, request, type)
    logging: Callable[[UpstreamSet, mcp_types.LoggingMessageNotificationParams], Awaitable[None]]
    message: Callable[[UpstreamSet, Any], Awaitable[None]]  # resource and list notifications
    tools_changed: Callable[[UpstreamSet, MCPServerTools], Awaitable[None]]


@dataclass
class Routes:
    """Which upstream serves a prompt or a resource the host asks for."""

    prompts: dict[str, tuple[MCPServerTools, str]] = field(default_factory=dict)
    resources: dict[str, MCPServerTools] = field(default_factory=dict)
    templates: dict[str, MCPServerTools] = field(default_factory=dict)


class UpstreamSet:
    """One connection to each upstream for one owner, with the registry and executor of
    their tools. ``identity`` is the owner's pseudonym (``None``: the proxy's own, at start)."""

    def __init__(
        self,
        configs: Iterable[UpstreamConfig],
        profile: HostProfile,
        *,
        hooks: Hooks | HookChain,
        recorder: ToolCallRecorder,
        callbacks: Callbacks,
        tool_timeout: float,
        environment: Callable[[UpstreamConfig], dict[str, str] | None] = lambda c: c.environment(),
        route: HostRoute | None = None,
        identity: str | None = None,
        max_result_bytes: int | None = None,
        trace_context: otel_context.Context | None = None,
        approver: Any = None,
    ) -> None:
        self.key = uuid.uuid4().hex  # this set among all: what pins and routes are kept by
        self.profile = profile
        self.identity = identity
        self.route = route or HostRoute(None, False)
        self.configs = {c.name: c for c in configs}
        self.callbacks = callbacks
        self.servers: dict[str, MCPServerTools] = {}
        for c in self.configs.values():
            ask = self._asker(c)
            self.servers[c.name] = MCPServerTools(
                c.url if c.url else list(c.command),
                prefix=c.prefix,
                name=c.name,
                timeout=c.timeout,
                env=environment(c),
                cwd=c.cwd,
                headers=c.headers,
                sampling_callback=ask("sampling") if profile.sampling else None,
                sampling_capabilities=(
                    mcp_types.SamplingCapability(tools=mcp_types.SamplingToolsCapability())
                    if profile.sampling_tools
                    else None
                ),
                elicitation_callback=ask("elicitation") if profile.elicitation else None,
                list_roots_callback=ask("roots") if c.roots else None,
                logging_callback=self._log,
                message_callback=self._message,
                on_tools_changed=self._tools_changed,
                mode=c.mode,
                start_timeout=c.start_timeout,
                max_result_bytes=max_result_bytes,
                trace_context=trace_context,
            )
        self.registry = ToolRegistry()
        self.executor = ToolExecutor(
            self.registry, hooks, tool_timeout=tool_timeout, recorder=recorder, approver=approver
        )
        self.refs: dict[str, ToolRef] = {}  # served name -> (upstream, its own name)
        self.routes = Routes()
        self.down: dict[str, tuple[int, float]] = {}  # name -> (failures, next attempt)
        self.busy = 0  # requests being served with the set
        self.last_used = time.monotonic()
        self.hosts: weakref.WeakSet[Any] = weakref.WeakSet()  # handshake-era connections
        self.bus = InMemorySubscriptionBus()  # events for the set's 2026-07-28 listen streams
        self.listen = ListenHandler(self.bus)
        self.closed = False
        self._retrying: asyncio.Task[None] | None = None
        self._background: set[asyncio.Future[Any]] = set()

    def _asker(self, config: UpstreamConfig) -> Callable[[str], Callable[..., Awaitable[Any]]]:
        def ask(what: str) -> Callable[..., Awaitable[Any]]:
            async def forward(context: Any, params: Any = None) -> Any:
                return await self.callbacks.ask(self, what, config, params)

            return forward

        return ask

    async def _log(self, params: mcp_types.LoggingMessageNotificationParams) -> None:
        await self.callbacks.logging(self, params)

    async def _message(self, notification: Any) -> None:
        await self.callbacks.message(self, notification)

    async def _tools_changed(self, server: MCPServerTools) -> None:
        self._register(server)
        await self.callbacks.tools_changed(self, server)

    # -- life --------------------------------------------------------------------------------

    async def start(self, grace: float | None = None) -> None:
        """Connect every upstream and register its tools; one that fails is logged and tried
        again later, in the background. Raises ``RuntimeError`` when none started.

        With ``grace``, an upstream still starting ``grace`` seconds after another is up is
        left to finish in the background (its tools appear when it does, a list change):
        one upstream that hangs on start does not hold up a host's session."""
        servers = list(self.servers.values())
        tasks: dict[asyncio.Future[None], MCPServerTools] = {
            asyncio.ensure_future(s.connect()): s for s in servers
        }
        try:
            await self._await_started(tasks, grace)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def _await_started(
        self, tasks: dict[asyncio.Future[None], MCPServerTools], grace: float | None
    ) -> None:
        servers = list(self.servers.values())
        pending = set(tasks)
        deadline: float | None = None
        while pending:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            done, pending = await asyncio.wait(
                pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            for task in done:
                self._started(tasks[task], task)
            if (
                grace is not None
                and deadline is None
                and len(self.down) < len(servers) - len(pending)
            ):
                deadline = time.monotonic() + grace  # one is up: the others get ``grace``
            if deadline is not None and time.monotonic() >= deadline:
                break
        for task in pending:
            server = tasks[task]
            logger.warning(
                "upstream %r is still starting; its tools come when it is up", server.name
            )
            self._background.add(task)
            task.add_done_callback(functools.partial(self._late, server))
        if pending:
            return
        if len(self.down) == len(servers):
            failures = [str(t.exception()) for t in tasks if not t.cancelled() and t.exception()]
            raise RuntimeError(
                "no upstream MCP server started: " + "; ".join(f[:300] for f in failures)
            )

    def _started(self, server: MCPServerTools, task: asyncio.Future[None]) -> bool:
        failure = task.exception() if not task.cancelled() else asyncio.CancelledError()
        if failure is not None:
            logger.error("upstream %r did not start: %s", server.name, failure)
            self.down[server.name] = (1, time.monotonic() + RETRY_AFTER[0])
            return False
        self._register(server)
        return True

    def _late(self, server: MCPServerTools, task: asyncio.Future[None]) -> None:
        self._background.discard(task)
        if self.closed:
            return
        if self._started(server, task):
            changed = asyncio.ensure_future(self.callbacks.tools_changed(self, server))
            self._background.add(changed)
            changed.add_done_callback(self._background.discard)

    def _register(self, server: MCPServerTools) -> None:
        """The upstream's tools in the set's registry; a served name another upstream has
        already is left out (and said so): which of two tools a name means must not depend
        on which answered first."""
        mine = {e.name for e in server.listings}
        for name, ref in list(self.refs.items()):
            if ref.upstream == server.name and name not in mine:
                del self.refs[name]
                self.registry.remove(name)
        for entry in server.listings:
            taken = self.refs.get(entry.name)
            if taken is not None and taken.upstream != server.name:
                logger.error(
                    "upstream %r serves a tool named %r, as %r does: it is left out (give one "
                    "of them a prefix)",
                    server.name,
                    entry.name,
                    taken.upstream,
                )
                continue
            self.refs[entry.name] = ToolRef(server.name, entry.listing.name)
            self.registry.add(entry.tool)

    def retry_down(self) -> None:
        """Start the upstreams that are down again, in the background, each no sooner than
        its back-off allows: a request never waits for one."""
        if not self.down or self.closed:
            return
        if self._retrying is None or self._retrying.done():
            self._retrying = asyncio.ensure_future(self._retry())

    async def _retry(self) -> None:
        now = time.monotonic()
        for name, (failures, due) in list(self.down.items()):
            if due > now:
                continue
            server = self.servers[name]
            try:
                await server.connect()
            except Exception as exc:
                delay = RETRY_AFTER[min(failures, len(RETRY_AFTER) - 1)]
                self.down[name] = (failures + 1, time.monotonic() + delay)
                logger.warning("upstream %r is still down (next try in %g s): %s", name, delay, exc)
                continue
            del self.down[name]
            self._register(server)
            logger.info("upstream %r is up", name)
            with contextlib.suppress(Exception):
                await self.callbacks.tools_changed(self, server)

    async def close(self) -> None:
        """Stop every upstream (a command line's whole process group), and end the listen
        streams."""
        self.closed = True
        if self._retrying is not None:
            self._retrying.cancel()
        for task in list(self._background):
            task.cancel()
        self.listen.close()
        await asyncio.gather(*(s.close() for s in self.servers.values()), return_exceptions=True)

    @contextlib.asynccontextmanager
    async def using(self) -> Any:
        """Mark the set busy for the block (the idle reaper leaves it alone)."""
        self.busy += 1
        try:
            yield self
        finally:
            self.busy -= 1
            self.last_used = time.monotonic()

    # -- what the upstreams offer ------------------------------------------------------------

    def capabilities(self, server: MCPServerTools) -> mcp_types.ServerCapabilities | None:
        """What an upstream declared (``None`` when it is not connected)."""
        return server.server_capabilities

    def offering(self, what: str) -> list[MCPServerTools]:
        """The connected upstreams that declared ``what`` (``resources``, ``prompts``...)."""
        return [
            s
            for s in self.servers.values()
            if (c := self.capabilities(s)) is not None and getattr(c, what) is not None
        ]

    def server_of(self, tool: str) -> MCPServerTools | None:
        """The upstream whose tool is served as ``tool``."""
        ref = self.refs.get(tool)
        return self.servers.get(ref.upstream) if ref is not None else None


class SessionLimit(RuntimeError):
    """No upstream session can be opened for this owner now: the proxy's or the identity's
    limit is reached."""


class UpstreamPool:
    """The upstream sets of the proxy, by owner key, bounded (see the module's docs).

    ``opener(key, profile, identity, route)`` makes and starts a set. Keys are whatever the
    serving path uses to tell owners apart; ``identity`` (a pseudonym) is what the per-identity
    limit counts.
    """

    def __init__(
        self,
        opener: Callable[[HostProfile, str | None, HostRoute], Awaitable[UpstreamSet]],
        *,
        max_sessions: int,
        max_per_identity: int,
        idle_timeout: float,
    ) -> None:
        self.opener = opener
        self.max_sessions = max_sessions
        self.max_per_identity = max_per_identity
        self.idle_timeout = idle_timeout
        self.sets: dict[Any, UpstreamSet] = {}
        self._owners: dict[Any, str | None] = {}  # every key reserved, opening or open
        self._opening: dict[Any, asyncio.Future[UpstreamSet]] = {}
        self._closing: set[asyncio.Task[Any]] = set()
        self._reaper: asyncio.Task[None] | None = None
        self._starting = asyncio.Semaphore(MAX_STARTING)

    def count(self, identity: str | None = None) -> int:
        """Sets reserved, being opened or open (for ``identity`` when given)."""
        owners = list(self._owners.values())
        return len(owners) if identity is None else owners.count(identity)

    def admits(self, identity: str | None) -> str | None:
        """Why a new set for ``identity`` would be refused now (``None``: it would not)."""
        if self.count() >= self.max_sessions:
            return f"the gateway's {self.max_sessions} upstream sessions are in use"
        if identity is not None and self.count(identity) >= self.max_per_identity:
            return f"this identity's {self.max_per_identity} upstream sessions are in use"
        return None

    def reserve(self, key: Any, identity: str | None) -> None:
        """Hold a place for ``key``'s set (:class:`SessionLimit` when there is none)."""
        if key in self._owners:
            return
        refusal = self.admits(identity)
        if refusal is not None:
            raise SessionLimit(refusal)
        self._owners[key] = identity

    def rekey(self, old: Any, new: Any) -> None:
        """A reservation made under ``old`` is ``new``'s from now on."""
        if old in self._owners and new not in self._owners:
            self._owners[new] = self._owners.pop(old)

    async def get(
        self, key: Any, profile: HostProfile, identity: str | None, route: HostRoute
    ) -> UpstreamSet:
        """The set of ``key``, opened when there is none (:class:`SessionLimit` when the
        limits do not let it open)."""
        found = self.sets.get(key)
        if found is not None and not found.closed:
            return found
        opening = self._opening.get(key)
        if opening is None:
            self.reserve(key, identity)
            opening = asyncio.ensure_future(self._open(key, profile, identity, route))
            self._opening[key] = opening
        return await asyncio.shield(opening)

    async def _open(
        self, key: Any, profile: HostProfile, identity: str | None, route: HostRoute
    ) -> UpstreamSet:
        try:
            async with self._starting:  # a burst of new sessions starts a few at a time
                opened = await self.opener(profile, identity, route)
        except BaseException:
            self._owners.pop(key, None)
            raise
        finally:
            self._opening.pop(key, None)
        if key not in self._owners:  # released while it opened: its owner is gone
            self.close_soon(opened)
            raise SessionLimit("the session ended while its upstreams started")
        self.sets[key] = opened
        self._watch()
        return opened

    def release(self, key: Any) -> None:
        """The owner of ``key`` is gone: its place is freed and its set closed (in the
        background)."""
        self._owners.pop(key, None)
        uset = self.sets.pop(key, None)
        if uset is not None:
            self.close_soon(uset)

    def close_soon(self, uset: UpstreamSet) -> None:
        """Close ``uset`` in the background (held until done)."""
        try:
            task = asyncio.get_running_loop().create_task(uset.close())
        except RuntimeError:  # no loop any more: the proxy is gone, and its processes with it
            return
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def _watch(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

    async def _reap(self) -> None:
        """Close the sets nobody used for ``idle_timeout`` seconds, until there are none."""
        period = max(0.05, min(self.idle_timeout / 4, 15.0))
        while self.sets:
            await asyncio.sleep(period)
            now = time.monotonic()
            for key, uset in list(self.sets.items()):
                if uset.busy == 0 and now - uset.last_used > self.idle_timeout:
                    logger.info("closing upstream sessions idle for %g s", self.idle_timeout)
                    self.release(key)

    async def close(self) -> None:
        """Close every set, and wait for them to close."""
        if self._reaper is not None:
            self._reaper.cancel()
        for key in list(self._owners):
            self.release(key)
        for opening in list(self._opening.values()):
            opening.cancel()
        await asyncio.gather(*self._closing, return_exceptions=True)


def narrow_roots(given: list[str], configured: tuple[str, ...]) -> list[str]:
    """The roots of ``given`` (URIs a host answered) that lie inside a configured root, as
    canonical ``file://`` URIs (symlinks resolved on this machine): a host may narrow an
    upstream's roots, never widen them."""
    bounds = [os.path.realpath(c) for c in configured]
    out: list[str] = []
    for uri in given:
        parts = urlsplit(uri)
        if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
            continue
        path = os.path.realpath(unquote(parts.path))
        if any(path == b or path.startswith(b.rstrip("/") + "/") for b in bounds):
            out.append(Path(path).as_uri())
    return out


def check_commands(configs: Sequence[UpstreamConfig]) -> None:
    """Refuse (``ValueError``, one line) an upstream command that is not found: which program,
    and what to install for it."""
    for config in configs:
        if not config.command:
            continue
        program = config.command[0]
        path = (config.environment() or {}).get("PATH", os.environ.get("PATH", ""))
        if os.sep in program:
            found = os.access(program, os.X_OK)
        else:
            found = shutil.which(program, path=path) is not None
        if not found:
            raise ValueError(
                f"upstream {config.name!r}: the command {program!r} is not found "
                f"{'' if os.sep in program else 'on PATH '}({_install_hint(program)})"
            )


_INSTALLERS: Final = {
    "uvx": "install uv: pip install uv, or see https://docs.astral.sh/uv/",
    "uv": "install uv: pip install uv, or see https://docs.astral.sh/uv/",
    "npx": "install Node.js and npm",
    "node": "install Node.js",
    "pipx": "install pipx: pip install pipx",
    "bunx": "install Bun",
    "docker": "install Docker",
}


def _install_hint(program: str) -> str:
    name = os.path.basename(program)
    hint = _INSTALLERS.get(name)
    if hint is not None:
        return hint
    return "install it, or give its absolute path in the policy's command"
