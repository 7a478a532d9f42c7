"""Path guards resolve what the server resolves, and a guard that guards nothing refuses to
start: the MCP guide's own set-up (npm's server-filesystem rooted at a shared directory, a path
guard rooted at its projects/ on ``argument = "path"``) driven by the official client through
the gateway, and mcp-server-time from PyPI for the typo at start."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import mcp.types as mcp_types
import pytest

from otelhooks.integrations.mcp.policy import parse_policy
from otelhooks.integrations.mcp.proxy import MCPProxy, ProxyStartError

from .gateway_support import gateway, host
from .hardening_support import names
from .mcp_support import filesystem_command, proxy_cli, time_command

SALARY = "alice: 250000"


def text_of(result: mcp_types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, mcp_types.TextContent))


def shared_tree(tmp_path: Path) -> Path:
    """/srv/shared of the guide: projects/p1 (a readme, and a link to ../../private), private."""
    shared = tmp_path / "srv" / "shared"
    (shared / "projects" / "p1").mkdir(parents=True)
    (shared / "private").mkdir()
    (shared / "private" / "salaries.txt").write_text(SALARY + "\n")
    (shared / "projects" / "p1" / "readme.txt").write_text("project one\n")
    os.symlink("../../private", shared / "projects" / "p1" / "link")
    os.symlink("../../private", shared / "projects" / "p1" / "l\u00ednk")  # NFC
    return shared


def add_token(tokens: Path, subject: str, group: str) -> str:
    from otelhooks.integrations.mcp.auth import add_token as add

    return add(tokens, subject, scopes=["mcp"], groups=[group])


async def test_relative_paths_symlinks_and_lists_of_paths_are_blocked_as_the_server_resolves_them(
    tmp_path: Path,
) -> None:
    shared = shared_tree(tmp_path)
    projects = shared / "projects"
    tokens = tmp_path / "tokens.toml"
    developer = add_token(tokens, "dana", "developers")
    maintainer = add_token(tokens, "max", "maintainers")
    policy = f"""
[[upstream]]
name = "fs"
command = {json.dumps(filesystem_command(shared))}

[auth]
tokens = "tokens.toml"

[[identity]]
name = "maintainers"
groups = ["maintainers"]
tools = ["*"]

[[identity.guard]]
kind = "path"
argument = "path"
arguments = ["source", "destination"]
root = "{projects}"
relative_to = "{shared}"            # what server-filesystem resolves relative paths against

[[identity]]
name = "developers"
groups = ["developers"]
tools = ["*"]

[[identity.guard]]                  # the guide's guard, as it was written
kind = "path"
argument = "path"
root = "{projects}"

[store]
file = "gateway.sqlite3"
"""
    readme = str(projects / "p1" / "readme.txt")
    private = str(shared / "private" / "salaries.txt")
    async with gateway(policy, tmp_path) as gw:
        async with host(gw.url, developer, mode="legacy") as dev:
            tool = names((await dev.list_tools()).tools)
            legit = await dev.call_tool(tool["read_text_file"], {"path": readme})
            attacks: dict[str, Any] = {
                "relative": await dev.call_tool(
                    tool["read_text_file"], {"path": "private/salaries.txt"}
                ),
                "symlink": await dev.call_tool(
                    tool["read_text_file"], {"path": str(projects / "p1" / "link" / "salaries.txt")}
                ),
                "list": await dev.call_tool(tool["read_multiple_files"], {"paths": [private]}),
                "move": await dev.call_tool(
                    tool["move_file"],
                    {"source": private, "destination": str(projects / "p1" / "stolen.txt")},
                ),
                "unicode": await dev.call_tool(  # NFD: the server matches it to the NFC link
                    tool["read_text_file"],
                    {"path": str(projects / "p1" / "li\u0301nk" / "salaries.txt")},
                ),
            }
        async with host(gw.url, maintainer, mode="legacy") as lead:
            relative_ok = await lead.call_tool(
                tool["read_text_file"], {"path": "projects/p1/readme.txt"}
            )
            relative_out = await lead.call_tool(
                tool["read_text_file"], {"path": "private/salaries.txt"}
            )
            moved_out = await lead.call_tool(
                tool["move_file"],
                {"source": private, "destination": str(projects / "p1" / "stolen.txt")},
            )
        notes = gw.proxy.guard_notes
    assert not legit.is_error and "project one" in text_of(legit)
    for what, result in attacks.items():
        assert result.is_error, f"{what}: {text_of(result)}"
        assert SALARY not in text_of(result), what
    assert "must be an absolute path" in text_of(attacks["relative"])
    assert "which leads to" in text_of(attacks["symlink"])
    assert "'paths'" in text_of(attacks["list"])
    assert "'source', 'destination'" in text_of(attacks["move"])
    assert "only up to Unicode normalization" in text_of(attacks["unicode"])
    assert not relative_ok.is_error and "project one" in text_of(relative_ok)
    assert relative_out.is_error and SALARY not in text_of(relative_out)
    assert moved_out.is_error and "must stay under" in text_of(moved_out)
    assert (shared / "private" / "salaries.txt").read_text().strip() == SALARY  # not moved
    # --check names the tool whose path-like arguments the guide's guard leaves unchecked.
    assert any("does not check source, destination" in n for n in notes[tool["move_file"]])


def test_a_guard_whose_argument_no_tool_takes_refuses_to_start_even_under_check(
    tmp_path: Path,
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(
        f'[[upstream]]\nname = "time"\ncommand = {json.dumps(time_command())}\n'
        '[store]\nfile = "gateway.sqlite3"\n'
        '[[guard]]\nkind = "path"\nargument = "timezon"\nroot = "."\n'
    )
    checked = proxy_cli("--policy", str(policy), "--check", timeout=120)
    assert checked.returncode == 1, checked.stderr
    assert "path_guard on argument 'timezon' names no argument of the tools it applies to" in (
        checked.stderr
    )
    assert "it would guard nothing (did you mean 'timezone'?" in checked.stderr


async def test_a_python_guard_or_an_identity_guard_with_a_typo_refuses_to_start(
    tmp_path: Path,
) -> None:
    from otelhooks.builtin import PathGuard

    add_token(tmp_path / "tokens.toml", "a", "team")
    policy = f"""
[[upstream]]
name = "time"
command = {json.dumps(time_command())}
[store]
file = "gateway.sqlite3"
[auth]
tokens = "tokens.toml"
[[identity]]
name = "team"
subjects = ["a"]
tools = ["*"]
[[identity.guard]]
kind = "url_host"
argument = "url"
hosts = ["example.com"]
"""
    proxy = MCPProxy(parse_policy(policy, base=tmp_path), hooks=[PathGuard("pth", str(tmp_path))])
    with pytest.raises(ProxyStartError) as refused:
        await proxy.start()
    await proxy.close()
    assert "url_host_guard on argument 'url' names no argument" in str(refused.value)
    assert "path_guard on argument 'pth' names no argument" in str(refused.value)


def test_in_process_a_guard_is_checked_against_the_registry_and_blocks_what_it_cannot_check(
    tmp_path: Path,
) -> None:
    from otelhooks import ToolRegistry
    from otelhooks.builtin import PathGuard
    from otelhooks.builtin.policy import check_guards

    registry = ToolRegistry()
    registry.register(lambda path: path, name="read")
    registry.register(lambda source, destination: source, name="move")
    errors, notes = check_guards([PathGuard("pth", str(tmp_path))], list(registry))
    assert errors and "did you mean 'path'?" in errors[0]
    errors, notes = check_guards([PathGuard("path", str(tmp_path))], list(registry))
    assert errors == [] and notes == {
        "move": ["path_guard on 'path' does not check source, destination: its calls are blocked"]
    }


async def test_in_process_a_guard_typo_raises_at_registration_and_at_the_agents_start(
    tmp_path: Path,
) -> None:
    from otelhooks import Agent, AssistantMessage, Hooks, ToolRegistry
    from otelhooks.builtin import PathGuard, UrlHostGuard
    from otelhooks.core import ToolCheckError, ToolCheckWarning
    from otelhooks.providers import ScriptedProvider

    registry = ToolRegistry()
    registry.register(lambda path: path, name="read")
    registry.register(lambda url: url, name="fetch")
    hooks = Hooks(registry=registry)
    with pytest.raises(ToolCheckError) as typo:
        hooks.add(PathGuard("pth", str(tmp_path)))
    assert "path_guard on argument 'pth' names no argument" in str(typo.value)
    assert "did you mean 'path'?" in str(typo.value)
    assert len(hooks) == 0  # nothing half-registered
    hooks.add(PathGuard("path", str(tmp_path), tools=["read"]))  # fits: registered
    with pytest.raises(ToolCheckError, match="tools it applies to \\(fetch\\)"):
        hooks.add(PathGuard("path", str(tmp_path)), tools=["fetch"])  # read takes a path, fetch not
    with pytest.warns(ToolCheckWarning, match="url_host_guard on argument 'uri'"):
        Hooks(registry=registry, strict=False).add(UrlHostGuard("uri", ["example.com"]))
    # Without a registry the agent checks at its start, before any call.
    agent = Agent(
        ScriptedProvider([AssistantMessage(text="never asked")]),
        tools=registry,
        hooks=Hooks([UrlHostGuard("ulr", ["example.com"], tools=["fetch"])]),
    )
    with pytest.raises(ToolCheckError, match="did you mean 'url'"):
        await agent.run("go")
