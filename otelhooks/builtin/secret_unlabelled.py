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
from .secret_detectors import (
    CALL_ID_PROVIDERS,
    Detector,
    Field,
    Finding,
    TextView,
    b64text,
)
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
_AROUND: Final = 256  # how far a token's line is read on either side
# Words for an id, whole (``sha`` in ``shall`` is none); in a key, or just before a token.
_ID_WORDS: Final = re.compile(
    r"(?<![a-z0-9])(?:commit|sha(?:1|224|256|384|512)?|digest|hash|checksum|revision|rev|etag"
    r"|md5|fingerprint|trace|span|ids?|uuid|guid|ulid|cursor)(?![a-z0-9])"
    r"|[_.-]ids?(?![a-z0-9])"
    r"|(?:request|session|user|node|trace|span|object|order|run|job|task|build|event|message"
    r"|correlation|transaction|account|device|client|app|file|item|record|row)ids?(?![a-z0-9])"
)
_LEAD: Final = "_-.:=/#$@"
_WORD: Final = re.compile(r"[A-Za-z0-9]")
_TRAIL: Final = ".:!?=,"
_PATHS: Final = ("/", "./", "../", "~/")
_WINDOWS_PATH: Final = re.compile(r"[\"'(]?[A-Za-z]:[\\/]")  # the long token is one
# What public ids and handles start with: a publishable key; providers' objects (Stripe's
# charges, customers, intents..., Anthropic's requests, OpenAI's assistants, threads and files)
# and calls; a path.
_KEPT_PREFIXES: Final = (
    "pk_test_",
    "pk_live_",
    *(
        f"{p}_"
        for p in (
            "acct",
            "ch",
            "cus",
            "evt",
            "in",
            "pi",
            "pm",
            "po",
            "price",
            "prod",
            "py",
            "re",
            "seti",
            "si",
            "sub",
            "txn",
            "req",
            "asst",
            "thread",
            "batch",
            "vs",
            "file",
        )
    ),
    "file-",
    *_PATHS,
    *CALL_ID_PROVIDERS,
)
_KEPT: Final = re.compile(
    r"(?:[a-z]{1,12}_)?[0-7][0-9A-HJKMNP-TV-Z]{25}"  # a ULID (Crockford's base32), a TypeID
    r"|(?:[a-z]{1,12}_)?[0-7][0-9a-hjkmnp-tv-z]{25}"
    r"|0[xX][0-9a-fA-F]+"  # a hex literal: an address, a hash
    r"|[A-Za-z]:[\\/].*"  # a Windows path
    r"|[^@\s]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"  # an email address
    r"|.*::h[0-9a-f]{16}"  # a Rust symbol's hash
    r"|AAAA[A-Za-z0-9+/]{12,}={0,2}"  # SSH's wire format (three zero bytes): a public key
)
# A mapping's keys for a handle that pages or versions a listing: random by design, meant to be
# sent back.
_HANDLE_KEYS: Final = frozenset(
    {"cursor", "etag", "marker", "continuation", "next", "prev", "previous", "after", "before"}
)


def _spelt(word: str) -> bool:
    """A word as words are spelt: one letter in four a vowel or more (``Cert``, ``Context``;
    not ``Tgkkyeqfow``)."""
    return sum(map(word.lower().count, "aeiou")) >= 0.25 * len(word)


def _made_of_words(run: str) -> bool:
    """Mixed case whose letters are mostly title-case words spelt as words are and capitals'
    acronyms (``CertAlgoECDSA256v01``, ``X25519PrivateKey``), or letters spelt as words are
    (one in four a vowel) between digits at its ends only (``33msecurityContext``)."""
    letters = sum(map(str.isalpha, run))
    if letters and not run.islower() and not run.isupper():
        worded = sum(len(w) for w in _TITLE_WORD.findall(run) if _spelt(w)) + sum(
            map(len, _ACRONYM.findall(run))
        )
        if worded >= 0.7 * letters:
            return True
    core = run.strip("0123456789")
    if not core.isalpha():
        return False
    return sum(map(core.lower().count, "aeiou")) >= 0.25 * len(core)


# A mapping's keys for content a tool or a program wrote, not a field: a token there is judged
# as the same text alone is (kept), in the tool's log event as in its result.
_CONTENT_KEYS: Final = frozenset(
    {"output", "result", "content", "text", "body", "message", "stdout", "stderr", "response"}
)


def _handle(key: str) -> bool:
    """Whether ``key`` names a handle (a cursor, an etag) or content (a tool's output)."""
    segments = normalise(key)
    return bool(segments) and (segments[-1] in _HANDLE_KEYS or segments[-1] in _CONTENT_KEYS)


_FILE_NAME: Final = re.compile(r"[A-Za-z][A-Za-z_-]*(?:\.[A-Za-z0-9]{1,8})*")


def _a_path(value: str) -> bool:
    """A relative path whose first and last parts are names (``tmp/k3mQ9.../out.json``,
    ``pkg/ab12.../lib``): a generated directory in it is where, not what."""
    parts = value.split("/")
    return (
        len(parts) >= 3
        and _FILE_NAME.fullmatch(parts[0]) is not None
        and _FILE_NAME.fullmatch(parts[-1]) is not None
    )


def _text_in_base64(value: str) -> bool:
    """Whether ``value`` is base64 of text, or parts of it joined by dots are (a JWT without
    its signature)."""
    parts = [p for p in value.split(".") if len(p) >= 8]
    return bool(parts) and all(b64text(p) is not None for p in parts)


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
    if token.startswith(_KEPT_PREFIXES) or _KEPT.fullmatch(token) is not None:
        return None  # a public key, an object's or a call's id, a path, a ULID, an address
    start = 0
    if token.count("=") == 1 and not token.endswith("="):
        start = token.index("=") + 1
    value = token[start:]
    if len(value) < SHORTEST or (_B64_LINE.fullmatch(value) is not None and not value.isalnum()):
        return None  # a base64 blob's line (a certificate's body): for the blob detectors
    if not _random_run(value) or near.path_like(value) or _a_path(value) or _text_in_base64(value):
        return None  # base64 of text (a JWT's header and claims): for the blob decoder to judge
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
            if token.startswith(_PATHS) or _WINDOWS_PATH.match(work, token_start) is not None:
                continue  # a path, with a generated name in it or not
            stripped = token.lstrip(_LEAD)
            start += len(token) - len(stripped)
            stripped = stripped.rstrip(_TRAIL)
            offset = generated_at(stripped)
            if offset is None:
                continue
            start += offset
            end = start + len(stripped) - offset
            if (
                view.taken(start, end)
                or _labelled(work, start, token_start)
                or _names_an_id(lowered, start)
            ):
                continue
            if _alone_on_its_line(work, start, end):
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
            or _ID_WORDS.search(key.lower()) is not None
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


# Things named by an id written right after their name (``request 3fKq... took 20 ms``,
# ``job Zk3m... failed``); further off, the word says nothing of the token.
_THINGS_WITH_IDS: Final = frozenset(
    {
        "request",
        "req",
        "order",
        "job",
        "run",
        "task",
        "build",
        "object",
        "session",
        "user",
        "item",
        "record",
        "message",
        "event",
        "ticket",
        "invoice",
        "transaction",
        "txn",
        "payment",
        "charge",
        "customer",
        "container",
        "pod",
        "node",
        "block",
        "deployment",
    }
)
_WORD_BEFORE: Final = re.compile(r"([a-z]+)[ \t:#=]*$")


def _labelled(work: str, start: int, token_start: int) -> bool:
    """Whether a name before ``work[start:]``, or before the long token it is part of
    (``token_start``), labels it public or an id (``publicKey: ``, ``request_id=``; looked for
    only where a ``:`` or ``=`` stands before it)."""
    for at in {start, token_start}:
        before = work[max(0, at - 80) : at]
        if before.rstrip(" \t\"'").endswith((":", "=")) and labelled_public(before):
            return True
    return False


def _names_an_id(lowered: str, start: int) -> bool:
    """Whether a word for an id, a commit, a hash or a digest stands shortly before ``start``
    on its line (``commit 3f9a...``, ``trace_id: ...``, ``the build id is ...``)."""
    line_start = lowered.rfind("\n", max(0, start - near.REACH), start) + 1
    if _ID_WORDS.search(lowered, max(line_start, start - near.REACH), start) is not None:
        return True
    word = _WORD_BEFORE.search(lowered, max(line_start, start - 24), start)
    return word is not None and word.group(1) in _THINGS_WITH_IDS


def _alone_on_its_line(text: str, start: int, end: int) -> bool:
    """Whether nothing but punctuation stands beside ``text[start:end]`` on its line (an item
    of a list of ids, one per line, or a text of one token), read as far as :data:`_AROUND`
    characters on either side (a line longer than that with no word in it is not a list)."""
    before = max(0, start - _AROUND)
    line_start = text.rfind("\n", before, start) + 1 or before
    after = min(len(text), end + _AROUND)
    line_end = text.find("\n", end, after)
    if line_start == before > 0 or (line_end < 0 and after < len(text)):
        return False  # the line goes on past what is read: not a line of its own
    return (
        _WORD.search(text, line_start, start) is None
        and _WORD.search(text, end, line_end if line_end >= 0 else after) is None
    )


def _generated_whole(text: str) -> bool:
    """Whether ``text`` is one token (spaces around it aside), generated whole."""
    token = text.strip()
    return _TOKEN.fullmatch(token) is not None and generated_at(token) == 0
