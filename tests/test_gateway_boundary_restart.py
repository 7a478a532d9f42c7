"""The stdio relay starting a dead server again: the new server gets the handshake the host
completed, and only it, before any request reaches it; what arrives meanwhile waits.

Both interleavings are forced, not waited for: the host that fell back to ``initialize`` after a
``server/discover`` probe it gave up on (the server had already taken the probe, so it refuses
the handshake), and a request of the relay's own made while the replay is in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import mcp.types as mcp_types
import pytest

from otelhooks.integrations.mcp.gateway import Gateway
from otelhooks.integrations.mcp.policy import UpstreamConfig, parse_policy
from otelhooks.integrations.mcp.relay_link import UpstreamProcess

from .gateway_support import INITIALIZE, RelayHost, relay_host
from .mcp_support import fault_command

MODERN = {
    mcp_types.PROTOCOL_VERSION_META_KEY: "2026-07-28",
    mcp_types.CLIENT_INFO_META_KEY: {"name": "raw", "version": "1"},
    mcp_types.CLIENT_CAPABILITIES_META_KEY: {},
}


@pytest.fixture
async def relay(tmp_path: Any) -> AsyncIterator[RelayHost]:
    config = UpstreamConfig("fault", tuple(fault_command()))
    gateway = Gateway(parse_policy(f'[store]\nfile = "{tmp_path / "gw.sqlite3"}"\n'), [config])
    try:
        async with relay_host(gateway, config) as host:
            yield host
    finally:
        await gateway.close()


def _call(name: str, arguments: dict[str, Any], meta: dict[str, Any] | None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    return params


def _text(answer: dict[str, Any]) -> str:
    assert "result" in answer, answer
    return str(answer["result"]["content"][0]["text"])


async def test_a_handshake_the_server_refused_is_not_replayed_on_a_restart(
    relay: RelayHost,
) -> None:
    # What the official client does when its server/discover probe times out on a slow server:
    # it falls back to initialize, which the server (already in the 2026-07-28 era) refuses.
    discovered = await relay.request(1, "server/discover", {"_meta": MODERN})
    assert "result" in discovered, discovered
    refused = await relay.request(2, "initialize", INITIALIZE["params"])
    assert refused["error"]["code"] == mcp_types.UNSUPPORTED_PROTOCOL_VERSION  # forced
    assert _text(await relay.request(3, "tools/call", _call("echo", {"text": "a"}, MODERN))) == "a"

    crashed = await relay.request(4, "tools/call", _call("crash", {}, MODERN))
    assert crashed["result"]["isError"] is True and "is gone" in _text(crashed)

    # the server started again is in the host's era: its enveloped requests are served
    again = await relay.request(5, "tools/call", _call("echo", {"text": "again"}, MODERN))
    assert _text(again) == "again"
    listed = await relay.request(6, "tools/list", {"_meta": MODERN})
    assert "echo" in {tool["name"] for tool in listed["result"]["tools"]}


async def test_a_request_made_while_the_handshake_is_replayed_waits_for_it(
    relay: RelayHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[tuple[UpstreamProcess, str]] = []
    started = asyncio.Event()
    real_start, real_send = UpstreamProcess.start, UpstreamProcess.send

    async def start(self: UpstreamProcess) -> None:
        await real_start(self)
        started.set()

    def send(self: UpstreamProcess, line: bytes) -> None:
        text = line.decode()
        sent.append((self, text))
        real_send(self, line)

    monkeypatch.setattr(UpstreamProcess, "start", start)
    monkeypatch.setattr(UpstreamProcess, "send", send)

    assert "result" in await relay.request(1, "initialize", INITIALIZE["params"])
    relay.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    crashed = await relay.request(2, "tools/call", _call("crash", {}, None))
    assert "is gone" in _text(crashed)

    started.clear()
    echo = _call("echo", {"text": "b"}, None)
    relay.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": echo})
    await asyncio.wait_for(started.wait(), 30)  # the server is started; its handshake is not done
    listing = asyncio.ensure_future(relay.relay.tools.list_upstream())  # the relay's own request
    assert _text((await relay.answer(3))[-1]) == "b"
    await asyncio.wait_for(listing, 30)  # served, not refused
    assert "echo" in relay.relay.tools.listing.upstream_names

    newest = sent[-1][0]
    order = [line for process, line in sent if process is newest]
    assert '"method":"initialize"' in order[0]
    assert '"method":"notifications/initialized"' in order[1]  # before any request
    assert any('"method":"tools/list"' in line for line in order[2:])
