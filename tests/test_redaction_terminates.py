"""The redactor ends on any text, and a secret set apart by line breaks is removed whatever
surrounds it: texts built from the characters its searches turn on (every kind of space and
control character, password marks, assignment and quote marks, base64 and keyword pieces).

A search loop that finds the same place again never returns, and the agent's call hangs with it,
so each text is redacted under an alarm far above any real cost (a bound on a hang, not a speed
target)."""

from __future__ import annotations

import random
import signal
import string
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otelhooks.builtin import Redactor
from otelhooks.builtin.redaction import CHUNK

_HANG = 60.0  # seconds; a real redaction of these texts takes milliseconds

# Every character some search of the redactor starts, stops or splits at.
_SPACES = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2003\u200b\u2028\u2029\u3000"
_MARKS = "!*^~%#$@&=:;,\"'`/\\|<>()[]{}.-_+?"
_PIECES = [
    "password",
    "PASSWORD=",
    "token",
    "secret",
    "api_key",
    "Bearer ",
    "Authorization: ",
    "ghp_",
    "sk-",
    "AKIA",
    "xoxb-",
    "eyJ",
    "-----BEGIN ",
    "PRIVATE KEY-----",
    "[REDACTED:",
    "://",
    "@",
    "0123456789",
    "4111 1111 1111 1111",
    "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=",
    "ＡＢＣ１２３",
]
_SECRET = "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"

_pieces = st.one_of(
    st.text(alphabet=_SPACES + _MARKS + "aZ09+/", min_size=1, max_size=6),
    st.sampled_from(_PIECES),
    st.text(alphabet=string.ascii_letters + string.digits + "+/", max_size=48),
)
_texts = st.lists(_pieces, max_size=40).map("".join)


@contextmanager
def _bounded(what: str) -> Iterator[None]:
    """Fails with ``what`` when the block runs past :data:`_HANG` (the redactor's loops are
    Python code, which an alarm interrupts)."""

    def hung(signum: int, frame: FrameType | None) -> None:
        raise AssertionError(f"the redactor did not end within {_HANG:.0f} s on {what}")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, _HANG)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=_texts, after=_texts)
def test_the_redactor_ends_and_removes_a_secret_set_apart_whatever_surrounds_it(
    before: str, after: str
) -> None:
    redactor = Redactor()
    with _bounded(repr(before + after)[:300]):
        redactor.redact_text(before + after)
        text, kinds = redactor.redact_text(f"{before}\n{_SECRET}\n{after}")
    assert _SECRET not in text
    assert kinds


@pytest.mark.parametrize("seed", range(3))
def test_the_redactor_ends_on_a_large_text_read_in_pieces(seed: int) -> None:
    # Larger than two pieces, so the cuts between pieces fall inside these characters too.
    rng = random.Random(seed)
    alphabet = _SPACES + _MARKS + "aZ09+/"
    parts: list[str] = []
    size = 0
    while size < 2 * CHUNK + CHUNK // 2:
        if rng.random() < 0.3:
            part = rng.choice(_PIECES)
        else:
            part = rng.choice(alphabet) * rng.randint(1, 3)
        parts.append(part)
        size += len(part)
    text = "".join(parts)
    middle = len(text) // 2
    text = f"{text[:middle]}\n{_SECRET}\n{text[middle:]}"
    with _bounded(f"seed {seed}"):
        redacted, kinds = Redactor().redact_text(text)
    assert _SECRET not in redacted
    assert kinds
