"""Detectors as a pipeline: every format rule passes its own samples through the gate the
redactor runs it behind (and one with a wrong gate fails), a detector written outside the
package is used in every channel without touching the engine, and the merge policy decides
precedence in one place."""

from __future__ import annotations

import asyncio
import io
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import pytest

from otelhooks import Hooks, ToolCall, ToolExecutor, ToolRegistry
from otelhooks.builtin import (
    Detector,
    Field,
    Finding,
    RedactionHook,
    Redactor,
    SecretPattern,
    StructlogEvents,
    TextView,
    json_logger,
)
from otelhooks.builtin.secret_detectors import merge, validate
from otelhooks.builtin.secret_rules import PATTERNS
from otelhooks.telemetry.testing import in_memory_tracing

# -- the rules carry their samples --------------------------------------------------------------


def test_every_format_rule_passes_its_own_samples_when_the_rules_load() -> None:
    problems = validate(PATTERNS)
    assert not problems, [str(p) for p in problems]
    assert all(p.samples and p.negatives for p in PATTERNS)
    assert len(PATTERNS) >= 130


def _rule(kind: str) -> SecretPattern:
    return next(p for p in PATTERNS if p.kind == kind)


@pytest.mark.parametrize(
    ("kind", "wrong"),
    [
        ("github_token", {"keywords": ("ghq_",)}),  # a keyword the token never holds
        ("stripe_key", {"at_start": True}),  # `_live_` is inside the token, not at its start
        ("authorization_header", {"in_token": True}),  # an ordinary word sought in tokens
        ("aws_access_key_id", {"keywords": ()}),  # no keyword, no prefilter: runs on any text
    ],
    ids=["keyword", "at-start flag", "in-token flag", "no keyword"],
)
def test_a_rule_with_a_wrong_gate_fails_the_check(kind: str, wrong: dict[str, Any]) -> None:
    broken = replace(_rule(kind), **wrong)
    rules = [broken if p.kind == kind and p is _rule(kind) else p for p in PATTERNS]
    problems = validate(rules)
    assert any(p.kind == kind for p in problems), problems


def test_a_rule_whose_regex_finds_its_false_sample_fails_the_check() -> None:
    loose = replace(
        _rule("mailgun_key"),
        regex=re.compile(r"key-\w+"),
        negatives=("cache key-valuestoreconfiguration",),
    )
    problems = validate([loose])
    assert [p.problem for p in problems] == ["finds its false sample"]


def test_a_redactor_refuses_a_rule_of_its_own_that_misses_its_sample() -> None:
    wrong = SecretPattern(
        "acme_key",
        re.compile(r"acme_[0-9]{10}"),
        ("acme_",),
        in_token=True,
        samples=("acme_{a20}",),
    )
    with pytest.raises(ValueError, match="acme_key: does not find its sample"):
        Redactor(patterns=[wrong])
    redactor = Redactor()
    with pytest.raises(ValueError, match="does not find its sample"):
        redactor.add_pattern("acme_key", r"acme_[0-9]{10}", keywords=["acme_"], samples=["acme_x"])
    redactor.add_pattern("acme_key", r"acme_[0-9]{10}", keywords=["acme_"], samples=["acme_{d10}"])
    assert redactor.scrub_text("id acme_0123456789 ok") == "id [REDACTED:acme_key] ok"


# -- a detector from outside ----------------------------------------------------------------------

TICKET = re.compile(r"\bACME-[0-9]{4}-[A-Z]{6}\b")


class AcmeTicketSecret(Detector):
    """An internal credential format nobody ships a rule for."""

    name = "acme_ticket"
    family = "custom"
    priority = 70
    keywords = ("acme-",)

    def find(self, view: TextView, hits: Mapping[str, list[int]]) -> Iterable[Finding]:
        return [self.finding(*m.span(), "acme_ticket") for m in TICKET.finditer(view.work)]

    def judge_value(self, field: Field) -> str | None:
        return "acme_ref" if field.key == "acme_ref" and field.value else None


def test_a_detector_registered_from_outside_is_used_in_every_channel() -> None:
    redactor = Redactor(detectors=[AcmeTicketSecret()])
    assert "acme_ticket" in [d.name for d in redactor.pipeline.detectors]
    tracing = in_memory_tracing(redactor=redactor)
    logs = io.StringIO()
    logger = json_logger(logs, redactor)
    registry = ToolRegistry()

    @registry.tool
    def lookup() -> dict[str, Any]:
        """A tool that leaks the internal credential three ways."""
        logger.info("looked up", note="token ACME-2026-QWERTY in use")
        return {
            "note": "use ACME-2026-QWERTY",
            "acme_ref": "short",
            "lines": ["a", "ACME-2026-QWERTY"],
        }

    hooks = Hooks([RedactionHook(redactor), StructlogEvents(logger, mirror_to_span=True)])
    executor = ToolExecutor(registry, hooks, tracer_provider=tracing.provider, capture_content=True)
    result = asyncio.run(executor.execute(ToolCall("c1", "lookup", {})))
    spans = "\n".join(s.to_json() for s in tracing.spans())
    for channel in (result.content, json.dumps(result.details), spans, logs.getvalue()):
        assert "QWERTY" not in channel
    assert "[REDACTED:acme_ticket]" in result.content
    assert result.details["acme_ref"] == "[REDACTED:acme_ref]"


def test_a_detector_that_implements_nothing_is_refused_by_name() -> None:
    class Misspelt(Detector):
        keywords = ("x",)

        def find_secrets(self, view: TextView) -> list[Finding]:
            return []

    with pytest.raises(TypeError, match=r"implements none of find.*find_secrets"):
        Redactor(detectors=[Misspelt()])
    with pytest.raises(TypeError, match="must subclass"):
        Redactor(detectors=[object()])  # type: ignore[list-item]


def test_a_detector_without_keywords_must_say_it_runs_always() -> None:
    class Unkeyed(Detector):
        def find(self, view: TextView, hits: Mapping[str, list[int]]) -> Iterable[Finding]:
            return []

    with pytest.raises(TypeError, match="always = True"):
        Redactor(detectors=[Unkeyed()])


# -- the merge policy ---------------------------------------------------------------------------


def _f(start: int, end: int, kind: str, priority: int, yields: bool = False) -> Finding:
    return Finding(start, end, kind, kind, priority, yields)


def test_a_yielding_finding_gives_way_to_a_higher_priority_only() -> None:
    text = "x" * 40
    format_ = _f(5, 20, "github_token", 100)
    nearby = _f(10, 30, "secret", 50, yields=True)
    blob = _f(32, 38, "encoded_secret", 10, yields=True)
    blob_over_nearby = _f(25, 34, "encoded_secret", 10, yields=True)
    assert merge(text, [format_, nearby]) == [format_]
    assert merge(text, [blob, nearby]) == [nearby, blob]
    assert merge(text, [nearby, blob_over_nearby]) == [nearby]


def test_overlapping_findings_become_one_labelled_by_the_highest_priority() -> None:
    key = _f(0, 10, "password", 90)
    fmt = _f(5, 20, "jwt", 100)
    assert merge("y" * 30, [key, fmt]) == [Finding(0, 20, "jwt", "jwt", 100)]


def test_a_redaction_already_in_the_text_is_never_redacted_again() -> None:
    text = "token [REDACTED:github_token] and more"
    assert merge(text, [_f(6, 29, "secret", 50)]) == []
    redactor = Redactor()
    assert redactor.scrub_text(text) == text


def test_detectors_run_in_priority_order_and_the_families_are_named() -> None:
    detectors = Redactor().pipeline.detectors
    assert [d.priority for d in detectors] == sorted((d.priority for d in detectors), reverse=True)
    assert {d.family for d in detectors} == {
        "format",
        "key_name",
        "table",
        "structure",
        "nearby",
        "shape",
        "encoded",
        "random",
    }


# -- what the held-out measurement taught (general shapes, not samples) ---------------------------

PKCS1_BODY = (
    "MIIEowIBAAKCAQEAu/Nua0/1y08gkbnBfKd6VDHia8Na0ATgMQqZ4YEbi/t73g84IEPQPkLbPF3X "
    "De++JA1QzqTZbbePLsW44DbbgMX/5jj+Sh2SvGe5IXNeNwyyMox+DKQccJUPxbCxnhF/gSnF76cM"
)


@pytest.mark.parametrize(
    "text",
    [
        f"Here is the key: {PKCS1_BODY} (rotate it)",
        f"API_KEY={PKCS1_BODY}",
        "KEY=" + PKCS1_BODY.replace(" ", "\\n"),  # an env file's key with escaped line breaks
    ],
    ids=["prose", "env", "env with escaped lines"],
)
def test_a_private_key_body_without_its_pem_lines_is_removed(text: str) -> None:
    out = Redactor().scrub_text(text)
    assert "De++JA1Q" not in out and "MIIEowIB" not in out, out


@pytest.mark.parametrize(
    "text",
    [
        "cert: MIIDdzCCAl+gAwIBAgIEbz3rfTANBgkqhkiG9w0BAQsFADBsMRAwDgYDVQQGEwdVbmtub3duMRAwDgYD",
        "pub: MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLez",
    ],
    ids=["certificate", "public key"],
)
def test_a_certificate_or_public_key_body_is_kept(text: str) -> None:
    assert Redactor().scrub_text(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "github.com/aws/aws-sdk-go-v2/credentials v1.19.34 "
        "h1:y6GkSmcv5myd1ngrYbGmiLlwQqB6TQhOuN/tbSSuWDY=",
        "anthropic/types/org_api_key_limit.py,sha256=cPvSFupw0b8llKQmqyzbA4dRWfktdj3XQiE7v7spKHc,550",
        '"integrity": "sha512-3Qv9Kp2Yx8yWbQ1mJ0nS5p6Zx4rT7uV2wA9bC3dE6fG1hI4jK7lM0nO3pQ6"',
        "cosign sign --key cosign.key docker.io/acme/app@sha256:"
        "c5911ac313e0be82a740bd726dc290e655800a9588424ba4e0558c705d1287fd",
        "github.com/bgentry/go-netrc v0.0.0-20140422174119-9fd32a8b3d3d/go.mod "
        "h1:6QX/PXZ00z/TKoufEY6K/a0k6AhaJrQKdFe6OfVXsa4=",
    ],
    ids=["go.sum", "RECORD", "npm integrity", "image digest", "pseudo-version"],
)
def test_digests_labelled_with_their_algorithm_and_versions_are_kept(text: str) -> None:
    assert Redactor().scrub_text(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "if isinstance(key, (Ed25519PublicKey, Ed448PublicKey)):",
        "load_key_and_certificates = rust_pkcs12.load_key_and_certificates",
        'OTEL_EXPORTER_OTLP_LOGS_CLIENT_KEY = "OTEL_EXPORTER_OTLP_LOGS_CLIENT_KEY"',
        "token = ctx = span_kind = None",
        "password=parts['password'],",
        "password: str",
        "--password-stdin    password from stdin. Comma-separated passwords are not supported.",
        "export AZURE_CLIENT_SECRET=$(echo $SP_DATA | jq -r '.password')",
        '"private_key_id": "XXXXXXXXXXXXXXXXXXXXxx",',
    ],
)
def test_code_names_types_and_placeholders_are_kept(text: str) -> None:
    assert Redactor().scrub_text(text) == text


def test_a_generated_token_is_still_not_a_name() -> None:
    text = "the Datadog key is c7Q2xZp9Lm4Rt8Vw3Ny6Kb1H"
    assert "c7Q2xZp9" not in Redactor().scrub_text(text)
    assert Redactor().redact({"MAILGUN_KEY": "c7Q2xZp9Lm4Rt8Vw3Ny6Kb1H"})[0] == {
        "MAILGUN_KEY": "[REDACTED:api_key]"
    }


# -- detectors carry their samples ----------------------------------------------------------------


def test_every_built_in_detector_passes_its_own_samples() -> None:
    from otelhooks.builtin.secret_defaults import default_detectors
    from otelhooks.builtin.secret_detectors import validate_detectors

    detectors = default_detectors(PATTERNS)
    assert validate_detectors(detectors) == []
    assert any(d.samples and d.negatives for d in detectors)


def test_a_detector_that_finds_its_false_sample_or_misses_a_true_one_fails_the_check() -> None:
    from otelhooks.builtin.secret_detectors import TableDetector, validate_detectors

    class Loose(TableDetector):
        negatives = ("user,password\nbob,{a14}",)  # a credential column: it finds this
        samples = ("user,password\nbob,«my password»",)  # prose: it leaves this

    problems = validate_detectors([Loose()])
    assert {p.problem for p in problems} == {"finds its false sample", "does not find its sample"}
