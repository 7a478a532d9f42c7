"""The stdio relay's link to its one server: the process (started, read and stopped), the
requests sent to it whose answers are awaited, and the server started again after it died,
given the handshake the host completed before anything else reaches it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from opentelemetry.trace import Span

from .client import CONNECTION_ERROR, MCPToolError, dies_with_parent
from .policy import UpstreamConfig

logger = logging.getLogger("otelhooks.mcp.proxy")

STOP_GRACE: Final = 2.0
"""Seconds a server has to exit after its stdin closes, before its process group is ended."""
PRIVATE: Final = "otelhooks-relay-"
"""The prefix of the ids of the relay's own requests."""

Answer = Callable[[dict[str, Any]], Awaitable[None] | None]


def dumps(message: Any) -> bytes:
    """One JSON-RPC message as a line."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


@dataclass
class Pending:
    """A request sent upstream whose answer the relay handles: a call's future, or the span to
    end and what to do with the answer before the host gets it."""

    future: asyncio.Future[dict[str, Any]] | None = None
    span: Span | None = None
    answer: Answer | None = None


class UpstreamProcess:
    """One server process with its stdin and stdout as asyncio streams, in a process group of
    its own that :meth:`stop` ends."""

    def __init__(self, config: UpstreamConfig, env: dict[str, str] | None = None) -> None:
        self.config = config
        self.env = env if env is not None else config.environment()
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        """Start the server (its stderr is the proxy's) with its allowlisted environment."""
        command = dies_with_parent(self.config.command)
        env = self.env
        self.process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=env,
            cwd=self.config.cwd,
            start_new_session=True,
            limit=1 << 30,
        )

    def send(self, line: bytes) -> None:
        """Queue ``line`` for the server (lost when it is gone)."""
        process = self.process
        if process is not None and process.stdin is not None and not process.stdin.is_closing():
            process.stdin.write(line)

    async def readline(self) -> bytes:
        """The server's next line (empty when it closed stdout)."""
        process = self.process
        if process is None or process.stdout is None:
            return b""
        try:
            return await process.stdout.readline()
        except (OSError, ValueError):
            return b""

    async def stop(self) -> None:
        """Close the server's stdin, give it :data:`STOP_GRACE` seconds, then end its process
        group (SIGTERM, then SIGKILL)."""
        process = self.process
        if process is None:
            return
        if process.stdin is not None:
            with contextlib.suppress(Exception):
                process.stdin.close()
        try:
            for signum in (None, signal.SIGTERM, signal.SIGKILL):
                if signum is not None:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(process.pid, signum)
                try:
                    await asyncio.wait_for(process.wait(), STOP_GRACE)
                    break
                except TimeoutError:
                    continue
        finally:  # also when the stop is cancelled: nothing of the server is left behind
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)  # what the server left running
            transport = getattr(process, "_transport", None)
            if transport is not None:  # closed now, not when collected after its loop is gone
                transport.close()


class LinkOwner(Protocol):
    """What the relay does with what its server sends."""

    def upstream_message(
        self, upstream: UpstreamProcess, message: dict[str, Any], line: bytes
    ) -> Awaitable[None] | None:
        """A JSON-RPC object from the server that is no answer awaited here."""

    def not_json(self, line: bytes) -> None:
        """A line from the server that is no JSON object."""

    async def drain(self) -> None:
        """Wait until what was written to the host is flushed."""

    def request_gone(self, request_id: Any, pending: Pending, text: str) -> None:
        """A host request the server died before answering."""


class UpstreamLink:
    """The live server of a relay (started on first need, again after it died) and the
    requests awaiting its answers."""

    def __init__(
        self,
        config: UpstreamConfig,
        env: Callable[[], dict[str, str] | None],
        owner: LinkOwner,
        spawn: Callable[[Awaitable[Any]], asyncio.Task[Any]],
    ) -> None:
        self.config = config
        self.env = env
        self.owner = owner
        self.spawn = spawn
        self.upstream: UpstreamProcess | None = None
        self.pending: dict[Any, Pending] = {}
        self.handshake: dict[str, Any] | None = None  # the host's initialize, once accepted
        self.initialized = False  # the host sent notifications/initialized
        self.meta: dict[str, Any] | None = None  # 2026-07-28: the host's envelope
        self._next_id = 0
        self._reading: asyncio.Task[None] | None = None
        self._starting = asyncio.Lock()

    async def ensure(self) -> UpstreamProcess:
        """The live server, started when there is none. A server started again is given the
        handshake the host completed (its ``initialize``, then ``notifications/initialized``)
        before it is published: whatever arrives meanwhile waits for it, and nothing reaches a
        server that is not initialized. A server that fails the replay is stopped
        (``MCPToolError``)."""
        live = self.upstream
        if live is not None:
            return live
        async with self._starting:
            if self.upstream is not None:
                return self.upstream
            started = UpstreamProcess(self.config, self.env())
            await started.start()
            self._reading = self.spawn(self._read(started))
            if self.handshake is not None:
                logger.info("starting upstream %r again", self.config.name)
                await self._replay(started, self.handshake)
            self.upstream = started
            return started

    async def _replay(self, started: UpstreamProcess, handshake: dict[str, Any]) -> None:
        try:
            await self.request("initialize", handshake, upstream=started)
        except (MCPToolError, TimeoutError) as error:
            await started.stop()
            raise MCPToolError(
                f"the MCP server {self.config.name!r} refused the host's handshake when "
                f"started again: {error}",
                error_type=CONNECTION_ERROR,
            ) from error
        except BaseException:
            await started.stop()
            raise
        if self.initialized:
            started.send(dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    async def stop(self) -> None:
        """Stop the server and stop reading it."""
        upstream, self.upstream = self.upstream, None
        if upstream is not None:
            await upstream.stop()
        if self._reading is not None:
            self._reading.cancel()

    async def request(
        self, method: str, params: dict[str, Any], upstream: UpstreamProcess | None = None
    ) -> dict[str, Any]:
        """A request of the relay's own to the server (``upstream``: one being started); its
        result (``MCPToolError`` for an error or a server that is gone)."""
        upstream = upstream or self.upstream or await self.ensure()
        self._next_id += 1
        request_id = f"{PRIVATE}{self._next_id}"
        if self.meta is not None and method != "initialize":
            params = {**params, "_meta": self.meta}
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[request_id] = Pending(future=future)
        upstream.send(
            dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        )
        try:
            async with asyncio.timeout(self.config.start_timeout):
                answer = await future
        finally:
            self.pending.pop(request_id, None)
        error = answer.get("error")
        if isinstance(error, dict):
            raise MCPToolError(f"MCP error {error.get('code')}: {error.get('message')}")
        result = answer.get("result")
        return result if isinstance(result, dict) else {}

    async def _read(self, upstream: UpstreamProcess) -> None:
        try:
            while line := await upstream.readline():
                try:
                    message = json.loads(line)
                except ValueError:
                    message = None
                if isinstance(message, dict):
                    outcome = self.owner.upstream_message(upstream, message, line)
                    if outcome is not None:
                        await outcome
                else:
                    self.owner.not_json(line)
                await self.owner.drain()
        finally:
            if self.upstream is upstream:
                self.upstream = None
                self.spawn(upstream.stop())
            self._fail_pending()

    def _fail_pending(self) -> None:
        """The server is gone: what was waiting for it fails."""
        gone = (
            f"the MCP server {self.config.name!r} is gone (it closed its output); it is started "
            "again on the next call"
        )
        for request_id, pending in list(self.pending.items()):
            del self.pending[request_id]
            if pending.future is not None:
                if not pending.future.done():
                    pending.future.set_exception(MCPToolError(gone, error_type=CONNECTION_ERROR))
            elif not (isinstance(request_id, str) and request_id.startswith(PRIVATE)):
                self.owner.request_gone(request_id, pending, gone)
            if pending.span is not None:
                pending.span.end()
