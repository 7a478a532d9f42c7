"""Keys that can be revoked, and logins that never stall: JWTs minted by PyJWT against a JWKS
served on loopback (whose keys are removed and which is made to hang), token-file tokens beside
them, mcp-server-time from PyPI behind the gateway, the official client and plain HTTP."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from pathlib import Path

import pytest

from otelhooks.integrations.mcp.auth import JWKS_REFETCH, JWKS_TTL, add_token
from otelhooks.integrations.mcp.policy import PolicyError, parse_policy
from otelhooks.telemetry.testing import InMemoryTracing

from .gateway_support import gateway, host, raw_post
from .hardening_support import jwks_server, new_key
from .mcp_support import time_command

RESOURCE = "https://gateway.test/mcp"
REVOCATION_BOUND = 120.0  # seconds: "a key removed from the JWKS is refused within 2 minutes"


def policy(jwks_url: str, issuer: str, *, extra: str = "") -> str:
    return f"""
[proxy]
isolation = "shared"

[[upstream]]
name = "time"
command = {json.dumps(time_command())}

[auth]
issuer = "{issuer}"
jwks_url = "{jwks_url}"
resource = "{RESOURCE}"
tokens = "tokens.toml"
{extra}

[audit]
file = "audit.jsonl"

[store]
file = "gateway.sqlite3"
"""


async def test_a_key_removed_from_the_jwks_is_refused_within_the_bound_and_a_new_one_is_taken(
    tmp_path: Path,
) -> None:
    add_token(tmp_path / "tokens.toml", "ops")
    with jwks_server("key-1", "key-2") as jwks:
        text = policy(jwks.jwks_url, jwks.url, extra="jwks_ttl = 1")
        async with gateway(text, tmp_path) as gw:
            doomed = jwks.token("bob", audience=RESOURCE, kid="key-2")
            assert (await raw_post(gw.url, doomed)).status_code == 200
            del jwks.keys["key-2"]  # the issuer revokes it
            removed = time.monotonic()
            while (await raw_post(gw.url, doomed)).status_code == 200:
                assert time.monotonic() - removed < REVOCATION_BOUND, "the key is still trusted"
                await asyncio.sleep(0.2)
            # Key rotation still works: a key id the gateway never saw is fetched.
            jwks.keys["key-3"] = new_key()
            rotated = jwks.token("bob", audience=RESOURCE, kid="key-3")
            deadline = time.monotonic() + JWKS_REFETCH * 5
            while (await raw_post(gw.url, rotated)).status_code != 200:
                assert time.monotonic() < deadline, "a new key was never fetched"
                await asyncio.sleep(0.2)
            fetches = jwks.fetches
    assert fetches < 200  # polled every 0.2 s: fetched about once a second, no storm


def test_the_default_bound_is_a_minute_and_a_longer_one_is_refused(tmp_path: Path) -> None:
    from otelhooks.integrations.mcp.auth import JWTVerifier

    assert JWKS_TTL <= 60 and JWTVerifier("http://x", issuer="i", audience="a").keys.ttl <= 60
    parsed = parse_policy(policy("http://127.0.0.1:1/j", "https://idp"), base=tmp_path)
    assert parsed.auth is not None and parsed.auth.jwks_ttl == 60
    with pytest.raises(PolicyError, match="jwks_ttl must be at most 60"):
        parse_policy(policy("http://127.0.0.1:1/j", "https://idp", extra="jwks_ttl = 300"))


async def test_a_hanging_jwks_and_random_key_ids_cost_one_fetch_and_stall_no_login(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ops = add_token(tmp_path / "tokens.toml", "ops", scopes=["mcp"])
    with jwks_server("key-1") as jwks:
        async with gateway(policy(jwks.jwks_url, jwks.url), tmp_path) as gw:
            bob = jwks.token("bob", audience=RESOURCE, kid="key-1")
            assert (await raw_post(gw.url, bob)).status_code == 200  # the keys are fetched
            before = jwks.fetches
            # An unknown key id may cause a fetch 10 s after the last one: skip those 10 s on
            # the cache's own clock (the keys stay fresh: 11 s is within their minute).
            assert gw.proxy.verifier is not None and gw.proxy.verifier.jwt is not None
            cache = gw.proxy.verifier.jwt.keys
            cache.clock = lambda: time.monotonic() + JWKS_REFETCH + 1
            jwks.hold.clear()  # from now on the issuer hangs
            attackers = [
                asyncio.create_task(raw_post(gw.url, jwks.random_kid_token(RESOURCE)))
                for _ in range(12)
            ]
            while jwks.waiting == 0:  # one fetch for an unknown key id reached the issuer
                await asyncio.sleep(0.02)
            with caplog.at_level(logging.DEBUG, logger="otelhooks"):
                # While it hangs, a token-file login and a login with a known key go through.
                by_file = await asyncio.wait_for(raw_post(gw.url, ops), 30)
                assert jwks.waiting == 1 and by_file.status_code == 200
                by_jwt = await asyncio.wait_for(raw_post(gw.url, bob), 30)
                assert jwks.waiting == 1 and by_jwt.status_code == 200
                refused = await asyncio.gather(*attackers)
                # Another wave within the back-off: no fetch at all.
                more = await asyncio.gather(
                    *(raw_post(gw.url, jwks.random_kid_token(RESOURCE)) for _ in range(12))
                )
            fetched = jwks.fetches - before
            jwks.hold.set()
    assert [r.status_code for r in refused + more] == [401] * 24
    assert fetched == 1
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "DecodeError" not in logged  # the token file's token never went to the JWT verifier


async def test_budgets_count_per_person_and_pseudonyms_are_keyed(
    tmp_path: Path, otelhooks_tracing: InMemoryTracing
) -> None:
    add_token(tmp_path / "tokens.toml", "ops")
    extra = '\n[[identity]]\nname = "team"\nsubjects = ["bob"]\ntools = ["*"]\nrate = 2\n'
    with jwks_server("key-1") as jwks:
        text = policy(jwks.jwks_url, jwks.url) + extra
        async with gateway(text, tmp_path, tracer_provider=otelhooks_tracing.provider) as gw:
            results = []
            for laptop in ("bob-laptop", "bob-laptop", "bob-phone"):  # a second client_id
                token = jwks.token("bob", audience=RESOURCE, kid="key-1", client_id=laptop)
                async with host(gw.url, token) as h:
                    results.append(await h.call_tool("get_current_time", {"timezone": "UTC"}))
    assert [r.is_error for r in results] == [False, False, True]
    reason = "\n".join(b.text for b in results[2].content if hasattr(b, "text"))
    assert "more than 2 calls a minute" in reason and "bob" not in reason
    spans = otelhooks_tracing.tool_spans()
    pseudonyms = {s.attributes["user.hash"] for s in spans}  # type: ignore[index]
    assert len(pseudonyms) == 1  # one person, whatever the client
    from otelhooks.builtin.audit import AuditKeys, load_secret
    from otelhooks.core import digest

    keys = AuditKeys.of(load_secret(tmp_path / "audit.jsonl.key", create=False))

    assert pseudonyms == {digest.pseudonym(keys.pseudonym, jwks.url, "bob")}
    for guess in ("bob", f"{jwks.url}\x1fbob", f"{jwks.url}\x1fbob\x1fbob-laptop"):
        assert hashlib.sha256(guess.encode()).hexdigest()[:16] not in pseudonyms


async def test_an_identity_budget_counts_a_call_once_when_a_later_rewrite_runs_it_again() -> None:
    from otelhooks import BeforeToolCallContext, Hooks, ToolCall, ToolExecutor, ToolRegistry
    from otelhooks.core import rewrite
    from otelhooks.integrations.mcp.access import CALLER, Caller, IdentityRule, IdentityRules
    from otelhooks.integrations.mcp.auth import Identity

    registry = ToolRegistry()
    registry.register(lambda text: text, name="echo")
    rules = IdentityRules([IdentityRule("team", subjects=("ann",), tools=("*",), max_calls=2)])
    hooks = Hooks([rules], registry=registry)

    @hooks.before
    def normalise(ctx: BeforeToolCallContext) -> object:  # runs the identity rules again
        return rewrite({"text": str(ctx.args["text"]).strip()})

    executor = ToolExecutor(registry, hooks)
    token = CALLER.set(Caller(Identity(subject="ann", client_id="laptop", via="token")))
    try:
        results = [
            await executor.execute(ToolCall(f"c{n}", "echo", {"text": " hi "})) for n in range(3)
        ]
    finally:
        CALLER.reset(token)
    assert [r.is_error for r in results] == [False, False, True]  # two calls, not one
    assert "its 2 calls are used up" in results[2].content
