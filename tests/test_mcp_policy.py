"""The proxy's policy file: what it builds, and a refusal naming file, line and problem for every
kind of mistake (never a proxy that starts allowing everything)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from otelhooks import Hooks, ToolCall, ToolExecutor, ToolRegistry
from otelhooks.builtin import ArgumentPattern, CallLimit, PathGuard, UrlHostGuard
from otelhooks.integrations.mcp.policy import (
    PolicyError,
    ProxyPolicy,
    load_policy,
    parse_policy,
    upstream_from_command,
)

from .mcp_support import proxy_cli

ROOT = Path(__file__).resolve().parent.parent

FULL = """
[proxy]
name = "guarded-git"
timeout = 30
strict = true

[[upstream]]
name = "git"
command = "uvx mcp-server-git --repository ."
env = { GIT_PAGER = "cat" }

[[upstream]]
name = "remote"
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer ${OTELHOOKS_TEST_TOKEN}" }

[tools]
allow = ["git_*", "remote_*"]
deny = ["git_reset"]
timeouts = { git_log = 5 }

[[guard]]
kind = "path"
argument = "repo_path"
root = "repos"
tools = ["git_*"]

[[guard]]
kind = "url_host"
argument = "url"
hosts = ["*.example.com"]

[[guard]]
kind = "pattern"
argument = "branch_name"
regex = "[a-z0-9/_-]+"
description = "be a lowercase branch name"

[[limit]]
max_calls = 20
tools = ["git_log"]

[redaction]
patterns = [{ kind = "acme_key", regex = "ACME-[0-9]{8}" }]

[failure]
before = "fail_closed"
after = "fail_closed"

[[hook]]
import = "tests.mcp_noisy_hook:NoisyHook"
args = { word = "audit" }
tools = ["git_status"]
"""


def test_a_full_policy_builds_the_hooks_and_upstreams(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTELHOOKS_TEST_TOKEN", "t0ken")
    policy = parse_policy(FULL, "policy.toml", base=tmp_path)
    assert policy.name == "guarded-git" and policy.timeout == 30 and policy.strict
    git, remote = policy.upstreams
    assert git.command == ("uvx", "mcp-server-git", "--repository", ".")
    assert git.environment()["GIT_PAGER"] == "cat"  # type: ignore[index]
    assert remote.url == "https://mcp.example.com/mcp" and remote.environment() is None
    assert remote.headers == {"Authorization": "Bearer t0ken"}
    assert policy.tool_timeouts == {"git_log": 5.0}
    hooks = [spec.hook for spec in policy.hook_specs()]
    kinds = [type(h).__name__ for h in hooks]
    assert kinds == [
        "ToolDenyList",
        "ToolAllowList",
        "PathGuard",
        "UrlHostGuard",
        "ArgumentPattern",
        "CallLimit",
        "NoisyHook",
    ]
    path_guard = hooks[2]
    assert isinstance(path_guard, PathGuard) and str(path_guard.root) == str(tmp_path / "repos")
    assert isinstance(hooks[3], UrlHostGuard) and isinstance(hooks[4], ArgumentPattern)
    assert isinstance(hooks[5], CallLimit) and hooks[5].max_calls == 20
    assert hooks[6].word == "audit"
    assert policy.denies("git_reset") and policy.denies("other_tool")
    assert not policy.denies("git_status")
    redacted, _ = policy.redactor.redact_text("key ACME-12345678 here")
    assert "ACME-12345678" not in redacted


async def test_the_policy_hooks_block_what_they_should() -> None:
    policy = parse_policy(
        '[tools]\ndeny = ["rm*"]\n[[guard]]\nkind = "url_host"\nargument = "url"\n'
        'hosts = ["docs.example.com"]\n[[limit]]\nmax_calls = 1\ntools = ["fetch"]\n'
    )
    registry = ToolRegistry()

    @registry.tool
    def fetch(url: str) -> str:
        """Fetch a URL."""
        return f"fetched {url}"

    @registry.tool
    def rm_rf(path: str) -> str:
        """Delete everything."""
        return "deleted"

    hooks = Hooks()
    for spec in policy.hook_specs():
        hooks.add(spec.hook, tools=spec.tools)
    executor = ToolExecutor(registry, hooks)
    ok = await executor.execute(ToolCall("1", "fetch", {"url": "https://docs.example.com/a"}))
    again = await executor.execute(ToolCall("2", "fetch", {"url": "https://docs.example.com/b"}))
    elsewhere = await executor.execute(ToolCall("3", "fetch", {"url": "https://evil.test/"}))
    removed = await executor.execute(ToolCall("4", "rm_rf", {"path": "/"}))
    assert ok.content == "fetched https://docs.example.com/a"
    assert again.is_error and "limit of 1" in again.content
    assert elsewhere.is_error and "allowed host" in elsewhere.content
    assert removed.is_error and "denied by policy" in removed.content


BAD = [
    ("[tools\ndeny = []\n", 1, "not valid TOML"),
    (
        '[tools]\nalow = ["x"]\n',
        2,
        "unknown key 'alow' in [tools] (did you mean 'allow'? known: allow, deny, timeouts)",
    ),
    ('[tools]\ndeny = "x"\nallow = 3\n', 3, "allow must be a list or a string, not an integer (3)"),
    ("[proxy]\ntimeout = -1\n", 2, "timeout must be greater than 0"),
    ("[proxy]\nprefix = true\n", 2, "prefix is set per upstream"),
    ('[[upstream]]\nname = "a"\ncommand = ["x"]\ninherit_env = true\n', 4, "an allowlist"),
    (
        '[[upstream]]\nname = "a"\ncommand = ["x"]\nenv = { OTELHOOKS_AUDIT_KEY = "k" }\n',
        4,
        "may not get OTELHOOKS_AUDIT_KEY",
    ),
    (
        '[[upstream]]\nname = "a"\ncommand = ["x"]\ninherit_env = ["OTEL_EXPORTER_OTLP_HEADERS"]\n',
        4,
        "exporter headers stay with the proxy",
    ),
    (
        '[[upstream]]\nname = "a"\ncommand = ["x"]\ninherit_env = ["MY_KEY"]\n'
        '[audit]\nfile = "a.jsonl"\nkey_env = "MY_KEY"\n',
        1,
        "the audit log's key",
    ),
    (
        '[[upstream]]\nname = "a"\ncommand = ["x"]\nprefix = "p"\n'
        '[[upstream]]\nname = "b"\ncommand = ["y"]\nprefix = "p"\n',
        8,
        "have the same prefix 'p'",
    ),
    ('[[upstream]]\nname = "a"\ncommand = ["x"]\nroots = ["https://x/"]\n', 4, "not a directory"),
    ("[proxy]\nmax_sessions = 0\n", 2, "max_sessions must be an integer >= 1"),
    (
        '[auth]\ntokens = "t.toml"\n[[identity]]\nname = "x"\nallow = ["a"]\n',
        5,
        "tools = [...]",
    ),
    ('[auth]\ntokens = "t.toml"\n[[identity]]\nname = "x"\nprompt = ["a"]\n', 5, "'prompts'"),
    ('[[guard]]\nkind = "path"\nargument = "p"\n', 1, "a path guard needs a root"),
    (
        '[[guard]]\nkind = "glob"\nargument = "p"\n',
        2,
        "guard kind must be path, url_host or pattern",
    ),
    (
        '[[guard]]\nkind = "path"\nargument = "p"\nroot = "."\n\n'
        '[[guard]]\nkind = "pattern"\nargument = "b"\nregex = "[a-"\n',
        9,
        "regex does not compile",
    ),
    ('[[guard]]\nkind = "path"\nargument = "p"\nroot = "."\nrot = 1\n', 5, "unknown key 'rot'"),
    ("[[limit]]\ntools = ['x']\n", 1, "needs max_calls"),
    ('[[hook]]\nimport = "no_such_module_xyz:Hook"\n', 2, "cannot import hook"),
    ('[[hook]]\nimport = "tests.mcp_noisy_hook:not_a_hook"\n', 2, "has no before_tool_call"),
    (
        '[[hook]]\nimport = "tests.mcp_noisy_hook:NoisyHook"\nargs = { loud = 1 }\n',
        3,
        "cannot create",
    ),
    ('[failure]\nbefore = "fail_open_please"\n', 2, "before must be one of fail_closed, fail_open"),
    ('[[upstream]]\nname = "a"\n', 1, "needs exactly one of command or url"),
    (
        '[[upstream]]\nname = "a"\ncommand = ["x"]\n[[upstream]]\nname = "a"\ncommand = ["y"]\n',
        5,
        "two upstreams are named 'a'",
    ),
    ('[redaction]\npatterns = [{ kind = "k", regex = "(" }]\n', 2, "does not compile"),
    ('[redaction]\nexclude = ["unlabeled"]\n', 2, "did you mean 'unlabelled'?"),
    ("[redaction]\nexclude = [1]\n", 2, "exclude must list strings"),
    ("[reaction]\nenabled = false\n", 1, "unknown key 'reaction' in the policy"),
    ('\n[proxy]\nname = "x"\n\n[toolz]\n', 5, "did you mean 'tools'?"),
    # a misspelt key is named before what it would have meant is checked
    ('[[upstream]]\nname = "a"\ncomand = ["x"]\n', 3, "unknown key 'comand'"),
    ('[[upstream]]\nname = "a"\ncomand = ["x"]\n', 3, "did you mean 'command'?"),
    ('[auth]\ntokens = "t.toml"\nunmatched = "maybe"\n', 3, "unmatched must be one of deny"),
    ('[auth]\nissuer = "https://idp"\n', 1, "needs both issuer and jwks_url"),
    ("[auth]\n", 1, "needs issuer and jwks_url (JWTs), or tokens"),
    ('[[identity]]\nname = "x"\n', 1, "need [auth]"),
    ('[pinning]\napprove = { t = "md5:1" }\n', 2, "approve.t must be sha256:"),
    ('[http]\nresponses = "xml"\n', 2, "responses must be one of sse, json"),
]


@pytest.mark.parametrize(("text", "line", "problem"), BAD)
def test_a_wrong_policy_is_refused_with_its_line(text: str, line: int | None, problem: str) -> None:
    with pytest.raises(PolicyError) as raised:
        parse_policy(text, "policy.toml")
    error = raised.value
    assert problem in error.problem, error
    assert error.line == line, error
    assert str(error).startswith(f"policy.toml:{line}: " if line else "policy.toml: ")


def test_redaction_is_on_unless_turned_off() -> None:
    assert ProxyPolicy().redaction and parse_policy("").redaction
    off = parse_policy("[redaction]\nenabled = false\n")
    assert not off.redaction
    assert off.redactor.redact_text("ghp_Zq8RkT2mWx9LpN4vB7cY1dF6hJ3sA5eG0uIo")[1] == []


def test_redaction_may_exclude_a_built_in_detector_by_name() -> None:
    token = "the sync runs with wv8d7n0j02zxzrsbcs8c1xq4 hourly"
    kept = parse_policy('[redaction]\nexclude = ["unlabelled"]\n').redactor
    assert kept.redact_text(token) == (token, [])
    assert parse_policy("").redactor.redact_text(token)[1] == ["secret"]


def test_upstream_names_come_from_the_program() -> None:
    assert upstream_from_command(["uvx", "mcp-server-git", "--repository", "."]).name == (
        "mcp-server-git"
    )
    assert upstream_from_command(["/usr/bin/python3", "server.py"]).name == "python3"
    assert upstream_from_command(["x"], "mine").name == "mine"
    with pytest.raises(ValueError, match="empty"):
        upstream_from_command([])


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read the policy file"):
        load_policy(tmp_path / "nope.toml")


def test_the_cli_refuses_to_start_on_a_bad_policy(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[tools]\ndeny = ["git_commit"]\n\n[[guard]]\nkind = "path"\nargument = 3\n')
    marker = tmp_path / "started"
    done = proxy_cli(
        "--policy", str(policy), "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"otelhooks mcp proxy: {policy}:6: argument must be a string, not an integer (3)"
    )
    assert done.stdout == ""
    assert not marker.exists()  # the upstream was never started


def test_the_cli_says_what_is_missing_without_an_upstream() -> None:
    done = proxy_cli()
    assert done.returncode == 2
    assert "no upstream" in done.stderr and done.stdout == ""
