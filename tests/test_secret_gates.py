"""The detectors' cheaper searches find exactly what a plain search finds: a card number read
over runs of digits, a rule that begins with its keyword tried only where the keyword is, segment
starts found from the character before them, the inner keywords' gate without the keywords a text
cannot hold, and the base64 runs a decoded blob is looked for in, each at its place (not where a
copy of it stands inside another run). Each is compared with the plain search on texts built to
break it (matches cut at a run's end, lookaheads past it, rejected matches that swallow the next,
look-alike case folds, overlapping keywords, runs repeated inside others)."""

from __future__ import annotations

import random
import re

import pytest

from otelhooks.builtin import Redactor, TextView
from otelhooks.builtin.redaction import CHUNK
from otelhooks.builtin.secret_detectors import FormatDetector, b64text
from otelhooks.builtin.secret_gate import FINDERS_FROM, SegmentGate, WordGate
from otelhooks.builtin.secret_rules import (
    PATTERNS,
    SecretPattern,
    leading_word,
    negatives_of,
    run_marks,
    samples_of,
    trie_regex,
)

_CARDS = ("4111 1111 1111 1111", "378282246310005", "5555555555554444", "4111-1111-1111-1111")


def _texts(seed: int, pieces: tuple[str, ...], alphabet: str, count: int = 3000) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 14)):
            if rng.random() < 0.4:
                parts.append(rng.choice(pieces))
            else:
                parts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8))))
        out.append("".join(parts))
    return out


def test_a_card_number_read_over_runs_of_digits_is_found_as_over_the_whole_text() -> None:
    card = next(p for p in PATTERNS if p.kind == "credit_card")
    assert card.runs is not None
    marks = run_marks(card.runs[0])
    texts = _texts(1, _CARDS, "0123456789 -.x_\n", 2000)
    texts += ["4111 1111 1111 1111.5", "x4111111111111111 4111111111111111", "4111 1111 1111 1111-"]
    found = 0
    for text in texts:
        whole = list(card.spans(text))
        assert list(card.spans_in_runs(text, text.translate(marks))) == whole, text
        found += bool(whole)
    assert found > 100  # the texts hold cards the rule keeps, and ones it rejects


def test_a_text_that_is_not_ascii_is_searched_whole_for_card_numbers() -> None:
    card = next(p for p in PATTERNS if p.kind == "credit_card")
    detector = Redactor().pipeline.detectors[0]
    assert isinstance(detector, FormatDetector)
    text = "paid with 4111 1111 1111 1111 — é, 4111١111 1111 1111"  # another script's digit
    found = [f.start for f in detector.find(_view(text), {}) if f.kind == "credit_card"]
    assert found == [s for s, _ in card.spans(text)] != []


def _view(text: str) -> TextView:
    return TextView(text, 0, Redactor().pipeline)


@pytest.mark.parametrize("pattern", [p for p in PATTERNS if leading_word(p)], ids=lambda p: p.kind)
def test_a_rule_that_begins_with_its_keyword_finds_there_what_it_finds_anywhere(
    pattern: SecretPattern,
) -> None:
    word = leading_word(pattern)
    assert word is not None
    pieces = (
        *(s.text for s in samples_of(pattern)),
        *(s.text for s in negatives_of(pattern)),
        word,
        word.upper(),
        word.title(),
        "_secret_key",
        " = ",
        ":",
        '"',
    )
    found = 0
    for text in _texts(2, pieces, "ab=: _\n", 1000):
        whole = list(pattern.spans(text))
        assert list(pattern.spans_at(text, text.lower(), word)) == whole, text
        found += bool(whole)
    assert found


@pytest.mark.parametrize(
    ("source", "word"),
    [
        ("(?i)okta.{0,20}?[=:]x", "okta"),
        ("(?i)okta|other", None),  # an alternative may begin elsewhere
        ("(?i)okta?x", None),  # the last letter is optional
        ("okta.x", None),  # case matters: the regex engine finds the literal itself
        ("(?i)(?:okta)x", None),
        ("(?i)okta[|]x", "okta"),
        ("(?i)okta(?:a|b)x", "okta"),
    ],
)
def test_a_rule_begins_with_its_keyword_only_when_its_regex_says_so(
    source: str, word: str | None
) -> None:
    assert leading_word(SecretPattern("k", re.compile(source), ("okta",))) == word


def test_segment_starts_are_those_a_lookbehind_search_finds() -> None:
    detector = Redactor().pipeline.detectors[0]
    assert isinstance(detector, FormatDetector)
    starts = {k for p in detector.patterns if p.in_token and p.at_start for k in p.keywords}
    words = sorted(w for w in starts if not any(o != w and w.startswith(o) for o in starts))
    plain = re.compile(r"(?<![a-z0-9])" + trie_regex(words))
    for text in _texts(3, tuple(words), "ab_-.:/ 0x1é", 1000):
        expected: dict[str, list[int]] = {}
        for match in plain.finditer(text):
            expected.setdefault(match.group(), []).append(match.start())
        assert detector._segment_starts(text) == expected, text


def test_the_inner_gate_without_the_keywords_a_text_cannot_hold_finds_what_the_whole_does() -> None:
    detector = Redactor().pipeline.detectors[0]
    assert isinstance(detector, FormatDetector)
    words = detector._inner_words
    plain = re.compile(trie_regex(words))
    found = 0
    for text in _texts(4, words, "ab_-.:/=$~ 0xé", 3000):
        expected: dict[str, list[int]] = {}
        for match in plain.finditer(text):
            expected.setdefault(match.group(), []).append(match.start())
        assert detector._inner_hits(text) == expected, text
        found += bool(expected)
    assert found > 1000
    assert len(detector._inner_gates) > 8  # the texts lack different marks


_SECRET_B64 = "cGFzc3dvcmQ9aHVudGVyMmh1bnRlcjJ4eXogYW5kIG1vcmUgdGV4dCBoZXJl"  # password=hunter2...


@pytest.mark.parametrize("decoy", ["9", "ZZ", "-", "_x"])
def test_a_blob_is_redacted_where_it_stands_not_where_a_copy_of_it_is_inside_another_run(
    decoy: str,
) -> None:
    # the run before it holds the same characters and is no base64 of text: it is not
    # redacted, the blob after it is
    text = f"{decoy}{_SECRET_B64} {_SECRET_B64}"
    redacted_text, kinds = Redactor().redact_text(text)
    assert redacted_text.endswith(" [REDACTED:encoded_secret]"), redacted_text
    assert kinds == ["encoded_secret"]


def test_the_blobs_tried_are_each_run_of_each_token_at_its_place() -> None:
    from otelhooks.builtin.secret_detectors import _ASCII_FIRST, _BLOB, EncodedBlobDetector

    detector = EncodedBlobDetector()
    tried: list[tuple[int, int]] = []

    class Seen(TextView):
        __slots__ = ()

        def holds_secret(self, decoded: str) -> bool:
            return True

    pieces = (
        _SECRET_B64,
        _SECRET_B64[:28],
        "Zm9vYmFyYmF6cXV4",
        "==",
        "-",
        "_",
        "9",
        "\n",
        " ",
        "\\n",
    )
    for text in _texts(5, pieces, "aB9+/=_- .", 1500):
        view = Seen(text, 0, Redactor().pipeline)
        got = [(f.start, f.end) for f in detector.find(view, {})]
        expected = []
        for token in re.finditer(r"\S+", view.work):
            for run in _BLOB.finditer(token.group()):
                blob = run.group()
                if blob.islower() or blob.isupper() or not _ASCII_FIRST.issuperset(blob[:64:4]):
                    continue
                if b64text(blob) is not None:
                    expected.append((token.start() + run.start(), token.start() + run.end()))
        assert got == expected, text
        tried += got
    assert len(tried) > 100


def test_inside_a_blob_is_a_run_of_40_base64_characters_around_the_place() -> None:
    from otelhooks.builtin.secret_detectors import _inside_blob

    def plain(lowered: str, start: int) -> bool:  # the run through ``start``, char by char
        left = start
        while left > 0 and lowered[left - 1] in "abcdefghijklmnopqrstuvwxyz0123456789+/":
            left -= 1
        right = start
        while right < len(lowered) and lowered[right] in "abcdefghijklmnopqrstuvwxyz0123456789+/":
            right += 1
        return right - left >= 40

    rng = random.Random(6)
    inside = 0
    for _ in range(800):
        alphabet = "ab9+/ =-\n_é" if rng.random() < 0.5 else "ab9"
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 120)))
        for start in range(len(text)):
            assert _inside_blob(text, start) == plain(text, start), (text, start)
            inside += plain(text, start)
    assert inside > 3000


@pytest.mark.parametrize("text", ["xx\u00a0yy!zz", "a\x0bb%c", "p\x1cq*r s\u2003t~u"])
def test_a_password_mark_after_a_space_that_is_not_a_separator_ends(text: str) -> None:
    # A run read from the last separator may end before the mark (a no-break space, a vertical
    # tab): the search must still move past the mark instead of finding it again forever.
    assert Redactor().redact_text(text)[1] == []


# -- the keyword gates: a regex per first letter, segment starts on a marked copy ----------------

# What a text may hold that a gate must read as any other character: line ends, upper case,
# full-width digits, no-break and other spaces, vertical tab, the separators \x1c-\x1f, letters
# whose lower case is longer (İ), look-alikes.
_AWKWARD = "\r\n\t ABZ\u00a0\u2003\x0b\x1c\x1d\x1e\x1f\uff10\uff19é\u0130ѕе_-.:/=+~$"


def _gate_texts(seed: int, words: tuple[str, ...], count: int, longest: int = 14) -> list[str]:
    """Texts of words (whole, cut, in upper case, run together) and awkward characters; a
    third of them longer than :data:`FINDERS_FROM`, cut anywhere (as a piece of a large text is)."""
    rng = random.Random(seed)
    pieces = (*words, *(w[: len(w) // 2] for w in words), *(w[1:] for w in words))
    pieces += tuple(w.upper() for w in words[:20])
    alphabet = "ab0x9" + _AWKWARD
    out = []
    for number in range(count):
        parts = []
        for _ in range(rng.randint(1, longest)):
            if rng.random() < 0.45:
                parts.append(rng.choice(pieces))
            else:
                parts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))))
        text = "".join(parts)
        if number % 3 == 0:  # long enough for the per-letter search, cut at random places
            while len(text) < FINDERS_FROM + 64:
                text += text[::-1] + rng.choice(pieces)
            cut = rng.randint(0, 40)
            text = text[cut : len(text) - rng.randint(0, 40)]
        out.append(text)
    return out


def _alternation(words: tuple[str, ...], text: str) -> dict[str, list[int]]:
    at: dict[str, list[int]] = {}
    for match in re.finditer(trie_regex(sorted(words)), text):
        at.setdefault(match.group(), []).append(match.start())
    return at


def _gates() -> list[tuple[str, tuple[str, ...]]]:
    pipeline = Redactor().pipeline
    detector = pipeline.detectors[0]
    assert isinstance(detector, FormatDetector) and pipeline.gate is not None
    return [
        ("pipeline", pipeline.gate.words),
        ("inner", detector._inner_words),
        ("overlapping", ("aba", "bab", "aa", "abab", "ba")),  # words that run into each other
        ("one letter", ("a", "b", "xy")),
    ]


@pytest.mark.parametrize(("name", "words"), _gates(), ids=[n for n, _ in _gates()])
def test_a_word_gate_finds_what_the_alternation_of_its_words_finds(
    name: str, words: tuple[str, ...]
) -> None:
    gate = WordGate(words)
    found = 0
    for text in _gate_texts(7, words, 900):
        for form in (text, text.lower()):
            expected = _alternation(words, form)
            assert gate.finder_hits(form) == expected, form
            assert gate.alternation_hits(form) == expected, form
            assert gate.hits(form) == expected, form
            found += bool(expected)
    assert found > 600


def test_the_pipeline_gate_over_a_view_is_the_alternation_over_its_lowered_text() -> None:
    pipeline = Redactor().pipeline
    assert pipeline.gate is not None
    words = pipeline.gate.words
    for text in _gate_texts(8, words, 300):
        view = TextView(text, 0, pipeline)
        assert pipeline.gate_hits(view) == _alternation(words, view.lowered), text


def test_segment_starts_on_the_marked_copy_are_those_the_plain_search_finds() -> None:
    detector = Redactor().pipeline.detectors[0]
    assert isinstance(detector, FormatDetector) and detector._start_gate is not None
    words = detector._start_gate.words
    plain = re.compile(r"[^a-z0-9](?=(" + trie_regex(words) + "))")
    found = 0
    for text in _gate_texts(9, words, 900):
        for form in (" " + text, " " + text.lower()):
            expected = [(m.start(), m.group(1)) for m in plain.finditer(form)]
            assert detector._start_gate.starts(form) == expected, form
            found += bool(expected)
    assert found > 500
    # a word becomes another on the marked copy (``ghp_`` and ``ghp-`` both read ``ghp ``):
    # the place is read again on the text itself
    gate = SegmentGate(("ghp_", "dp.ct."))
    assert gate.starts(" ghp- ghp_ dp-ct. dp.ct.") == [(5, "ghp_"), (17, "dp.ct.")]


def test_a_word_gate_needs_words() -> None:
    with pytest.raises(ValueError):
        WordGate(())
    with pytest.raises(ValueError):
        SegmentGate(("",))


def _plain_gates(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every gate as the plain alternation over the whole text."""
    monkeypatch.setattr(WordGate, "hits", WordGate.alternation_hits)

    def starts(self: SegmentGate, text: str) -> list[tuple[int, str]]:
        plain = re.compile(r"[^a-z0-9](?=(" + trie_regex(self.words) + "))")
        return [(m.start(), m.group(1)) for m in plain.finditer(text)]

    monkeypatch.setattr(SegmentGate, "starts", starts)


def test_a_large_text_read_in_pieces_is_redacted_as_with_the_plain_gates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # secrets and keywords over the pieces' cuts, in texts of every awkward character
    rng = random.Random(10)
    secrets = [s.text for p in PATTERNS for s in samples_of(p)][::7]
    words = tuple(Redactor().pipeline.gate.words)  # type: ignore[union-attr]
    texts = []
    for seed in range(3):
        parts = []
        while sum(map(len, parts)) < 2 * CHUNK + 20_000:
            roll = rng.random()
            if roll < 0.02:
                parts.append(rng.choice(secrets))
            elif roll < 0.2:
                parts.append(rng.choice(words) + rng.choice(" =:\"'\r\n"))
            else:
                parts.append(
                    "".join(rng.choice("abcdefXYZ0129+/ \r\n" + _AWKWARD) for _ in range(40))
                )
        text = "".join(parts)
        cut = CHUNK - 30 - seed * 7  # a secret across the first piece's end
        texts.append(text[:cut] + secrets[seed] + text[cut:])
    fast = [Redactor().redact_text(t) for t in texts]
    _plain_gates(monkeypatch)
    plain = [Redactor().redact_text(t) for t in texts]
    assert fast == plain
    assert all(kinds for _, kinds in fast)


@pytest.mark.parametrize(
    "text",
    [
        "İ" * 40 + " token: abcdefghijklmnopqrstuvwxyz012345",
        "İİ password=hunter2hunter2xx and İ",
        "İ" * 3 + " ghp_" + "a1B2c3D4e5" * 4 + " İ",
    ],
)
def test_a_letter_whose_lower_case_is_longer_moves_no_place(text: str) -> None:
    # ``"İ".lower()`` is two characters: the lower-case text the gates read was longer than
    # the text, its places were read in the text (an IndexError, or the wrong span replaced)
    redacted_text, kinds = Redactor().redact_text(text)
    assert kinds, redacted_text
    assert "hunter2" not in redacted_text
    assert "abcdefghijklmnop" not in redacted_text and "a1B2c3D4e5a1B2c3" not in redacted_text
    assert redacted_text.startswith("İ")


def test_each_long_token_is_placed_where_a_search_from_the_last_one_finds_it() -> None:
    # tokens repeated (a copy further on must not take an earlier one's place), separated by
    # one or several whitespace characters of any kind, or by short tokens
    rng = random.Random(11)
    pipeline = Redactor().pipeline
    longs = ["a" * 16, "a" * 17, "ab" * 9, "x" * 20 + "ab" * 9, "b64+/" * 5]
    gaps = [" ", "\n", "\r\n", "\u00a0", "\x0b", "\x1c", "\x1f", "\u2003", "  ", " ab ", " aaaa "]
    for _ in range(1500):
        text = "".join(rng.choice(longs) + rng.choice(gaps) for _ in range(rng.randint(1, 9)))
        text = rng.choice(["", " ", "aa "]) + text
        view = TextView(text, 0, pipeline)
        cursor, expected = 0, []
        for token in view.long_tokens:
            cursor = view.work.find(token, cursor)
            expected.append(cursor)
            cursor += len(token)
        assert [view.token_at(i) for i in range(len(view.long_tokens))] == expected, text


def test_a_key_around_a_key_word_is_read_as_far_as_a_character_at_a_time_reads_it() -> None:
    from otelhooks.builtin.secret_keys import key_around

    chars = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-$@")

    def plain(text: str, pos: int) -> tuple[int, int]:
        start, limit = pos, max(0, pos - 80)
        while start > limit and text[start - 1] in chars:
            start -= 1
        end, stop = pos, min(len(text), pos + 80)
        while end < stop and text[end] in chars:
            end += 1
        return start, end

    rng = random.Random(12)
    alphabet = "aZ9_.-$@ =:\"'\n\u00a0é+/\uff10"
    long_runs = 0
    for _ in range(400):
        text = "".join(rng.choice(alphabet) * rng.randint(1, 60) for _ in range(rng.randint(1, 8)))
        for pos in range(len(text) + 1):
            assert key_around(text, pos) == plain(text, pos), (text, pos)
            long_runs += pos - plain(text, pos)[0] == 80
    assert long_runs > 100  # the limit each way is reached too
