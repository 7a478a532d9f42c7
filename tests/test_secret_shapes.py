"""Secrets known by their shape alone (otelhooks/builtin/secret_shapes.py): each shape carries its
own true and false samples, checked here by the shape detector alone and through the whole
redactor; a wrapped base64 body is removed over all its lines; provider ids and the
``mcp.session.id`` the gateway writes stay as they are."""

from __future__ import annotations

import pytest

from otelhooks.builtin import Redactor
from otelhooks.builtin.secret_detectors import ShapeDetector
from otelhooks.builtin.secret_shapes import SHAPE_SAMPLES

_POSITIVES = [(shape, text) for shape, (pos, _) in SHAPE_SAMPLES.items() for text in pos]
_NEGATIVES = [(shape, text) for shape, (_, neg) in SHAPE_SAMPLES.items() for text in neg]


def _shape_only() -> Redactor:
    return Redactor(use_defaults=False, detectors=[ShapeDetector()])


def test_every_shape_carries_true_and_false_samples() -> None:
    assert set(SHAPE_SAMPLES) == {"prefixed token", "password"}
    assert all(pos and neg for pos, neg in SHAPE_SAMPLES.values())


@pytest.mark.parametrize(("shape", "text"), _POSITIVES)
def test_the_shape_detector_alone_finds_each_true_sample(shape: str, text: str) -> None:
    out = _shape_only().scrub_text(text)
    assert "[REDACTED:" in out, (shape, out)


@pytest.mark.parametrize(("shape", "text"), _POSITIVES)
def test_no_eight_characters_of_a_true_sample_survive_the_redactor(shape: str, text: str) -> None:
    out = Redactor().scrub_text(text)
    secret = max(text.replace("=", " ").replace(":", " ").split(), key=len)
    secret = secret.strip("\"'{}").split("@")[0]
    left = [secret[i : i + 8] for i in range(len(secret) - 7) if secret[i : i + 8] in out]
    assert not left, (shape, out)


@pytest.mark.parametrize(("shape", "text"), _NEGATIVES)
def test_each_false_sample_is_kept_by_the_shape_detector_and_the_redactor(
    shape: str, text: str
) -> None:
    assert _shape_only().scrub_text(text) == text, shape
    assert Redactor().scrub_text(text) == text, shape


def test_a_shape_check_that_cannot_fail_would_be_caught() -> None:
    # the samples are real tests: a detector that finds nothing fails every true sample
    class Blind(ShapeDetector):
        def find(self, view, hits):  # type: ignore[no-untyped-def]
            return ()

    blind = Redactor(use_defaults=False, detectors=[Blind()])
    assert all("[REDACTED:" not in blind.scrub_text(text) for _, text in _POSITIVES)


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: Bearer 7eUHc9npsdql24xsVK8huo9VKPu/mrDStv8JYRWP4cSUXWWBx5oGpPBP7uaMgQCx"
        "\\nuks3gKrUL/3LFndE0egKslgGSkoyYb3iHP1X3IFsOtTQz6ZPmzc=",
        "authenticating with 7eUHc9npsdql24xsVK8huo9VKPu/mrDStv8JYRWP4cSUXWWBx5oGpPBP7uaMgQCx"
        "\nuks3gKrUL/3LFndE0egKslgGSkoyYb3iHP1X3IFsOtTQz6ZPmzc= (attempt 1)",
    ],
    ids=["escaped line break", "line break"],
)
def test_a_base64_secret_wrapped_over_lines_is_removed_on_every_line(text: str) -> None:
    out = Redactor().scrub_text(text)
    assert "uks3gKrU" not in out and "7eUHc9np" not in out, out


def test_a_certificate_wrapped_over_lines_is_kept() -> None:
    text = (
        "-----BEGIN CERTIFICATE-----\n"
        "MIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\n"
        "RTESMBAGA1UEChMJQmFsdGltb3JlMRMwEQYDVQQLEwpDeWJlclRydXN0MSIwIAYD\n"
        "-----END CERTIFICATE-----"
    )
    assert Redactor().scrub_text(text) == text


@pytest.mark.parametrize(
    "value",
    [
        "call_Zk3mQ9vR2xT7bN4pL8wY1cF6",
        "toolu_01A09q90qw90lq917835lq9Zk3mQ9vR2xT7bN4pL8",
        "chatcmpl-Zk3mQ9vR2xT7bN4pL8wY1cF6hJ0sD5gK",
        "req_011CRzHq8Vn2Rk7Tm3Wp9Lx6Bc1Dy5Fg0Sj8",
    ],
)
def test_provider_ids_are_not_vendor_tokens(value: str) -> None:
    assert Redactor().scrub_text(value) == value
    assert Redactor().scrub_text(f"id: {value}") == f"id: {value}"


@pytest.mark.parametrize(
    "session_id",
    ["7f3c2a7be41d48c6a5f2e19d7b3c04a8", "c7Q2xZp9Lm4Rt8Vw3Ny6Kb1H"],
)
def test_an_mcp_session_id_attribute_stays_as_the_gateway_wrote_it(session_id: str) -> None:
    # session ids as servers make them: hex (the official SDK's uuid4().hex), base62; the
    # real gateway's span is checked in tests/test_redaction_defaults.py
    scrubbed, paths = Redactor().redact({"mcp.session.id": session_id}, "attributes")
    assert scrubbed == {"mcp.session.id": session_id} and paths == []


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("ENV API_TOKEN Zk3mQ9vR2xT7bN4pL8wY1cF6", "Zk3mQ9vR2xT7bN4pL8wY1cF6"),
        ('"created_by": "ENV aws_sec_key \\"KEYKEYKEYKEYKEYKEY\\""', "KEYKEYKEYKEYKEYKEY"),
        ("/bin/sh -c #(nop)  ENV DB_PASSWORD s3cr3tPassw0rd", "s3cr3tPassw0rd"),
        ("  .dockerconfigjson: eyE1x2a3MpLe", "eyE1x2a3MpLe"),
        ("  .dockercfg: ewE1x2a3MpLe", "ewE1x2a3MpLe"),
    ],
    ids=["ENV", "ENV in an image's history", "ENV after #(nop)", "dockerconfigjson", "dockercfg"],
)
def test_a_credential_in_a_dockerfile_env_or_a_registry_secret_is_removed(
    text: str, secret: str
) -> None:
    assert secret not in Redactor().scrub_text(text)


@pytest.mark.parametrize(
    "text",
    [
        "RUN echo ENV password is set",
        "ENV PASSWORD_MIN_LENGTH 12",
        "timeout_sec: 30",
        'secretRef: {"name": "registry-pull-secret", "key": ".dockerconfigjson"}',
    ],
)
def test_prose_lengths_and_references_near_those_names_are_kept(text: str) -> None:
    assert Redactor().scrub_text(text) == text


def test_a_credential_quoted_in_an_authentication_error_message_is_removed() -> None:
    text = (
        "DatabaseConnectionStringAuthError: the Database Connection String API rejected "
        "'m48QGGtDxd1hyIlTr9vDP3W+rlsv': 401 Unauthorized"
    )
    assert "m48QGGtD" not in Redactor().scrub_text(text)


def test_an_id_far_into_an_authentication_error_message_is_kept() -> None:
    # past the usual reach the error's name is weak evidence: a line about an id gives none
    text = (
        "AuthError: the upstream answered for the tenant named acme-production with "
        "request id 9f3c2a7be41d08c6a5f2e19d7b3c04a8"
    )
    assert Redactor().scrub_text(text) == text


def test_a_wrapped_base64_key_of_a_mapping_of_tokens_is_removed() -> None:
    key = "7eUHc9npsdql24xsVK8huo9VKPu/mrDStv8JYRWP4cSUXWWBx5oGpPBP7uaMgQCx\\nuks3gKrUL/3LFndE0eg"
    scrubbed, _ = Redactor().redact({"tokens": {key: "read-only"}})
    assert "7eUHc9np" not in str(scrubbed) and "uks3gKrU" not in str(scrubbed)


def test_a_generated_value_under_private_is_removed_and_a_flag_kept() -> None:
    assert "4c6f4a5c" not in Redactor().scrub_text("Private: 4c6f4a5cb2d395f828384c2ab29d1f55")
    assert Redactor().scrub_text('"private": true') == '"private": true'
