"""For the gateway tests: an OAuth issuer's JWKS served on loopback with tokens minted by PyJWT,
and the proxy served over Streamable HTTP in the test's own event loop (real TCP, real SDK
client), so its spans land in the test's in-memory exporter."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from otelhooks.integrations.mcp.policy import parse_policy
from otelhooks.integrations.mcp.proxy import MCPProxy

from .jaeger_support import free_port


@dataclass
class Issuer:
    """An OAuth authorization server, as far as a resource server sees one: its JWKS URL and
    the tokens it signs."""

    url: str
    jwks_url: str
    key: rsa.RSAPrivateKey
    kid: str = "key-1"

    def token(
        self,
        subject: str,
        *,
        audience: str,
        scopes: Sequence[str] = ("mcp",),
        groups: Sequence[str] = (),
        lifetime: float = 300,
        issuer: str | None = None,
        key: rsa.RSAPrivateKey | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> str:
        now = int(time.time())
        claims = {
            "iss": issuer or self.url,
            "sub": subject,
            "aud": audience,
            "iat": now,
            "exp": now + int(lifetime),
            "scope": " ".join(scopes),
            "groups": list(groups),
            "client_id": f"{subject}-laptop",
            **(extra or {}),
        }
        return jwt.encode(claims, key or self.key, algorithm="RS256", headers={"kid": self.kid})


@contextlib.contextmanager
def issuer() -> Iterator[Issuer]:
    """A JWKS endpoint on loopback for a fresh RSA key."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    body = json.dumps({"keys": [{**public, "kid": "key-1", "use": "sig", "alg": "RS256"}]})

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            data = body.encode()
            self.send_response(200 if self.path == "/jwks.json" else 404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield Issuer(url=url, jwks_url=f"{url}/jwks.json", key=key)
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Gateway:
    url: str  # the MCP endpoint
    base: str  # scheme://host:port
    proxy: MCPProxy


@contextlib.asynccontextmanager
async def gateway(policy_text: str, tmp_path: Path, **proxy_options: Any) -> AsyncIterator[Gateway]:
    """The proxy over Streamable HTTP on a free loopback port, in this event loop."""
    import uvicorn

    from otelhooks.integrations.mcp.http import server_config

    port = free_port()
    policy = parse_policy(policy_text, str(tmp_path / "gateway.toml"), base=tmp_path)
    proxy = MCPProxy(policy, **proxy_options)
    await proxy.start()
    app = proxy.http_app("127.0.0.1", port)
    config = server_config(app, "127.0.0.1", port, policy.http.header_timeout)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        for _ in range(200):
            if server.started:
                break
            await asyncio.sleep(0.02)
        base = f"http://127.0.0.1:{port}"
        yield Gateway(f"{base}/mcp", base, proxy)
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 60)
        await proxy.close()


@contextlib.asynccontextmanager
async def host(url: str, token: str | None = None, **client_options: Any) -> AsyncIterator[Client]:
    """The official client over Streamable HTTP, with a bearer token when given."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http), **client_options) as client,
    ):
        yield client


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw-http", "version": "1"},
    },
}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


async def raw_post(
    url: str, token: str | None = None, headers: Mapping[str, str] | None = None
) -> httpx.Response:
    """An ``initialize`` POST as any HTTP client sends it: to see the HTTP answer itself."""
    sent = {**MCP_HEADERS, **(headers or {})}
    if token:
        sent["authorization"] = f"Bearer {token}"
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.post(url, json=INITIALIZE, headers=sent)


def descendants(marker: str, root: int | None = None) -> list[int]:
    """The live processes below ``root`` (default: this one) whose command line holds
    ``marker`` (zombies left out)."""
    import os

    root = os.getpid() if root is None else root
    parents: dict[int, int] = {}
    lines: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            if fields[0] == "Z":
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                lines[int(entry)] = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
            parents[int(entry)] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue

    def below(pid: int) -> bool:
        seen = 0
        while pid > 1 and seen < 64:
            pid = parents.get(pid, 0)
            if pid == root:
                return True
            seen += 1
        return False

    return sorted(p for p, line in lines.items() if marker in line and below(p))


def environ(pid: int) -> dict[str, str]:
    """The environment a process started with (``/proc/PID/environ``)."""
    with open(f"/proc/{pid}/environ", "rb") as raw:
        items = [i.decode(errors="replace") for i in raw.read().split(b"\0") if i]
    return dict(item.partition("=")[::2] for item in items)


async def wait_until(check: Any, timeout: float, interval: float = 0.1) -> bool:
    """Whether ``check()`` became true within ``timeout`` seconds (polled)."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(interval)


def wait_for_port(port: int, timeout: float = 60) -> None:
    """Return once something listens on ``port`` of loopback (or ``timeout`` passed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port)):
                return
        except OSError:
            time.sleep(0.1)


async def opened_session(http: httpx.AsyncClient, url: str, token: str) -> dict[str, str]:
    """The headers of a handshake-era session opened with a raw ``initialize``."""
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token}"}
    opened = await http.post(url, json=INITIALIZE, headers=headers)
    return {**headers, "mcp-session-id": opened.headers["mcp-session-id"]}


@dataclass
class RelayHost:
    """A host speaking raw JSON-RPC lines to a :class:`StdioRelay` run in the test's own event
    loop (over socket pairs), so the test sees each line and the relay's spans."""

    relay: Any
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def send(self, message: Any) -> None:
        self.writer.write(json.dumps(message).encode() + b"\n")

    async def answer(self, request_id: Any, timeout: float = 30) -> list[dict[str, Any]]:
        """The lines up to the answer to ``request_id`` (that answer last)."""
        seen = []
        async with asyncio.timeout(timeout):
            while True:
                message = json.loads(await self.reader.readline())
                seen.append(message)
                if message.get("id") == request_id and "method" not in message:
                    return seen

    async def request(self, request_id: Any, method: str, params: Any = None) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return (await self.answer(request_id))[-1]


@contextlib.asynccontextmanager
async def relay_host(gateway: Any, config: Any) -> AsyncIterator[RelayHost]:
    """``gateway``'s relay in front of ``config``'s server, driven by a :class:`RelayHost`."""
    from otelhooks.integrations.mcp.relay import StdioRelay

    kept = []  # stream ends kept alive (a writer collected closes its socket)
    to_relay, to_host = socket.socketpair(), socket.socketpair()
    host_writes = await asyncio.open_connection(sock=to_relay[0])
    relay_reads = await asyncio.open_connection(sock=to_relay[1])
    relay_writes = await asyncio.open_connection(sock=to_host[0])
    host_reads = await asyncio.open_connection(sock=to_host[1])
    kept += [host_writes, relay_reads, relay_writes, host_reads]
    relay = StdioRelay(gateway, config, relay_reads[0], relay_writes[1])
    running = asyncio.ensure_future(relay.run())
    try:
        yield RelayHost(relay, host_reads[0], host_writes[1])
    finally:
        host_writes[1].close()
        await asyncio.wait_for(running, 30)
        for _, writer in kept:
            writer.close()
