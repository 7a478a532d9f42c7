"""One redactor, three places: tool results, spans and log events.

A :class:`Redactor` is configured once and used by

* as the executor's and the agent's scrubber (``scrubber=redactor``, see
  :mod:`otelhooks.core.scrub`), on everything a call hands the model and writes on its span;
* :class:`RedactionHook`, an after-hook that rewrites tool results before they reach the model;
* :class:`~otelhooks.builtin.span_redaction.RedactingSpanProcessor` (needs the SDK), which
  scrubs every span's attributes, events (exception
  messages and stack traces included) and status before any exporter sees it;
* :class:`RedactingProcessor`, a structlog processor that scrubs events before rendering.

Two kinds of rules apply. A value under a *sensitive key* (``password``, ``api_key``, ``token``,
``auth`` but not ``author``, ...) is replaced whole. Any string, whatever its key, is searched for
*secret patterns* (bearer tokens, JWTs, cloud and SaaS API keys, private key blocks, passwords in
connection strings and ``key=value`` text, card numbers that pass the Luhn check). Dicts, lists
and JSON inside strings are walked. A redaction reads ``[REDACTED:<kind>]``; the paths that were
redacted (never the values) are reported, and recorded on spans as ``otelhooks.redacted.paths``.

Cost is bounded: each pattern runs only when a cheap keyword test says it could match.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry import trace

from ..core.hooks import AfterOverride, AfterToolCallContext
from ..telemetry import attributes as A
from .secret_context import (
    CREDENTIAL_WORDS,
    PROXIMITY_WORDS,
    STRONG,
    fold,
    proximity_spans,
    proximity_strength,
    qualifies,
)
from .secret_keys import (
    KEY_WORDS,
    Span,
    classify,
    is_placeholder,
    key_value_spans,
    kubernetes_secret_spans,
    looks_random,
    public_name,
    public_tail,
)
from .secret_rules import CHECKS, PATTERNS, SecretPattern, luhn_valid

__all__ = [
    "DEFAULT_ALLOW_KEYS",
    "PATTERNS",
    "RedactingProcessor",
    "RedactionHook",
    "Redactor",
    "SecretPattern",
    "luhn_valid",
    "redacted",
]

Callback = Callable[[str, str], str | None]

# Keys never redacted for their name alone (``max_tokens`` is no token): identifiers a person
# needs to find the trace. Their values still go through the secret patterns.
DEFAULT_ALLOW_KEYS: frozenset[str] = frozenset(
    {
        A.GEN_AI_TOOL_NAME,
        A.GEN_AI_TOOL_CALL_ID,
        A.GEN_AI_OPERATION_NAME,
        A.GEN_AI_AGENT_NAME,
        A.GEN_AI_REQUEST_MODEL,
        A.GEN_AI_USAGE_INPUT_TOKENS,
        A.GEN_AI_USAGE_OUTPUT_TOKENS,
        A.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
        A.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
        A.DECISION,
        A.DECISION_HOOK,
        A.REDACTED_PATHS,
        A.EVENT_HOOK_NAME,
        A.EVENT_HOOK_DECISION,
        "trace_id",
        "span_id",
        "event",
        "level",
        "timestamp",
        "logger",
        "tool_name",
        "call_id",
        "tool_call_id",
        "exception.type",
        "session_id_hash",
    }
)

_MIN_SECRET_LEN: Final = 8
_INERT: Final = frozenset({bool, int, float})
_HEX_ID: Final = re.compile(r"[0-9a-f]+|[0-9A-F]+")
_MAX_ID: Final = 64
_MAX_DEPTH: Final = 64
_MAX_JSON_WALK: Final = 16_384  # JSON text up to this size is walked as structure
_JSON_START: Final = ("{", "[")
_KNOWN_MAX: Final = 8192
_CLEAN_MAX_LEN: Final = 256  # clean texts up to this length are remembered by value

# Encoded forms a secret is often found in, decoded (only characters that change no syntax).
_ENCODED: Final = re.compile(r"\\/|\\u00[0-9a-fA-F]{2}|%[0-9a-fA-F]{2}")
_SAFE: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=:@._~-")
_DATA_URL: Final = re.compile(r"data:[\w/+.-]*;base64,([A-Za-z0-9+/]{16,}={0,2})")
_BASE64ISH: Final = re.compile(r"[A-Za-z0-9+/]+={0,2}")


def _decode_safe(text: str) -> str:
    """``text`` with JSON escapes (``\\/``, ``\\u00XX``) and URL escapes (``%XX``) of safe
    characters decoded; other escapes are left as they are."""

    def one(match: re.Match[str]) -> str:
        token = match.group()
        if token == "\\/":
            return "/"
        char = chr(int(token[-2:], 16))
        return char if char in _SAFE else token

    return _ENCODED.sub(one, text)


def _b64decode(text: str) -> str | None:
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
        return raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


def _b64text(blob: str) -> str | None:
    """``blob`` decoded from base64 (standard or URL-safe) when the result is printable text."""
    text = _b64decode(blob.replace("-", "+").replace("_", "/"))
    return (
        text if text is not None and all(c.isprintable() or c in "\t\n\r" for c in text) else None
    )


def _basic_credential(text: str) -> bool:
    decoded = _b64decode(text)
    return decoded is not None and ":" in decoded


_CHECKS: dict[str, Callable[[str], bool]] = {**CHECKS, "basic_auth": _basic_credential}


_ESCAPE: Final = re.compile(r"\\([nrt])")
_CONTROL: Final = {"n": "\n", "r": "\r", "t": "\t"}
_LONG: Final = 16  # no token format is shorter
_MIN_BLOB: Final = 24  # base64 of a 16-character secret and a little more
_MAX_DECODE: Final = 2  # base64 layers looked through
# Runs are tried from where they start only (the lookbehind): a run too short fails once.
_BLOB: Final = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{24,}={0,2}")
_DIGITS_AS_ZERO: Final = str.maketrans("123456789", "000000000")


def _unescape(match: re.Match[str]) -> str:
    return " " + _CONTROL[match.group(1)]


def _minimal(words: Iterable[str]) -> list[str]:
    """The words no other word is part of (enough for a gate that only needs to know)."""
    words = set(words)
    return sorted(w for w in words if not any(o != w and o in w for o in words))


def _gate(words: Iterable[str]) -> re.Pattern[str] | None:
    minimal = _minimal(words)
    return re.compile(_trie_regex(minimal)) if minimal else None


@functools.lru_cache(maxsize=32)
def _gates(
    patterns: tuple[SecretPattern, ...], use_defaults: bool
) -> tuple[
    dict[int, int],
    re.Pattern[str] | None,
    re.Pattern[str] | None,
    re.Pattern[str] | None,
    dict[str, tuple[SecretPattern, ...]],
    tuple[SecretPattern, ...],
    frozenset[str],
    frozenset[str],
    frozenset[str],
]:
    """The order, gates and keyword index of a set of patterns (built once per set): a gate
    for token keywords where a token segment starts, one for token keywords anywhere in a
    token, one for ordinary words anywhere in the text, and one for the names of services
    where a word starts (hundreds of names: a gate that tries them only there stays fast)."""
    key_words = frozenset(KEY_WORDS) if use_defaults else frozenset()
    near = PROXIMITY_WORDS if use_defaults else {}
    near_words = frozenset(w for w, strength in near.items() if strength == STRONG)
    service_words = sorted(w for w, strength in near.items() if strength != STRONG)
    start_words = {k for p in patterns if p.in_token and p.at_start for k in p.keywords if k}
    inner_words = {k for p in patterns if p.in_token and not p.at_start for k in p.keywords if k}
    context_words = {k for p in patterns if not p.in_token for k in p.keywords if k}
    context_words |= key_words | near_words
    # a start keyword is found at a segment start, so only a shorter one it begins with may
    # stand for it (``cfpat-`` is not found by ``pat``); elsewhere any part will do
    start_minimal = sorted(
        w for w in start_words if not any(o != w and w.startswith(o) for o in start_words)
    )
    inner_minimal, context_minimal = _minimal(inner_words), _minimal(context_words)
    by_word: dict[str, list[SecretPattern]] = {}
    for pattern in patterns:
        keys = [k for k in pattern.keywords if k]
        if not pattern.in_token:
            found = {m for m in context_minimal for k in keys if m in k}
        elif pattern.at_start:
            found = {m for m in start_minimal for k in keys if k.startswith(m)}
        else:
            found = {m for m in inner_minimal for k in keys if m in k}
        for word in found:
            by_word.setdefault(word, []).append(pattern)
    start_gate = re.compile(_trie_regex(start_minimal)) if start_minimal else None
    return (
        {id(p): i for i, p in enumerate(patterns)},
        re.compile(r"(?<![a-z0-9])" + start_gate.pattern) if start_gate else None,
        _gate(inner_words),
        _gate(context_words),
        {w: tuple(ps) for w, ps in by_word.items()},
        tuple(p for p in patterns if not any(p.keywords)),
        frozenset(m for m in context_minimal for k in key_words if m in k),
        frozenset(m for m in context_minimal for k in near_words if m in k),
        frozenset(service_words),
    )


_ALPHA_RUN: Final = re.compile(r"[a-z]+")
# Everything but letters and digits as a space: ``str.split`` then gives the words of a text.
_WORDS_APART: Final = str.maketrans(
    {chr(c): " " for c in range(128) if not chr(c).isalnum()}  # ASCII: the text is folded
)


@functools.lru_cache(maxsize=256)
def _named_words(words: frozenset[str]) -> re.Pattern[str]:
    """Where any of ``words`` stands as a word of its own."""
    return re.compile(r"(?<![a-z0-9])(?:" + _trie_regex(sorted(words)) + r")(?![a-z0-9])")


_ID_RUN: Final = re.compile(r"[A-Za-z0-9+/=_.~-]{16,}")
_ID_PREFIX: Final = re.compile(r"[A-Za-z]+[_-]")
_PROVIDER_ID: Final = re.compile(
    r"(?:call|toolu|srvtoolu|fc|tool|chatcmpl|msg|run|resp|item|pyd_ai)_[A-Za-z0-9-]{8,48}"
)
_HEXISH: Final = re.compile(r"[0-9a-fA-F-]+")

# Keys whose value is an identifier the model chose.
_IDENTIFIER_FIELDS = ("tool_name", "call_id", "tool_call_id")
IDENTIFIER_KEYS: Final = frozenset(
    {A.GEN_AI_TOOL_NAME, A.GEN_AI_TOOL_CALL_ID, *_IDENTIFIER_FIELDS}
    | {f"log.{field}" for field in _IDENTIFIER_FIELDS}  # log events mirrored to spans
)


def _generated(part: str) -> bool:
    return looks_random(part) and _HEXISH.fullmatch(part) is None


# A token a service's name may vouch for (tried where a run starts only).
_CANDIDATE: Final = re.compile(r"(?<![a-z0-9+_~:|=-])[a-z0-9+_~:|=-]{16,}")
_LABEL: Final = re.compile(r"\[redacted:[a-z0-9_]*\]")
_NAME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")


_BLOB_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789+/")


def _inside_blob(lowered: str, start: int) -> bool:
    """Whether ``start`` is inside a run of 40+ base64 characters (no word stands there)."""
    left = start
    while left > 0 and start - left < 40 and lowered[left - 1] in _BLOB_CHARS:
        left -= 1
    right = start
    while right < len(lowered) and right - left < 40 and lowered[right] in _BLOB_CHARS:
        right += 1
    return right - left >= 40


def _strength_at(text: str, lowered: str, start: int) -> int:
    """The evidence of the proximity word at ``start``: strong when the word it begins holds a
    credential word (``apikey``, ``authenticating``), else weak; none inside a word unless a
    capital starts it there (``DatadogAuthError``)."""
    if (
        start
        and lowered[start - 1].isalnum()
        and (not text[start].isupper() or _inside_blob(lowered, start))
    ):
        return 0  # inside a word (monkey), or inside base64 (an image, a blob)
    if start and (
        lowered[start - 1] == "/"
        or (lowered[start - 1] == "." and "." in lowered[start : start + 12])
    ):
        return 0  # a host's name or a path (api.example.com, /api/items): where, not what
    name_start = start
    while name_start > 0 and text[name_start - 1] in _NAME_CHARS:
        name_start -= 1
    name = _NAME.match(text, name_start)
    if name is not None and public_name(name.group()):
        return 0  # publicKey, STRIPE_PUBLISHABLE_KEY, key_id: meant to be seen
    run = _ALPHA_RUN.match(lowered, start)
    word = run.group() if run is not None else ""
    if any(w in word for w in CREDENTIAL_WORDS) or word in ("pw", "pwd"):
        return STRONG
    return PROXIMITY_WORDS.get(word, 1) if word else 1


def _trie_regex(words: Sequence[str]) -> str:
    """A regex matching any of ``words``, shaped as a trie: ``p(?:ass|wd)`` for pass, pwd."""
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def build(node: dict[str, Any]) -> str:
        if "" in node:  # a word ends here: the shorter match is enough for a gate
            return ""
        alternatives = [re.escape(char) + build(sub) for char, sub in sorted(node.items())]
        return alternatives[0] if len(alternatives) == 1 else f"(?:{'|'.join(alternatives)})"

    return build(trie)


def redacted(kind: str) -> str:
    """The text a redacted secret is replaced with."""
    return f"[REDACTED:{kind}]"


@dataclass
class Redactor:
    """Finds and replaces secrets. Immutable once built (but for :meth:`add_pattern`); safe to
    share between threads.

    Three kinds of rules apply to every string: the token formats of
    :mod:`otelhooks.builtin.secret_rules` (wherever they appear), values under credential names
    in any syntax (:mod:`otelhooks.builtin.secret_keys`), and structures that hold secrets
    (Kubernetes Secrets, ``Authorization`` and ``Cookie`` headers, URLs with a password, base64
    ``data:`` URLs). JSON-escaped and URL-encoded forms are decoded and checked too. In dicts, a
    value under a credential key is replaced whole, and keys are checked like values (a secret
    used as a key).

    ``patterns`` and ``sensitive_keys`` (``(kind, regex)`` pairs matched anywhere in a key name)
    extend the defaults (or replace them with ``use_defaults=False``); ``allow_keys`` are never
    redacted for their name (their values are still searched for secret patterns: a tool name or
    a call id comes from the model, which must not be able to smuggle a key through it);
    ``callback(path, text)`` runs on every string after the built-in rules and returns a
    replacement or ``None``. A redactor built with ``enabled=False`` (see :meth:`disabled`)
    changes nothing: redaction is turned off only explicitly.

    Text the redactor returned (or found clean) is remembered by identity, so the same string
    passed again (the result the redaction hook produced, now a span attribute or a log field) is
    not scanned twice.
    """

    patterns: Sequence[SecretPattern] = ()
    sensitive_keys: Sequence[tuple[str, str]] = ()
    allow_keys: Iterable[str] = ()
    callback: Callback | None = None
    use_defaults: bool = True
    enabled: bool = True
    _patterns: tuple[SecretPattern, ...] = field(init=False, repr=False)
    _extra_keys: re.Pattern[str] | None = field(init=False, repr=False, default=None)
    _extra_kinds: tuple[str, ...] = field(init=False, repr=False, default=())
    _allow: frozenset[str] = field(init=False, repr=False)
    _key_cache: dict[str, tuple[int, str] | None] = field(
        init=False, repr=False, default_factory=dict
    )
    _gate: re.Pattern[str] | None = field(init=False, repr=False, default=None)
    _start_gate: re.Pattern[str] | None = field(init=False, repr=False, default=None)
    _inner_gate: re.Pattern[str] | None = field(init=False, repr=False, default=None)
    _by_word: dict[str, tuple[SecretPattern, ...]] = field(
        init=False, repr=False, default_factory=dict
    )
    _always: tuple[SecretPattern, ...] = field(init=False, repr=False, default=())
    _key_words: frozenset[str] = field(init=False, repr=False, default=frozenset())
    _near_words: frozenset[str] = field(init=False, repr=False, default=frozenset())
    _service_words: frozenset[str] = field(init=False, repr=False, default=frozenset())
    _order: dict[int, int] = field(init=False, repr=False, default_factory=dict)
    _known: dict[int, str] = field(init=False, repr=False, default_factory=dict)
    _clean: dict[str, None] = field(init=False, repr=False, default_factory=dict)
    _key_hints: dict[str, int] = field(init=False, repr=False, default_factory=dict)
    _plain_keys: dict[str, bool] = field(init=False, repr=False, default_factory=dict)
    _value_hints: dict[str, int] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        base = PATTERNS if self.use_defaults else ()
        self._set_patterns(tuple(self.patterns) + base)
        if self.sensitive_keys:
            alternatives = "|".join(
                f"(?P<k{i}>{rx})" for i, (_, rx) in enumerate(self.sensitive_keys)
            )
            self._extra_keys = re.compile(alternatives, re.IGNORECASE)
            self._extra_kinds = tuple(kind for kind, _ in self.sensitive_keys)
        self._allow = frozenset(self.allow_keys) | (
            DEFAULT_ALLOW_KEYS if self.use_defaults else frozenset()
        )

    @classmethod
    def disabled(cls) -> Redactor:
        """A redactor that redacts nothing, for when you mean it."""
        return cls(enabled=False)

    def add_pattern(
        self, kind: str, regex: str, *, keywords: Iterable[str] = (), group: int = 0
    ) -> None:
        """Add a secret pattern (checked before the defaults)."""
        pattern = SecretPattern(
            kind, re.compile(regex), tuple(k.lower() for k in keywords), group=group
        )
        self._set_patterns((pattern, *self._patterns))

    def _set_patterns(self, patterns: tuple[SecretPattern, ...]) -> None:
        """Keep the patterns and build the two gates. The token gate finds the keywords of the
        token formats (``ghp_``, ``xoxb-``, ``AKIA``...) inside long tokens only (16+ characters
        without spaces: a secret is one), which is where they can be; the context gate finds
        ordinary words (key names, ``authorization``, ``machine``...) anywhere. A pattern runs
        only when a gate found one of its keywords (or, without keywords, when its prefilter
        matches), so a clean text costs two scans whatever the number of patterns."""
        self._patterns = patterns
        self._known = {}
        self._clean = {}
        (
            self._order,
            self._start_gate,
            self._inner_gate,
            self._gate,
            self._by_word,
            self._always,
            self._key_words,
            self._near_words,
            self._service_words,
        ) = _gates(patterns, self.use_defaults)

    # -- the rules ----------------------------------------------------------------------------

    def key_tier(self, key: str) -> tuple[int, str] | None:
        """``(1, kind)`` for a credential key name (its value is redacted whole), ``(2, kind)``
        for a credential-ish one (its value when it looks random), else ``None``."""
        if key in self._allow:
            return None
        cached = self._key_cache.get(key, ())
        if cached != ():
            return cached  # type: ignore[return-value]
        found = classify(key) if self.use_defaults else None
        if self._extra_keys is not None and (found is None or found[0] == 2):
            match = self._extra_keys.search(key)
            if match is not None and match.lastgroup is not None:
                found = (1, self._extra_kinds[int(match.lastgroup[1:])])
        if len(self._key_cache) < 10_000:
            self._key_cache[key] = found
        return found

    def sensitive_key(self, key: str) -> str | None:
        """The kind of a credential key name (one whose value is always redacted), or ``None``."""
        found = self.key_tier(key)
        return found[1] if found is not None and found[0] == 1 else None

    def redact_text(self, text: str, path: str = "") -> tuple[str, list[str]]:
        """``text`` with secrets replaced, and the kinds found (empty when unchanged)."""
        if not self.enabled:
            return text, []
        if self.callback is None:
            if self._known.get(id(text)) is text:
                return text, []
            short = len(text) <= _CLEAN_MAX_LEN
            if short and text in self._clean:
                return text, []  # the same text was found clean: the rules depend on it only
            if len(text) <= _MAX_ID and _HEX_ID.fullmatch(text) is not None:
                return text, []  # a trace id, a span id, a git SHA: no format is bare hex
        new_text, kinds = self._scan(text) if len(text) >= _MIN_SECRET_LEN else (text, [])
        if "\\" in new_text or "%" in new_text:  # JSON-escaped or URL-encoded secrets
            decoded = _decode_safe(new_text)
            if decoded != new_text:
                again, more = self._scan(decoded)
                if more:
                    new_text, kinds = again, kinds + more
        if self.callback is not None:
            replaced = self.callback(path, new_text)
            if replaced is not None and replaced != new_text:
                kinds.append("custom")
                new_text = replaced
        else:
            self._remember(new_text)
            if not kinds and short:
                clean = self._clean
                if len(clean) >= _KNOWN_MAX:
                    clean.clear()
                clean[text] = None
        return new_text, kinds

    def scrub_text(self, text: str) -> str:
        """``text`` with secrets replaced (the kinds found are not reported)."""
        return self.redact_text(text)[0]

    def redact_identifier(self, text: str, path: str = "") -> tuple[str, list[str]]:
        """An identifier the model chose (a tool name, a call id) with secrets replaced: the
        rules for any text, and any part of it that looks generated and is not an id's usual
        shape (hex, a UUID, a provider's ``call_...``/``toolu_...``)."""
        new_text, kinds = self.redact_text(text, path)
        if not self.enabled or len(new_text) < 16:
            return new_text, kinds
        spans: list[Span] = []
        for match in _ID_RUN.finditer(new_text):
            run = match.group()
            if _PROVIDER_ID.fullmatch(run):
                continue
            start = match.start()
            prefix = _ID_PREFIX.match(run)
            if not _generated(run) and prefix is not None and _generated(run[prefix.end() :]):
                start += prefix.end()
            elif not _generated(run):
                continue
            spans.append((start, match.end(), "secret"))
        if not spans:
            return new_text, kinds
        replaced, more = _replace(new_text, spans)
        return replaced, kinds + more

    def _plain_key(self, key: str) -> bool:
        """Whether a value under ``key`` that no format can be in (short, known clean, not
        text) needs no look: not a credential name, not long enough to hide one, not an
        identifier (a text known clean is not known clean as a name); remembered."""
        plain = self.key_tier(key) is None and len(key) < 16 and key not in IDENTIFIER_KEYS
        if len(self._plain_keys) >= _HINT_CACHE_MAX:
            self._plain_keys.clear()
        self._plain_keys[key] = plain
        return plain

    def _remember(self, text: str) -> None:
        known = self._known
        if len(known) >= _KNOWN_MAX:
            known.clear()
        known[id(text)] = text

    def _scan(self, text: str, depth: int = 0) -> tuple[str, list[str]]:
        """One pass of every rule over ``text``: the spans to replace, merged, replaced.
        ``depth``: how many base64 layers ``text`` was decoded from."""
        # JSON escapes (\\n, \\t, \\r) become a space and the character: the same length, so
        # spans found in ``work`` are spans of ``text``, and a token after \\n starts a line.
        work = _ESCAPE.sub(_unescape, text) if "\\" in text else text
        if not work.isascii():
            work = fold(work)  # look-alike letters as the ASCII ones (same offsets)
        lowered = work.lower()
        spans: list[Span] = []
        key_positions: list[int] = []
        near_positions: list[tuple[int, int]] = []
        candidates: dict[int, SecretPattern] = {}
        by_word = self._by_word
        found: set[str] = set()
        if self._gate is not None:
            key_words, near_words = self._key_words, self._near_words
            for match in self._gate.finditer(lowered):
                word = match.group()
                if word in key_words:
                    key_positions.append(match.start())
                if word in near_words:
                    near_positions.append(
                        (match.start(), _strength_at(work, lowered, match.start()))
                    )
                found.add(word)
        blobs: list[str] = []
        if len(lowered) >= _LONG and (self._start_gate or self._inner_gate):
            # a secret is one long token: the token gates look at those alone
            long_tokens = [t for t in work.split() if len(t) >= _LONG]
            tokens = " ".join(long_tokens).lower()
            for gate in (self._start_gate, self._inner_gate):
                if gate is not None and tokens:
                    found.update(gate.findall(tokens))
            # a service's name is evidence for a token of 16+ characters: look only then
            if self._service_words and _CANDIDATE.search(tokens) is not None:
                named = self._service_words.intersection(lowered.translate(_WORDS_APART).split())
                if named:  # rare: find where
                    for match in _named_words(frozenset(named)).finditer(lowered):
                        near_positions.append(
                            (match.start(), _strength_at(work, lowered, match.start()))
                        )
                    near_positions.sort()
            if depth < _MAX_DECODE:  # base64 of text has both cases (hex, names do not)
                blobs = [
                    b
                    for t in long_tokens
                    if len(t) >= _MIN_BLOB and not t.islower() and not t.isupper()
                    for b in _BLOB.findall(t)
                    if not b.islower() and not b.isupper()
                ]
        for word in found:
            for pattern in by_word.get(word, ()):
                candidates[id(pattern)] = pattern
        if candidates:  # in the patterns' order: where two find the same text, the first wins
            order = self._order
            for pattern in sorted(candidates.values(), key=lambda p: order[id(p)]):
                self._pattern_spans(pattern, work, spans)
        zeroed: str | None = None
        for pattern in self._always:
            if pattern.prefilter is not None:  # a card number: its prefilter, on digits as 0
                if len(work) < 12:
                    continue
                if zeroed is None:
                    zeroed = work.translate(_DIGITS_AS_ZERO)
                if pattern.prefilter.search(zeroed) is None:
                    continue
            self._pattern_spans(pattern, work, spans)
        if key_positions:
            spans.extend(key_value_spans(work, key_positions))
            if "kind" in lowered:
                spans.extend(kubernetes_secret_spans(work))
        if "base64," in lowered:
            spans.extend(self._data_url_spans(work))
        if near_positions and "[redacted:" in lowered:  # a label's words are no evidence
            labels = [m.span() for m in _LABEL.finditer(lowered)]
            near_positions = [
                (p, strength)
                for p, strength in near_positions
                if not any(s <= p < e for s, e in labels)
            ]
        if near_positions:  # a known format or key wins over evidence nearby
            known = list(spans)
            spans.extend(
                span
                for span in proximity_spans(work, lowered, near_positions)
                if not any(s < span[1] and span[0] < e for s, e, _ in known)
            )
        if blobs:
            spans.extend(self._blob_spans(work, blobs, spans, depth))
        if not spans:
            return text, []
        return _replace(text, spans)

    def _blob_spans(
        self, text: str, blobs: list[str], spans: list[Span], depth: int
    ) -> Iterable[Span]:
        """Of ``blobs`` (base64-looking runs of ``text``, in order), those that decode (standard
        or URL-safe base64) to text holding a secret."""
        cursor = 0
        for blob in blobs:
            start = text.find(blob, cursor)
            end = cursor = start + len(blob)
            if any(s < end and start < e for s, e, _ in spans):
                continue
            decoded = _b64text(blob)
            if decoded is not None and self._scan(decoded, depth + 1)[1]:
                yield start, end, "encoded_secret"

    def _pattern_spans(self, pattern: SecretPattern, text: str, spans: list[Span]) -> None:
        check = pattern.check or _CHECKS.get(pattern.kind)
        group = pattern.group
        not_after = pattern.not_after
        for match in pattern.regex.finditer(text):
            begin = match.start()
            if not_after is not None and begin and not_after.match(text, begin - 1):
                continue
            start, end = match.span(group)
            if start == end or text.startswith("[REDACTED:", start):
                continue
            if check is not None and not check(match.group(group)):
                continue
            value = match.group(group)
            if is_placeholder(value) or (value.endswith(">") and "<" in match.group()):
                continue  # --user "$USER:$PASSWORD", Bearer <token>, -u <user:password>
            spans.append((start, end, pattern.kind))

    def _data_url_spans(self, text: str) -> Iterable[Span]:
        for match in _DATA_URL.finditer(text):
            decoded = _b64decode(match.group(1))
            if decoded is not None and self._scan(decoded)[1]:
                yield match.start(1), match.end(1), "encoded_secret"

    def redact(self, value: Any, path: str = "") -> tuple[Any, list[str]]:
        """Walk ``value`` (dicts, lists, tuples, strings, JSON in strings); return the redacted
        copy and the paths that were redacted. Unchanged parts are returned as they are."""
        if not self.enabled:
            return value, []
        paths: list[str] = []
        result = self._walk(value, path, paths, 0)
        return result, paths

    def _walk(self, value: Any, path: str, paths: list[str], depth: int, hint: int = 0) -> Any:
        """``hint``: the evidence the enclosing mapping gives (see :meth:`_walk_mapping`)."""
        if isinstance(value, str):
            if (
                value[:1] in _JSON_START
                and len(value) <= _MAX_JSON_WALK
                and depth <= _MAX_DEPTH
                and self._known.get(id(value)) is not value
            ):
                try:
                    decoded = json.loads(value)
                except ValueError:
                    decoded = None
                if isinstance(decoded, (dict, list)):
                    before = len(paths)
                    new = self._walk(decoded, path, paths, depth + 1, hint)
                    if len(paths) > before:
                        return json.dumps(new, ensure_ascii=False)
                    self._remember(value)
                    return value
            text, kinds = self.redact_text(value, path)
            if kinds:
                paths.append(path or "$")
            return text
        if depth > _MAX_DEPTH and isinstance(value, (Mapping, list, tuple)):
            paths.append(path or "$")  # too deep to inspect: never pass it on unread
            return redacted("too_deep")
        if isinstance(value, Mapping):
            return self._walk_mapping(value, path, paths, depth, hint)
        if isinstance(value, (list, tuple)):
            items = [
                self._walk(item, f"{path}[{i}]", paths, depth + 1, hint)
                for i, item in enumerate(value)
            ]
            if any(new is not old for new, old in zip(items, value, strict=True)):
                return type(value)(items) if isinstance(value, tuple) else items
            return value
        if isinstance(value, bytes):
            try:
                text = value.decode("utf-8")
            except UnicodeDecodeError:
                return value
            new_text = self._walk(text, path, paths, depth)
            return new_text if new_text is not text else value
        return value

    def _walk_mapping(
        self, value: Mapping[Any, Any], path: str, paths: list[str], depth: int, inherited: int
    ) -> Any:
        """A mapping's items, redacted. A value not under a credential key is still redacted
        when it looks generated and the mapping (or the one it is in) names a credential or a
        service in its keys or short values (``{"integration": "datadog", "config": {"value":
        ...}}``); so is a key that looks generated there (``{"tokens": {"<token>": ...}}``)."""
        out: dict[Any, Any] | None = None
        own = -1  # computed when a value needs it
        secret_data = _is_kubernetes_secret(value)
        plain = self.callback is None
        known = self._known
        plain_keys = self._plain_keys
        for key, item in value.items():
            if (  # the common case, decided without building the item's path
                plain
                and (
                    item is None
                    or type(item) in _INERT
                    or (
                        type(item) is str
                        and (len(item) < _MIN_SECRET_LEN or known.get(id(item)) is item)
                    )
                )
                and type(key) is str
                and ((seen := plain_keys.get(key)) or (seen is None and self._plain_key(key)))
            ):
                continue
            tier = self.key_tier(key) if isinstance(key, str) else None
            if (
                plain
                and tier is None
                and type(key) is not str
                and (item is None or type(item) in _INERT)
            ):
                continue
            sub_path = f"{path}.{key}" if path else str(key)
            if secret_data and key in ("data", "stringData") and isinstance(item, Mapping):
                new: Any = {
                    k: redacted("kubernetes_secret") if _has_content(v) else v
                    for k, v in item.items()
                }
                if new != dict(item):
                    paths.append(sub_path)
                else:
                    new = item
            elif (
                tier is not None
                and _has_content(item)
                and (tier[0] == 1 or (isinstance(item, str) and looks_random(item)))
            ):
                new = redacted(tier[1])
                paths.append(sub_path)
            elif key in IDENTIFIER_KEYS and type(item) is str:
                new, kinds = self.redact_identifier(item, sub_path)
                if kinds:
                    paths.append(sub_path)
            else:
                # what the mapping says is needed to walk what can hold more (a mapping, a
                # list, JSON text), and below for a text no known format was found in
                if own < 0 and not (type(item) is str and item[:1] not in _JSON_START):
                    own = _mapping_hint(value, self)
                before = len(paths)
                new = self._walk(item, sub_path, paths, depth + 1, max(own, 0))
                if len(paths) == before and type(item) is str and len(item) >= _MIN_SECRET_LEN:
                    if own < 0:
                        own = _mapping_hint(value, self)
                    evidence = max(own, inherited)
                    if evidence and not _public_key(key) and qualifies(item, evidence):
                        # no known format in it, but what surrounds it names a credential
                        new = redacted("secret")
                        paths.append(sub_path)
            new_key = key
            if isinstance(key, str) and len(key) >= _MIN_SECRET_LEN and key not in self._allow:
                if own < 0:
                    own = _mapping_hint(value, self)
                if max(own, inherited) and qualifies(key, max(own, inherited)):
                    new_key, kinds = redacted("secret"), ["secret"]
                elif len(key) >= 16:
                    new_key, kinds = self.redact_text(key, sub_path)
                else:
                    kinds = []
                if kinds:
                    paths.append(f"{path}.<key>" if path else "<key>")
                    while new_key in value or (out is not None and new_key in out):
                        new_key += "'"
            if new is not item or new_key is not key:
                if out is None:
                    out = dict(value)
                if new_key is not key:
                    del out[key]
                out[new_key] = new
        return out if out is not None else value


_PLACED: Final = re.compile(r"\[REDACTED:[A-Za-z0-9_.-]{1,64}\]")


def _outside_placeholders(text: str, spans: list[Span]) -> list[Span]:
    """The spans that do not touch a replacement already in ``text``: redacting a redacted
    text changes nothing."""
    placed = [m.span() for m in _PLACED.finditer(text)]
    return [s for s in spans if not any(s[0] < end and start < s[1] for start, end in placed)]


def _replace(text: str, spans: list[Span]) -> tuple[str, list[str]]:
    """``text`` with the (possibly overlapping) spans replaced; the kinds replaced."""
    if "[REDACTED:" in text:
        spans = _outside_placeholders(text, spans)
        if not spans:
            return text, []
    spans.sort(key=lambda s: (s[0], -s[1]))
    pieces: list[str] = []
    kinds: list[str] = []
    last = 0
    cur_start, cur_end, cur_kind = spans[0]
    for start, end, kind in spans[1:]:
        if start < cur_end:  # overlapping: one redaction covering both
            cur_end = max(cur_end, end)
            continue
        pieces.append(text[last:cur_start])
        pieces.append(redacted(cur_kind))
        kinds.append(cur_kind)
        last = cur_end
        cur_start, cur_end, cur_kind = start, end, kind
    pieces.append(text[last:cur_start])
    pieces.append(redacted(cur_kind))
    kinds.append(cur_kind)
    pieces.append(text[cur_end:])
    return "".join(pieces), kinds


_HINT_VALUE_MAX: Final = 48


def _mapping_hint(value: Mapping[Any, Any], redactor: Redactor) -> int:
    """The evidence a mapping gives its values: strong when a key or a short value names a
    credential (``{"name": "DATADOG_API_KEY", "value": ...}``), weak when one names a service
    or an API, else none."""
    best = 0
    keys, values = redactor._key_hints, redactor._value_hints
    for key, item in value.items():
        strength = max(
            _text_hint(key, redactor, keys, as_key=True) if type(key) is str else 0,
            _text_hint(item, redactor, values, as_key=False) if type(item) is str else 0,
        )
        if strength == STRONG:
            return STRONG
        best = max(best, strength)
    return best


def _text_hint(text: str, redactor: Redactor, cache: dict[str, int], *, as_key: bool) -> int:
    """The evidence one key or value gives (see :func:`_mapping_hint`), remembered in ``cache``:
    the keys and short values of log events and results recur."""
    known = cache.get(text)
    if known is not None:
        return known
    if not 2 <= len(text) <= _HINT_VALUE_MAX:
        return 0  # not remembered: long values are mostly unique
    if len(text) >= 16 and _HEX_ID.fullmatch(text) is not None:
        return 0  # a trace, span or commit id, not remembered: no name or word is bare hex
    # a value that names a credential, or a key the redactor would redact for its name
    if classify(text) is not None and (not as_key or redactor.key_tier(text)):
        strength = STRONG
    else:
        strength = min(proximity_strength(text), STRONG)
    if len(cache) >= _HINT_CACHE_MAX:
        cache.clear()
    cache[text] = strength
    return strength


_HINT_CACHE_MAX: Final = 10_000


def _public_key(key: Any) -> bool:
    """A key whose value is an identifier meant to be seen (``request_id``, ``name``, ``url``)."""
    return isinstance(key, str) and public_tail(key)


def _is_kubernetes_secret(value: Mapping[Any, Any]) -> bool:
    kind = value.get("kind")
    return isinstance(kind, str) and kind.lower() == "secret"


def _has_content(value: Any) -> bool:
    """Whether a value under a sensitive key is worth redacting (not empty, None or a bool)."""
    return not (value is None or isinstance(value, bool) or (isinstance(value, str) and not value))


# -- place 1: tool results ---------------------------------------------------------------------


class RedactionHook:
    """After-hook: redacts a tool result's content and details before the model sees them.

    Hooks registered after it, and whatever they print or log, see redacted results. It fails
    closed: if it cannot run, the result is withheld rather than passed on unredacted. The
    redacted paths are recorded on the current (``after``) span as ``otelhooks.redacted.paths``.

    The text the runtime writes itself (block reasons, error messages, captured content) and
    every change a later hook makes are scrubbed by the executor's scrubber, which is declared,
    not found on a hook: give the same redactor as ``scrubber=`` to the executor or the agent
    (:mod:`otelhooks.core.scrub`); without one, the executor refuses to run this hook
    (``requires_scrubber``). With one, this hook finds the result already redacted.
    """

    name = "redaction"
    after_failure = "fail_closed"
    requires_scrubber = True

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor

    def after_tool_call(self, ctx: AfterToolCallContext) -> AfterOverride | None:
        """Redact the result's content and details (an override only when something was found)."""
        content, content_paths = self.redactor.redact(ctx.result.content, "result")
        details, detail_paths = self.redactor.redact(ctx.result.details, "details")
        paths = content_paths + detail_paths
        if not paths:
            return None
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attribute(A.REDACTED_PATHS, paths)
        return AfterOverride(content=content, details=details)


# -- place 3: log events -----------------------------------------------------------------------


class RedactingProcessor:
    """structlog processor: scrubs an event dict before it is rendered. Put it last but the
    renderer in your chain."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor

    def __call__(self, logger: Any, method_name: str, event_dict: Any) -> Any:
        scrubbed, _ = self.redactor.redact(event_dict)
        return scrubbed
