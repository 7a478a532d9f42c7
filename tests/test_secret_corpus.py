"""The redactor against the project's corpus: every rule's true positive is removed whole, its
look-alike and the ordinary strings are left alone, and no cut keeps part of a secret."""

from __future__ import annotations

import asyncio
import io
import json
import re
from typing import Any

import pytest

from otelhooks import Hooks, ToolCall, ToolExecutor, ToolRegistry
from otelhooks.builtin import RedactionHook, Redactor, StructlogEvents, json_logger
from otelhooks.builtin.secret_rules import PATTERNS
from otelhooks.telemetry import attributes as A
from otelhooks.telemetry.testing import in_memory_tracing

from .secret_corpus import KEY_CASES, ORDINARY, TOKEN_CASES, Case, render

REDACTOR = Redactor()


_LABEL = re.compile(r"\[REDACTED:[^\]]*\]")


def leftover(secret: str, text: str, window: int = 8) -> str | None:
    """A piece of ``secret`` of ``window`` characters still in ``text`` (its redaction labels
    aside, which name the kind: ``[REDACTED:rubygems_api_key]``), if any."""
    text = _LABEL.sub("", text)
    for i in range(0, max(1, len(secret) - window + 1)):
        piece = secret[i : i + window]
        if len(piece) == window and piece in text:
            return piece
    return None


def test_the_corpus_covers_every_rule() -> None:
    covered = {c.kind for c in TOKEN_CASES}
    assert {p.kind for p in PATTERNS} <= covered
    assert len(covered) + len({k for k, _, _ in KEY_CASES}) >= 100


@pytest.mark.parametrize("case", TOKEN_CASES, ids=lambda c: c.kind)
def test_true_positive_is_removed_whole(case: Case) -> None:
    text = f"tool output: {case.positive}\n(end of output)"
    out, kinds = REDACTOR.redact_text(text)
    assert case.kind in kinds, out
    assert case.secret not in out
    assert leftover(case.secret, out) is None, out
    assert out.startswith("tool output: ") and out.endswith("\n(end of output)")
    assert REDACTOR.redact_text(out + " ") == (out + " ", [])  # redacting again changes nothing


@pytest.mark.parametrize("case", TOKEN_CASES, ids=lambda c: c.kind)
def test_look_alike_is_left_alone(case: Case) -> None:
    text = f"tool output: {case.negative} (end of output)"
    assert REDACTOR.redact_text(text) == (text, [])


@pytest.mark.parametrize(
    ("key", "value", "syntax"), KEY_CASES, ids=[f"{k}-{s}" for k, _, s in KEY_CASES]
)
def test_value_under_a_credential_name_is_removed(key: str, value: str, syntax: str) -> None:
    text = render(key, value, syntax)
    out, kinds = REDACTOR.redact_text(text)
    assert kinds, out
    assert value not in out and leftover(value, out) is None, out
    assert REDACTOR.redact_text(out + "\n") == (out + "\n", [])  # idempotent


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_strings_are_not_altered(text: str) -> None:
    assert REDACTOR.redact_text(text) == (text, [])


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (
            "url=https%3A%2F%2Fhooks.slack.com%2Fservices%2FT01%2FB02%2FAbCdEfGhIjKlMnOpQrStUv12",
            "AbCdEfGhIjKlMnOpQrStUv12",
        ),
        (
            '{"url": "https:\\/\\/hooks.slack.com\\/services\\/T01\\/B02\\/AbCdEfGhIjKlMnOp"}',
            "AbCdEfGhIjKlMnOp",
        ),
        (
            "token \\u0067hp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
            "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
        ),
        (
            "src=data:text/plain;base64,"
            + __import__("base64")
            .b64encode(b"OPENAI_API_KEY=sk-proj-abcdefghijklmnop0123456789")
            .decode(),
            __import__("base64")
            .b64encode(b"OPENAI_API_KEY=sk-proj-abcdefghijklmnop0123456789")
            .decode(),
        ),
        ("Authorization: Basic YWRtaW46aHVudGVyMg==", "YWRtaW46aHVudGVyMg=="),
    ],
    ids=["url-encoded", "json-escaped", "unicode-escaped", "data-url", "basic-auth"],
)
def test_encoded_forms_are_decoded_and_checked(text: str, secret: str) -> None:
    out, kinds = REDACTOR.redact_text(text)
    assert kinds and secret not in out, out


def test_a_secret_used_as_a_key_is_redacted() -> None:
    token = TOKEN_CASES[[c.kind for c in TOKEN_CASES].index("github_token")].positive
    value, paths = REDACTOR.redact({"tokens": {token: "repo scope", "other": 1}})
    assert token not in json.dumps(value)
    assert value["tokens"]["other"] == 1 and "repo scope" in value["tokens"].values()
    assert paths


def test_kubernetes_secret_data_is_redacted_as_json_too() -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "db"},
        "data": {"username": "YWRtaW4=", "dsn": "cG9zdGdyZXM6Ly9hOmJAYw=="},
    }
    value, _ = REDACTOR.redact(secret)
    assert value["data"] == {
        "username": "[REDACTED:kubernetes_secret]",
        "dsn": "[REDACTED:kubernetes_secret]",
    }
    assert value["metadata"] == {"name": "db"}


def test_credentialish_names_need_a_random_looking_value() -> None:
    value, _ = REDACTOR.redact(
        {
            "client_id": "0afae57f3ccfd9d7f5767067bc48b30f719e271ba470488056e37ab35d4b6506",
            "cache_key": "user:42:profile",
            "auth_method": "oauth2",
        }
    )
    assert value == {
        "client_id": "[REDACTED:secret]",
        "cache_key": "user:42:profile",
        "auth_method": "oauth2",
    }


# -- every channel, and every cut -------------------------------------------------------------


def _pipeline(limit: int = 4096) -> tuple[ToolExecutor, Any, io.StringIO]:

    redactor = Redactor()
    tracing = in_memory_tracing(redactor=redactor)
    out = io.StringIO()
    logger = json_logger(out, redactor)
    registry = ToolRegistry()

    @registry.tool
    def emit(text: str) -> str:
        logger.info("emitting", text=text)
        return text

    @registry.tool
    def fail(text: str) -> str:
        raise RuntimeError(f"could not process {text}")

    hooks = Hooks([RedactionHook(redactor), StructlogEvents(logger, mirror_to_span=True)])
    executor = ToolExecutor(
        registry,
        hooks,
        tracer_provider=tracing.provider,
        capture_content=True,
        max_content_length=limit,
        scrubber=redactor,
    )
    return executor, tracing, out


_CHANNEL_CASES = TOKEN_CASES[::3] + [
    Case(f"key:{k}", render(k, v, s), v, "") for k, v, s in KEY_CASES[::2]
]


@pytest.mark.parametrize("case", _CHANNEL_CASES, ids=lambda c: c.kind)
def test_no_channel_carries_the_secret(case: Case) -> None:
    executor, tracing, logs = _pipeline()

    async def main() -> list[Any]:
        text = f"env dump:\n{case.positive}\nLANG=C.UTF-8"
        return [
            await executor.execute(ToolCall("c1", "emit", {"text": text})),
            await executor.execute(ToolCall("c2", "fail", {"text": text})),
        ]

    results = asyncio.run(main())
    everything = (
        "\n".join(s.to_json() for s in tracing.spans())
        + json.dumps([r.content for r in results])
        + logs.getvalue()
    )
    assert leftover(case.secret, everything) is None
    assert "[REDACTED:" in results[0].content and "[REDACTED:" in results[1].content


@pytest.mark.parametrize(
    "case",
    [c for c in TOKEN_CASES if c.kind in ("github_token", "openai_api_key", "private_key", "jwt")],
    ids=lambda c: c.kind,
)
def test_no_cut_keeps_a_piece_of_a_secret(case: Case) -> None:
    prefix = "result: "
    text = f"{prefix}{case.positive} trailing words after the secret"
    start = len(prefix)
    for limit in range(start - 2, start + len(case.positive) + 2, 3):
        executor, tracing, _ = _pipeline(limit=limit)
        asyncio.run(executor.execute(ToolCall("c", "emit", {"text": text})))
        attrs = tracing.tool_span(call_id="c").attributes or {}
        captured = str(attrs.get(A.GEN_AI_TOOL_CALL_ARGUMENTS)) + str(
            attrs.get(A.GEN_AI_TOOL_CALL_RESULT)
        )
        assert leftover(case.secret, captured) is None, (limit, captured)
