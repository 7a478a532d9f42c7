"""The MCP guide's proxy commands, run as printed in a git repository that holds the guide's
policy file as ``policy.toml``: over stdio and Streamable HTTP with the official client, and
``--check``.

The guide runner (tests/test_guides.py) does not run this block in a reader's clone, whose
environment has only the ``sdk`` extra; these tests run it in the checkout's environment, with
the runner's map: ``uvx X`` becomes ``X`` from the environment, ``otelhooks`` this
environment's, the page's port a free loopback port.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import mcp.types as mcp_types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from .gateway_support import free_port, host, wait_for_port
from .mcp_support import git_repository, installed

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "guides" / "mcp.md"
MARK = "# not run by the docs tests: it needs the mcp extra and mcp-server-git"

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


def guide_commands() -> list[list[str]]:
    """The commands of the page's proxy block, comments dropped, the map applied."""
    text = PAGE.read_text()
    block = text.split(f"    {MARK}", 1)[1].split("\n", 1)[1].split("\n\n", 1)[0]
    commands = []
    for line in block.strip().splitlines():
        words = shlex.split(line.strip(), comments=True)
        assert words[0] == "otelhooks", line
        if "uvx" in words:
            words.remove("uvx")
        words = [installed(w) if w == "mcp-server-git" else w for w in words]
        commands.append([sys.executable, "-m", "otelhooks", *words[1:]])
    return commands


def guide_policy() -> str:
    return PAGE.read_text().split("<!-- policy -->\n```toml\n", 1)[1].split("```", 1)[0]


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A git repository holding the guide's policy file, ``uvx mcp-server-git`` mapped to the
    environment's program."""
    repo = git_repository(tmp_path / "repo")
    policy = guide_policy().replace('"uvx", "mcp-server-git"', f'"{installed("mcp-server-git")}"')
    (repo / "policy.toml").write_text(policy)
    return repo


def environment(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "OTEL_TRACES_EXPORTER": "none",
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }


def test_the_guide_block_names_four_proxy_commands() -> None:
    commands = guide_commands()
    assert len(commands) == 4
    assert commands[3][-3:] == ["--policy", "policy.toml", "--check"]
    assert any("--listen" in c for c in commands)


async def served_over_stdio(command: list[str], cwd: Path, tmp_path: Path) -> None:
    target = StdioServerParameters(
        command=command[0], args=command[1:], env=environment(tmp_path), cwd=str(cwd)
    )
    async with Client(target) as client:
        await check_served(client, cwd, policy="--policy" in command)


async def check_served(client: Client, repository: Path, policy: bool) -> None:
    """git_status answers; with the guide's policy, git_reset is hidden and refused, and a
    repository outside the guard's root (the policy file's folder) or given relatively is
    refused."""
    names = {tool.name for tool in (await client.list_tools()).tools}
    assert "git_status" in names
    status = await client.call_tool("git_status", {"repo_path": str(repository)})
    assert not status.is_error, status
    assert "branch" in str(status.content[0]).lower()
    if policy:
        assert "git_reset" not in names and "git_commit" not in names
        with pytest.raises(MCPError, match="Unknown tool: 'git_reset'"):
            await client.call_tool("git_reset", {"repo_path": str(repository)})
        for path in ("/", "."):
            refused = await client.call_tool("git_status", {"repo_path": path})
            assert refused.is_error, path
    else:
        assert "git_reset" in names


@pytest.mark.parametrize("which", [0, 1], ids=["no-policy", "policy"])
async def test_the_guides_stdio_commands_serve_the_official_client(
    which: int, repository: Path, tmp_path: Path
) -> None:
    await served_over_stdio(guide_commands()[which], repository, tmp_path)


@contextlib.contextmanager
def started(command: list[str], cwd: Path, tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=environment(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.asynccontextmanager
async def listening(command: list[str], cwd: Path, tmp_path: Path) -> AsyncIterator[str]:
    port = free_port()
    command = [re.sub(r"^127\.0\.0\.1:8765$", f"127.0.0.1:{port}", w) for w in command]
    with started(command, cwd, tmp_path) as process:
        wait_for_port(port, timeout=90)
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        yield f"http://127.0.0.1:{port}/mcp"


async def test_the_guides_listen_command_serves_streamable_http(
    repository: Path, tmp_path: Path
) -> None:
    (command,) = [c for c in guide_commands() if "--listen" in c]
    async with listening(command, repository, tmp_path) as url, host(url) as client:
        await check_served(client, repository, policy=True)
        listed: mcp_types.ListToolsResult = await client.list_tools()
        assert all(tool.name.startswith("git_") for tool in listed.tools)


def test_the_guides_check_command_lists_the_tools_and_what_the_policy_denies(
    repository: Path, tmp_path: Path
) -> None:
    checked = subprocess.run(
        guide_commands()[3],
        cwd=repository,
        env=environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout == ""
    assert "git_status" in checked.stderr
    assert "git_reset (denied" in checked.stderr
