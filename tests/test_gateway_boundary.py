"""The gateway as a security boundary, tried as an attacker would (1 of 2): requests of one
host's upstreams kept from every other host, every MCP method allowed by identity, upstream
processes bounded and their environment an allowlist, and the lower findings of the same
review. Real servers nobody here wrote (server-filesystem and server-everything from npm,
mcp-server-time from PyPI) behind the gateway over Streamable HTTP, driven by the official
``mcp`` client; bounds such as idle times are short settings here (one test uses the
defaults)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp.types as mcp_types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from otelhooks.integrations.mcp.auth import add_token
from otelhooks.integrations.mcp.policy import parse_policy
from otelhooks.telemetry.testing import InMemoryTracing

from .gateway_support import (
    INITIALIZE,
    MCP_HEADERS,
    descendants,
    environ,
    free_port,
    gateway,
    host,
    opened_session,
    relay_host,
    wait_for_port,
    wait_until,
)
from .mcp_support import (
    everything_command,
    fault_command,
    filesystem_command,
    proxy_cli,
    time_command,
)

ROOT = Path(__file__).resolve().parent.parent
EVERYTHING = "mcp-server-everything"
TIME = "mcp-server-time"

pytestmark = [
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
    # the SDK's stdio client leaves a stopped server's subprocess transport to the garbage
    # collector, which may run after that test's event loop has closed
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]


def text_of(result: mcp_types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, mcp_types.TextContent))


def audit_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class Team:
    """A token file with a token per subject (``otelhooks mcp token add``'s own function)."""

    def __init__(self, folder: Path) -> None:
        self.file = folder / "tokens.toml"
        self.tokens: dict[str, str] = {}

    def token(self, subject: str, groups: tuple[str, ...] = ()) -> str:
        if subject not in self.tokens:
            self.tokens[subject] = add_token(
                self.file, subject, scopes=["mcp"], groups=list(groups)
            )
        return self.tokens[subject]


@pytest.fixture
def team(tmp_path: Path) -> Team:
    made = Team(tmp_path)
    made.token("admin", ("admins",))
    return made


def upstream(name: str, command: list[str], extra: str = "") -> str:
    return f"[[upstream]]\nname = {json.dumps(name)}\ncommand = {json.dumps(command)}\n{extra}\n"


def common(team: Team, extra: str = "") -> str:
    return f"""
[auth]
tokens = "{team.file}"
[audit]
file = "audit.jsonl"
[store]
file = "gateway.sqlite3"
{extra}
"""


# -- 1. an upstream's requests reach the host whose session it is, and no other ------------


async def test_an_upstreams_roots_request_never_reaches_another_host_nor_widens_its_roots(
    team: Team, tmp_path: Path
) -> None:
    """server-filesystem asks the host for roots after initialize and *replaces* the
    directories it was started with by the answer. Bob has a long call in flight; Alice's
    upstream session starts. Bob must never be asked for Alice's roots, and no answer
    (``file:///``) may widen what Alice's filesystem allows."""
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "notes.txt").write_text("inside\n")
    policy = (
        upstream("fs", filesystem_command(shared))
        + upstream("everything", everything_command())
        + common(team)
    )
    bob_asked: list[str] = []
    alice_asked: list[str] = []

    def answering(log: list[str]) -> Any:
        async def roots(context: Any) -> mcp_types.ListRootsResult:
            log.append("roots/list")
            return mcp_types.ListRootsResult(roots=[mcp_types.Root(uri="file:///")])  # type: ignore[arg-type]

        return roots

    async with (
        gateway(policy, tmp_path) as gw,
        host(
            gw.url, team.token("bob"), mode="legacy", list_roots_callback=answering(bob_asked)
        ) as bob,
    ):
        await bob.list_tools()  # bob's own upstream session
        await asyncio.sleep(1.0)  # its filesystem would have asked by now
        own = len(bob_asked)
        long_call = asyncio.ensure_future(
            bob.call_tool("trigger-long-running-operation", {"duration": 4, "steps": 4})
        )
        await asyncio.sleep(0.3)
        async with host(
            gw.url,
            team.token("alice"),
            mode="legacy",
            list_roots_callback=answering(alice_asked),
        ) as alice:
            await alice.list_tools()
            await asyncio.sleep(1.0)
            allowed = text_of(await alice.call_tool("list_allowed_directories", {}))
            outside = await alice.call_tool("read_text_file", {"path": "/etc/hostname"})
            inside = await alice.call_tool("read_text_file", {"path": str(shared / "notes.txt")})
        await long_call
    assert len(bob_asked) == own, "bob was asked for another session's roots"
    assert str(shared.resolve()) in allowed and "\n/\n" not in f"\n{allowed}\n"
    assert outside.is_error and not inside.is_error and "inside" in text_of(inside)


async def test_a_host_may_narrow_the_configured_roots_but_never_widen_them(
    team: Team, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    (shared / "projects").mkdir(parents=True)
    (shared / "private.txt").write_text("private\n")
    (shared / "projects" / "p.txt").write_text("project\n")
    (shared / "escape").symlink_to("/")  # a root given through a link out of the tree
    policy = upstream(
        "fs", filesystem_command(shared), f"roots = [{json.dumps(str(shared))}]"
    ) + common(team)

    def answer(*uris: str) -> Any:
        async def roots(context: Any) -> mcp_types.ListRootsResult:
            return mcp_types.ListRootsResult(roots=[mcp_types.Root(uri=u) for u in uris])  # type: ignore[arg-type]

        return roots

    async with gateway(policy, tmp_path) as gw:
        token = team.token("alice")
        widen = answer("file:///", (shared / "escape").as_uri())
        async with host(gw.url, token, mode="legacy", list_roots_callback=widen) as wide:
            await wide.list_tools()
            await asyncio.sleep(1.0)
            wide_dirs = text_of(await wide.call_tool("list_allowed_directories", {}))
            etc = await wide.call_tool("read_text_file", {"path": "/etc/hostname"})
        narrow = answer((shared / "projects").as_uri())
        async with host(gw.url, token, mode="legacy", list_roots_callback=narrow) as small:
            await small.list_tools()
            ok = await wide_wait(small, "projects")
            private = await small.call_tool("read_text_file", {"path": str(shared / "private.txt")})
    assert str(shared.resolve()) in wide_dirs and "/etc" not in wide_dirs
    assert etc.is_error
    assert ok and private.is_error  # narrowed to projects/: the rest of the share is out


async def wide_wait(client: Client, marker: str) -> bool:
    for _ in range(50):
        listed = text_of(await client.call_tool("list_allowed_directories", {}))
        if marker in listed:
            return True
        await asyncio.sleep(0.1)
    return False


async def test_elicitation_goes_only_to_the_session_whose_upstream_asked(
    team: Team, tmp_path: Path
) -> None:
    policy = upstream("fault", fault_command(), 'mode = "legacy"') + common(team)
    asked: dict[str, list[str]] = {"alice": [], "bob": []}

    def answering(who: str) -> Any:
        async def elicit(context: Any, params: Any) -> mcp_types.ElicitResult:
            asked[who].append(params.message)
            return mcp_types.ElicitResult(action="accept", content={"confirmed": who == "alice"})

        return elicit

    async with (
        gateway(policy, tmp_path) as gw,
        host(gw.url, team.token("bob"), mode="legacy", elicitation_callback=answering("bob")) as b,
        host(
            gw.url, team.token("alice"), mode="legacy", elicitation_callback=answering("alice")
        ) as a,
    ):
        slow = asyncio.ensure_future(b.call_tool("hang", {"seconds": 2}))
        await asyncio.sleep(0.2)
        result = await a.call_tool("ask", {"question": "Deploy now?"})
        await slow
    assert asked == {"alice": ["Deploy now?"], "bob": []}
    assert text_of(result) == "accept: True"


# -- 2. every method needs the caller's rule; errors never name what it may not see ---------


def rules(*clock: str) -> str:
    """Admins may use everything; "clock" may call the tools named."""
    return f"""
[[identity]]
name = "admins"
groups = ["admins"]
tools = ["*"]
resources = ["**"]
prompts = ["*"]
completion = true
logging = true

[[identity]]
name = "clock"
subjects = ["clock"]
tools = {json.dumps(list(clock))}
"""


RULES = rules("get-sum", "echo")  # for server-everything
TIME_RULES = rules("get_current_time")


async def test_an_identity_may_use_only_the_methods_its_rule_names(
    team: Team,
    tmp_path: Path,
    otelhooks_tracing: InMemoryTracing,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An identity no rule matches, and one allowed two tools, are served no resource,
    template, prompt, completion, log level or subscription, and each refusal is audited;
    an admin gets all of it."""
    from mcp.shared import _otel

    monkeypatch.setattr(
        _otel._tracer, "inner", otelhooks_tracing.provider.get_tracer("mcp-python-sdk")
    )
    policy = upstream("everything", everything_command()) + common(team, RULES)
    async with gateway(policy, tmp_path, tracer_provider=otelhooks_tracing.provider) as gw:
        async with host(gw.url, team.token("admin", ("admins",)), mode="legacy") as admin:
            caps = admin.server_capabilities
            assert caps is not None and caps.resources and caps.prompts and caps.completions
            resources = (await admin.list_resources()).resources
            assert resources and (await admin.list_prompts()).prompts
            first = str(resources[0].uri)
            assert (await admin.read_resource(first)).contents
        for who in ("stranger", "clock"):
            async with host(gw.url, team.token(who), mode="legacy") as h:
                caps = h.server_capabilities
                assert caps is not None
                assert caps.resources is None and caps.prompts is None
                assert caps.completions is None and caps.logging is None
                assert (await h.list_resources()).resources == []
                assert (await h.list_resource_templates()).resource_templates == []
                assert (await h.list_prompts()).prompts == []
                refusals = {
                    "read": h.read_resource(first),
                    "subscribe": h.subscribe_resource(first),
                    "prompt": h.get_prompt("simple-prompt"),
                    "complete": h.complete(
                        mcp_types.PromptReference(type="ref/prompt", name="completable-prompt"),
                        {"name": "department", "value": "E"},
                    ),
                    "log level": h.set_logging_level("debug"),
                }
                for what, request in refusals.items():
                    with pytest.raises(MCPError) as refused:
                        await request
                    message = str(refused.value)
                    assert "admins" not in message and "identity" not in message, (who, what)
                    assert refused.value.error.code in (-32002, -32602, -32601), (who, what)
                tools = {t.name for t in (await h.list_tools()).tools}
                assert tools == (set() if who == "stranger" else {"get-sum", "echo"})
    lines = audit_lines(tmp_path / "audit.jsonl")
    refused_lines = [e for e in lines if e["decision"] == "block"]
    methods = {(e["identity"], e["tool"]) for e in refused_lines}
    for who in ("stranger", "clock"):
        assert {
            (who, m)
            for m in (
                "resources/read",
                "resources/subscribe",
                "prompts/get",
                "completion/complete",
                "logging/setLevel",
            )
        } <= methods
    refused_spans = [
        s
        for s in otelhooks_tracing.spans()
        if (s.attributes or {}).get("otelhooks.decision") == "block"
    ]
    assert len(refused_spans) >= 10  # each refusal is on its request's span


async def test_any_other_method_is_method_not_found(team: Team, tmp_path: Path) -> None:
    policy = upstream("time", time_command()) + common(team, TIME_RULES)
    admin = team.token("admin", ("admins",))
    async with gateway(policy, tmp_path) as gw, httpx.AsyncClient(timeout=30) as http:
        session = await opened_session(http, gw.url, admin)
        await http.post(
            gw.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session
        )
        codes = {}
        for index, method in enumerate(
            ["tasks/list", "tasks/get", "sampling/createMessage", "roots/list", "admin/shutdown"]
        ):
            answer = await http.post(
                gw.url,
                json={"jsonrpc": "2.0", "id": 10 + index, "method": method, "params": {}},
                headers=session,
            )
            codes[method] = _rpc(answer)["error"]["code"]
    assert set(codes.values()) == {-32601}, codes


def _rpc(answer: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of an answer (JSON, or the data line of an SSE event)."""
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        for line in answer.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                return json.loads(line[5:])  # type: ignore[no-any-return]
    return answer.json()  # type: ignore[no-any-return]


async def test_an_unknown_tool_error_names_no_tool_the_caller_may_not_see(
    team: Team, tmp_path: Path
) -> None:
    policy = upstream("everything", everything_command()) + common(team, RULES)
    async with gateway(policy, tmp_path) as gw, host(gw.url, team.token("clock")) as h:
        visible = {t.name for t in (await h.list_tools()).tools}
        errors = []
        for name in ("no-such-tool", "get-env", "echo "):
            with pytest.raises(MCPError) as refused:
                await h.call_tool(name, {})
            errors.append(str(refused.value))
    assert visible == {"get-sum", "echo"}
    hidden = {"get-env", "get-tiny-image", "trigger-long-running-operation", "get-resource-links"}
    for message in errors:
        assert message.startswith("Unknown tool:")
        assert not any(h in message for h in hidden - {"get-env"}), message
        assert "get-sum" not in message
    assert errors[1] == "Unknown tool: 'get-env'"  # hidden is answered as missing


def test_the_stdio_relay_names_no_denied_tool_in_an_error(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[tools]\ndeny = ["get-env", "trigger-*"]\n')
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE["params"]},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "nope"}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "get-env"}},
        {"jsonrpc": "2.0", "id": {"an": "object"}, "method": "ping"},
        {"jsonrpc": "2.0", "id": 4, "method": "tasks/list"},
        {"jsonrpc": "2.0", "id": 5, "method": "ping"},
    ]
    answers = _relay_exchange(["--policy", str(policy), "--", *everything_command()], lines)
    by_id = {json.dumps(a.get("id")): a for a in answers}  # the object id: answered with null
    assert by_id["2"]["error"]["message"] == "Unknown tool: 'nope'"
    assert by_id["3"]["error"]["message"] == "Unknown tool: 'get-env'"
    assert by_id["null"]["error"]["code"] == -32600  # the id that is an object
    assert by_id["4"]["error"]["code"] == -32601
    assert by_id["5"]["result"] == {}  # the relay went on after the bad id


def _relay_exchange(
    args: list[str], lines: list[Any], env: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """Each line sent to ``otelhooks mcp proxy ARGS`` over stdio (the first, initialize, and
    its answer first); the answers, once every request with a number for an id has one."""
    proxy = subprocess.Popen(
        [sys.executable, "-m", "otelhooks", "mcp", "proxy", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
        env={**os.environ, "OTEL_TRACES_EXPORTER": "none", **(env or {})},
    )
    assert proxy.stdin is not None and proxy.stdout is not None
    answers: list[dict[str, Any]] = []

    def read() -> dict[str, Any]:
        out = proxy.stdout.readline()  # type: ignore[union-attr]
        assert out, f"the proxy closed stdout before answering: {answers}"
        return json.loads(out)  # type: ignore[no-any-return]

    def send(line: Any) -> None:
        proxy.stdin.write((line if isinstance(line, str) else json.dumps(line)) + "\n")  # type: ignore[union-attr]
        proxy.stdin.flush()  # type: ignore[union-attr]

    try:
        send(lines[0])  # initialize, answered before anything else is sent
        while not any(a.get("id") == 1 for a in answers):
            answers.append(read())
        for line in lines[1:]:
            send(line)
        wanted = {
            line["id"]
            for line in lines
            if isinstance(line, dict) and isinstance(line.get("id"), int)
        }
        while not wanted <= {a.get("id") for a in answers if isinstance(a.get("id"), int)}:
            message = read()
            if "method" not in message:
                answers.append(message)
    finally:
        proxy.stdin.close()
        proxy.wait(timeout=30)
    return answers


# -- 4. upstream processes are bounded ------------------------------------------------------


async def test_an_identity_allowed_nothing_starts_no_upstream_process(
    team: Team, tmp_path: Path
) -> None:
    policy = upstream("everything", everything_command()) + common(team, RULES)
    async with gateway(policy, tmp_path) as gw:
        await asyncio.sleep(0.5)
        before = len(descendants(EVERYTHING))  # the one started to check the policy
        async with contextlib.AsyncExitStack() as stack:
            clients = [
                await stack.enter_async_context(host(gw.url, team.token("stranger"), mode="legacy"))
                for _ in range(10)
            ]
            for client in clients:
                assert (await client.list_tools()).tools == []
                with pytest.raises(MCPError):
                    await client.call_tool("echo", {"message": "x"})
            during = len(descendants(EVERYTHING))
    assert during == before


async def test_a_deleted_sessions_processes_are_gone_within_60_s(
    team: Team, tmp_path: Path
) -> None:
    policy = upstream("time", time_command()) + common(team, TIME_RULES)
    async with gateway(policy, tmp_path) as gw:
        assert await wait_until(lambda: len(descendants(TIME)) == 0, 30)  # the start's gone
        async with contextlib.AsyncExitStack() as stack:
            for _ in range(2):
                client = await stack.enter_async_context(
                    host(gw.url, team.token("admin", ("admins",)), mode="legacy")
                )
                await client.call_tool("get_current_time", {"timezone": "UTC"})
            assert len(descendants(TIME)) == 2  # each host session its own
        # the clients' exits sent DELETE: every process goes (60 s is the promise)
        gone = await wait_until(lambda: not descendants(TIME), 60)
    assert gone, descendants(TIME)


async def test_upstream_sessions_are_capped_per_identity_and_in_all_with_503_and_audited(
    team: Team, tmp_path: Path
) -> None:
    policy = (
        upstream("time", time_command())
        + common(
            team, TIME_RULES + '[[identity]]\nname = "devs"\ngroups = ["devs"]\ntools = ["*"]\n'
        )
    ).replace("[auth]", "[proxy]\nmax_sessions = 3\nmax_sessions_per_identity = 2\n[auth]")
    async with gateway(policy, tmp_path) as gw, contextlib.AsyncExitStack() as stack:
        first = [
            await stack.enter_async_context(
                host(gw.url, team.token("dev1", ("devs",)), mode="legacy")
            )
            for _ in range(2)
        ]
        for client in first:
            await client.call_tool("get_current_time", {"timezone": "UTC"})
        third = await _raw_initialize(gw.url, team.token("dev1", ("devs",)))
        other = await stack.enter_async_context(
            host(gw.url, team.token("dev2", ("devs",)), mode="legacy")
        )
        await other.call_tool("get_current_time", {"timezone": "UTC"})
        over = await _raw_initialize(gw.url, team.token("dev3", ("devs",)))
        # the running sessions were not evicted for the newcomers
        for client in [*first, other]:
            assert not (await client.call_tool("get_current_time", {"timezone": "UTC"})).is_error
    assert third.status_code == 503 and "this identity's 2" in third.json()["error"]["message"]
    assert over.status_code == 503 and "gateway's 3" in over.json()["error"]["message"]
    assert third.json()["jsonrpc"] == "2.0" and third.json()["error"]["code"] == -32603
    refused = [e for e in audit_lines(tmp_path / "audit.jsonl") if e["tool"] == "initialize"]
    assert [e["identity"] for e in refused] == ["dev1", "dev3"]
    assert all(e["decision"] == "block" and "refused" in e["reason"] for e in refused)


async def _raw_initialize(url: str, token: str) -> httpx.Response:
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=30) as http:
        return await http.post(url, json=INITIALIZE, headers=headers)


async def test_idle_upstream_sessions_are_stopped(team: Team, tmp_path: Path) -> None:
    policy = (upstream("time", time_command()) + common(team, TIME_RULES)).replace(
        "[auth]", "[proxy]\nidle_timeout = 1\n[auth]"
    )
    async with gateway(policy, tmp_path) as gw:
        admin = team.token("admin", ("admins",))
        async with host(gw.url, admin) as modern:  # 2026-07-28: no session, idle time alone
            await modern.call_tool("get_current_time", {"timezone": "UTC"})
            assert descendants(TIME)
            gone = await wait_until(lambda: not descendants(TIME), 30)
            again = await modern.call_tool("get_current_time", {"timezone": "UTC"})
    assert gone and not again.is_error  # started again when used again


async def test_the_defaults_bound_sessions_and_reap_within_ten_minutes(tmp_path: Path) -> None:
    policy = parse_policy(upstream("time", time_command()), "defaults.toml", base=tmp_path)
    assert policy.idle_timeout <= 600
    assert policy.max_sessions_per_identity < policy.max_sessions <= 64
    assert policy.isolation == "host" and policy.http.header_timeout <= 10
    (config,) = policy.upstreams
    assert set(config.environment() or {}) <= {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}


# -- 5. the environment an upstream gets is an allowlist -----------------------------------


async def test_no_upstream_holds_a_variable_off_the_allowlist(
    team: Team, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTELHOOKS_AUDIT_KEY", "audit-key-never-upstream")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer exporter-secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-never-upstream")
    monkeypatch.setenv("LANG", "C.UTF-8")
    policy = (
        upstream("everything", everything_command(), 'inherit_env = ["LANG"]')
        + upstream("time", time_command(), 'prefix = "time"\nenv = { TZ_HINT = "named" }')
        + common(team, rules("get-sum", "time_get_current_time"))
    ).replace('file = "audit.jsonl"', 'file = "audit.jsonl"\nkey_env = "OTELHOOKS_AUDIT_KEY"')
    allowed = {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "TZ_HINT"}
    async with (
        gateway(policy, tmp_path) as gw,
        host(gw.url, team.token("admin", ("admins",)), mode="legacy") as admin,
    ):
        shown = text_of(await admin.call_tool("get-env", {}))
        pids = descendants(EVERYTHING) + descendants(TIME)
        environments = [environ(pid) for pid in pids]
    assert len(pids) >= 2
    for env in environments:
        assert set(env) <= allowed | {"NODE_OPTIONS", "_"}, sorted(set(env) - allowed)
    everything = [e for e in environments if "LANG" in e]
    assert everything and all(e["LANG"] == "C.UTF-8" for e in everything)
    for secret in ("audit-key-never-upstream", "exporter-secret", "aws-secret-never-upstream"):
        assert secret not in shown
    assert "OTELHOOKS" not in shown and "AWS_SECRET" not in shown


# -- 6. the lower findings -----------------------------------------------------------------


async def test_a_dead_upstream_never_makes_a_listing_wait_for_its_start_timeout(
    team: Team, tmp_path: Path
) -> None:
    # serves the check at start; every later start never speaks MCP
    flaky = [*fault_command(), "--hang-after-first", str(tmp_path / "started")]
    policy = (
        upstream("time", time_command())
        + upstream("flaky", flaky, 'start_timeout = 60\nprefix = "f"')
        + common(team, TIME_RULES)
    )
    durations = []
    async with gateway(policy, tmp_path) as gw:
        for _ in range(2):  # two host sessions: two upstream sessions started
            async with host(gw.url, team.token("admin", ("admins",)), mode="legacy") as h:
                started = time.monotonic()
                names = {t.name for t in (await h.list_tools()).tools}
                durations.append(time.monotonic() - started)
        assert "get_current_time" in names
    # each listing of a new session would wait the 60 s start timeout: 12 s is 5x below it
    assert max(durations) < 12, durations


def test_the_sdk_served_stdio_path_answers_a_line_that_is_not_json(tmp_path: Path) -> None:
    policy = tmp_path / "two.toml"
    policy.write_text(
        upstream("time", time_command(), 'prefix = "time"') + upstream("fault", fault_command())
    )
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE["params"]},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        "this is not json",
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
    ]
    answers = _relay_exchange(["--policy", str(policy)], lines)
    errors = [a["error"]["code"] for a in answers if "error" in a]
    assert errors == [-32700], answers


def test_sigterm_ends_the_http_gateway_without_a_traceback(tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "otelhooks", "mcp", "proxy", "--listen", f"127.0.0.1:{port}",
         "--", *time_command()],
        cwd=ROOT, env={**os.environ, "OTEL_TRACES_EXPORTER": "none"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for_port(port)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert "Traceback" not in stderr and "CancelledError" not in stderr, stderr
    assert process.returncode in (0, 128 + signal.SIGTERM)
    assert not descendants(TIME, process.pid)


async def test_slow_clients_cannot_hold_connections_by_trickling_headers(
    team: Team, tmp_path: Path
) -> None:
    policy = (upstream("time", time_command()) + common(team, TIME_RULES)).replace(
        "[store]", "[http]\nheader_timeout = 1\n[store]"
    )
    async with gateway(policy, tmp_path) as gw:
        port = int(gw.base.rsplit(":", 1)[1])
        slow = []
        for _ in range(300):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and nothing more
            slow.append((reader, writer))
        started = time.monotonic()
        async with host(gw.url, team.token("admin", ("admins",))) as h:
            served = await h.call_tool("get_current_time", {"timezone": "UTC"})
        closed = 0
        for reader, writer in slow:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(max(0.1, 10 - (time.monotonic() - started))):
                    if await reader.read() == b"":
                        closed += 1
            writer.close()
    assert not served.is_error
    assert closed == 300  # each cut at its 1 s bound (10 s here: 10x the bound)


async def test_a_get_resuming_a_stream_is_not_a_server_error(team: Team, tmp_path: Path) -> None:
    policy = upstream("time", time_command()) + common(team, TIME_RULES)
    admin = team.token("admin", ("admins",))
    async with gateway(policy, tmp_path) as gw, httpx.AsyncClient(timeout=10) as http:
        opened = await opened_session(http, gw.url, admin)
        session = {
            "authorization": f"Bearer {admin}",
            "accept": "text/event-stream",
            "mcp-session-id": opened["mcp-session-id"],
            "last-event-id": "0",
        }
        async with http.stream("GET", gw.url, headers=session) as resumed:
            status = resumed.status_code
    assert status < 500 and status in (200, 400, 405, 409), status


async def test_a_long_calls_progress_is_recorded_on_its_span_through_the_relay(
    tmp_path: Path,
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otelhooks.integrations.mcp.gateway import Gateway
    from otelhooks.integrations.mcp.policy import UpstreamConfig

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    config = UpstreamConfig("fault", tuple(fault_command()))
    gw = Gateway(
        parse_policy(f'[store]\nfile = "{tmp_path / "gateway.sqlite3"}"\n'),
        [config],
        tracer_provider=provider,
    )
    try:
        async with relay_host(gw, config) as relay:
            await relay.request(1, "initialize", INITIALIZE["params"])
            relay.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            call = {"name": "slow_progress", "arguments": {"steps": 3}}
            relay.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {**call, "_meta": {"progressToken": "p1"}}})  # fmt: skip
            notes = await relay.answer(2)
    finally:
        await gw.close()
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool slow_progress"]
    run = next(s for s in exporter.get_finished_spans() if s.name == "run" and s.parent and
               s.parent.span_id == span.context.span_id)  # fmt: skip
    events = [e for e in run.events if e.name == "otelhooks.tool.progress"]
    assert len(events) == 3
    assert sum(1 for n in notes if n.get("method") == "notifications/progress") == 3


def test_the_guides_policies_start_with_one_upstream_or_several(tmp_path: Path) -> None:
    """A tool's name follows from the policy alone: the guide's git policy, checked against
    one upstream, and the same rules beside another upstream."""
    text = (ROOT / "docs" / "guides" / "mcp.md").read_text()
    block = text.split("<!-- policy -->\n```toml\n", 1)[1].split("```", 1)[0]
    repo = _git_repository(tmp_path / "repo")
    git = [str(Path(sys.executable).parent / "mcp-server-git"), "--repository", str(repo)]
    one = block.replace('["uvx", "mcp-server-git", "--repository", "."]', json.dumps(git))
    one = one.replace('root = "."', f"root = {json.dumps(str(repo))}")
    (tmp_path / "one.toml").write_text(one)
    (tmp_path / "two.toml").write_text(one + "\n" + upstream("time", time_command()))
    for name in ("one.toml", "two.toml"):
        checked = proxy_cli("--policy", str(tmp_path / name), "--check", timeout=90)
        assert checked.returncode == 0, checked.stderr
        assert "git_status" in checked.stderr
        assert "git_reset (denied" in checked.stderr


def _git_repository(path: Path) -> Path:
    from .mcp_support import git_repository

    return git_repository(path)


def test_a_command_that_is_not_found_says_what_to_install(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": "/nonexistent", "OTEL_TRACES_EXPORTER": "none"}
    done = subprocess.run(
        [sys.executable, "-m", "otelhooks", "mcp", "proxy", "--check", "--", "uvx",
         "mcp-server-time"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert "'uvx' is not found" in lines[0] and "install uv" in lines[0]
    assert "ExceptionGroup" not in done.stderr and "Traceback" not in done.stderr


# -- the attacks that held keep holding ---------------------------------------------------


@pytest.fixture
def jwks() -> Iterator[Any]:
    from .gateway_support import issuer

    with issuer() as found:
        yield found


async def test_forged_tokens_and_a_session_taken_by_another_identity_are_refused(
    jwks: Any, tmp_path: Path, team: Team
) -> None:
    import jwt

    resource = "https://gateway.test/mcp"
    policy = (
        upstream("time", time_command())
        + f"""
[auth]
issuer = "{jwks.url}"
jwks_url = "{jwks.jwks_url}"
resource = "{resource}"
required_scopes = ["mcp"]
[[identity]]
name = "all"
subjects = ["alice", "bob"]
tools = ["*"]
[store]
file = "gateway.sqlite3"
"""
    )
    now = int(time.time())
    claims = {"iss": jwks.url, "sub": "alice", "aud": resource, "exp": now + 300, "scope": "mcp"}
    public = jwks.key.public_key().public_bytes(
        __import__("cryptography.hazmat.primitives.serialization", fromlist=["x"]).Encoding.PEM,
        __import__(
            "cryptography.hazmat.primitives.serialization", fromlist=["x"]
        ).PublicFormat.SubjectPublicKeyInfo,
    )
    forged = {
        "alg none": jwt.encode(claims, None, algorithm="none"),
        "HS256 with the public key": _hs256(claims, public),
        "unknown kid": jwt.encode(claims, jwks.key, algorithm="RS256", headers={"kid": "nope"}),
        "not yet valid": jwks.token("alice", audience=resource, extra={"nbf": now + 3600}),
        "no scope": jwks.token("alice", audience=resource, scopes=[]),
    }
    async with gateway(policy, tmp_path) as gw, httpx.AsyncClient(timeout=10) as http:
        for why, token in forged.items():
            answer = await http.post(
                gw.url, json=INITIALIZE, headers={**MCP_HEADERS, "authorization": f"Bearer {token}"}
            )
            assert answer.status_code in (401, 403), why
        good = jwks.token("alice", audience=resource)
        in_query = await http.post(f"{gw.url}?access_token={good}", json=INITIALIZE,
                                   headers=MCP_HEADERS)  # fmt: skip
        assert in_query.status_code == 401
        opened = await http.post(
            gw.url, json=INITIALIZE, headers={**MCP_HEADERS, "authorization": f"Bearer {good}"}
        )
        assert opened.status_code == 200
        bob = jwks.token("bob", audience=resource)
        taken = await http.post(
            gw.url,
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            headers={
                **MCP_HEADERS,
                "authorization": f"Bearer {bob}",
                "mcp-session-id": opened.headers["mcp-session-id"],
            },
        )
        assert taken.status_code == 404  # another identity's session does not exist for bob
        huge = await http.post(
            gw.url,
            content=b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":"'
            + b"a" * (5 << 20)
            + b'"}}',
            headers={**MCP_HEADERS, "authorization": f"Bearer {good}"},
        )
        assert huge.status_code == 413


def _hs256(claims: dict[str, Any], secret: bytes) -> str:
    """A token signed with HMAC over the issuer's public key (PyJWT refuses to make one)."""
    import base64
    import hashlib
    import hmac

    def part(data: dict[str, Any]) -> bytes:
        raw = json.dumps(data, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=")

    head = part({"alg": "HS256", "typ": "JWT", "kid": "key-1"}) + b"." + part(claims)
    mac = base64.urlsafe_b64encode(hmac.new(secret, head, hashlib.sha256).digest()).rstrip(b"=")
    return (head + b"." + mac).decode()


async def test_no_bearer_token_reaches_an_upstream(team: Team, tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    policy = upstream(
        "fault", fault_command(), f"env = {{ FAULT_SERVER_RECORD = {json.dumps(str(record))} }}"
    ) + common(team, rules("echo"))
    token = team.token("admin", ("admins",))
    async with gateway(policy, tmp_path) as gw, host(gw.url, token) as h:
        await h.call_tool("echo", {"text": "hi"})
        pids = descendants("mcp_fault_server")
        environments = [json.dumps(environ(p)) for p in pids]
    assert token not in record.read_text()
    assert all(token not in env for env in environments)


async def test_a_calls_param_headers_are_checked_against_what_the_caller_is_shown(
    team: Team, tmp_path: Path
) -> None:
    """The SDK checks a 2026-07-28 call's ``Mcp-Param-*`` headers against the tool's schema
    before any middleware; the gateway hands it the schema from the caller's own listing
    (not a listing per call). A header that disagrees with the body is refused, one that
    agrees passes, and a tool the caller may not see stays unknown (no check names it)."""
    policy = upstream("fault", fault_command()) + common(team) + rules("echo")

    async def forge(request: httpx.Request) -> None:
        if request.method == "POST" and b'"tools/call"' in request.content:
            request.headers["mcp-param-region"] = "us"

    async with gateway(policy, tmp_path) as gw:
        async with host(gw.url, team.token("admin")) as admin:
            assert text_of(await admin.call_tool("routed", {"region": "eu"})) == "eu"
        for subject, expected in (("admin", "Mcp-Param-Region"), ("clock", "Unknown tool")):
            headers = {"Authorization": f"Bearer {team.token(subject)}"}
            async with (
                httpx.AsyncClient(
                    headers=headers, timeout=30, event_hooks={"request": [forge]}
                ) as http,
                Client(streamable_http_client(gw.url, http_client=http)) as forged,
            ):
                with pytest.raises(MCPError, match=expected):
                    await forged.call_tool("routed", {"region": "eu"})
