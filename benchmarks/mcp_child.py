"""MCP costs per ``tools/call`` on mcp-server-time (run by ``benchmarks/run.py --only mcp``).

1. The proxy: the official ``mcp`` client calling ``get_current_time`` through
   ``otelhooks mcp proxy`` (default policy: redaction on, spans recorded) against the same client
   calling the same server directly. Both connections stay open; the sides take turns in rounds.
2. The gateway: the same client over Streamable HTTP, with a bearer token, through
   ``otelhooks mcp proxy --listen`` with authentication (a token file) and the audit log on
   (each line flushed and fsynced), against the direct call; and the same listener without
   authentication or audit, to tell the transport from the gateway's own work.
3. The client adapter: ``MCPServerTools`` as an otelhooks tool (arguments checked against the
   input schema, result mapped, spans, redaction) against ``mcp.Client.call_tool`` on one
   connection to the same server.

Prints one JSON line: µs per call of each side and the paired ratios.
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
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from opentelemetry.trace import NoOpTracerProvider

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from otelhooks import NO_SCRUBBING, Hooks, ToolCall, ToolExecutor, ToolRegistry  # noqa: E402
from otelhooks.builtin import RedactionHook, Redactor  # noqa: E402
from otelhooks.integrations.mcp.client import MCPServerTools  # noqa: E402
from otelhooks.telemetry.testing import in_memory_tracing  # noqa: E402

TIME_SERVER = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
ARGS = {"timezone": "Europe/Paris"}


async def rounds(
    sides: dict[str, Callable[[], Awaitable[Any]]], n: int, repeats: int
) -> dict[str, list[float]]:
    """µs per call of each side, per round; the order alternates between rounds."""
    for fn in sides.values():
        for _ in range(min(n, 50)):
            await fn()
    samples: dict[str, list[float]] = {name: [] for name in sides}
    for index in range(repeats):
        order = list(sides.items())
        if index % 2:
            order.reverse()
        for name, fn in order:
            start = time.perf_counter()
            for _ in range(n):
                await fn()
            samples[name].append((time.perf_counter() - start) / n * 1e6)
    return samples


def paired(samples: dict[str, list[float]], a: str, b: str) -> float:
    return statistics.median(x / y for x, y in zip(samples[a], samples[b], strict=True))


async def proxy_overhead(n: int, repeats: int) -> dict[str, Any]:
    direct_params = StdioServerParameters(command=TIME_SERVER[0], args=TIME_SERVER[1:])
    proxy_params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "otelhooks", "mcp", "proxy", "--log-level", "WARNING", "--", *TIME_SERVER],
        env={"OTEL_TRACES_EXPORTER": "none"},
        cwd=str(ROOT),
    )
    async with Client(direct_params) as direct, Client(proxy_params) as proxied:

        async def call_direct() -> Any:
            return await direct.call_tool("get_current_time", ARGS)

        async def call_proxied() -> Any:
            return await proxied.call_tool("get_current_time", ARGS)

        samples = await rounds({"direct": call_direct, "proxy": call_proxied}, n, repeats)
    return {
        "direct_us": statistics.median(samples["direct"]),
        "proxy_us": statistics.median(samples["proxy"]),
        "proxy_over_direct": paired(samples, "proxy", "direct"),
    }


@contextlib.asynccontextmanager
async def listening(policy: str, port: int) -> AsyncIterator[None]:
    """``otelhooks mcp proxy --listen`` in a process of its own, until the block ends."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "policy.toml"
        path.write_text(policy.replace("{tmp}", tmp))
        proc = subprocess.Popen(
            [sys.executable, "-m", "otelhooks", "mcp", "proxy", "--log-level", "WARNING",
             "--policy", str(path), "--listen", f"127.0.0.1:{port}"],
            cwd=ROOT, env={**os.environ, "OTEL_TRACES_EXPORTER": "none", "XDG_STATE_HOME": tmp},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            for _ in range(300):
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                    break
                await asyncio.sleep(0.05)
            yield
        finally:
            proc.terminate()
            proc.wait(timeout=20)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def gateway_overhead(n: int, repeats: int) -> dict[str, Any]:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from otelhooks.integrations.mcp.auth import add_token

    upstream = f'[[upstream]]\nname = "time"\ncommand = {json.dumps(TIME_SERVER)}\n'
    gateway_port, open_port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as tokens_dir:
        tokens = Path(tokens_dir) / "tokens.toml"
        token = add_token(tokens, "bench", scopes=["mcp"])
        secured = upstream + (
            f'[auth]\ntokens = "{tokens}"\n[audit]\nfile = "{{tmp}}/audit.jsonl"\n'
        )
        direct_params = StdioServerParameters(command=TIME_SERVER[0], args=TIME_SERVER[1:])
        async with (
            listening(secured, gateway_port),
            listening(upstream, open_port),
            Client(direct_params) as direct,
            create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http,
            Client(
                streamable_http_client(f"http://127.0.0.1:{gateway_port}/mcp", http_client=http)
            ) as gateway,
            Client(f"http://127.0.0.1:{open_port}/mcp") as plain_http,
        ):

            async def call_direct() -> Any:
                return await direct.call_tool("get_current_time", ARGS)

            async def call_gateway() -> Any:
                return await gateway.call_tool("get_current_time", ARGS)

            async def call_http() -> Any:
                return await plain_http.call_tool("get_current_time", ARGS)

            sides = {"direct": call_direct, "gateway": call_gateway, "http": call_http}
            samples = await rounds(sides, n, repeats)
    return {
        "direct_us": statistics.median(samples["direct"]),
        "gateway_us": statistics.median(samples["gateway"]),
        "http_proxy_us": statistics.median(samples["http"]),
        "gateway_added_us": statistics.median(
            g - d for g, d in zip(samples["gateway"], samples["direct"], strict=True)
        ),
        "gateway_over_direct": paired(samples, "gateway", "direct"),
        "gateway_over_http_proxy": paired(samples, "gateway", "http"),
    }


async def adapter_cost(n: int, repeats: int) -> dict[str, Any]:
    tracing = in_memory_tracing()
    async with MCPServerTools(TIME_SERVER) as server:
        client = await server.client()
        bare = ToolRegistry()
        server.register(bare)
        untraced = ToolExecutor(  # the adapter alone: no spans, no scrubbing
            bare,
            tracer_provider=NoOpTracerProvider(),
            tool_timeout=None,
            scrubber=NO_SCRUBBING,
        )
        redactor = Redactor()
        full = ToolExecutor(
            bare,
            Hooks([RedactionHook(redactor)]),
            tracer_provider=tracing.provider,
            scrubber=redactor,
        )
        counter = iter(range(10**9))

        async def raw() -> Any:
            return await client.call_tool("get_current_time", ARGS)

        async def adapter() -> Any:
            return await untraced.execute(ToolCall(f"a{next(counter)}", "get_current_time", ARGS))

        async def boundary() -> Any:
            tracing.clear()
            return await full.execute(ToolCall(f"b{next(counter)}", "get_current_time", ARGS))

        samples = await rounds(
            {"client": raw, "adapter": adapter, "adapter+boundary": boundary}, n, repeats
        )
    client_us = statistics.median(samples["client"])
    return {
        "client_us": client_us,
        "adapter_us": statistics.median(samples["adapter"]),
        "boundary_us": statistics.median(samples["adapter+boundary"]),
        "adapter_added_us": statistics.median(
            a - c for a, c in zip(samples["adapter"], samples["client"], strict=True)
        ),
        "boundary_added_us": statistics.median(
            b - c for b, c in zip(samples["adapter+boundary"], samples["client"], strict=True)
        ),
        "adapter_over_client": paired(samples, "adapter", "client"),
        "boundary_over_client": paired(samples, "adapter+boundary", "client"),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n, repeats = (50, 3) if args.quick else (300, 11)
    results = {
        "proxy": asyncio.run(proxy_overhead(n, repeats)),
        "gateway": asyncio.run(gateway_overhead(n, repeats)),
        "adapter": asyncio.run(adapter_cost(n, repeats)),
        "calls_per_round": n,
        "rounds": repeats,
    }
    print(json.dumps(results))


if __name__ == "__main__":
    main()
