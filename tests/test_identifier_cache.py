"""A tool name found clean is remembered by value (a gateway sees the same few names on every
call), and what is remembered never changes an answer: a name holding a secret is redacted every
time, and a name remembered clean is still judged as a call id where it is one."""

from __future__ import annotations

from typing import Any

import pytest

from otelhooks.builtin import Redactor, redaction, secret_detectors

SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def test_a_clean_name_is_scanned_once(monkeypatch: pytest.MonkeyPatch) -> None:
    redactor = Redactor()
    scans: list[str] = []
    find = secret_detectors.identifier_findings

    def counted(text: str, pipeline: Any) -> Any:
        scans.append(text)
        return find(text, pipeline)

    monkeypatch.setattr(redaction, "identifier_findings", counted)
    for _ in range(3):
        assert redactor.scrub_identifier("get_current_time_in_zone") == "get_current_time_in_zone"
    assert scans == ["get_current_time_in_zone"]


def test_a_name_holding_a_secret_is_redacted_every_time() -> None:
    redactor = Redactor()
    for _ in range(3):
        assert SECRET not in redactor.scrub_identifier(f"tool_{SECRET}")
    assert not any(SECRET in name for name in redactor.cache.clean_names)


def test_a_name_remembered_clean_is_still_replaced_as_a_call_id() -> None:
    redactor = Redactor()
    name = "lookup weather now please"
    assert redactor.scrub_identifier(name) == name
    assert name in redactor.cache.clean_names
    text, kinds = redactor.redact_identifier(name, "call_id")
    assert text != name and kinds == ["secret"]


def test_a_custom_callback_is_asked_every_time() -> None:
    asked: list[str] = []

    def callback(path: str, text: str) -> str | None:
        asked.append(text)
        return None

    redactor = Redactor(callback=callback)
    redactor.scrub_identifier("get_current_time_in_zone")
    redactor.scrub_identifier("get_current_time_in_zone")
    assert len(asked) == 2
    assert not redactor.cache.clean_names
