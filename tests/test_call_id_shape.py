"""A call id is a handle a provider or framework mints; the model writes it back, so it is a place
a model told to leak a secret could put one. In every channel that carries it (the call's span,
its log events, a hook failure's warning) a call id of 8 or more characters without a call
id's shape is replaced whole; the ids providers and frameworks mint are kept, and so are tool
names made of words (the rule is the call id's alone)."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

import pytest

from otelhooks import Hooks, ToolCall, ToolExecutor, ToolRegistry
from otelhooks.builtin import RedactionHook, Redactor, StructlogEvents, json_logger
from otelhooks.builtin.audit import AuditLog
from otelhooks.builtin.secret_detectors import call_id_shaped
from otelhooks.builtin.secret_rules import PATTERNS, samples_of
from otelhooks.telemetry import attributes as A
from otelhooks.telemetry.testing import in_memory_tracing

# ids as providers and frameworks document them
MINTED = (
    "call_1",
    "c1",
    "call_abc123XYZdef456GHI789jk",  # OpenAI chat
    "fc_67ca09c5efe0819096d0511c92b8c890096610f474011cc0",  # OpenAI responses
    "toolu_01A09q90qw90lq917835lq9",  # Anthropic
    "srvtoolu_014hJH82Qum7Td6UV8gDXThB",
    "D681PevKs",  # Mistral: nine letters and digits
    "functions.get_weather:0",  # Kimi
    "3f2a1c9e-8b7d-4e6f-a5c4-1b2d3e4f5a6b",  # a UUID
    "pyd_ai_9f8e7d6c5b4a39281706f5e4d3c2b1a0",
    "req-abc-123",
    "e-sync_echo",  # lower-case words, as a tool's name
    "42",
)
# what has no id's shape: words, passwords, alphabets, a repeated word, base64
UNSHAPED = (
    "MySuperSecretPassword",
    "hunter2hunter2",
    "CorrectHorseBatteryStaple",
    "abcdefghijklmnopqrstuvwxyz",
    "PASSPASSPASSPASSPASS",
    "c2VjcmV0OnBhc3N3b3Jk",
    "p@ssw0rd!",
)


@pytest.mark.parametrize("call_id", MINTED)
def test_minted_call_ids_have_a_call_ids_shape(call_id: str) -> None:
    assert call_id_shaped(call_id)


@pytest.mark.parametrize("call_id", UNSHAPED)
def test_words_passwords_and_alphabets_have_none(call_id: str) -> None:
    assert not call_id_shaped(call_id)


def _run(call_id: str, tool: str = "lookup") -> tuple[str, str, str]:
    """The call's span attribute, its log events and the tool name on the span."""
    redactor = Redactor()
    tracing = in_memory_tracing(redactor=redactor)
    logs = io.StringIO()
    registry = ToolRegistry()

    @registry.tool(name=tool)
    def lookup() -> str:
        """A tool."""
        return "ok"

    hooks = Hooks([RedactionHook(redactor), StructlogEvents(json_logger(logs, redactor))])
    executor = ToolExecutor(registry, hooks, tracer_provider=tracing.provider, scrubber=redactor)
    asyncio.run(executor.execute(ToolCall(call_id, tool, {})))
    span = next(s for s in tracing.spans() if A.GEN_AI_TOOL_CALL_ID in (s.attributes or {}))
    attributes = span.attributes or {}
    return (
        str(attributes[A.GEN_AI_TOOL_CALL_ID]),
        logs.getvalue(),
        str(attributes.get(A.GEN_AI_TOOL_NAME)),
    )


@pytest.mark.parametrize("call_id", MINTED)
def test_a_minted_call_id_is_kept_on_the_span_and_in_the_logs(call_id: str) -> None:
    on_span, logs, _ = _run(call_id)
    assert on_span == call_id
    assert f'"call_id": "{call_id}"' in logs


@pytest.mark.parametrize("call_id", UNSHAPED)
def test_a_call_id_without_an_ids_shape_is_replaced_in_every_channel(call_id: str) -> None:
    on_span, logs, _ = _run(call_id)
    assert on_span == "[REDACTED:secret]"
    assert call_id not in logs and "[REDACTED:secret]" in logs


def test_a_secret_of_every_known_format_as_the_call_id_is_removed() -> None:
    """Every format but bare hex (a key that is only hex digits has an id's shape: found by its
    name or a service's name, not here)."""
    redactor = Redactor()
    for pattern in PATTERNS:
        for sample in samples_of(pattern):
            secret = sample.text[sample.start : sample.end]
            if " " in secret or "\n" in secret or re.fullmatch(r"[0-9a-fA-F-]+", secret):
                continue  # no id holds a space: the model's ids are single tokens
            redacted, _ = redactor.redact_identifier(secret, A.GEN_AI_TOOL_CALL_ID)
            assert secret not in redacted, pattern.kind


@pytest.mark.parametrize("prefix", ["call_", "toolu_", "fc_", "call-"])
def test_a_secret_of_every_known_format_behind_a_providers_prefix_is_removed(prefix: str) -> None:
    """``call_`` + a token has a call id's shape: the handle after the prefix is searched for
    known formats all the same. Every sample a format tells on its own (``ghp_...``,
    ``sk-proj-...``, ``AKIA...``); a bare random token whose rule needs its keyword beside it
    has a handle's shape, and behind a provider's prefix is taken for one."""
    redactor = Redactor()
    tried = 0
    for pattern in PATTERNS:
        for sample in samples_of(pattern):
            secret = sample.text[sample.start : sample.end]
            if " " in secret or "\n" in secret or re.fullmatch(r"[0-9a-fA-F-]+", secret):
                continue
            if not any(f.detector != "shape" for f in redactor.pipeline.find(secret)):
                continue
            redacted, _ = redactor.redact_identifier(prefix + secret, A.GEN_AI_TOOL_CALL_ID)
            assert secret not in redacted, (pattern.kind, redacted)
            tried += 1
    assert tried > 100


def test_a_tool_name_made_of_words_is_kept() -> None:
    _, _, tool = _run("call_1", "CorrectHorseBatteryStaple")
    assert tool == "CorrectHorseBatteryStaple"


GITHUB_TOKEN = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"


@pytest.mark.parametrize(
    ("call_id", "tool"),
    [
        ("CorrectHorseBatteryStaple", "lookup"),  # no id's shape
        (GITHUB_TOKEN, "lookup"),  # a secret's format
        ("call_1", GITHUB_TOKEN),  # an unknown tool named by a secret
    ],
)
def test_the_audit_log_holds_no_secret_from_a_call_id_or_a_tool_name(
    tmp_path: Path, call_id: str, tool: str
) -> None:
    """The audit log never holds the arguments (a digest of them): nor does it hold what the
    model put in a call id or an unknown tool's name; a minted id is kept to follow the call."""
    registry = ToolRegistry()

    @registry.tool(name="lookup")
    def lookup() -> str:
        """A tool."""
        return "ok"

    log = AuditLog(tmp_path / "audit.jsonl", fsync=False)
    redactor = Redactor()
    executor = ToolExecutor(registry, Hooks([log]), scrubber=redactor)
    for call in (
        ToolCall(call_id, tool, {}),
        ToolCall("call_abc123XYZdef456GHI789jk", "lookup", {}),
    ):
        asyncio.run(executor.execute(call))
    log.close()
    text = (tmp_path / "audit.jsonl").read_text()
    leaked = tool if tool != "lookup" else call_id
    assert leaked not in text and "[REDACTED:" in text
    assert '"call_id":"call_abc123XYZdef456GHI789jk"' in text and '"tool":"lookup"' in text
