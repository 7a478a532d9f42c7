"""Cedar at the gateway, in front of real servers nobody here wrote (mcp-server-git from PyPI,
@modelcontextprotocol/server-filesystem from npm), driven by the official ``mcp`` client: an
approval-marked permit becomes elicitation to the calling host (accepted, refused, declined,
cancelled), never a form for arguments holding a secret; forbids and attribute conditions hold
over Streamable HTTP and the stdio relay alike; the same policy file decides the same in-process;
a typo stops the start with file and line; ``--check`` names the policies of each tool."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp.types as mcp_types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

pytest.importorskip("cedarpy")
ROOT = Path(__file__).resolve().parents[1]

from otelhooks import Hooks, ToolCall, ToolExecutor, ToolRegistry  # noqa: E402
from otelhooks.builtin.cedar import CedarPolicy  # noqa: E402
from otelhooks.builtin.store import SQLiteStore  # noqa: E402
from otelhooks.integrations.mcp import MCPServerTools  # noqa: E402
from otelhooks.integrations.mcp.auth import add_token  # noqa: E402
from otelhooks.integrations.mcp.cedar import cedar_keys  # noqa: E402
from otelhooks.integrations.mcp.proxy import ProxyStartError  # noqa: E402

from .gateway_support import gateway, host  # noqa: E402
from .mcp_support import (  # noqa: E402
    filesystem_command,
    git_command,
    git_repository,
)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

POLICIES = """\
// Role-based: admins may call every git tool.
@id("admins-use-git")
permit(principal in Group::"admins", action in Action::"call_tool", resource in Upstream::"git");

// Anyone may look at the status, once a person approves it.
@id("status-with-approval")
@approval("required")
permit(principal, action == Action::"git/git_status", resource);

// Attribute-based: listing a folder of the shared tree.
@id("list-shared")
permit(principal, action == Action::"fs/list_directory", resource)
when { context.arguments.path like "*shared*" };

// Forbid overrides permit: never the private folder.
@id("never-private")
forbid(principal, action in Action::"call_tool", resource)
when { (context.arguments has path && context.arguments.path like "*private*")
       || (context.arguments has repo_path && context.arguments.repo_path like "*private*") };
"""


def text_of(result: mcp_types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, mcp_types.TextContent))


def _setup(
    tmp_path: Path, fs: bool = True, git: bool = True, timeout: float = 20
) -> tuple[str, dict[str, str]]:
    repo = git_repository(tmp_path / "repo")
    tree = tmp_path / "tree"
    (tree / "shared").mkdir(parents=True)
    (tree / "private").mkdir()
    (tree / "shared" / "notes.txt").write_text("hello")
    git_part, fs_part = POLICIES.split("// Attribute-based")
    # each part keeps its lines (the tests name them)
    policies = (POLICIES if git else "\n" * 9 + "// Attribute-based" + fs_part) if fs else git_part
    (tmp_path / "policies.cedar").write_text(policies)
    tokens = tmp_path / "tokens.toml"
    team = {
        "alice": add_token(tokens, "alice", scopes=["mcp"], groups=["staff"]),
        "root": add_token(tokens, "root", scopes=["mcp"], groups=["admins"]),
    }
    first = f'[[upstream]]\nname = "git"\ncommand = {json.dumps(git_command(repo))}'
    second = f'[[upstream]]\nname = "fs"\ncommand = {json.dumps(filesystem_command(tree))}'
    policy = f"""
[proxy]
isolation = "shared"
{first if git else ""}
{second if fs else ""}
[auth]
tokens = "{tokens}"
unmatched = "allow"
[store]
file = "gateway.sqlite3"
[cedar]
policies = "policies.cedar"
approval_timeout = {timeout}
"""
    return policy, team


async def ready(client: Client, *names: str) -> Client:
    """The client once the gateway lists ``names`` to it (its upstreams start per host)."""
    for _ in range(300):
        listed = {tool.name for tool in (await client.list_tools()).tools}
        if set(names) <= listed:
            return client
        await asyncio.sleep(0.1)
    raise AssertionError(f"never listed: {names} (listed: {sorted(listed)})")


def answering(log: list[Any], action: str, approve: bool | None = None) -> Any:
    async def elicit(context: Any, params: Any) -> mcp_types.ElicitResult:
        log.append(params)
        content = {"approve": approve} if approve is not None else None
        return mcp_types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    return elicit


async def test_an_approval_is_asked_of_the_calling_host_and_its_answer_holds(
    tmp_path: Path,
) -> None:
    policy, team = _setup(tmp_path, fs=False, timeout=3)
    repo = str(tmp_path / "repo")
    script = iter([("accept", True), ("accept", False), ("decline", None), ("cancel", None)])
    asked: list[Any] = []
    other: list[Any] = []

    async def alice_answers(context: Any, params: Any) -> mcp_types.ElicitResult:
        asked.append(params)
        action, approve = next(script)
        content = {"approve": approve} if approve is not None else None
        return mcp_types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    modern: list[Any] = []
    async with (
        gateway(policy, tmp_path) as gw,
        host(gw.url, team["alice"], mode="legacy", elicitation_callback=alice_answers) as alice,
        host(
            gw.url,
            team["root"],
            mode="legacy",
            elicitation_callback=answering(other, "accept", True),
        ) as root,
        host(
            gw.url, team["alice"], elicitation_callback=answering(modern, "accept", True)
        ) as stateless,
    ):
        await ready(alice, "git_status")
        await ready(root, "git_status")
        await ready(stateless, "git_status")
        answers = [await alice.call_tool("git_status", {"repo_path": repo}) for _ in range(4)]
        # root is an admin: the role's permit and the approval-marked one both determine, so
        # root is asked too (its own host, never alice's); git_log needs no approval.
        admin = await root.call_tool("git_status", {"repo_path": repo})
        log = await root.call_tool("git_log", {"repo_path": repo, "max_count": 1})
        # A host of the 2026-07-28 era has no back-channel: it is never sent a form, and the
        # call waits in the store; nobody answers within approval_timeout: blocked.
        waited = await stateless.call_tool("git_status", {"repo_path": repo})
        # A call whose arguments hold a secret is never shown in a form: the store instead.
        hidden = await alice.call_tool("git_status", {"repo_path": f"{repo}/{secret}"})
    approved, refused, declined, cancelled = answers
    assert not approved.is_error and "branch" in text_of(approved).lower(), text_of(approved)
    for result, word in ((refused, "refused"), (declined, "decline"), (cancelled, "cancel")):
        assert result.is_error and "blocked" in text_of(result), text_of(result)
        assert word in text_of(result), text_of(result)
    assert len(asked) == 4 and len(other) == 1
    assert not admin.is_error and not log.is_error
    # blocked after approval_timeout (the approver's bound or the request's, whichever first)
    assert modern == [] and waited.is_error and "within 3" in text_of(waited)
    assert hidden.is_error and secret not in text_of(hidden)
    assert "within 3" in text_of(hidden)
    form = asked[0]
    assert form.mode == "form"
    assert "git_status" in form.message and repo in form.message
    assert "status-with-approval" in form.message
    assert form.requested_schema["properties"]["approve"]["type"] == "boolean"


async def test_a_call_waiting_in_the_store_runs_once_another_process_approves_it(
    tmp_path: Path,
) -> None:
    policy, team = _setup(tmp_path, fs=False, timeout=120)
    repo = str(tmp_path / "repo")
    store = tmp_path / "gateway.sqlite3"
    secret = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    shown: list[Any] = []

    def approvals(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "otelhooks", "approvals", "--store", str(store), *args],
            capture_output=True, text=True, timeout=60, cwd=str(ROOT),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    async with (
        gateway(policy, tmp_path) as gw,
        host(
            gw.url,
            team["alice"],
            mode="legacy",
            elicitation_callback=answering(shown, "accept", True),
        ) as client,
    ):
        await ready(client, "git_status")
        # a secret in the arguments: never a form, the store instead
        call = asyncio.ensure_future(
            client.call_tool("git_status", {"repo_path": f"{repo}/{secret}"})
        )
        pending: list[Any] = []
        with contextlib.closing(SQLiteStore(store)) as reader:
            for _ in range(600):
                pending = reader.approvals("pending")
                if pending or call.done():
                    break
                await asyncio.sleep(0.1)
        assert len(pending) == 1, (pending, call.done())
        assert secret not in repr(pending)
        assert "status-with-approval" in repr(pending)
        # answered by another process, as an operator answers it
        await asyncio.to_thread(approvals, "approve", str(pending[0].id), "--as", "carol")
        result = await asyncio.wait_for(call, 60)
    assert shown == []
    # approved: the call reached the server (which finds no repository there)
    assert text_of(result).startswith("Error executing tool git_status"), text_of(result)
    assert "blocked" not in text_of(result) and secret not in text_of(result)


async def test_forbid_and_attribute_conditions_hold_and_the_same_file_in_process(
    tmp_path: Path,
) -> None:
    policy, team = _setup(tmp_path, git=False)
    tree = tmp_path / "tree"
    calls = [
        ("list_directory", {"path": str(tree / "shared")}),
        ("list_directory", {"path": str(tree / "private" / "shared")}),
        ("list_directory", {"path": str(tree)}),
    ]
    asked: list[Any] = []
    async with (
        gateway(policy, tmp_path) as gw,
        host(
            gw.url,
            team["root"],
            mode="legacy",
            elicitation_callback=answering(asked, "accept", True),
        ) as c,
    ):
        await ready(c, "list_directory")
        at_gateway = [await c.call_tool(name, arguments) for name, arguments in calls]
        cedar = gw.proxy.gateway.cedar
        assert cedar is not None
        report = cedar.report("list_directory")  # what --check prints for the tool
    shared, private, other = at_gateway
    assert not shared.is_error and "notes.txt" in text_of(shared)
    # the attribute permit matches (*shared*), and the forbid overrides it
    assert private.is_error and "never-private" in text_of(private)
    assert other.is_error and "no Cedar policy permits fs/list_directory" in text_of(other)
    assert asked == []  # a forbid is never asked about
    assert report == "cedar: permit list-shared (line 11); forbid never-private (line 16)"
    # The same file, in-process, over the same server's tools keyed as the gateway keys them.
    registry = ToolRegistry()
    async with MCPServerTools(filesystem_command(tree), name="fs") as fs:
        fs.register(registry)
        hooks = Hooks(registry=registry)  # checked: every tool the policies name is there
        hooks.add(CedarPolicy(tmp_path / "policies.cedar", key_of=cedar_keys(fs)))
        executor = ToolExecutor(registry, hooks)
        results = [
            await executor.execute(ToolCall(f"c{i}", name, arguments))
            for i, (name, arguments) in enumerate(calls)
        ]
    assert (
        [r.is_error for r in results]
        == [r.is_error for r in at_gateway]
        == [
            False,
            True,
            True,
        ]
    )
    assert "never-private" in results[1].content
    assert "no Cedar policy permits fs/list_directory" in results[2].content


async def test_the_stdio_relay_asks_its_host_and_enforces_the_same_file(tmp_path: Path) -> None:
    repo = git_repository(tmp_path / "repo")
    (tmp_path / "policies.cedar").write_text(
        POLICIES.replace('"fs/list_directory"', '"git/git_log"').replace(
            'context.arguments.path like "*shared*"', 'context.arguments.repo_path like "*shared*"'
        )
    )
    (tmp_path / "gateway.toml").write_text(
        f'[[upstream]]\nname = "git"\ncommand = {json.dumps(git_command(repo))}\n'
        '[store]\nfile = "gateway.sqlite3"\n[cedar]\npolicies = "policies.cedar"\n'
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "otelhooks", "mcp", "proxy", "--policy", str(tmp_path / "gateway.toml")],
        cwd=str(ROOT),
        env={**os.environ, "OTEL_TRACES_EXPORTER": "none"},
    )
    answers = iter([("accept", True), ("decline", None)])
    asked: list[Any] = []

    async def elicit(context: Any, p: Any) -> mcp_types.ElicitResult:
        asked.append(p)
        action, approve = next(answers)
        content = {"approve": approve} if approve is not None else None
        return mcp_types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    async with Client(params, mode="legacy", elicitation_callback=elicit) as client:
        await ready(client, "git_status")
        first = await client.call_tool("git_status", {"repo_path": str(repo)})
        second = await client.call_tool("git_status", {"repo_path": str(repo)})
        private = await client.call_tool("git_log", {"repo_path": f"{repo}/private"})
        unlisted = await client.call_tool("git_diff_staged", {"repo_path": str(repo)})
    assert len(asked) == 2 and "git_status" in asked[0].message
    assert not first.is_error, text_of(first)
    assert second.is_error and "decline" in text_of(second)
    assert private.is_error and "never-private" in text_of(private)
    assert unlisted.is_error and "no Cedar policy permits git/git_diff_staged" in text_of(unlisted)


async def test_a_typo_in_the_policies_stops_the_start_with_file_and_line(tmp_path: Path) -> None:
    policy, _ = _setup(tmp_path)
    (tmp_path / "policies.cedar").write_text(
        POLICIES.replace("context.arguments.path like", "context.arguments.pth like", 1)
    )
    with pytest.raises(ProxyStartError) as caught:
        async with gateway(policy, tmp_path):
            pass
    message = str(caught.value)
    assert f"{tmp_path / 'policies.cedar'}:13" in message
    assert "did you mean 'arguments.path'?" in message
