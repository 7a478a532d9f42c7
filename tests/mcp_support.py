"""Where the MCP servers the tests drive live, and how to read what the fault server recorded."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
FAULT_SERVER = HERE / "mcp_fault_server.py"
BIN = Path(sys.executable).parent


def fault_command() -> list[str]:
    return [sys.executable, str(FAULT_SERVER)]


def installed(program: str) -> str:
    """The console script of a server package the test set-up installs (``mcp-server-time``)."""
    path = BIN / program
    if not path.exists():
        pytest.fail(f"{program} is not installed: scripts/test.sh installs it with '.[dev]'")
    return str(path)


def npm_server(program: str) -> str:
    """A server from npm that scripts/install-mcp-servers.sh installs (``mcp-server-everything``,
    ``mcp-server-filesystem``): skipped without it, unless OTELHOOKS_REQUIRE_NPM_SERVERS is set."""
    import os

    from otelhooks.cli.cache import cached

    folder = os.environ.get("OTELHOOKS_MCP_SERVERS_BIN")
    path = (
        Path(folder) / program
        if folder
        else cached("mcp-servers", "lock", "node_modules", ".bin", program)
    )
    if path is None or not path.exists():
        message = f"{program} is not installed: run scripts/install-mcp-servers.sh"
        if os.environ.get("OTELHOOKS_REQUIRE_NPM_SERVERS"):
            pytest.fail(message)
        pytest.skip(message)
    return str(path)


def everything_command() -> list[str]:
    return [npm_server("mcp-server-everything"), "stdio"]


def filesystem_command(root: Path) -> list[str]:
    return [npm_server("mcp-server-filesystem"), str(root)]


def time_command() -> list[str]:
    return [installed("mcp-server-time"), "--local-timezone", "UTC"]


def git_repository(path: Path) -> Path:
    """A small git repository with two commits."""
    if shutil.which("git") is None:
        pytest.fail("git is needed by mcp-server-git")
    path.mkdir(parents=True, exist_ok=True)
    env = {
        "GIT_AUTHOR_NAME": "Test",
        "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "Test",
        "GIT_COMMITTER_EMAIL": "test@example.com",
        "HOME": str(path),
        "PATH": "/usr/bin:/bin:/usr/local/bin",
    }

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=path, env=env, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    (path / "README.md").write_text("hello\n")
    git("add", "README.md")
    git("commit", "-q", "-m", "first commit")
    (path / "notes.txt").write_text("notes\n")
    git("add", "notes.txt")
    git("commit", "-q", "-m", "second commit")
    return path


def git_command(repository: Path) -> list[str]:
    return [installed("mcp-server-git"), "--repository", str(repository)]


def proxy_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``otelhooks mcp proxy ARGS`` run as a user runs it (no traces exported)."""
    import os

    return subprocess.run(
        [sys.executable, "-m", "otelhooks", "mcp", "proxy", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(HERE.parent),
        env={**os.environ, "OTEL_TRACES_EXPORTER": "none"},
    )


def records(path: Path, event: str | None = None, **fields: Any) -> list[dict[str, Any]]:
    """What the fault server recorded (``event`` and field values to match)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        if event is not None and entry.get("event") != event:
            continue
        if all(entry.get(k) == v for k, v in fields.items()):
            out.append(entry)
    return out


async def wait_for_record(
    path: Path, event: str, timeout: float = 10.0, **fields: Any
) -> dict[str, Any]:
    """The first matching record, waiting (without blocking the event loop) for it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = records(path, event, **fields)
        if found:
            return found[0]
        await asyncio.sleep(0.05)
    raise AssertionError(f"the fault server recorded no {event} {fields}: {records(path)}")
