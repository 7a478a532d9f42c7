"""The proxy as a shared gateway, over Streamable HTTP with the official client and real
servers (mcp-server-time from PyPI, server-filesystem from npm): bearer tokens (JWTs from a JWKS
served on loopback, minted by PyJWT; a token file), identities and their rules, the audit log,
tool definition pinning, Origin and Host checks, and results too large for an SSE event."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import mcp.types as mcp_types
import pytest
import structlog
from mcp.shared.exceptions import MCPError

from otelhooks.builtin.audit import verify_audit_log
from otelhooks.telemetry.testing import InMemoryTracing

from .gateway_support import Issuer, free_port, gateway, host, issuer, raw_post
from .mcp_support import fault_command, filesystem_command, proxy_cli, time_command

ROOT = Path(__file__).resolve().parent.parent
RESOURCE = "https://gateway.test/mcp"


def text_of(result: mcp_types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, mcp_types.TextContent))


def jwt_policy(iss: Issuer, tmp_path: Path, *, extra: str = "") -> str:
    return f"""
[proxy]
isolation = "shared"

[[upstream]]
name = "time"
command = {json.dumps(time_command())}

[auth]
issuer = "{iss.url}"
jwks_url = "{iss.jwks_url}"
resource = "{RESOURCE}"
required_scopes = ["mcp"]

[[identity]]
name = "admins"
groups = ["admins"]
tools = ["*"]

[[identity]]
name = "readers"
subjects = ["bob"]
tools = ["*"]
deny = ["convert_time"]

[audit]
file = "audit.jsonl"

[store]
file = "gateway.sqlite3"
{extra}
"""


@pytest.fixture
def jwks() -> Any:
    with issuer() as found:
        yield found


# -- who may come in ------------------------------------------------------------------------


async def test_no_request_gets_in_without_a_valid_token(jwks: Issuer, tmp_path: Path) -> None:
    async with gateway(jwt_policy(jwks, tmp_path), tmp_path) as gw:
        missing = await raw_post(gw.url)
        assert missing.status_code == 401
        challenge = missing.headers["www-authenticate"]
        assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge
        metadata_url = challenge.split('resource_metadata="')[1].split('"')[0]
        assert metadata_url == "https://gateway.test/.well-known/oauth-protected-resource/mcp"
        async with __import__("httpx").AsyncClient() as http:  # RFC 9728, served here
            metadata = (
                await http.get(f"{gw.base}/.well-known/oauth-protected-resource/mcp")
            ).json()
        assert metadata["resource"] == RESOURCE
        assert [s.rstrip("/") for s in metadata["authorization_servers"]] == [jwks.url]

        other_key = __import__(
            "cryptography.hazmat.primitives.asymmetric.rsa", fromlist=["rsa"]
        ).generate_private_key(public_exponent=65537, key_size=2048)
        refused = {
            "wrong audience": jwks.token("alice", audience="https://elsewhere.test/mcp"),
            "expired": jwks.token("alice", audience=RESOURCE, lifetime=-120),
            "bad signature": jwks.token("alice", audience=RESOURCE, key=other_key),
            "wrong issuer": jwks.token("alice", audience=RESOURCE, issuer="https://evil.test"),
            "not a JWT": "hello",
        }
        for why, token in refused.items():
            answer = await raw_post(gw.url, token)
            assert answer.status_code == 401, why
            assert "www-authenticate" in answer.headers, why

        no_scope = await raw_post(gw.url, jwks.token("alice", audience=RESOURCE, scopes=["x"]))
        assert no_scope.status_code == 403
        assert 'error="insufficient_scope"' in no_scope.headers["www-authenticate"]

        good = await raw_post(gw.url, jwks.token("alice", audience=RESOURCE, groups=["admins"]))
        assert good.status_code == 200


async def test_a_cross_origin_request_is_refused(jwks: Issuer, tmp_path: Path) -> None:
    async with gateway(jwt_policy(jwks, tmp_path), tmp_path) as gw:
        token = jwks.token("alice", audience=RESOURCE, groups=["admins"])
        evil = await raw_post(gw.url, token, headers={"origin": "http://evil.example"})
        assert evil.status_code == 403
        rebound = await raw_post(gw.url, token, headers={"host": "attacker.example:80"})
        assert rebound.status_code == 421 or rebound.status_code == 403
        same = await raw_post(gw.url, token)
        assert same.status_code == 200


def test_listening_beyond_loopback_without_auth_is_refused(tmp_path: Path) -> None:
    port = free_port()
    done = proxy_cli("--listen", f"0.0.0.0:{port}", "--", *time_command(), timeout=120)
    assert done.returncode == 1
    assert "needs authentication" not in done.stderr  # says what to do instead:
    assert "reachable from other machines" in done.stderr and "[auth]" in done.stderr
    assert "tokens" in done.stderr and "jwks_url" in done.stderr
    assert done.stderr.count("\n") <= 2  # one clear line, no traceback

    tokens = tmp_path / "tokens.toml"
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[auth]\ntokens = "{tokens}"\n')
    tokens.write_text("")
    everywhere = proxy_cli(
        "--policy", str(policy), "--listen", f"0.0.0.0:{port}", "--", *time_command(), timeout=120
    )
    assert everywhere.returncode == 1
    assert "allowed_hosts" in everywhere.stderr


# -- identities, their rules, and the audit log ---------------------------------------------


async def test_each_identity_sees_and_calls_what_its_rule_allows_and_every_call_is_audited(
    jwks: Issuer, tmp_path: Path, otelhooks_tracing: InMemoryTracing
) -> None:
    alice = jwks.token("alice", audience=RESOURCE, groups=["admins"])
    bob = jwks.token("bob", audience=RESOURCE)
    carol = jwks.token("carol", audience=RESOURCE)
    convert = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
    events = structlog.testing.LogCapture()
    structlog.configure(processors=[structlog.contextvars.merge_contextvars, events])
    async with gateway(
        jwt_policy(jwks, tmp_path), tmp_path, tracer_provider=otelhooks_tracing.provider
    ) as gw:
        async with host(gw.url, alice) as a:
            assert {t.name for t in (await a.list_tools()).tools} == {
                "get_current_time",
                "convert_time",
            }
            allowed = await a.call_tool("convert_time", convert)
        async with host(gw.url, bob, mode="legacy") as b:  # the handshake era: a session
            assert {t.name for t in (await b.list_tools()).tools} == {"get_current_time"}
            with pytest.raises(MCPError) as denied:
                await b.call_tool("convert_time", convert)
            fine = await b.call_tool("get_current_time", {"timezone": "UTC"})
        async with host(gw.url, carol) as c:
            assert (await c.list_tools()).tools == []
            with pytest.raises(MCPError) as stranger:
                await c.call_tool("get_current_time", {"timezone": "UTC"})
    assert not allowed.is_error and "Asia/Tokyo" in text_of(allowed)
    # what a caller may not call is answered as a tool that does not exist
    assert str(denied.value) == "Unknown tool: 'convert_time'"
    assert not fine.is_error
    assert str(stranger.value) == "Unknown tool: 'get_current_time'"

    structlog.reset_defaults()
    completed = [e for e in events.entries if str(e["event"]).startswith("tool_call.")]
    refused = [e for e in events.entries if e["event"] == "request.refused"]
    assert len(completed) == 3  # carol may call nothing: refused before any tool call
    assert [(e["target"], e["log_level"]) for e in refused] == [("get_current_time", "warning")]
    completed += refused
    assert all(len(e["user_hash"]) == 16 and "user_id" not in e for e in completed)
    lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [(e["identity"], e["tool"], e["decision"], e["outcome"]) for e in lines] == [
        ("alice", "convert_time", "allow", "ok"),
        ("bob", "convert_time", "block", "blocked"),
        ("bob", "get_current_time", "allow", "ok"),
        ("carol", "get_current_time", "block", "blocked"),
    ]
    assert [e["rule"] for e in lines] == ["admins", "readers", "readers", "identity"]
    assert all(e["identity_via"] == "jwt" for e in lines)
    assert [e["upstream"] for e in lines] == ["time", "time", "time", None]  # carol: none started
    assert lines[0]["arguments"].startswith("hmac-sha256:") and "Asia" not in json.dumps(lines)
    # The block reason reaches spans and logs, where the caller is a pseudonym: it never names
    # the caller.
    assert lines[1]["reason"].startswith("the caller may not call 'convert_time'")
    assert "identity rule 'readers'" in lines[1]["reason"]
    assert not any("bob" in json.dumps(e) for e in refused + completed)
    assert verify_audit_log(tmp_path / "audit.jsonl").ok

    spans = otelhooks_tracing.find("execute_tool convert_time")
    assert len(spans) == 2
    trace_ids = {format(s.context.trace_id, "032x") for s in spans}  # type: ignore[union-attr]
    assert {lines[0]["trace_id"], lines[1]["trace_id"]} == trace_ids
    for span in otelhooks_tracing.tool_spans():
        attrs = dict(span.attributes or {})
        assert attrs["network.transport"] == "tcp" and attrs["network.protocol.name"] == "http"
        assert len(attrs["user.hash"]) == 16 and "user.id" not in attrs  # a pseudonym
        assert "alice" not in json.dumps(attrs, default=str)
    # bob's host spoke the handshake era: its calls carry its Mcp-Session-Id (not the
    # upstream's); 2026-07-28 has no sessions, so alice's and carol's carry none.
    by_rule = {
        s.attributes.get("otelhooks.identity.rule"): s for s in otelhooks_tracing.tool_spans()
    }  # type: ignore[union-attr]
    assert by_rule["readers"].attributes["mcp.session.id"]  # type: ignore[index]
    assert "mcp.session.id" not in by_rule["admins"].attributes  # type: ignore[operator]


async def test_a_token_file_lets_small_teams_in_and_a_removed_entry_is_revoked_at_once(
    tmp_path: Path,
) -> None:
    tokens = tmp_path / "tokens.toml"
    made = subprocess.run(
        [sys.executable, "-m", "otelhooks", "mcp", "token", "add", "--file", str(tokens),
         "--subject", "dana", "--scope", "mcp", "--group", "ops"],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    token = made.stdout.strip()
    assert token.startswith("ohk_") and token not in tokens.read_text()  # the hash only
    assert oct(tokens.stat().st_mode & 0o777) == "0o600"
    policy = f"""
[[upstream]]
name = "time"
command = {json.dumps(time_command())}
[auth]
tokens = "{tokens}"
identity_in_telemetry = "plain"
[store]
file = "gateway.sqlite3"
"""
    async with gateway(policy, tmp_path) as gw:
        async with host(gw.url, token) as dana:
            result = await dana.call_tool("get_current_time", {"timezone": "UTC"})
        assert not result.is_error
        assert (await raw_post(gw.url, "ohk_not-a-token")).status_code == 401
        tokens.write_text("")  # revoke every token
        assert (await raw_post(gw.url, token)).status_code == 401


async def test_an_audit_log_that_was_edited_fails_verification(
    jwks: Issuer, tmp_path: Path
) -> None:
    alice = jwks.token("alice", audience=RESOURCE, groups=["admins"])
    async with gateway(jwt_policy(jwks, tmp_path), tmp_path) as gw, host(gw.url, alice) as a:
        for zone in ("UTC", "Europe/Paris", "Asia/Tokyo"):
            await a.call_tool("get_current_time", {"timezone": zone})
    log = tmp_path / "audit.jsonl"
    verify = [sys.executable, "-m", "otelhooks", "mcp", "audit", "verify", str(log)]
    intact = subprocess.run(verify, capture_output=True, text=True, cwd=ROOT)
    assert intact.returncode == 0 and "3 lines, the chain holds" in intact.stdout
    lines = log.read_text().splitlines()
    edited = json.loads(lines[1])
    edited["decision"] = "allow"
    edited["identity"] = "mallory"
    log.write_text("\n".join([lines[0], json.dumps(edited), lines[2]]) + "\n")
    broken = subprocess.run(verify, capture_output=True, text=True, cwd=ROOT)
    assert broken.returncode == 1
    assert f"{log}:2: its hash does not match its content" in broken.stderr
    log.write_text("\n".join([lines[0], lines[2]]) + "\n")  # a line removed
    removed = subprocess.run(verify, capture_output=True, text=True, cwd=ROOT)
    assert removed.returncode == 1 and ":2: does not follow the line before" in removed.stderr


# -- pinning --------------------------------------------------------------------------------


async def test_a_tool_that_changes_after_it_was_pinned_is_hidden_and_blocked_until_approved(
    tmp_path: Path,
) -> None:
    policy = f"""
[[upstream]]
name = "fault"
command = {json.dumps(fault_command())}
[store]
file = "gateway.sqlite3"
[audit]
file = "audit.jsonl"
"""
    async with gateway(policy, tmp_path) as gw, host(gw.url) as h:
        await h.call_tool("add_tool", {"name": "innocent"})  # pinned on first sight
        assert "innocent" in {t.name for t in (await h.list_tools()).tools}
        first = await h.call_tool("innocent", {})
        # The server replaces it with a new description: a rug pull.
        await h.call_tool("add_tool", {"name": "innocent"})
        # The new definition reaches the gateway with the upstream's list_changed: wait for the
        # event, not for a time (a loaded machine may take seconds to deliver it).
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if "innocent" not in {t.name for t in (await h.list_tools()).tools}:
                break
            await asyncio.sleep(0.1)
        assert "innocent" not in {t.name for t in (await h.list_tools()).tools}
        blocked = await h.call_tool("innocent", {})
    assert not first.is_error and text_of(first) == "I am innocent"
    assert blocked.is_error and "changed since it was pinned" in text_of(blocked)
    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert audit[-1]["tool"] == "innocent" and audit[-1]["deciding_hook"] == "pinning"


def test_approve_shows_the_change_and_pins_the_new_definition(tmp_path: Path) -> None:
    from otelhooks.builtin.store import Definition, SQLiteStore

    policy = tmp_path / "policy.toml"
    policy.write_text(
        f'[[upstream]]\nname = "time"\ncommand = {json.dumps(time_command())}\n'
        '[store]\nfile = "gateway.sqlite3"\n'
    )
    assert proxy_cli("--policy", str(policy), "--check", timeout=60).returncode == 0
    store = SQLiteStore(tmp_path / "gateway.sqlite3")
    (pinned,) = [p for p in store.pins() if p.tool == "get_current_time"]
    older = {**pinned.definition, "description": "Get the current time. (as it was once)"}
    old = Definition(pinned.upstream, pinned.tool, "sha256:" + "0" * 64, older)
    store.approve_pin(old, by="test")
    store.close()

    checked = proxy_cli("--policy", str(policy), "--check", timeout=60)
    assert "get_current_time (definition changed since pinned: hidden and blocked)" in (
        checked.stderr
    )
    approve = [sys.executable, "-m", "otelhooks", "mcp", "approve", "--policy", str(policy)]
    shown = subprocess.run(approve, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert shown.returncode == 0
    assert "get_current_time: changed (sha256:000" in shown.stdout
    assert '-  "description": "Get the current time. (as it was once)"' in shown.stdout
    assert "approved" not in shown.stdout  # nothing named: nothing approved
    approved = subprocess.run(
        [*approve, "--as", "alice", "get_current_time"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert approved.returncode == 0 and "approved get_current_time" in approved.stdout
    again = proxy_cli("--policy", str(policy), "--check", timeout=60)
    assert "changed since pinned" not in again.stderr
    store = SQLiteStore(tmp_path / "gateway.sqlite3")
    assert store.get_pin(pinned.upstream, pinned.tool).pinned_by == "alice"  # type: ignore[union-attr]


# -- large results --------------------------------------------------------------------------


async def test_a_result_too_large_for_an_sse_event_is_a_clear_error_or_delivered_as_json(
    tmp_path: Path, otelhooks_tracing: InMemoryTracing
) -> None:
    root = tmp_path / "files"
    root.mkdir()
    big = root / "big.txt"
    big.write_text(("0123456789abcdef" * 64 + "\n") * 2100)  # 2.1 MB
    upstream = f'[[upstream]]\nname = "fs"\ncommand = {json.dumps(filesystem_command(root))}\n'
    pins = '[store]\nfile = "gateway.sqlite3"\n'
    arguments = {"path": str(big)}
    async with (
        gateway(upstream + pins, tmp_path, tracer_provider=otelhooks_tracing.provider) as gw,
        host(gw.url) as h,
    ):
        refused = await h.call_tool("read_text_file", arguments)
    assert refused.is_error
    assert "more than the 1,040,000 a message to the host may carry" in text_of(refused)
    span = otelhooks_tracing.find_one("execute_tool read_text_file")
    assert span.attributes["error.type"] == "result_too_large"  # type: ignore[index]

    json_mode = upstream + pins + '[http]\nresponses = "json"\n'
    async with gateway(json_mode, tmp_path) as gw, host(gw.url) as h:
        delivered = await h.call_tool("read_text_file", arguments)
    assert not delivered.is_error and len(text_of(delivered)) == big.stat().st_size
