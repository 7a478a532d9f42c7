"""The redactor of otelhooks 0.1.0, kept verbatim as the "today" baseline of benchmark 5.

Not used by the package; the benchmark compares the current redactor with it on the same
inputs, per KB. Its docstring follows.

One redactor, three places: tool results, spans and log events.

A :class:`Redactor` is configured once and used by

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

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from otelhooks.telemetry import attributes as A

Callback = Callable[[str, str], str | None]


@dataclass(frozen=True, slots=True)
class SecretPattern:
    """A secret format. ``keywords``: at least one must occur in the text (matched case-sensitively,
    or against the lower-cased text when ``lower``) for the regex to run at all. ``group``: the
    part of the match that is replaced (0 = all). ``check``: a final test of the matched text.
    ``prefilter``: a cheap regex that must find something before ``regex`` runs."""

    kind: str
    regex: re.Pattern[str]
    keywords: tuple[str, ...] = ()
    lower: bool = False
    group: int = 0
    check: Callable[[str], bool] | None = None
    prefilter: re.Pattern[str] | None = None


def luhn_valid(text: str) -> bool:
    digits = [int(c) for c in text if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


DEFAULT_PATTERNS: tuple[SecretPattern, ...] = (
    SecretPattern(
        "private_key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
            r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)"
        ),
        ("PRIVATE KEY",),
    ),
    SecretPattern(
        "jwt",
        re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{10,}"),
        ("eyJ",),
    ),
    SecretPattern(
        "bearer_token",
        re.compile(r"(?i)\bbearer\s+([A-Za-z0-9\-._~+/]{8,}=*)"),
        ("bearer",),
        lower=True,
        group=1,
    ),
    SecretPattern(
        "aws_access_key_id",
        re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b"),
        ("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"),
    ),
    SecretPattern(
        "aws_secret_access_key",
        re.compile(
            r"(?i)aws.{0,24}?(?:secret|key).{0,24}?[=:]\s*[\"']?([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"
        ),
        ("aws",),
        lower=True,
        group=1,
    ),
    SecretPattern(
        "github_token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})"),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    SecretPattern("slack_token", re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{10,}"), ("xox",)),
    SecretPattern(
        "slack_webhook",
        re.compile(r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_-]+"),
        ("hooks.slack.com",),
    ),
    SecretPattern("anthropic_api_key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}"), ("sk-ant-",)),
    SecretPattern(
        "openai_api_key",
        re.compile(r"\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}"),
        ("sk-",),
    ),
    SecretPattern("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), ("AIza",)),
    SecretPattern(
        "stripe_key",
        re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"),
        ("_live_", "_test_"),
    ),
    SecretPattern(
        "connection_string_password",
        re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]*:([^\s@/]+)@"),
        ("://",),
        group=1,
    ),
    SecretPattern(
        "password",
        re.compile(
            r"(?i)\b(?:password|passwd|pwd|secret|client[_-]?secret|api[_-]?key|access[_-]?key"
            r"|secret[_-]?key|private[_-]?key|auth[_-]?token|access[_-]?token|refresh[_-]?token"
            r"|session[_-]?id|x-api-key)\b[\"']?\s*[=:]\s*(\"[^\"]*\"|'[^']*'|[^\s,;&\"']+)"
        ),
        ("pass", "pwd", "secret", "key", "token", "session"),
        lower=True,
        group=1,
    ),
    SecretPattern(
        "token",
        re.compile(r"(?i)\b[a-z0-9_]*token\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s,;&\"']+)"),
        ("token",),
        lower=True,
        group=1,
    ),
    SecretPattern(
        "credit_card",
        re.compile(r"(?<![\w-])(?:\d[ -]?){12,18}\d(?![\w-])"),
        (),
        check=luhn_valid,
        prefilter=re.compile(r"\d{4}[ -]?\d{4}[ -]?\d{4}"),
    ),
)

# Key names whose values are redacted whole. Matched anywhere in the key, case-insensitively.
DEFAULT_SENSITIVE_KEYS: tuple[tuple[str, str], ...] = (
    ("password", r"passw(?:or)?d|\bpwd\b|mysql_pwd"),
    ("secret", r"secret"),
    ("auth", r"auth(?!or(?!i[sz]))"),
    ("credential", r"credential"),
    ("private_key", r"private[._ -]?key"),
    ("api_key", r"api[._ -]?key"),
    (
        "token",
        r"(?<!input_)(?<!output_)(?<!max_)(?<!prompt_)(?<!completion_)(?<!reasoning_)"
        r"token(?!s?[._ -]?(?:count|usage|limit|used|budget))(?!s\b)",
    ),
    ("session", r"session"),
    ("cookie", r"cookie"),
    ("jwt", r"(?:\b|_)jwt(?:\b|_)"),
    ("csrf", r"(?:\b|_)[cx]srf(?:\b|_)"),
    ("ssn", r"(?:\b|_)ssn(?:\b|_)|social[._ -]?security"),
    ("credit_card", r"credit[._ -]?card|card[._ -]?number|\bcvv\b|\bcvc\b"),
)

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

_JSON_START = ("{", "[")
_MAX_JSON = 1_000_000
_MIN_SECRET_LEN = 8
_MAX_DEPTH = 64


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
    return f"[REDACTED:{kind}]"


@dataclass
class Redactor:
    """Finds and replaces secrets. Immutable once built; safe to share between threads.

    ``patterns`` and ``sensitive_keys`` extend the defaults (or replace them with
    ``use_defaults=False``); ``allow_keys`` are never redacted for their name (their values are
    still searched for secret patterns: a tool name or a call id comes from the model, which must
    not be able to smuggle a key through it); ``callback(path, text)`` runs on
    every string after the built-in rules and returns a replacement or ``None``. A redactor built
    with ``enabled=False`` (see :meth:`disabled`) changes nothing: redaction is turned off only
    explicitly.
    """

    patterns: Sequence[SecretPattern] = ()
    sensitive_keys: Sequence[tuple[str, str]] = ()
    allow_keys: Iterable[str] = ()
    callback: Callback | None = None
    use_defaults: bool = True
    enabled: bool = True
    _patterns: tuple[SecretPattern, ...] = field(init=False, repr=False)
    _key_regex: re.Pattern[str] = field(init=False, repr=False)
    _key_kinds: tuple[str, ...] = field(init=False, repr=False)
    _allow: frozenset[str] = field(init=False, repr=False)
    _key_cache: dict[str, str | None] = field(init=False, repr=False, default_factory=dict)
    _gate: re.Pattern[str] | None = field(init=False, repr=False, default=None)
    _all: tuple[tuple[SecretPattern, frozenset[str] | None], ...] = field(
        init=False, repr=False, default=()
    )
    _keywordless: tuple[tuple[SecretPattern, frozenset[str] | None], ...] = field(
        init=False, repr=False, default=()
    )

    def __post_init__(self) -> None:
        base = DEFAULT_PATTERNS if self.use_defaults else ()
        self._set_patterns(tuple(self.patterns) + base)
        keys = tuple(self.sensitive_keys) + (DEFAULT_SENSITIVE_KEYS if self.use_defaults else ())
        self._key_kinds = tuple(kind for kind, _ in keys)
        alternatives = "|".join(f"(?P<k{i}>{rx})" for i, (_, rx) in enumerate(keys)) or "(?!)"
        self._key_regex = re.compile(alternatives, re.IGNORECASE)
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
        pattern = SecretPattern(kind, re.compile(regex), tuple(keywords), group=group)
        self._set_patterns((pattern, *self._patterns))

    def _set_patterns(self, patterns: tuple[SecretPattern, ...]) -> None:
        """Keep the patterns and build the gate: one regex over the lower-cased text that finds
        the patterns' keywords (shaped as a trie: each position costs one branch). A pattern
        runs only when the gate found one of its keywords, or its prefilter matches, so a clean
        text costs one regex scan whatever the number of patterns."""
        self._patterns = patterns
        keywords = {k.lower() for p in patterns for k in p.keywords}
        minimal = sorted(k for k in keywords if not any(o != k and o in k for o in keywords))
        self._gate = re.compile(_trie_regex(minimal)) if minimal else None
        # per pattern: the gate's words that its keywords contain (None: no keyword test)
        gate_words = (
            frozenset(m for m in minimal for k in p.keywords if m in k.lower())
            if p.keywords
            else None
            for p in patterns
        )
        self._all = tuple(zip(patterns, gate_words, strict=True))
        self._keywordless = tuple((p, w) for p, w in self._all if w is None)

    # -- the rules ----------------------------------------------------------------------------

    def sensitive_key(self, key: str) -> str | None:
        """The kind of a sensitive key name, or ``None``."""
        if key in self._allow:
            return None
        cached = self._key_cache.get(key, "")
        if cached != "":
            return cached
        match = self._key_regex.search(key)
        kind = None
        if match is not None and match.lastgroup is not None:
            kind = self._key_kinds[int(match.lastgroup[1:])]
        if len(self._key_cache) < 10_000:
            self._key_cache[key] = kind
        return kind

    def redact_text(self, text: str, path: str = "") -> tuple[str, list[str]]:
        """``text`` with secrets replaced, and the kinds found (empty when unchanged)."""
        if not self.enabled:
            return text, []
        kinds: list[str] = []
        if len(text) >= _MIN_SECRET_LEN:
            lowered = text.lower()
            found = frozenset(self._gate.findall(lowered)) if self._gate is not None else None
            candidates = self._keywordless if found is not None and not found else self._all
            for pattern, words in candidates:
                if words is not None:
                    if found is not None and found.isdisjoint(words):
                        continue
                    haystack = lowered if pattern.lower else text
                    if not any(k in haystack for k in pattern.keywords):
                        continue
                if pattern.prefilter is not None and pattern.prefilter.search(text) is None:
                    continue
                new_text = self._apply(pattern, text)
                if new_text is not text:
                    kinds.append(pattern.kind)
                    text = new_text
                    lowered = text.lower()
        if self.callback is not None:
            replaced = self.callback(path, text)
            if replaced is not None and replaced != text:
                kinds.append("custom")
                text = replaced
        return text, kinds

    def _apply(self, pattern: SecretPattern, text: str) -> str:
        replacement = redacted(pattern.kind)
        changed = False

        def sub(match: re.Match[str]) -> str:
            nonlocal changed
            whole = match.group(0)
            if pattern.check is not None and not pattern.check(whole):
                return whole
            if whole.startswith("[REDACTED:") or match.group(pattern.group).startswith(
                "[REDACTED:"
            ):
                return whole
            changed = True
            if pattern.group == 0:
                return replacement
            start, end = match.span(pattern.group)
            offset = match.start(0)
            return whole[: start - offset] + replacement + whole[end - offset :]

        result = pattern.regex.sub(sub, text)
        return result if changed else text

    def redact(self, value: Any, path: str = "") -> tuple[Any, list[str]]:
        """Walk ``value`` (dicts, lists, tuples, strings, JSON in strings); return the redacted
        copy and the paths that were redacted. Unchanged parts are returned as they are."""
        if not self.enabled:
            return value, []
        paths: list[str] = []
        result = self._walk(value, path, paths, 0)
        return result, paths

    def _walk(self, value: Any, path: str, paths: list[str], depth: int) -> Any:
        if isinstance(value, str):
            if value[:1] in _JSON_START and len(value) <= _MAX_JSON and depth <= _MAX_DEPTH:
                try:
                    decoded = json.loads(value)
                except ValueError:
                    decoded = None
                if isinstance(decoded, (dict, list)):
                    before = len(paths)
                    new = self._walk(decoded, path, paths, depth + 1)
                    return json.dumps(new, ensure_ascii=False) if len(paths) > before else value
            text, kinds = self.redact_text(value, path)
            if kinds:
                paths.append(path or "$")
            return text
        if depth > _MAX_DEPTH and isinstance(value, (Mapping, list, tuple)):
            paths.append(path or "$")  # too deep to inspect: never pass it on unread
            return redacted("too_deep")
        if isinstance(value, Mapping):
            out: dict[Any, Any] | None = None
            for key, item in value.items():
                sub_path = f"{path}.{key}" if path else str(key)
                kind = self.sensitive_key(key) if isinstance(key, str) else None
                if kind is not None and _has_content(item):
                    new = redacted(kind)
                    paths.append(sub_path)
                else:
                    new = self._walk(item, sub_path, paths, depth + 1)
                if new is not item:
                    if out is None:
                        out = dict(value)
                    out[key] = new
            return out if out is not None else value
        if isinstance(value, (list, tuple)):
            items = [
                self._walk(item, f"{path}[{i}]", paths, depth + 1) for i, item in enumerate(value)
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


def _has_content(value: Any) -> bool:
    """Whether a value under a sensitive key is worth redacting (not empty, None or a bool)."""
    return not (value is None or isinstance(value, bool) or (isinstance(value, str) and not value))
