"""Benchmark 15: the MCP gateway with everything on, against the direct call, a floor of its own
and peers, each served by a process of its own on loopback (run by ``benchmarks/run.py --only
gateway``).

Sides, each called by the official ``mcp`` client with ``get_current_time`` on mcp-server-time:

* ``direct``: the client talks to mcp-server-time over stdio;
* ``floor``: a minimal Streamable HTTP pass-through written with the SDK alone
  (``benchmarks/gateway_sides.py floor``);
* ``otelhooks``: ``otelhooks mcp proxy --listen`` with everything on: a token file, an identity
  rule, a deny rule, redaction, pinning and the audit log (on disk before each answer);
* ``relay``: ``otelhooks mcp proxy`` over stdio (the line relay) with a deny rule and the audit
  log; ``bare relay``: an asyncio line relay that parses nothing (``gateway_sides.py relay``);
* peers, when ``--peers PYTHON`` names an interpreter with them (``run.py`` makes one venv per
  peer): fastmcp's ``create_proxy`` over HTTP with a ``StaticTokenVerifier`` and a deny
  middleware, and over stdio with the deny middleware (``benchmarks/gateway_peers.py``).

Latency: paired rounds at one client, the sides taking turns (a ratio is the median of the
per-round ratios); p50 and p99 over every call. Throughput: calls per second with 10 and 50
clients, each side in turn. Gateway CPU: the served process's user+system time per call.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TIME_SERVER = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
ARGS = {"timezone": "Europe/Paris"}
ENV = {**os.environ, "OTEL_TRACES_EXPORTER": "none"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process, its threads included (not its children)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Side:
    """One way of calling the tool: how to open a client, and the process serving it."""

    name: str
    connect: Callable[[], contextlib.AbstractAsyncContextManager[Client]]
    pid: Callable[[], int | None] = lambda: None
    samples: list[float] = field(default_factory=list)


async def wait_port(port: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
            return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port}")


@contextlib.contextmanager
def served(command: list[str], cwd: Path, python_path: bool = True) -> Any:
    env = {**ENV, "PYTHONPATH": str(ROOT)} if python_path else ENV
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def http_client(url: str, token: str | None = None) -> Any:
    @contextlib.asynccontextmanager
    async def connect() -> AsyncIterator[Client]:
        headers = {"Authorization": f"Bearer {token}"} if token else None
        async with (
            create_mcp_http_client(headers=headers) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            yield client

    return connect


def stdio_client(command: list[str], cwd: Path) -> Any:
    @contextlib.asynccontextmanager
    async def connect() -> AsyncIterator[Client]:
        params = StdioServerParameters(command=command[0], args=command[1:], env=ENV, cwd=cwd)
        async with Client(params) as client:
            yield client

    return connect


POLICY = """
[[upstream]]
name = "time"
command = {command}

[tools]
deny = ["convert_time"]

[auth]
tokens = "{tokens}"

[[identity]]
name = "bench"
subjects = ["bench"]
tools = ["get_current_time"]

[audit]
file = "{tmp}/audit.jsonl"

[store]
file = "{tmp}/gateway.sqlite3"
"""

RELAY_POLICY = """
[tools]
deny = ["convert_time"]
[audit]
file = "{tmp}/relay-audit.jsonl"
[store]
file = "{tmp}/relay.sqlite3"
"""


async def latency_rounds(sides: list[Side], n: int, repeats: int) -> None:
    """Paired rounds at one client: ``n`` calls per side per round, the order alternating."""
    async with contextlib.AsyncExitStack() as stack:
        clients = {s.name: await stack.enter_async_context(s.connect()) for s in sides}
        for side in sides:  # warm-up
            for _ in range(20):
                await clients[side.name].call_tool("get_current_time", ARGS)
        for index in range(repeats):
            order = sides if index % 2 == 0 else list(reversed(sides))
            for side in order:
                client = clients[side.name]
                for _ in range(n):
                    started = time.perf_counter()
                    await client.call_tool("get_current_time", ARGS)
                    side.samples.append((time.perf_counter() - started) * 1e6)


async def throughput(side: Side, clients: int, calls: int) -> dict[str, float]:
    """Calls per second with ``clients`` connections calling at once, and the served
    process's CPU per call."""
    async with contextlib.AsyncExitStack() as stack:
        opened = [await stack.enter_async_context(side.connect()) for _ in range(clients)]
        for client in opened:
            await client.call_tool("get_current_time", ARGS)
        pid = side.pid()
        cpu = cpu_seconds(pid) if pid else 0.0
        latencies: list[float] = []

        async def one(client: Client) -> None:
            for _ in range(calls):
                started = time.perf_counter()
                await client.call_tool("get_current_time", ARGS)
                latencies.append((time.perf_counter() - started) * 1e6)

        started = time.perf_counter()
        await asyncio.gather(*(one(c) for c in opened))
        wall = time.perf_counter() - started
        used = (cpu_seconds(pid) - cpu) if pid else 0.0
    total = clients * calls
    return {
        "calls_per_s": total / wall,
        "p50_us": statistics.median(latencies),
        "p99_us": percentile(latencies, 99),
        "cpu_us_per_call": used / total * 1e6 if pid else float("nan"),
    }


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


def paired(a: Side, b: Side, n: int) -> float:
    """The median over rounds of (a's mean / b's mean)."""
    rounds = len(a.samples) // n
    ratios = []
    for r in range(rounds):
        x = statistics.fmean(a.samples[r * n : (r + 1) * n])
        y = statistics.fmean(b.samples[r * n : (r + 1) * n])
        ratios.append(x / y)
    return statistics.median(ratios)


async def run(quick: bool, peers: str | None) -> dict[str, Any]:
    from otelhooks.integrations.mcp.auth import add_token

    # Quick (the test suite's smoke run): every side runs, at a concurrency that starts few
    # upstream processes (each client's session has its own).
    n, repeats = (10, 2) if quick else (100, 9)
    counts = {1: 10, 4: 4} if quick else {1: 200, 10: 60, 50: 20}
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        tmp = Path(folder)
        tokens = tmp / "tokens.toml"
        token = add_token(tokens, "bench", scopes=["mcp"])
        (tmp / "gateway.toml").write_text(
            POLICY.format(command=json.dumps(TIME_SERVER), tokens=tokens, tmp=tmp)
        )
        (tmp / "relay.toml").write_text(RELAY_POLICY.format(tmp=tmp))
        proxy = [sys.executable, "-m", "otelhooks", "mcp", "proxy", "--log-level", "WARNING"]
        gateway_port, floor_port = free_port(), free_port()
        gateway = stack.enter_context(
            served(
                [*proxy, "--policy", str(tmp / "gateway.toml"), "--listen",
                 f"127.0.0.1:{gateway_port}"],
                tmp,
            )
        )  # fmt: skip
        floor = stack.enter_context(
            served(
                [sys.executable, str(ROOT / "benchmarks" / "gateway_sides.py"), "floor",
                 str(floor_port), "--", *TIME_SERVER],
                tmp,
            )
        )  # fmt: skip
        sides = [
            Side("direct", stdio_client(TIME_SERVER, tmp)),
            Side(
                "floor", http_client(f"http://127.0.0.1:{floor_port}/mcp"), lambda: floor.pid
            ),
            Side(
                "otelhooks",
                http_client(f"http://127.0.0.1:{gateway_port}/mcp", token),
                lambda: gateway.pid,
            ),
            Side(
                "relay",
                stdio_client(
                    [*proxy, "--policy", str(tmp / "relay.toml"), "--", *TIME_SERVER], tmp
                ),
            ),
            Side(
                "bare relay",
                stdio_client(
                    [sys.executable, str(ROOT / "benchmarks" / "gateway_sides.py"), "relay",
                     "--", *TIME_SERVER],
                    tmp,
                ),
            ),
        ]  # fmt: skip
        if peers:
            fast_port = free_port()
            fast = stack.enter_context(
                served(
                    [peers, str(ROOT / "benchmarks" / "gateway_peers.py"), "http", str(fast_port),
                     "--", *_peer_time(peers)],
                    tmp, python_path=False,
                )
            )  # fmt: skip
            await wait_port(fast_port)
            sides.append(
                Side(
                    "fastmcp",
                    http_client(f"http://127.0.0.1:{fast_port}/mcp", "bench-token"),
                    lambda: fast.pid,
                )
            )
            sides.append(
                Side(
                    "fastmcp stdio",
                    stdio_client(
                        [peers, str(ROOT / "benchmarks" / "gateway_peers.py"), "stdio", "--",
                         *_peer_time(peers)],
                        tmp,
                    ),
                )
            )  # fmt: skip
        await wait_port(gateway_port)
        await wait_port(floor_port)
        await latency_rounds(sides, n, repeats)
        by = {s.name: s for s in sides}
        results: dict[str, Any] = {
            "latency": {
                s.name: {
                    "p50_us": statistics.median(s.samples),
                    "p99_us": percentile(s.samples, 99),
                }
                for s in sides
            },
            "ratios": {
                "otelhooks / direct": paired(by["otelhooks"], by["direct"], n),
                "otelhooks / floor": paired(by["otelhooks"], by["floor"], n),
                "floor / direct": paired(by["floor"], by["direct"], n),
                "relay / direct": paired(by["relay"], by["direct"], n),
                "bare relay / direct": paired(by["bare relay"], by["direct"], n),
            },
        }
        if "fastmcp" in by:
            results["ratios"]["fastmcp / direct"] = paired(by["fastmcp"], by["direct"], n)
            results["ratios"]["fastmcp stdio / direct"] = paired(
                by["fastmcp stdio"], by["direct"], n
            )
        load: dict[str, Any] = {}
        http_sides = [s for s in sides if s.name in ("direct", "floor", "otelhooks", "fastmcp")]
        for clients, calls in counts.items():
            for side in http_sides:
                load[f"{side.name} x{clients}"] = await throughput(side, clients, calls)
        results["load"] = load
        results["calls_per_round"] = n
        results["rounds"] = repeats
    return results


def _peer_time(python: str) -> list[str]:
    return [python, "-m", "mcp_server_time", "--local-timezone", "UTC"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--peers", help="an interpreter with fastmcp and mcp-server-time")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.quick, args.peers))))


if __name__ == "__main__":
    main()
