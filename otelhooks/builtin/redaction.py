"""One redactor, three places: tool results, spans and log events.

A :class:`Redactor` is configured once and used by

* as the executor's and the agent's scrubber (``scrubber=redactor``, see
  :mod:`otelhooks.core.scrub`), on everything a call hands the model and writes on its span;
* :class:`RedactionHook`, an after-hook that rewrites tool results before they reach the model;
* :class:`~otelhooks.builtin.span_redaction.RedactingSpanProcessor` (needs the SDK), which
  scrubs every span's attributes, events (exception messages and stack traces included) and
  status before any exporter sees it;
* :class:`RedactingProcessor`, a structlog processor that scrubs events before rendering.

What it finds is decided by its detectors (:mod:`otelhooks.builtin.secret_detectors`): token
formats, values under credential names in any syntax, Kubernetes Secrets, ``data:`` URLs and
base64 holding a secret, and evidence nearby; a detector of your own is one more
(``Redactor(detectors=[...])``). A redaction reads ``[REDACTED:<kind>]``; the paths that were
redacted (never the values) are reported, and recorded on spans as ``otelhooks.redacted.paths``.

Values are redacted as the model, a span and a log line will see them
(:mod:`otelhooks.builtin.secret_walk`): dicts, lists, tuples, sets, bytes, dataclasses, pydantic
models and other objects are walked, JSON inside strings is walked as structure, and the
strings of a list are also read joined line by line (a private key or a YAML block returned as
``splitlines()`` is one secret, not many clean lines).
"""

from __future__ import annotations

import asyncio
import difflib
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from opentelemetry import trace

from ..core.hooks import AfterOverride, AfterToolCallContext
from ..core.messages import ToolResult
from ..telemetry import attributes as A
from .secret_cache import CLEAN_MAX_LEN, ScanCache, bounded_put
from .secret_defaults import default_detectors
from .secret_detectors import (
    Detector,
    Finding,
    Pipeline,
    call_id_shaped,
    check_detector,
    identifier_findings,
    merge,
    pipeline_of,
    redacted,
    replace_findings,
    validate,
)
from .secret_keys import classify
from .secret_rules import PATTERNS, SecretPattern, luhn_valid
from .secret_walk import CREDENTIAL, IDENTIFIER, KEY_TEXT, At, Walk

__all__ = [
    "DEFAULT_ALLOW_KEYS",
    "PATTERNS",
    "SEMCONV_IDENTIFIER_KEYS",
    "Detector",
    "RedactingProcessor",
    "RedactionHook",
    "Redactor",
    "SecretPattern",
    "default_redactor",
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

# Keys semantic conventions define for identifiers a person needs to follow a trace, whose names
# hold a credential word (``session``, ``key``, ``client``): exempt from the key-name rules only;
# their values still go through every other rule (a token format is redacted there too).
SEMCONV_IDENTIFIER_KEYS: frozenset[str] = frozenset(
    {
        A.MCP_SESSION_ID,
        "session.id",
        "session.previous_id",
        A.GEN_AI_TOOL_CALL_ID,
        "gen_ai.conversation.id",
        "gen_ai.response.id",
        A.GEN_AI_REQUEST_MAX_TOKENS,
        A.EVENT_INFERENCE_DETAILS,
        "messaging.kafka.message.key",
        "client.address",
        "client.port",
        "trace_id",
        "span_id",
    }
)

# Keys whose value is an identifier the model chose.
_IDENTIFIER_FIELDS = ("tool_name", "call_id", "tool_call_id")
IDENTIFIER_KEYS: Final = frozenset(
    {A.GEN_AI_TOOL_NAME, A.GEN_AI_TOOL_CALL_ID, *_IDENTIFIER_FIELDS}
    | {f"log.{field}" for field in _IDENTIFIER_FIELDS}  # log events mirrored to spans
)

# Where a call id is (a path ends in one): its value must have a call id's shape.
CALL_ID_KEYS: Final = ("call_id", A.GEN_AI_TOOL_CALL_ID)

_MIN_SECRET_LEN: Final = 8
CHUNK: Final = 65_536  # a text longer than two of these is read in pieces (Redactor._chunked)
OVERLAP: Final = 8_192  # ... each with this much of the next
LARGE: Final = 131_072  # a result this large is redacted in a worker thread (RedactionHook)
_HEX_ID: Final = re.compile(r"[0-9a-f]+|[0-9A-F]+")
_MAX_ID: Final = 64
_UNSET: Final = object()

# Encoded forms a secret is often found in, decoded (only characters that change no syntax).
_ENCODED: Final = re.compile(r"\\/|\\u00[0-9a-fA-F]{2}|%[0-9a-fA-F]{2}")
_SAFE: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=:@._~-")


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


def _check_excluded(names: Iterable[str]) -> frozenset[str]:
    """``names`` if each names a built-in detector; a ``ValueError`` naming the one it
    probably meant when one does not (a misspelt name would otherwise exclude nothing)."""
    names = frozenset([names] if isinstance(names, str) else names)
    known = [d.name for d in default_detectors(PATTERNS)]
    for name in sorted(names):
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(
                f"Redactor(exclude=...): no built-in detector is named {name!r}{hint}; "
                f"they are {', '.join(known)}"
            )
    return names


@dataclass
class Redactor:
    """Finds and replaces secrets. Immutable once built (but for :meth:`add_pattern`); safe to
    share between threads.

    ``patterns`` (:class:`SecretPattern`, checked against their own samples when they carry
    any) and ``detectors`` (:class:`~otelhooks.builtin.secret_detectors.Detector`) extend the
    built-in ones, or replace them with ``use_defaults=False``; ``sensitive_keys`` (``(kind,
    regex)`` pairs matched anywhere in a key name) add credential names; ``allow_keys`` are
    never redacted for their name (their values are still searched: a tool name or a call id
    comes from the model, which must not be able to smuggle a key through it);
    ``callback(path, text)`` runs on every string after the detectors and returns a
    replacement or ``None``. ``exclude`` names built-in detectors not to run (``"unlabelled"``:
    keep generated tokens that nothing names); a name no built-in detector has is refused with
    the one it probably meant. A redactor built with ``enabled=False`` (see :meth:`disabled`)
    changes nothing: redaction is turned off only explicitly.

    What it learnt is kept in :attr:`cache` (:class:`~otelhooks.builtin.secret_cache.ScanCache`):
    text it returned or found clean is recognised when it is passed again (the result the hook
    produced, now a span attribute or a log field) instead of being scanned twice.
    """

    patterns: Sequence[SecretPattern] = ()
    sensitive_keys: Sequence[tuple[str, str]] = ()
    allow_keys: Iterable[str] = ()
    callback: Callback | None = None
    use_defaults: bool = True
    enabled: bool = True
    detectors: Sequence[Detector] = ()
    exclude: Iterable[str] = ()
    cache: ScanCache = field(init=False, repr=False)
    pipeline: Pipeline = field(init=False, repr=False)
    _patterns: tuple[SecretPattern, ...] = field(init=False, repr=False)
    _extra_keys: re.Pattern[str] | None = field(init=False, repr=False, default=None)
    _extra_kinds: tuple[str, ...] = field(init=False, repr=False, default=())
    _allow: frozenset[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        _check_patterns(self.patterns)
        self.detectors = tuple(check_detector(d) for d in self.detectors)
        self.exclude = _check_excluded(self.exclude)
        self.cache = ScanCache()
        self._set_patterns(tuple(self.patterns) + (PATTERNS if self.use_defaults else ()))
        if self.sensitive_keys:
            alternatives = "|".join(
                f"(?P<k{i}>{rx})" for i, (_, rx) in enumerate(self.sensitive_keys)
            )
            self._extra_keys = re.compile(alternatives, re.IGNORECASE)
            self._extra_kinds = tuple(kind for kind, _ in self.sensitive_keys)
        self._allow = frozenset(self.allow_keys) | (
            DEFAULT_ALLOW_KEYS | SEMCONV_IDENTIFIER_KEYS if self.use_defaults else frozenset()
        )

    @classmethod
    def disabled(cls) -> Redactor:
        """A redactor that redacts nothing, for when you mean it."""
        return cls(enabled=False)

    def add_pattern(
        self,
        kind: str,
        regex: str,
        *,
        keywords: Iterable[str] = (),
        group: int = 0,
        samples: Sequence[str] = (),
        negatives: Sequence[str] = (),
    ) -> None:
        """Add a secret pattern (checked before the defaults, and against its samples)."""
        pattern = SecretPattern(
            kind,
            re.compile(regex),
            tuple(k.lower() for k in keywords),
            group=group,
            samples=tuple(samples),
            negatives=tuple(negatives),
        )
        _check_patterns([pattern])
        self._set_patterns((pattern, *self._patterns))

    def _set_patterns(self, patterns: tuple[SecretPattern, ...]) -> None:
        self._patterns = patterns
        builtin = [d for d in default_detectors(patterns) if d.name not in self.exclude]
        if not self.use_defaults:  # the formats given, and the detectors given
            builtin = builtin[:1] if patterns else []
        self.pipeline = pipeline_of((*builtin, *self.detectors))
        self.cache.clear()

    # -- the rules ----------------------------------------------------------------------------

    def allows(self, key: str) -> bool:
        """Whether ``key``'s value is meant to be seen (``allow_keys``, and by default the
        semantic conventions' identifiers): no key-name rule applies to it."""
        return key in self._allow

    def key_tier(self, key: str) -> tuple[int, str] | None:
        """``(1, kind)`` for a credential key name (its value is redacted whole), ``(2, kind)``
        for a credential-ish one (its value when it looks random), else ``None``."""
        if key in self._allow:
            return None
        tiers = self.cache.key_tiers
        cached = tiers.get(key, _UNSET)
        if cached is not _UNSET:
            return cached  # type: ignore[return-value]
        found = classify(key) if self.use_defaults else None
        if self._extra_keys is not None and (found is None or found[0] == 2):
            match = self._extra_keys.search(key)
            if match is not None and match.lastgroup is not None:
                found = (1, self._extra_kinds[int(match.lastgroup[1:])])
        bounded_put(tiers, key, found)
        return found

    def sensitive_key(self, key: str) -> str | None:
        """The kind of a credential key name (one whose value is always redacted), or ``None``."""
        found = self.key_tier(key)
        return found[1] if found is not None and found[0] == 1 else None

    # -- text ---------------------------------------------------------------------------------

    def redact_text(self, text: str, path: str = "") -> tuple[str, list[str]]:
        """``text`` with secrets replaced, and the kinds found (empty when unchanged)."""
        if not self.enabled:
            return text, []
        cache = self.cache
        short = len(text) <= CLEAN_MAX_LEN
        if self.callback is None:
            if cache.is_known(text) or (short and text in cache.clean):
                return text, []  # the same text was found clean: the rules depend on it only
            if len(text) <= _MAX_ID and _HEX_ID.fullmatch(text) is not None:
                return text, []  # a trace id, a span id, a git SHA: no format is bare hex
        new_text, kinds = self._scan(text)
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
            if kinds or not self.pipeline.judged_in_place(text):
                cache.remember(new_text)  # clean wherever it stands (or already redacted)
            if not kinds and short:
                cache.remember_clean(text)
        return new_text, kinds

    def _scan(self, text: str) -> tuple[str, list[str]]:
        findings = self.find(text)
        return replace_findings(text, findings) if findings else (text, [])

    def find(self, text: str) -> list[Finding]:
        """What the detectors find in ``text`` (a large text read in pieces)."""
        if len(text) < _MIN_SECRET_LEN:
            return []
        return self.pipeline.find(text) if len(text) <= 2 * CHUNK else self._chunked(text)

    def _chunked(self, text: str) -> list[Finding]:
        """The findings of a large text, read in pieces of :data:`CHUNK` characters that end
        at a line break, each read with the :data:`OVERLAP` characters after it (a secret or
        its evidence across the cut is found in the piece it starts in). No scan of the text
        runs long, so a thread doing this gives the interpreter up often."""
        findings: list[Finding] = []
        start = 0
        while start < len(text):
            end = min(len(text), start + CHUNK)
            line = text.find("\n", end, end + 4096)
            end = line + 1 if line >= 0 else end
            for f in self.pipeline.find(text[start : min(len(text), end + OVERLAP)]):
                if f.start < end - start:
                    findings.append(
                        Finding(f.start + start, f.end + start, f.kind, f.detector, f.priority)
                    )
            start = end
        return merge(text, findings)

    def redact_identifier(self, text: str, path: str = "") -> tuple[str, list[str]]:
        """An identifier the model chose (a tool name, a call id) with secrets replaced: the
        rules for any text, and any part of it that looks generated and is not an id's usual
        shape (hex, a UUID, a provider's ``call_...``/``toolu_...``). A call id (``path`` ends
        in one of :data:`CALL_ID_KEYS`) of 8 or more characters without a call id's shape
        (:func:`~otelhooks.builtin.secret_detectors.call_id_shaped`) is replaced whole."""
        call_id = path.endswith(CALL_ID_KEYS)
        names = self.cache.clean_names if self.callback is None and not call_id else None
        if names is not None and text in names:
            return text, []  # found clean as a name before: the rules depend on the text only
        new_text, kinds = self.redact_text(text, path)
        if not self.enabled:
            return new_text, kinds
        if call_id and not kinds and not call_id_shaped(new_text) and "[REDACTED:" not in new_text:
            return redacted("secret"), ["secret"]
        if len(new_text) < 16 or not (
            findings := merge(new_text, list(identifier_findings(new_text, self.pipeline)))
        ):
            if names is not None and not kinds and len(text) <= CLEAN_MAX_LEN:
                bounded_put(names, text, None)
            return new_text, kinds
        replaced, more = replace_findings(new_text, findings)
        return replaced, kinds + more

    # -- the scrubber's methods ------------------------------------------------------------

    def scrub_text(self, text: str) -> str:
        """``text`` with secrets replaced (the kinds found are not reported)."""
        return self.redact_text(text)[0]

    def scrub_identifier(self, name: str) -> str:
        """A name the model chose (a tool name, a call id), with secrets replaced."""
        return self.redact_identifier(name)[0]

    def scrub_value(self, value: Any) -> Any:
        """``value`` (any structure) with secrets replaced; the same object when clean."""
        return self.redact(value)[0]

    def scrub_result(self, result: ToolResult) -> ToolResult:
        """``result`` with its content and details redacted (the same object when clean)."""
        content, _ = self.redact(result.content, "result")
        details, _ = self.redact(result.details, "details")
        if content is result.content and details is result.details:
            return result
        return replace(result, content=content, details=details)

    # -- structures ---------------------------------------------------------------------------

    def redact(self, value: Any, path: str = "") -> tuple[Any, list[str]]:
        """Walk ``value`` (:mod:`otelhooks.builtin.secret_walk`); return the redacted copy and
        the paths that were redacted. Unchanged parts are returned as they are."""
        if not self.enabled:
            return value, []
        walk = Walk(self)
        return walk.value(value, At(path)), walk.paths

    async def redact_async(self, value: Any, path: str = "") -> tuple[Any, list[str]]:
        """:meth:`redact`, in a worker thread when ``value`` is large (a text or structure of
        :data:`LARGE` characters or more), so that an event loop that awaits it goes on
        serving others meanwhile; inline otherwise."""
        if _size(value) < LARGE:
            return self.redact(value, path)
        return await asyncio.to_thread(self.redact, value, path)

    def key_plan(self, key: str) -> int:
        """What a key name needs, as flags (remembered): :data:`~.secret_walk.CREDENTIAL` (its
        value is judged for its name), :data:`~.secret_walk.IDENTIFIER` (its value is an
        identifier the model chose: a text known clean is not known clean as a name),
        :data:`~.secret_walk.KEY_TEXT` (the key itself may hold a secret: long enough, not
        allowed, and a format is in it or the evidence of its mapping could make it one)."""
        plans = self.cache.key_plans
        plan = plans.get(key)
        if plan is None:
            plan = 0
            if self.key_tier(key) is not None:
                plan |= CREDENTIAL
            if key in IDENTIFIER_KEYS:
                plan |= IDENTIFIER
            if (
                len(key) >= _MIN_SECRET_LEN
                and key not in self._allow
                and (
                    self.callback is not None
                    or (len(key) >= 16 and self.pipeline.find(key))
                    or any(j.may_judge_unfound(key) for j in self.pipeline.unfound_judges)
                )
            ):
                plan |= KEY_TEXT
            bounded_put(plans, key, plan)
        return plan

    def is_identifier_key(self, key: Any) -> bool:
        """Whether the value under ``key`` is an identifier the model chose."""
        return key in IDENTIFIER_KEYS


_DEFAULT: list[Redactor] = []


def default_redactor() -> Redactor:
    """The redactor with the default rules, one per process (built on first use; safe to share:
    only its caches change). What otelhooks uses wherever a redactor is not given: the
    redaction hook, the structlog events and processor, :func:`~otelhooks.setup_tracing`."""
    if not _DEFAULT:
        _DEFAULT.append(Redactor())
    return _DEFAULT[0]


def resolve(redactor: Redactor | bool | None) -> Redactor | None:
    """What an option ``redactor=`` means: ``None`` or ``True`` the default redactor, ``False``
    none (redaction off, as asked), a :class:`Redactor` itself."""
    if redactor is None or redactor is True:
        return default_redactor()
    if redactor is False:
        return None
    return redactor


def _size(value: Any, budget: int = LARGE) -> int:
    """A lower bound of how many characters ``value`` holds, counted up to ``budget``."""
    if isinstance(value, (str, bytes, bytearray)):
        return len(value)
    if isinstance(value, Mapping):
        value = [*value.keys(), *value.values()]
    if isinstance(value, (list, tuple, set, frozenset)):
        total = 0
        for item in value:
            total += _size(item, budget - total)
            if total >= budget:
                break
        return total
    return 0


def _check_patterns(patterns: Iterable[SecretPattern]) -> None:
    """Rules given to a redactor that carry samples must pass them (fail closed: a rule that
    cannot find its own sample would guard nothing)."""
    problems = validate([p for p in patterns if p.samples or p.negatives], require=False)
    if problems:
        raise ValueError("secret patterns fail their samples: " + "; ".join(map(str, problems)))


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

    def __init__(self, redactor: Redactor | None = None) -> None:
        self.redactor = redactor if redactor is not None else default_redactor()

    def after_tool_call(
        self, ctx: AfterToolCallContext
    ) -> AfterOverride | Awaitable[AfterOverride | None] | None:
        """Redact the result's content and details (an override only when something was
        found). A large result (:data:`LARGE` characters or more) is redacted in a worker
        thread, in pieces, and the hook returns an awaitable for it: the event loop goes on
        serving other calls meanwhile."""
        result = ctx.result
        if len(result.content) >= LARGE or _size(result.details) >= LARGE:
            return self._in_a_thread(result)
        return self._override(*self._redact(result))

    async def _in_a_thread(self, result: ToolResult) -> AfterOverride | None:
        span = trace.get_current_span()  # the after phase's, taken in the loop's context
        return self._override(*await asyncio.to_thread(self._redact, result), span)

    def _redact(self, result: ToolResult) -> tuple[Any, Any, list[str]]:
        content, content_paths = self.redactor.redact(result.content, "result")
        details, detail_paths = self.redactor.redact(result.details, "details")
        return content, details, content_paths + detail_paths

    @staticmethod
    def _override(
        content: Any, details: Any, paths: list[str], span: Any = None
    ) -> AfterOverride | None:
        if not paths:
            return None
        span = span if span is not None else trace.get_current_span()
        if span.is_recording():
            span.set_attribute(A.REDACTED_PATHS, paths)
        return AfterOverride(content=content, details=details)


# -- place 3: log events -----------------------------------------------------------------------


class RedactingProcessor:
    """structlog processor: scrubs an event dict before it is rendered. Put it last but the
    renderer in your chain."""

    def __init__(self, redactor: Redactor | None = None) -> None:
        self.redactor = redactor if redactor is not None else default_redactor()

    def __call__(self, logger: Any, method_name: str, event_dict: Any) -> Any:
        scrubbed, _ = self.redactor.redact(event_dict)
        return scrubbed
