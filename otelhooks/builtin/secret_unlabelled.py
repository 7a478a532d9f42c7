"""A generated token that nothing names: the last of the detectors.

Every other detector needs a reason beyond the token itself: a known format, a credential's name,
a service's name nearby, a structure. A service nobody listed has none of these, yet its key is
a generated token in prose, a JSON value or a line of code. :class:`UnlabelledTokenDetector`
removes such a token on its looks alone, and only where what surrounds it does not say it is
something meant to be seen.

**A token is judged generated** (:func:`generated_at`) when one run of 16+ letters and digits in
it looks random (:func:`.secret_keys.looks_random`: high entropy, not a word, a version, a UUID)
and is neither hex (a hash, a trace, span or commit id), nor made of words (``CertAlgoECDSA``,
``33msecurityContext``). **It is kept** when it is a URL or a path of words, a digest labelled
with its algorithm (``sha256=...``, ``h1:...``), a base64 line of 60+ characters (a certificate's
body; a key's is found by the private-key detectors, an encoded secret by the blob decoder), a
provider's call id (``toolu_...``, ``call_...``), a ULID, a path (``/rp/...``), a publishable
key (``pk_test_...``), a value
whose name labels it public or an id (``publicKey``, ``request_id``), a token on a line that
speaks of commits, hashes, digests or ids, and a mapping's value under a key for something meant
to be seen (``cursor``, ``etag``, ``node_id``) or for content (``output``, ``stdout``: a token
there is judged as the same text alone is).

**A token alone on its line** (a text of one token, a JSON value, an item of a list of ids, one
per line) is judged where its key is known: as a mapping's value it is judged with its key
(:meth:`UnlabelledTokenDetector.judge_unfound`); alone, or in a list, it is kept. A text found
clean that a mapping's key could still make a secret is not remembered as clean by identity
(:meth:`~.secret_detectors.Pipeline.judged_in_place`): the same string is judged anew where it
stands.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final

from . import secret_context as near
from .secret_detectors import CALL_ID_PROVIDERS, Detector, Field, Finding, TextView, b64text
from .secret_keys import DIGEST, looks_random, normalise, public_tail
from .secret_shapes import labelled_public

SHORTEST: Final = 16  # characters of a token and of its random run
_B64_LINE_MIN: Final = 60  # a base64 run this long is a blob's line
_TOKEN: Final = re.compile(r"[^\s\"'`<>()\[\]{},;\\|]+")  # between quotes, brackets and spaces
_BREAKS: Final = frozenset(" \t\r\n\"'`<>()[]{},;\\|")
# The runs of base64's characters in the lower-case long tokens, found on a mask of them: each
# such character an "x", every other ASCII character a space (one translate), searched for
# sixteen "x" in a row (a literal: the engine skips to it at a few instructions a character).
_RUN_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789+/")
_MASK: Final = str.maketrans({chr(c): "x" if chr(c) in _RUN_CHARS else " " for c in range(128)})
# Sixteen in a row (a literal the engine skips to), and the rest of the run; a run of 60+ with
# the runs of 60+ after it (a base64 blob's lines, passed over in one match).
_SIXTEEN: Final = re.compile(
    "x" * SHORTEST
    + "(?:"
    + "x" * (_B64_LINE_MIN - SHORTEST)
    + "x*(?: "
    + "x" * _B64_LINE_MIN
    + "x*)*|x*)"
)
# What each character of a run is, for tests by position without a copy: a digit "d", a letter
# no hex has "g" (hex letters "h"), "+" or "/" "p".
_KINDS: Final = str.maketrans(
    {
        **{c: "d" for c in "0123456789"},
        **{c: "h" for c in "abcdef"},
        **{c: "g" for c in "ghijklmnopqrstuvwxyz"},
        "+": "p",
        "/": "p",
    }
)
_RUN: Final = re.compile(r"[A-Za-z0-9]+")
_HEX: Final = re.compile(r"[0-9a-fA-F]+")
_B64_LINE: Final = re.compile(r"[A-Za-z0-9+/]{60,}={0,2}")  # _B64_LINE_MIN or more
_TITLE_WORD: Final = re.compile(r"[A-Z][a-z]{2,}")
_ACRONYM: Final = re.compile(r"[A-Z]{2,}(?![a-z])")
_LEAD: Final = "_-.:=/#$@"
_WORD: Final = re.compile(r"[A-Za-z0-9]")
_TRAIL: Final = ".:!?=,"
_PATHS: Final = ("/", "./", "../", "~/")
_KEPT_PREFIXES: Final = ("pk_test_", "pk_live_", *_PATHS, *CALL_ID_PROVIDERS)
_ULID: Final = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")  # Crockford's base32: a sortable id
_VOWELS: Final = frozenset("aeiou")
# A mapping's keys for a handle that pages or versions a listing: random by design, meant to be
# sent back.
_HANDLE_KEYS: Final = frozenset(
    {"cursor", "etag", "marker", "continuation", "next", "prev", "previous", "after", "before"}
)


def _made_of_words(run: str) -> bool:
    """Mixed case whose letters are mostly title-case words and capitals' acronyms
    (``CertAlgoECDSA256v01``, ``X25519PrivateKey``), or letters spelt as words are (one in four
    a vowel) between digits at its ends only (``33msecurityContext``)."""
    letters = sum(c.isalpha() for c in run)
    if letters and not run.islower() and not run.isupper():
        worded = sum(map(len, _TITLE_WORD.findall(run))) + sum(map(len, _ACRONYM.findall(run)))
        if worded >= 0.7 * letters:
            return True
    core = run.strip("0123456789")
    if not core.isalpha():
        return False
    lowered = core.lower()
    return sum(c in _VOWELS for c in lowered) >= 0.25 * len(lowered)


# A mapping's keys for content a tool or a program wrote, not a field: a token there is judged
# as the same text alone is (kept), in the tool's log event as in its result.
_CONTENT_KEYS: Final = frozenset(
    {"output", "result", "content", "text", "body", "message", "stdout", "stderr", "response"}
)


def _handle(key: str) -> bool:
    """Whether ``key`` names a handle (a cursor, an etag) or content (a tool's output)."""
    segments = normalise(key)
    return bool(segments) and (segments[-1] in _HANDLE_KEYS or segments[-1] in _CONTENT_KEYS)


def _random_run(token: str) -> bool:
    return any(
        len(run) >= SHORTEST
        and _HEX.fullmatch(run) is None
        and looks_random(run)
        and not _made_of_words(run)
        for run in _RUN.findall(token)
    )


def generated_at(token: str) -> int | None:
    """Where in ``token`` (a token stripped of quotes and brackets) a generated secret starts
    (after ``NAME=``), or ``None`` when it holds none: see the module's contract."""
    if len(token) < SHORTEST or "://" in token or DIGEST.search(token):
        return None
    if token.startswith(_KEPT_PREFIXES) or _ULID.fullmatch(token) is not None:
        return None  # a publishable key, a provider's call id, a path, a ULID
    start = 0
    if token.count("=") == 1 and not token.endswith("="):
        start = token.index("=") + 1
    value = token[start:]
    if len(value) < SHORTEST or _B64_LINE.fullmatch(value) is not None:
        return None
    if not _random_run(value) or near.path_like(value) or b64text(value) is not None:
        return None  # b64text: base64 of text (a JWT's header), for the blob decoder to judge
    return start


class UnlabelledTokenDetector(Detector):
    """A generated token that no name, format or structure vouches for (the module's
    contract). It gives way to every other detector."""

    name = "unlabelled"
    family = "random"
    priority = 30
    yields = True
    always = True  # needs no word: looked for in the text's long tokens only
    samples = (
        "Here is what I found in the dashboard: «{l20}»",
        "The integration is configured with «{a32}» and runs hourly.",
        'client = AcmeClient("«{l24}»")',
        "2026-12-03T10:15:02Z INFO sync: authenticating with «{a40}» (attempt 1)",
        "Use «{a28}» for the nightly sync.",
    )
    negatives = (
        "commit {h40} merged",
        "request {u} took 20 ms",
        "see https://lists.example.org/message/{H32}/ for details",
        "../bin/tool,sha256={b43},311",
        "call toolu_01{a22} returned",
        "ssh.CertAlgoECDSA256v01 and x25519.X25519PrivateKey are supported",
        "the request_id is {a24}",
        "{a24}",
    )

    def find(self, view: TextView, hits: Mapping[str, list[int]]) -> Iterable[Finding]:
        """The generated tokens of a text that do not stand alone on their line. Candidates
        are found in one pass over the text's long tokens (a run of 16+ letters and digits,
        neither all letters, all digits nor hex); each token holding one is judged once."""
        joined = view.tokens_lower
        if not joined:
            return ()
        work, lowered = view.work, view.lowered
        found: list[Finding] = []
        judged = -1  # where in work the last token judged ends
        kinds = joined.translate(_KINDS)
        for run in _SIXTEEN.finditer(joined.translate(_MASK)):
            place, run_end = run.span()
            if kinds.find("g", place, run_end) < 0 or kinds.find("d", place, run_end) < 0:
                continue  # hex, letters alone or digits alone: nothing generated
            if run_end - place >= _B64_LINE_MIN and (
                kinds.find("p", place, run_end) >= 0 or kinds.find(" ", place, run_end) >= 0
            ):
                continue  # a base64 blob's lines: the blob and private-key detectors' to judge
            if kinds.find("p", place, run_end) >= 0 and (
                max(map(len, joined[place:run_end].replace("+", "/").split("/"))) < SHORTEST
            ):
                continue  # no run of 16+ letters and digits between its + and /: a path
            token_start, joined_start = view.token_holding(place)
            at = token_start + place - joined_start  # the run, in work
            if at < judged:
                continue  # a run of a token already judged
            start, end = _token_around(work, token_start, at)
            judged = end
            token = work[start:end]
            if token.startswith(_PATHS):
                continue  # a path, with a generated name in it or not
            stripped = token.lstrip(_LEAD)
            start += len(token) - len(stripped)
            stripped = stripped.rstrip(_TRAIL)
            offset = generated_at(stripped)
            if offset is None:
                continue
            start += offset
            end = start + len(stripped) - offset
            if view.taken(start, end) or labelled_public(work[max(0, start - 80) : start]):
                continue
            if _alone_on_its_line(work, start, end) or near.speaks_of_ids(lowered, start):
                continue
            found.append(self.finding(start, end, "secret"))
        return found

    def may_judge_unfound(self, text: str) -> bool:
        """Only a text of one token that looks generated."""
        return _generated_whole(text)

    def judge_unfound(self, field: Field, text: str) -> str | None:
        """A mapping's value (or key) of one generated token, unless its key is for something
        meant to be seen or speaks of ids and digests."""
        key = field.key
        if type(key) is str and (
            field.where.redactor.allows(key)
            or public_tail(key)
            or near.speaks_of_ids(key.lower(), 0)
            or _handle(key)
        ):
            return None
        return "secret" if _generated_whole(text) else None


def _token_around(work: str, token_start: int, at: int) -> tuple[int, int]:
    """The token (between quotes, brackets and spaces) of the long token starting at
    ``token_start`` that holds ``work[at]``."""
    start = at
    while start > token_start and work[start - 1] not in _BREAKS:
        start -= 1
    match = _TOKEN.match(work, at)
    return start, match.end() if match is not None else at


def _alone_on_its_line(text: str, start: int, end: int) -> bool:
    """Whether nothing but punctuation stands beside ``text[start:end]`` on its line (an item
    of a list of ids, one per line, or a text of one token)."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    return (
        _WORD.search(text, line_start, start) is None
        and _WORD.search(text, end, line_end if line_end >= 0 else len(text)) is None
    )


def _generated_whole(text: str) -> bool:
    """Whether ``text`` is one token (spaces around it aside), generated whole."""
    token = text.strip()
    return _TOKEN.fullmatch(token) is not None and generated_at(token) == 0
