"""The proxy's stdio transport (:mod:`otelhooks.integrations.mcp.stdio`) in a process of its own:
messages in and out through the SDK's transport, stray prints off the wire, and the standard
streams as they were afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = r"""
import asyncio, os, sys, threading
import mcp_types as types
from mcp.shared.message import SessionMessage
from otelhooks.integrations.mcp.stdio import stdio_server

async def main():
    async with stdio_server() as (read, write):
        print("stray print while serving")
        async for message in read:
            request = message.message
            size = len(request.params["blob"])
            await write.send(SessionMessage(
                types.JSONRPCResponse(jsonrpc="2.0", id=request.id, result={"size": size})
            ))
        await write.aclose()
    threads = "none" if threading.active_count() == 1 else "some"
    print(f"after: blocking={os.get_blocking(0)},{os.get_blocking(1)} worker threads: {threads}")

asyncio.run(main())
"""


def request(index: int, size: int) -> str:
    params = {"blob": "x" * size}
    return json.dumps({"jsonrpc": "2.0", "id": index, "method": "echo", "params": params}) + "\n"


@pytest.mark.parametrize("stdin_kind", ["pipe", "file"])
def test_messages_round_trip_and_stdout_stays_the_protocol(tmp_path: Path, stdin_kind: str) -> None:
    """Three requests (one of 3 MB, past asyncio's default line limit) are each answered once;
    a print while serving goes to stderr (with stdout block-buffered, as on a pipe, so what is
    still in the buffer at the end must be written out before fd 1 is given back); after
    serving, stdout is stdout again and blocking. Pipes are served on the event loop (no worker
    thread); a regular file on stdin by the SDK's own transport (its worker threads)."""
    sizes = [10, 3 * 1024 * 1024, 5]
    wire = "".join(request(i, size) for i, size in enumerate(sizes))
    feed = tmp_path / "in.jsonl"
    feed.write_text(wire)
    with feed.open("rb") as source:
        done = subprocess.run(
            [sys.executable, "-c", CHILD],
            stdin=source if stdin_kind == "file" else None,
            input=None if stdin_kind == "file" else wire.encode(),
            capture_output=True,
            timeout=60,
            cwd=Path(__file__).resolve().parent.parent,
            env={k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"},
        )
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.decode().splitlines()
    answers = [json.loads(line) for line in lines[:-1]]
    assert [a["result"]["size"] for a in answers] == sizes
    assert [a["id"] for a in answers] == [0, 1, 2]
    threads = "none" if stdin_kind == "pipe" else "some"
    assert lines[-1] == f"after: blocking=True,True worker threads: {threads}"
    assert "stray print while serving" in done.stderr.decode()
