"""The proxy's stdin and stdout as asyncio pipes: MCP's stdio transport without worker threads.

The ``mcp`` SDK's :func:`~mcp.server.stdio.stdio_server` reads and writes the standard streams
through blocking files in worker threads: each line read and each message written is a trip to
a thread and back (three per ``tools/call``). :func:`stdio_server` here gives the SDK's transport
the same streams as non-blocking asyncio pipes, so a message is read and written on the event
loop. What it keeps of the SDK's contract: while serving, fd 0 reads the null device and fd 1
writes to stderr, so a hook's or a library's stray ``print`` never reaches the protocol, and
both (with their blocking mode) are restored on exit. When a standard stream is not a pipe, a
socket or a terminal (a regular file, say), and on Windows, the SDK's own transport serves
instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
import sys
from collections.abc import AsyncIterator
from typing import Any, Final

from mcp.server.stdio import stdio_server as sdk_stdio_server

MAX_LINE = 1 << 30
"""The longest message read (bytes): the SDK's own transport has no limit either."""


class PipeLines:
    """A stream of text lines from an asyncio reader (``async for line in ...``). A line that
    is not JSON is answered on ``writer`` with the JSON-RPC parse error (``-32700``), as the
    protocol asks, and not passed on."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter | None = None
    ) -> None:
        self._reader = reader
        self._writer = writer

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self._reader.readline()
            if not line:
                raise StopAsyncIteration
            text = line.decode("utf-8", errors="replace")
            if self._writer is None or not text.strip():
                return text
            try:
                json.loads(text)
            except ValueError:
                self._writer.write(_PARSE_ERROR)
                continue
            return text


_PARSE_ERROR: Final = (
    b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,'
    b'"message":"otelhooks proxy: the message is not JSON"}}\n'
)


class PipeText:
    """Text written to an asyncio pipe: ``await write(text)``, then ``await flush()``."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        """Queue ``text`` (UTF-8); the pipe sends what it can at once."""
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        """Wait while the pipe holds more than its high-water mark (the reader is slow)."""
        await self._writer.drain()


def _flush_stdout() -> None:
    """Write out what ``print`` left in ``sys.stdout``'s buffer while fd 1 still points at
    stderr: stray output must not reach the wire when fd 1 is given back."""
    with contextlib.suppress(Exception):
        sys.stdout.flush()


def _pollable(fd: int) -> bool:
    """Whether asyncio can watch ``fd`` (a pipe, a socket or a character device)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


class _Claim:
    """fd 0 and fd 1 moved out of the way: the wire on private descriptors, fd 0 on the null
    device and fd 1 on stderr until :meth:`release`."""

    def __init__(self) -> None:
        import fcntl  # POSIX only: stdio_server() does not claim on Windows

        _flush_stdout()
        self.blocking = {fd: os.get_blocking(fd) for fd in (0, 1)}
        self.wire: dict[int, int] = {}
        try:
            for fd in (0, 1):
                self.wire[fd] = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
            null = os.open(os.devnull, os.O_RDONLY)
            try:
                os.dup2(null, 0)
            finally:
                os.close(null)
            os.dup2(2, 1)
        except OSError:
            self.release()
            raise

    def release(self) -> None:
        """fd 0 and fd 1 back on the wire, in their blocking mode; the private descriptors
        closed."""
        _flush_stdout()
        for fd, private in self.wire.items():
            with contextlib.suppress(OSError):
                os.dup2(private, fd)
                os.set_blocking(fd, self.blocking[fd])
            with contextlib.suppress(OSError):
                os.close(private)
        self.wire = {}


async def _drain(transport: asyncio.WriteTransport, timeout: float = 5.0) -> None:
    """Wait (at most ``timeout`` seconds) until ``transport`` has handed all it holds to the
    operating system."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while transport.get_write_buffer_size() and loop.time() < deadline:
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def stdio_pipes() -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter] | None]:
    """This process's stdin and stdout as an asyncio reader and writer, claimed (see the
    module's docs) until the block ends; ``None`` when they cannot be polled (and on Windows)."""
    if sys.platform == "win32" or not (_pollable(0) and _pollable(1)):
        yield None
        return
    loop = asyncio.get_running_loop()
    claim = _Claim()
    read_transport: asyncio.ReadTransport | None = None
    write_transport: asyncio.WriteTransport | None = None
    try:
        reader = asyncio.StreamReader(limit=MAX_LINE)
        # closefd=False: the claim closes the descriptors, after fd 0 and 1 point back.
        read_file = os.fdopen(claim.wire[0], "rb", buffering=0, closefd=False)
        write_file = os.fdopen(claim.wire[1], "wb", buffering=0, closefd=False)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), read_file
        )
        write_transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, write_file
        )
        yield reader, asyncio.StreamWriter(write_transport, protocol, None, loop)
    finally:
        if write_transport is not None:
            await _drain(write_transport)
            write_transport.close()
        if read_transport is not None:
            read_transport.close()
        claim.release()


@contextlib.asynccontextmanager
async def stdio_server() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's stdio transport (``(read_stream, write_stream)``) on asyncio pipes over this
    process's stdin and stdout; on the SDK's own blocking files when they cannot be polled."""
    async with stdio_pipes() as pipes:
        if pipes is None:
            async with sdk_stdio_server() as streams:
                try:
                    yield streams
                finally:
                    _flush_stdout()
            return
        reader, writer = pipes
        lines = PipeLines(reader, writer)
        async with sdk_stdio_server(lines, PipeText(writer)) as streams:  # type: ignore[arg-type]
            yield streams
