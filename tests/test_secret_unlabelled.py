"""The unlabelled detector: a generated token that nothing names is removed from what the model,
the spans and the logs see; what is meant to be seen (ids, digests, cursors, call ids, public
keys, URLs, code names) is kept."""

from __future__ import annotations

import asyncio
import json

import pytest

from benchmarks import recall as R
from otelhooks.builtin import Redactor
from otelhooks.builtin.secret_detectors import validate_detectors
from otelhooks.builtin.secret_rules import fill
from otelhooks.builtin.secret_unlabelled import UnlabelledTokenDetector, generated_at

REDACTOR = Redactor()
# generated as a service's key is, over the alphabets services use (seeded: the same everywhere)
LOWER = fill("{l24}", "unlabelled:lower")
MIXED = fill("{a32}", "unlabelled:mixed")
DASHED = fill("{l8}-{l16}", "unlabelled:dashed")

REMOVED = [
    f"Here is what I found in the Quorvane dashboard: {LOWER}",
    f"The Vexto integration is configured with {MIXED} and runs hourly.",
    f'client = ZintraClient("{LOWER}")',
    f"const quorvane = new Api({{ auth: '{MIXED}' }});",
    f"2026-12-03T10:15:02.113Z INFO  vexto.client: connecting with {MIXED} (attempt 1)",
    f"Traceback (most recent call last):\n  File \"sync.py\"\nVextoError: rejected '{LOWER}'",
    f"settings:\n  upstream: {DASHED}\n  region: eu-west-1\n",
    f"VEXTO={MIXED} ./run.sh",
    # what a review found passing: a long token of letters and digits, random mixed case that
    # holds capitals before small letters, words that only begin like an id's
    f"configured with {fill('{a64}', 'unlabelled:64')} hourly",
    "The integration is configured with RfQ67QncSvEzlnIzc3Q9TgkkyeqfowLf and runs hourly.",
    "The integration is configured with u1MKjzEfeOJks83PAmRvlzIwGcjgbgTY and runs hourly.",
    f"You shall use {MIXED} for the nightly sync.",
    f"I shared {LOWER} with the vendor.",
    f"Per your request, here it is: {MIXED}",
]


@pytest.mark.parametrize("text", REMOVED)
def test_a_generated_token_nothing_names_is_removed_from_text(text: str) -> None:
    out, kinds = REDACTOR.redact_text(text)
    assert kinds
    for secret in (LOWER, MIXED, DASHED):
        assert R.leftover((secret,), out) is None, out


@pytest.mark.parametrize(
    "value",
    [
        {"id": 42, "integration": "vexto", "config": {"value": MIXED, "enabled": True}},
        {"provider": "Quorvane", "credentials": [{"type": "api", "data": LOWER}]},
        {"vexto": MIXED, "region": "eu-west-1"},
        {"tokens": {MIXED: "Vexto (read-only)"}},
    ],
)
def test_a_generated_token_as_a_mapping_value_or_key_is_removed(value: dict[str, object]) -> None:
    out, paths = REDACTOR.redact(value)
    assert paths
    text = json.dumps(out)
    assert R.leftover((MIXED, LOWER), text) is None, text
    # the same document as JSON text, as a tool returns it (walked as structure)
    out_text, _ = REDACTOR.redact(json.dumps(value))
    assert R.leftover((MIXED, LOWER), out_text) is None, out_text


def test_removed_from_the_result_the_spans_and_the_logs() -> None:
    text = f"The Vexto integration is configured with {MIXED} and runs hourly."

    async def main() -> dict[str, object]:
        return await R.Pipeline(REDACTOR).run(text)

    seen = asyncio.run(main())
    channels = {
        "result": "\n".join(R._strings([seen["result"].content, seen["result"].details])),  # type: ignore[attr-defined]
        "spans": "\n".join(R._span_strings(seen["spans"])),
        "logs": "\n".join(R._strings(seen["logs"])),
    }
    for channel, carried in channels.items():
        assert R.leftover((MIXED,), carried) is None, (channel, carried)
    assert "configured with [REDACTED:secret]" in channels["result"]


KEPT = [
    "trace 4bf92f3577b34da6a3ce929d0e0e4736 span 00f067aa0ba902b7",
    "created 3fa85f64-5717-4562-b3fc-2c963f66afa6 in eu-west-1",
    f"commit {fill('{h40}', 'k:1')} merged into main",
    f"the request {MIXED} took 20 ms",
    f"node_id: {MIXED}",
    "call toolu_01A09q90qw90lq917835lq9 and call_abc123XYZdefGHIjkl456mnoPQ returned",
    "chatcmpl-9aXbYcZdEfGhIjKlMnOpQrStUvWx finished",
    "see https://lists.example.org/archives/message/GY6SNRJP2S7Y42GIIDO3HXPNMDYN2U3A/ for it",
    "pkg/ab12cd34ef56gh78/lib,sha256=Xk3mQ9vR2xT7bN4pL8wY1cF6hJ0sD5gKzqwe4r5t6y7,311",
    "cloud.google.com/go v0.26.0/go.mod h1:aQUYkXzVsufM+DwF1aE+0xfcU+56JwCaLick0ClmMTw=",
    '"integrity": "sha512-Xk3mQ9vR2xT7bN4pL8wY1cF6hJ0sD5gKzqwe4r5t6y7u8i9o0pAsDfGhJkL=="',
    "the header is eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9 (base64 of JSON)",
    "MIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJRTES",
    "ssh.CertAlgoECDSA256v01 and x25519.X25519PrivateKey are supported",
    "HTTP_511_NETWORK_AUTHENTICATION_REQUIRED is returned",
    "/srv/data/builds/x86_64-linux-gnu/libexprtotype.cpython-311.so loaded",
    "version v0.0.0-20160628152529-48b4e1c0c4d0 is pinned",
    "block 01BZJ9WJQPWHGNC2W4J9TA62KC compacted",  # a ULID
    "loaded /rp/Zk3mQ9vR2xT7bN4pL8wY1cF6hJ0sD5gK.gz.js from the CDN",
    "thread 'main' panicked at core::panicking::panic_fmt::h3a5b7c9d1e2f4a6b",
    "sent to 0x742d35Cc6634C0532925a3b844Bc454e4438f44e on mainnet",
    "block 01hzx3q8v5k2m9n4p7r6t1w0yb compacted",
    "created user_01h455vb4pex5vsknk084sn02q today",
    "wrote C:\\Users\\bob\\AppData\\Local\\Cache\\a8Zk3mQ9vR2xT7bN4pQ\\log.txt ok",
    "wrote tmp/Zk3mQ9vR2xT7bN4pL8wY1c/out.json ok",
    "claims eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0 unsigned",
    "charged pi_3MtwBwLkdIwHu7ix28a3tqPa and logged req_011CRq4tZz8mJ3xY5kWn2PqA",
    "mailed x9kqa7w2m4vb8n1c3zq5t6y0pl@example.com",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGJ8N3q7sXoH9m2kQ4uYt6dW5rP0fZcL1vB8eA3nK2xM dev@laptop",
    MIXED,  # a text of one token: an id a tool created, unless a key says what it is
    f"created:\n  {MIXED}\n  {LOWER}\n",  # ids, one per line
    f'[\n  "{MIXED}",\n  "{LOWER}"\n]',
]


@pytest.mark.parametrize("text", KEPT)
def test_what_is_meant_to_be_seen_is_kept(text: str) -> None:
    assert REDACTOR.redact_text(text) == (text, [])


def test_a_value_under_a_key_for_an_id_a_cursor_or_a_digest_is_kept() -> None:
    value = {
        "id": MIXED,
        "request_id": MIXED,
        "cursor": MIXED,
        "next_cursor": LOWER,
        "etag": MIXED,
        "node_id": MIXED,
        "checksum": LOWER,
        "mcp.session.id": MIXED,
        "gen_ai.tool.call.id": f"call_{MIXED}",
        "items": [MIXED, LOWER],  # a list of ids
        "output": MIXED,  # content, judged as the same text alone is
    }
    assert REDACTOR.redact(value) == (value, [])


def test_a_key_the_redactor_is_told_to_allow_keeps_its_generated_value() -> None:
    allowed = Redactor(allow_keys=["build_handle"])
    assert allowed.redact({"build_handle": MIXED}) == ({"build_handle": MIXED}, [])
    assert REDACTOR.redact({"build_handle": MIXED})[1] == ["build_handle"]


def test_a_string_found_clean_alone_is_judged_again_as_a_mapping_value() -> None:
    # the same object, first where nothing names it (kept), then under a key (removed): what
    # was learnt about it alone must not let it through the second time
    redactor = Redactor()
    token = fill("{a32}", "unlabelled:same-object")
    assert redactor.redact_text(token) == (token, [])
    assert redactor.redact({"items": [token], "config": {"value": token}}) == (
        {"items": [token], "config": {"value": "[REDACTED:secret]"}},
        ["config.value"],
    )
    # however long the padding around the token (a judge's bound is on the token, not the text)
    padded = token + " " * 1100
    assert redactor.redact({"items": [padded], "config": {"value": padded}})[1] == [
        "items[0]",
        "config.value",
    ]
    # and a service's name beside it (the nearby detector judges it the same way)
    hexkey = fill("{h32}", "unlabelled:hex")
    assert redactor.redact_text(hexkey) == (hexkey, [])
    out, paths = redactor.redact({"integration": "datadog", "value": hexkey})
    assert out["value"] == "[REDACTED:secret]" and paths == ["value"]


@pytest.mark.parametrize(
    "text",
    [
        f"Password:\n{MIXED}\n",
        f"API key:\n{LOWER}",
        f"Generated new token for you:\n    {MIXED}",
        f"Your token:\n\n  {MIXED}\n\nKeep it safe.",
        f"secret =\r\n{LOWER}\r\n",
    ],
)
def test_a_value_alone_below_the_credential_name_that_announces_it_is_removed(text: str) -> None:
    out, kinds = REDACTOR.redact_text(text)
    assert kinds and R.leftover((MIXED, LOWER), out) is None, out


@pytest.mark.parametrize(
    "text",
    [
        "password:\n  required: true\n",
        "token:\n  - abc\n",
        "The token is described below:\nsee docs",
        "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n"
        "-----END PUBLIC KEY-----",
        f"Your publishable key:\n{MIXED}",
        "the secret\nis here",
    ],
)
def test_what_follows_a_credential_name_on_the_next_line_is_judged_as_a_value(text: str) -> None:
    assert REDACTOR.redact_text(text) == (text, [])


def test_a_known_format_keeps_its_own_label() -> None:
    token = "ghp_" + fill("{a36}", "unlabelled:ghp")
    out, kinds = REDACTOR.redact_text(f"the Vexto integration is configured with {token}")
    assert kinds == ["github_token"], out


def test_the_detector_holds_against_its_own_samples() -> None:
    assert validate_detectors([UnlabelledTokenDetector()]) == []
    assert generated_at(f"NAME={MIXED}") == len("NAME=")
    assert generated_at("x" * 40) is None  # one character: no entropy
    assert generated_at("A" * 5000) is None


def test_it_can_be_turned_off_by_name_and_a_misspelt_name_is_refused() -> None:
    text = f"The Vexto integration is configured with {MIXED} and runs hourly."
    assert Redactor(exclude=["unlabelled"]).redact_text(text) == (text, [])
    with pytest.raises(ValueError, match="did you mean 'unlabelled'"):
        Redactor(exclude=["unlabeled"])
    with pytest.raises(ValueError, match="no built-in detector is named 'format_rules'"):
        Redactor(exclude="format_rules")
