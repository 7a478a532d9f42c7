"""One redactor in three places: tool results, spans and log lines."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otelhooks import Hooks, ToolCall, ToolContext, ToolExecutor, ToolRegistry
from otelhooks.builtin import (
    RedactingProcessor,
    RedactionHook,
    Redactor,
    StructlogEvents,
    add_trace_context,
)
from otelhooks.telemetry import attributes as A
from otelhooks.telemetry.testing import InMemoryTracing, in_memory_tracing

# kind -> (text as it appears, the part that must not survive)
SECRETS: dict[str, tuple[str, str]] = {
    "private_key": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAs3cr3tKeyMaterial\n"
        "-----END RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEAs3cr3tKeyMaterial",
    ),
    "jwt": (
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ),
    "bearer_token": ("Authorization: Bearer abcDEF123456ghiJKLmno", "abcDEF123456ghiJKLmno"),
    "aws_access_key_id": ("AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    "aws_secret_access_key": (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    "github_token": (
        "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
        "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
    ),
    "slack_token": ("xoxb-123456789012-AbCdEfGhIjKl", "xoxb-123456789012-AbCdEfGhIjKl"),
    "slack_webhook": (
        "https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXXXXXXXXXX",
        "XXXXXXXXXXXXXXXXXXXXXXXX",
    ),
    "anthropic_api_key": (
        "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz012345",
        "AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    ),
    "openai_api_key": (
        "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
        "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    ),
    "google_api_key": (
        "AIzaSyA1234567890abcdefghijklmnopqrstuv",
        "AIzaSyA1234567890abcdefghijklmnopqrstuv",
    ),
    "stripe_key": ("sk_live_AbCdEfGhIjKlMnOpQrSt1234", "AbCdEfGhIjKlMnOpQrSt1234"),
    "connection_string_password": (
        "postgres://app:S3cretPassw0rd@db.internal:5432/prod",
        "S3cretPassw0rd",
    ),
    "password": ("password=Hunter2Hunter2", "Hunter2Hunter2"),
    "token": ("GITHUB_TOKEN=abc123def456ghi789", "abc123def456ghi789"),
    "credit_card": ("card 4111 1111 1111 1111 on file", "4111 1111 1111 1111"),
}

KEEP = [
    {"author": "Ada Lovelace"},
    {"commit": "3f2a9c1d7e8b4a6c5d0e1f2a3b4c5d6e7f8a9b0c"},
    {"request_id": "123e4567-e89b-12d3-a456-426614174000"},
    {"note": "Please pass the token to the function when you call it."},
    {"max_tokens": 1024, "gen_ai.usage.input_tokens": 12},
    {"order": "ship 2 items to 1600 Pennsylvania Ave, phone 202 456 1111"},
    {"path": "/home/user/docs/report-2024.pdf"},
]


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_each_default_pattern_is_caught_under_an_innocent_key(kind: str) -> None:
    text, secret = SECRETS[kind]
    value, paths = Redactor().redact({"output": f"here: {text} (end)"})
    assert secret not in json.dumps(value)
    assert f"[REDACTED:{kind}]" in value["output"]
    assert paths == ["output"]


@pytest.mark.parametrize("sample", KEEP, ids=lambda s: next(iter(s)))
def test_false_positives_are_kept(sample: dict[str, Any]) -> None:
    value, paths = Redactor().redact(sample)
    assert value == sample and paths == []


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "db_passwd",
        "client_secret",
        "Authorization",
        "oauth_state",
        "credentials",
        "private_key",
        "X-Api-Key",
        "access_token",
        "session",
        "cookie",
        "jwt",
        "csrf_token",
        "ssn",
        "credit_card",
    ],
)
def test_sensitive_keys_redact_the_whole_value(key: str) -> None:
    value, paths = Redactor().redact({"outer": {key: "anything at all"}})
    assert value["outer"][key].startswith("[REDACTED:")
    assert paths == [f"outer.{key}"]


def test_nested_lists_and_json_in_strings_are_walked() -> None:
    text, secret = SECRETS["openai_api_key"]
    payload = {"items": [{"ok": 1}, {"config": json.dumps({"env": {"OPENAI": text}})}]}
    value, paths = Redactor().redact(payload)
    assert secret not in json.dumps(value)
    assert paths == ["items[1].config.env.OPENAI"]
    assert json.loads(value["items"][1]["config"])["env"]["OPENAI"] == "[REDACTED:openai_api_key]"


def test_users_extend_allow_and_call_back() -> None:
    redactor = Redactor(
        allow_keys={"session"}, callback=lambda path, text: text.replace("ACME-", "ACME-***")
    )
    redactor.add_pattern("employee_id", r"\bEMP-\d{6}\b", keywords=["EMP-"])
    value, paths = redactor.redact({"session": "visible", "who": "EMP-123456", "org": "ACME-42"})
    assert value == {
        "session": "visible",
        "who": "[REDACTED:employee_id]",
        "org": "ACME-***42",
    }
    assert sorted(paths) == ["org", "who"]


def test_redaction_is_off_only_when_asked() -> None:
    text, secret = SECRETS["jwt"]
    assert Redactor.disabled().redact({"password": text}) == ({"password": text}, [])
    assert secret not in json.dumps(Redactor().redact({"password": text})[0])


# -- the three places, through the real runtime ------------------------------------------------


def _runtime(redactor: Redactor, log_out: io.StringIO) -> tuple[ToolExecutor, InMemoryTracing, Any]:
    tracing = in_memory_tracing(redactor=redactor)
    logger = structlog.wrap_logger(
        structlog.PrintLogger(log_out),
        processors=[
            add_trace_context,
            RedactingProcessor(redactor),
            structlog.processors.JSONRenderer(),
        ],
    )
    registry = ToolRegistry()

    @registry.tool
    def store(data: Any, ctx: ToolContext) -> Any:
        """Stores data and reports progress."""
        ctx.progress({"stored": data})
        logger.info("storing", data=data)
        return {"saved": data}

    @registry.tool
    def explode(data: Any) -> str:
        raise RuntimeError(f"could not handle {data}")

    hooks = Hooks([RedactionHook(redactor), StructlogEvents(logger, mirror_to_span=True)])
    executor = ToolExecutor(
        registry,
        hooks,
        tracer_provider=tracing.provider,
        capture_content=True,
        scrubber=redactor,
    )
    return executor, tracing, logger


def _everything(tracing: InMemoryTracing, results: list[Any], log_out: io.StringIO) -> str:
    exported = "\n".join(span.to_json() for span in tracing.spans())
    return (
        exported
        + json.dumps([r.content for r in results])
        + repr([r.details for r in results])
        + log_out.getvalue()
    )


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_a_secret_reaches_no_result_span_event_or_log_line(kind: str) -> None:
    text, secret = SECRETS[kind]
    redactor, log_out = Redactor(), io.StringIO()
    executor, tracing, _ = _runtime(redactor, log_out)

    async def main() -> list[Any]:
        return [
            await executor.execute(ToolCall("c1", "store", {"data": f"value {text} end"})),
            await executor.execute(ToolCall("c2", "explode", {"data": f"value {text} end"})),
        ]

    results = asyncio.run(main())
    everything = _everything(tracing, results, log_out)
    assert secret not in everything
    assert f"[REDACTED:{kind}]" in results[0].content
    assert results[1].is_error and f"[REDACTED:{kind}]" in results[1].content
    store_span = tracing.tool_span(call_id="c1")
    assert f"[REDACTED:{kind}]" in store_span.attributes[A.GEN_AI_TOOL_CALL_ARGUMENTS]  # type: ignore[index, operator]
    redacted_paths = store_span.attributes[A.REDACTED_PATHS]  # type: ignore[index]
    assert A.GEN_AI_TOOL_CALL_ARGUMENTS in redacted_paths  # type: ignore[operator]
    run = tracing.child(store_span, "run")
    (progress,) = tracing.events(run, A.EVENT_PROGRESS)
    assert f"[REDACTED:{kind}]" in progress[A.EVENT_PROGRESS_CONTENT]
    explode_run = tracing.child(tracing.tool_span(call_id="c2"), "run")
    (exc,) = tracing.events(explode_run, "exception")
    assert f"[REDACTED:{kind}]" in exc["exception.message"]
    assert secret not in exc["exception.stacktrace"]
    assert '"event": "storing"' in log_out.getvalue()


_innocent_keys = st.sampled_from(["data", "items", "note", "payload", "value", "x", "meta", "body"])
_words = st.text(alphabet="abcdefghij klmnop", max_size=12)


@st.composite
def planted(draw: st.DrawFn) -> tuple[Any, list[str]]:
    kinds = draw(st.lists(st.sampled_from(sorted(SECRETS)), min_size=1, max_size=3))
    secrets = [SECRETS[k][1] for k in kinds]
    leaves = [f"{draw(_words)} {SECRETS[k][0]} {draw(_words)}" for k in kinds]

    def nest(leaf: Any, depth: int) -> Any:
        for _ in range(depth):
            if draw(st.booleans()):
                leaf = {draw(_innocent_keys): leaf, "n": draw(st.integers(0, 9))}
            else:
                leaf = [draw(st.integers(0, 9)), leaf]
        return leaf

    value = {f"k{i}": nest(leaf, draw(st.integers(0, 4))) for i, leaf in enumerate(leaves)}
    if draw(st.booleans()):
        value = {"json": json.dumps(value)}
    return value, secrets


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(planted())
def test_property_no_planted_secret_leaves_through_spans_events_or_logs(
    case: tuple[Any, list[str]],
) -> None:
    data, secrets = case
    redactor, log_out = Redactor(), io.StringIO()
    executor, tracing, _ = _runtime(redactor, log_out)

    async def main() -> list[Any]:
        return [
            await executor.execute(ToolCall("c1", "store", {"data": data})),
            await executor.execute(ToolCall("c2", "explode", {"data": data})),
        ]

    results = asyncio.run(main())
    everything = _everything(tracing, results, log_out)
    for secret in secrets:
        assert secret not in everything


def test_the_evidence_a_mapping_gives_is_remembered_and_an_id_gives_none() -> None:
    import re

    from otelhooks.builtin.secret_context import PROXIMITY_WORDS
    from otelhooks.builtin.secret_keys import _CREDENTIAL_TAILS

    # Ids (trace, span, commit) are skipped when a mapping's evidence is computed: sound only
    # while no word that names a service or a credential is bare hex.
    bare_hex = re.compile("[0-9a-f]+")
    assert not [w for w in PROXIMITY_WORDS if bare_hex.fullmatch(w)]
    assert not [t for t in _CREDENTIAL_TAILS if all(bare_hex.fullmatch(s) for s in t)]
    redactor = Redactor()
    hex_key = "5c33ca9e276cef2e76ff9b36a657575e"  # the shape of a Datadog API key
    for _ in range(2):  # computed, then remembered: the same answer
        near_a_service = {"integration": "datadog", "value": hex_key}
        assert redactor.redact(near_a_service) == (
            {"integration": "datadog", "value": "[REDACTED:secret]"},
            ["value"],
        )
        ids = {"trace_id": hex_key, "span_id": hex_key[:16], "event": "tool_call.completed"}
        assert redactor.redact(ids) == (ids, [])
        named = {"DATADOG_API_KEY": "abc", "note": "hi"}
        assert redactor.redact(named)[1] == ["DATADOG_API_KEY"]
