"""Nothing lost in pass-through: the official client gets the same answers from
@modelcontextprotocol/server-everything (npm) directly and through ``otelhooks mcp proxy``, for
every feature the host supports, and is offered only what it declared it can take."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp.types as mcp_types
import pytest
from mcp import Client, StdioServerParameters

from otelhooks.integrations.mcp.policy import UpstreamConfig
from otelhooks.integrations.mcp.proxy import MCPProxy

from .mcp_support import everything_command

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


def upstream() -> StdioServerParameters:
    command = everything_command()
    return StdioServerParameters(command=command[0], args=command[1:])


def proxied(tmp_path: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "otelhooks", "mcp", "proxy", "--", *everything_command()],
        env={"OTEL_TRACES_EXPORTER": "none", "XDG_STATE_HOME": str(tmp_path / "state")},
        cwd=str(ROOT),
    )


async def sample(context: Any, params: mcp_types.CreateMessageRequestParams) -> Any:
    return mcp_types.CreateMessageResult(
        role="assistant",
        content=mcp_types.TextContent(type="text", text="a sampled answer"),
        model="host-model",
    )


class Seen:
    """What the host was told on its own: log messages and resource updates."""

    def __init__(self) -> None:
        self.logs: list[str] = []
        self.updated: list[str] = []

    async def log(self, params: mcp_types.LoggingMessageNotificationParams) -> None:
        self.logs.append(str(params.level))

    async def message(self, message: Any) -> None:
        note = getattr(message, "root", message)
        if isinstance(note, mcp_types.ResourceUpdatedNotification):
            self.updated.append(str(note.params.uri))


@contextlib.asynccontextmanager
async def connected(target: StdioServerParameters, seen: Seen) -> AsyncIterator[Client]:
    async with Client(
        target,
        mode="legacy",  # server-everything speaks the 2025-11-25 handshake era
        sampling_callback=sample,
        logging_callback=seen.log,
        message_handler=seen.message,
    ) as client:
        yield client


# server-everything's dynamic resources say when they were made.
_CLOCK = re.compile(r"\d{1,2}:\d{2}:\d{2}( [AP]M)?|\d{4}-\d{2}-\d{2}T[\d:.]+Z?")


def plain(model: Any) -> Any:
    """A model as JSON data, with clock times made equal."""
    return json.loads(_CLOCK.sub("<time>", model.model_dump_json(by_alias=True, exclude_none=True)))


async def answers(client: Client, seen: Seen) -> dict[str, Any]:
    """Everything a host would ask server-everything for, in one place."""
    out: dict[str, Any] = {}
    tools = (await client.list_tools()).tools
    out["tools"] = sorted((plain(t) for t in tools), key=lambda t: t["name"])
    calls = {
        "echo": {"message": "hello through the proxy"},
        "get-sum": {"a": 2, "b": 40},
        "get-structured-content": {"location": "New York"},
        "get-tiny-image": {},
        "get-resource-links": {"count": 3},
        "get-annotated-message": {"messageType": "error", "includeImage": True},
        "get-resource-reference": {"resourceType": "Text", "resourceId": 2},
        "trigger-sampling-request": {"prompt": "Say hi", "maxTokens": 10},
    }
    for name, arguments in calls.items():
        out[f"call {name}"] = plain(await client.call_tool(name, arguments))
    progress: list[float] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    long = await client.call_tool(
        "trigger-long-running-operation", {"duration": 1, "steps": 3}, progress_callback=on_progress
    )
    out["long running"] = (plain(long), progress)
    resources = await client.list_resources()
    out["resources"] = plain(resources)
    out["templates"] = plain(await client.list_resource_templates())
    first = resources.resources[0]
    out["read"] = plain(await client.read_resource(first.uri))
    out["prompts"] = plain(await client.list_prompts())
    out["simple prompt"] = plain(await client.get_prompt("simple-prompt"))
    out["args prompt"] = plain(
        await client.get_prompt("args-prompt", {"city": "Lima", "state": "Lima"})
    )
    out["completion"] = plain(
        await client.complete(
            mcp_types.PromptReference(type="ref/prompt", name="completable-prompt"),
            {"name": "department", "value": "E"},
        )
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        await client.set_logging_level("debug")
    await client.call_tool("toggle-simulated-logging", {})
    await client.subscribe_resource(str(first.uri))
    await client.call_tool("toggle-subscriber-updates", {})
    for _ in range(100):  # the first of each arrives at once, the next ones every 5 s
        if seen.logs and seen.updated:
            break
        await asyncio.sleep(0.05)
    out["told"] = (bool(seen.logs), sorted(set(seen.updated)))
    out["capabilities"] = plain(client.server_capabilities)
    return out


async def test_direct_and_proxied_answers_are_the_same(tmp_path: Path) -> None:
    direct_seen, proxy_seen = Seen(), Seen()
    async with connected(upstream(), direct_seen) as direct:
        expected = await answers(direct, direct_seen)
    async with connected(proxied(tmp_path), proxy_seen) as through:
        got = await answers(through, proxy_seen)
    # Tasks are the one capability the proxy does not pass on (documented).
    assert "tasks" in expected["capabilities"] and "tasks" not in got["capabilities"]
    expected["capabilities"].pop("tasks")
    assert got["told"][0] and got["told"][1]  # a log message and a resource update arrived
    for key in expected:
        assert got[key] == expected[key], key


async def test_a_host_is_offered_only_what_it_declared_it_can_take(tmp_path: Path) -> None:
    gated = {"trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"}

    async def names(target: StdioServerParameters, **callbacks: Any) -> set[str]:
        async with Client(target, mode="legacy", **callbacks) as client:
            return {t.name for t in (await client.list_tools()).tools}

    plain_direct = await names(upstream())
    plain_proxied = await names(proxied(tmp_path))
    assert plain_direct == plain_proxied and not plain_proxied & gated
    sampling_direct = await names(upstream(), sampling_callback=sample)
    sampling_proxied = await names(proxied(tmp_path), sampling_callback=sample)
    assert sampling_direct == sampling_proxied
    assert "trigger-sampling-request" in sampling_proxied
    assert not sampling_proxied & (gated - {"trigger-sampling-request"})


@pytest.mark.parametrize("through", ["stdio relay", "proxy session"])
async def test_a_2026_host_through_the_proxy_gets_the_same_tools_and_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, through: str
) -> None:
    """Over stdio the host negotiates with the server itself (server-everything: the
    handshake era, as directly); a proxy session (``MCPProxy.server()``, as ``--listen``
    serves) speaks the 2026-07-28 era to the host whatever the server speaks."""
    async with Client(upstream()) as auto:
        negotiated = auto.protocol_version
    async with Client(upstream(), mode="legacy") as direct:
        expected_tools = sorted(t.name for t in (await direct.list_tools()).tools)
        expected = plain(await direct.call_tool("get-structured-content", {"location": "Chicago"}))
        expected_prompts = plain(await direct.list_prompts())["prompts"]
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    async with contextlib.AsyncExitStack() as stack:
        if through == "stdio relay":
            target: Any = proxied(tmp_path)
        else:
            config = UpstreamConfig("everything", tuple(everything_command()))
            proxy = await stack.enter_async_context(MCPProxy(upstreams=[config]))
            target, negotiated = proxy.server(), "2026-07-28"
        modern = await stack.enter_async_context(Client(target))
        assert modern.protocol_version == negotiated
        assert sorted(t.name for t in (await modern.list_tools()).tools) == expected_tools
        got = plain(await modern.call_tool("get-structured-content", {"location": "Chicago"}))
        got.pop("_meta", None)  # the 2026-07-28 envelope names the server that answered
        assert plain(await modern.list_prompts())["prompts"] == expected_prompts
    assert got == expected
