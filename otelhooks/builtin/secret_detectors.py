"""Detectors: the families of rules the redactor runs, behind one interface, and how what they
find is merged.

A :class:`Detector` has a ``name``, a ``family``, a ``priority``, the ``keywords`` it needs (a
cheap gate: a detector runs on a text only where one of its keywords occurs, unless it is
``always`` run) and up to three ways of finding secrets:

* :meth:`Detector.find` searches a :class:`TextView` (any string, whatever its key) and returns
  :class:`Finding` spans;
* :meth:`Detector.judge_value` decides, for a value in a mapping, that the whole value is a
  secret before it is searched (``{"password": ...}``);
* :meth:`Detector.judge_unfound` decides for a text in a mapping (a value, or a key) that
  nothing was found in, from what surrounds it (``{"integration": "datadog", "value": ...}``).

The built-in families, highest priority first: token formats (:class:`FormatDetector`, the rules
of :mod:`.secret_rules`), values under credential names in any syntax (:class:`KeyNameDetector`)
and Kubernetes Secrets (:class:`KubernetesSecretDetector`), ``data:`` URLs holding a secret
(:class:`DataUrlDetector`), evidence nearby (:class:`NearbyEvidenceDetector`), and base64 blobs
that decode to a secret (:class:`EncodedBlobDetector`).

**The merge policy** (:func:`merge`), the one place precedence is decided: a finding of a
detector that ``yields`` is dropped when it overlaps a finding of a higher priority (evidence
nearby gives way to a known format or key, a decoded blob to anything found); all other
findings are kept, overlapping ones become one redaction, labelled with the kind of the finding
of the highest priority (the earliest on a tie). Findings that touch a redaction already in the
text are dropped: redacting twice changes nothing.

Adding a detector touches no engine code: subclass :class:`Detector` and pass an instance to
``Redactor(detectors=[...])``. The built-in ones, in order, are listed in :mod:`.secret_defaults`.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, NamedTuple, Protocol

from . import secret_context as near
from .secret_cache import ScanCache, bounded_put
from .secret_gate import SegmentGate, WordGate
from .secret_keys import (
    KEY_WORDS,
    classify,
    is_placeholder,
    key_value_spans,
    kubernetes_secret_spans,
    looks_random,
    public_name,
    public_tail,
)
from .secret_rules import (
    SecretPattern,
    leading_word,
    negatives_of,
    run_marks,
    sample,
    samples_of,
    trie_regex,
)
from .secret_shapes import PASSWORD_GATE, SHORTEST, labelled_public, shape_spans
from .secret_tables import table_spans

__all__ = [
    "DataUrlDetector",
    "DerPrivateKeyDetector",
    "Detector",
    "EncodedBlobDetector",
    "Field",
    "Finding",
    "FormatDetector",
    "KeyNameDetector",
    "KubernetesSecretDetector",
    "MappingView",
    "NearbyEvidenceDetector",
    "Pipeline",
    "ShapeDetector",
    "Spans",
    "TableDetector",
    "TextView",
    "merge",
    "pipeline_of",
    "redacted",
    "replace_findings",
]


def redacted(kind: str) -> str:
    """The text a redacted secret is replaced with."""
    return f"[REDACTED:{kind}]"


@dataclass(frozen=True, slots=True)
class Finding:
    """A span of a text a detector found a secret in: ``text[start:end]`` is replaced by
    ``[REDACTED:<kind>]``. ``detector``, ``priority`` and ``yields`` are the finding
    detector's (see :func:`merge`)."""

    start: int
    end: int
    kind: str
    detector: str
    priority: int
    yields: bool = False

    def overlaps(self, start: int, end: int) -> bool:
        """Whether this finding and ``[start, end)`` share a character."""
        return self.start < end and start < self.end


# -- the text view -------------------------------------------------------------------------------

_ESCAPE: Final = re.compile(r"\\([nrt])")
_CONTROL: Final = {"n": "\n", "r": "\r", "t": "\t"}
LONG: Final = 16  # no token format is shorter: the token gates look at tokens this long only


def _unescape(match: re.Match[str]) -> str:
    return " " + _CONTROL[match.group(1)]


class TextView:
    """One text as the detectors read it.

    ``text`` is the text itself. ``work`` is the same text with JSON escapes ``\\n``, ``\\t``,
    ``\\r`` as a space and the character (a token after ``\\n`` starts a line) and look-alike
    letters folded to ASCII (``ѕеcrеt``): the same length, so a span of ``work`` is a span of
    ``text``. ``lowered`` is ``work`` in lower case. ``depth``: how many base64 layers the text
    was decoded from. ``findings``: what the detectors of higher priority found so far (a
    detector that yields may skip work there)."""

    __slots__ = (
        "_long_tokens",
        "_offsets",
        "_pipeline",
        "_starts",
        "_taken",
        "_taken_count",
        "_tokens_lower",
        "depth",
        "findings",
        "lowered",
        "text",
        "work",
    )

    def __init__(self, text: str, depth: int, pipeline: Pipeline) -> None:
        self.text = text
        work = _ESCAPE.sub(_unescape, text) if "\\" in text else text
        if not work.isascii():
            work = near.fold(work)
        self.work = work
        self.lowered = work.lower()
        self.depth = depth
        self.findings: list[Finding] = []
        self._pipeline = pipeline
        self._long_tokens: list[str] | None = None
        self._tokens_lower: str | None = None
        self._starts: list[int] | None = None
        self._offsets: list[int] = []
        self._taken: Spans | None = None
        self._taken_count = 0

    @property
    def long_tokens(self) -> list[str]:
        """The whitespace-separated tokens of 16+ characters (a secret is one)."""
        if self._long_tokens is None:
            self._long_tokens = (
                [t for t in self.work.split() if len(t) >= LONG] if len(self.work) >= LONG else []
            )
        return self._long_tokens

    @property
    def tokens_lower(self) -> str:
        """:attr:`long_tokens`, lower case, joined by spaces."""
        if self._tokens_lower is None:
            self._tokens_lower = " ".join(self.long_tokens).lower()
        return self._tokens_lower

    def token_window(self, at: int, reach: int = 256) -> tuple[int, int]:
        """Where in :attr:`work` the long token holding :attr:`tokens_lower`'s character
        ``at`` is: from its start to ``reach`` characters past it (a rule's match may go on
        over spaces, or lines)."""
        starts = self._place_tokens()
        index = bisect.bisect_right(starts, at) - 1
        start = self._offsets[index]
        return start, min(len(self.work), start + len(self.long_tokens[index]) + reach)

    def token_holding(self, at: int) -> tuple[int, int]:
        """Where the long token holding :attr:`tokens_lower`'s character ``at`` starts: in
        :attr:`work`, and in :attr:`tokens_lower`."""
        starts = self._place_tokens()
        index = bisect.bisect_right(starts, at) - 1
        return self._offsets[index], starts[index]

    def token_at(self, index: int) -> int:
        """Where in :attr:`work` the long token ``long_tokens[index]`` is."""
        self._place_tokens()
        return self._offsets[index]

    def _place_tokens(self) -> list[int]:
        """Where each long token starts in :attr:`tokens_lower` (returned) and in :attr:`work`
        (kept), found once."""
        if self._starts is None:
            work = self.work
            starts, offsets, cursor, joined = [], [], 0, 0
            for token in self.long_tokens:
                # the first place from ``cursor`` on that holds it (as ``find`` gives): most
                # often right there or one whitespace on, which a comparison tells
                if not work.startswith(token, cursor):
                    cursor = (
                        cursor + 1
                        if work.startswith(token, cursor + 1)
                        else work.find(token, cursor)
                    )
                starts.append(joined)
                offsets.append(cursor)
                joined += len(token) + 1
                cursor += len(token)
            self._starts, self._offsets = starts, offsets
        return self._starts

    def taken(self, start: int, end: int) -> bool:
        """Whether a finding so far overlaps ``[start, end)`` (their union is built again only
        when findings were added: thousands of tests cost no more than sorting them once)."""
        if self._taken is None or self._taken_count != len(self.findings):
            self._taken = Spans((f.start, f.end) for f in self.findings)
            self._taken_count = len(self.findings)
        return self._taken.overlap(start, end)

    def holds_secret(self, decoded: str) -> bool:
        """Whether ``decoded`` (a text decoded from this one) holds a secret, by every
        detector, one layer deeper."""
        return bool(self._pipeline.find(decoded, self.depth + 1))


# -- the detector interface ----------------------------------------------------------------------


class Walker(Protocol):
    """What a detector may ask of the redactor walking a mapping."""

    @property
    def cache(self) -> ScanCache:
        """Where what was learnt about keys and values is kept."""
        ...

    def key_tier(self, key: str) -> tuple[int, str] | None:
        """The tier of a key name (see ``Redactor.key_tier``)."""
        ...

    def allows(self, key: str) -> bool:
        """Whether the redactor was told a key's value is meant to be seen (``allow_keys``, the
        semantic conventions' identifiers): no key-name or look-alone rule applies to it."""
        ...


class MappingView:
    """A mapping being walked: the mapping, the one it is in (with the key it is under), and a
    memo detectors may keep what they learnt about it in (per walk)."""

    __slots__ = ("mapping", "memo", "outer", "outer_key", "redactor")

    def __init__(
        self,
        mapping: Mapping[Any, Any],
        outer: MappingView | None,
        outer_key: Any,
        redactor: Walker,
    ) -> None:
        self.mapping = mapping
        self.outer = outer
        self.outer_key = outer_key
        self.redactor = redactor
        self.memo: dict[str, Any] = {}


class Field(NamedTuple):
    """One item of a mapping: its key and value, the path to it, and the mapping."""

    key: Any
    value: Any
    path: str
    where: MappingView


class Detector:
    """The interface every detector implements (a subclass overrides :meth:`find`,
    :meth:`judge_value`, :meth:`judge_unfound` or several; the defaults find nothing).

    ``name`` names the detector in findings and benchmarks; ``family`` groups detectors
    (``format``, ``key_name``, ``structure``, ``nearby``, ``encoded``...); ``priority`` orders
    them in the merge (:func:`merge`); a detector that ``yields`` gives way where a detector of
    higher priority found something. ``keywords`` (lower case) gate :meth:`find`: it runs on a
    text only where one of them occurs, unless ``always`` is set. A detector whose
    :meth:`judge_value` only ever judges values under credential names says so with
    ``judges_credential_names_only`` (the redactor then skips the others without asking it)."""

    name: ClassVar[str] = "detector"
    family: ClassVar[str] = "custom"
    priority: ClassVar[int] = 60
    yields: ClassVar[bool] = False
    keywords: tuple[str, ...] = ()
    always: bool = False
    judges_credential_names_only: ClassVar[bool] = False
    # texts :meth:`find` must find the ``«...»`` part of whole, and texts it must leave alone,
    # as a format rule's samples are written (checked by :func:`validate_detectors`)
    samples: ClassVar[tuple[str, ...]] = ()
    negatives: ClassVar[tuple[str, ...]] = ()

    def find(self, view: TextView, hits: Mapping[str, list[int]]) -> Iterable[Finding]:
        """The secrets in ``view``. ``hits``: where the gate found each of this detector's
        keywords (under the shortest part of it the gate looks for: ``pass`` for
        ``password``), positions in ``view.lowered``, in order."""
        return ()

    def judge_value(self, field: Field) -> str | None:
        """The kind to redact a mapping's value with, whole, before it is searched; ``None``
        to let it be searched."""
        return None

    def judges_every_value(self, outer: MappingView | None, key: Any) -> bool:
        """Whether :meth:`judge_value` must see every value of the mapping found under ``key``
        in ``outer`` (short ones and those under keys no credential name is in too: the
        redactor skips those otherwise). The default, for a detector that judges values, is
        yes."""
        return type(self).judge_value is not Detector.judge_value

    def may_judge_unfound(self, text: str) -> bool:
        """Whether :meth:`judge_unfound` could redact ``text`` under any evidence (a cheap
        test: a key name for which it says no is never looked at again). The default is yes."""
        return type(self).judge_unfound is not Detector.judge_unfound

    def judge_unfound(self, field: Field, text: str) -> str | None:
        """The kind to redact ``text`` (the field's value, or its key) with when no detector
        found anything in it; ``None`` to keep it."""
        return None

    def finding(self, start: int, end: int, kind: str) -> Finding:
        """A finding of this detector."""
        return Finding(start, end, kind, self.name, self.priority, self.yields)


_INTERFACE: Final = ("find", "judge_value", "judge_unfound")


def check_detector(detector: Any) -> Detector:
    """``detector`` if it implements the interface; a ``TypeError`` naming what is wrong when
    it does not (a misspelt method would otherwise find nothing, silently)."""
    if not isinstance(detector, Detector):
        raise TypeError(
            f"a detector must subclass otelhooks.builtin.Detector, got {type(detector).__name__}"
        )
    kind = type(detector)
    if not any(getattr(kind, m) is not getattr(Detector, m) for m in _INTERFACE):
        own = sorted(n for n in vars(kind) if not n.startswith("_") and callable(vars(kind)[n]))
        raise TypeError(
            f"detector {kind.__name__} implements none of find, judge_value, judge_unfound"
            + (f" (it defines {', '.join(own)})" if own else "")
        )
    if any(k != k.lower() or not k for k in detector.keywords):
        raise TypeError(f"detector {kind.__name__}: keywords must be non-empty and lower case")
    if not detector.keywords and not detector.always and kind.find is not Detector.find:
        raise TypeError(f"detector {kind.__name__} has no keywords: set always = True")
    return detector


# -- the engine ----------------------------------------------------------------------------------


def minimal(words: Iterable[str]) -> list[str]:
    """The words no other word is part of (enough for a gate that only needs to know)."""
    words = set(words)
    return sorted(w for w in words if not any(o != w and o in w for o in words))


_JUDGED_MAX: Final = 1024  # the longest token a judge of unfound texts judges (looks_random)


class Pipeline:
    """The detectors of one redactor in priority order, the gate over their keywords, and
    :meth:`find`: every detector that applies, over one text, merged."""

    def __init__(self, detectors: Sequence[Detector]) -> None:
        self.detectors = tuple(sorted(detectors, key=lambda d: -d.priority))
        gate_words = minimal(k for d in self.detectors for k in d.keywords)
        self.gate = WordGate(gate_words) if gate_words else None
        self._words = tuple(
            frozenset(m for m in gate_words for k in d.keywords if m in k) for d in self.detectors
        )
        finders = [i for i, d in enumerate(self.detectors) if type(d).find is not Detector.find]
        # the detectors that search a text: all of them where the gate found a word, else
        # those that run without one (most texts: the others are not even looked at)
        self._finders = tuple(finders)
        self._always = tuple(i for i in finders if self.detectors[i].always)
        self.value_judges = tuple(
            d for d in self.detectors if type(d).judge_value is not Detector.judge_value
        )
        # those that may ask to see every value of a mapping (not only the credential-named)
        self.every_value_judges = tuple(
            d for d in self.value_judges if not d.judges_credential_names_only
        )
        self.unfound_judges = tuple(
            d for d in self.detectors if type(d).judge_unfound is not Detector.judge_unfound
        )

    def judged_in_place(self, text: str) -> bool:
        """Whether a ``text`` no detector found anything in may still be redacted where it
        stands (a judge of unfound texts may judge it as a mapping's item): it is then clean
        here, not everywhere, and must not be remembered as clean by identity."""
        if len(text) > _JUDGED_MAX and len(text.strip()) > _JUDGED_MAX:
            return False  # no judge judges a token this long (padding around one aside)
        return any(judge.may_judge_unfound(text) for judge in self.unfound_judges)

    def find(self, text: str, depth: int = 0) -> list[Finding]:
        """What every applicable detector finds in ``text``, merged (:func:`merge`)."""
        view = TextView(text, depth, self)
        found = self.gate_hits(view)
        detectors = self.detectors
        for index in self._finders if found else self._always:
            detector = detectors[index]
            hits = self.hits_of(index, found)
            if hits or detector.always:
                view.findings.extend(detector.find(view, hits))
        if not view.findings:
            return []
        # a base64 body found on one line goes on over the lines it is wrapped on
        return [
            f
            if (end := near.wrapped_end(view.work, f.start, f.end)) == f.end
            else Finding(f.start, end, f.kind, f.detector, f.priority, f.yields)
            for f in merge(text, view.findings)
        ]

    def gate_hits(self, view: TextView) -> dict[str, list[int]]:
        """Where the gate finds each of its words in ``view.lowered``."""
        return self.gate.hits(view.lowered) if self.gate is not None else {}

    def hits_of(self, index: int, found: dict[str, list[int]]) -> dict[str, list[int]]:
        """Of ``found``, the hits of the words of ``self.detectors[index]``."""
        if not found:
            return {}
        return {w: found[w] for w in self._words[index] if w in found}


_PLACED: Final = re.compile(r"\[REDACTED:[A-Za-z0-9_.-]{1,64}\]")


class Spans:
    """A union of spans, for overlap tests in logarithmic time."""

    __slots__ = ("_ends", "_starts")

    def __init__(self, spans: Iterable[tuple[int, int]]) -> None:
        starts: list[int] = []
        ends: list[int] = []
        for start, end in sorted(spans):
            if starts and start <= ends[-1]:
                ends[-1] = max(ends[-1], end)
            else:
                starts.append(start)
                ends.append(end)
        self._starts, self._ends = starts, ends

    def overlap(self, start: int, end: int) -> bool:
        """Whether ``[start, end)`` shares a character with the union."""
        index = bisect.bisect_left(self._starts, end) - 1  # the last span starting before end
        return index >= 0 and self._ends[index] > start


def _not_yielded(findings: list[Finding]) -> list[Finding]:
    """``findings`` without those of a yielding detector that overlap a finding of a higher
    priority (for each priority that yields, the higher findings' union, searched by bisection:
    thousands of findings cost no more than sorting them)."""
    if not any(f.yields for f in findings):
        return findings
    kept = [f for f in findings if not f.yields]
    for priority in sorted({f.priority for f in findings if f.yields}):
        higher = Spans((g.start, g.end) for g in findings if g.priority > priority)
        kept.extend(
            f
            for f in findings
            if f.yields and f.priority == priority and not higher.overlap(f.start, f.end)
        )
    return kept


def merge(text: str, findings: list[Finding]) -> list[Finding]:
    """The merge policy: findings of yielding detectors that overlap a finding of a higher
    priority are dropped, findings that touch a redaction already in ``text`` too; the rest,
    where they overlap, become one finding with the kind of the highest priority among them
    (the earliest on a tie). In order of position."""
    kept = _not_yielded(findings)
    if "[REDACTED:" in text:
        placed = Spans(m.span() for m in _PLACED.finditer(text))
        kept = [f for f in kept if not placed.overlap(f.start, f.end)]
    kept = [f for f in kept if f.start < f.end]
    if len(kept) < 2:
        return kept
    kept.sort(key=lambda f: (f.start, -f.end))
    out = [kept[0]]
    for f in kept[1:]:
        last = out[-1]
        if f.start < last.end:  # overlapping: one redaction covering both
            label = last if last.priority >= f.priority else f
            out[-1] = Finding(
                last.start, max(last.end, f.end), label.kind, label.detector, label.priority
            )
        else:
            out.append(f)
    return out


def replace_findings(text: str, findings: Sequence[Finding]) -> tuple[str, list[str]]:
    """``text`` with merged, ordered ``findings`` replaced; the kinds replaced."""
    pieces: list[str] = []
    last = 0
    for f in findings:
        pieces.append(text[last : f.start])
        pieces.append(redacted(f.kind))
        last = f.end
    pieces.append(text[last:])
    return "".join(pieces), [f.kind for f in findings]


# -- token formats -------------------------------------------------------------------------------

_DIGITS_AS_ZERO: Final = str.maketrans("123456789", "000000000")


class FormatDetector(Detector):
    """Token formats (:mod:`.secret_rules`): each rule runs where one of its keywords occurs —
    inside a long token for most (``ghp_``, ``xoxb-``, ``AKIA``), anywhere for the few whose
    keywords are ordinary words (``authorization``, ``machine``) — or, for a rule without
    keywords, where its prefilter finds something (a card number)."""

    name = "format"
    family = "format"
    priority = 100
    always = True

    def __init__(self, patterns: Sequence[SecretPattern]) -> None:
        self.patterns = tuple(patterns)
        order = {id(p): i for i, p in enumerate(self.patterns)}
        self._order = order
        self._by_id = {id(p): p for p in self.patterns}
        starts = {k for p in self.patterns if p.in_token and p.at_start for k in p.keywords}
        inners = {k for p in self.patterns if p.in_token and not p.at_start for k in p.keywords}
        self.keywords = tuple(
            sorted({k for p in self.patterns if not p.in_token for k in p.keywords})
        )
        # a start keyword is found at a segment start, so only a shorter one it begins with
        # may stand for it (``cfpat-`` is not found by ``pat``); elsewhere any part will do
        start_minimal = sorted(
            w for w in starts if not any(o != w and w.startswith(o) for o in starts)
        )
        inner_minimal = minimal(inners)
        # a segment's start, found as the character before it (a leading lookbehind would be
        # tried at every position)
        self._start_gate = SegmentGate(start_minimal) if start_minimal else None
        self._inner_words = tuple(inner_minimal)
        # the inner keywords' characters that are neither letters nor digits (``_live_``,
        # ``hooks.slack.com``): a text without one holds no keyword with it, so its gate leaves
        # those out (fewer places the regex engine tries: the same matches)
        self._inner_marks = "".join(
            sorted({c for w in inner_minimal for c in w if not c.isalnum()})
        )
        self._inner_gates: dict[str, WordGate | None] = {}
        by_word: dict[str, list[SecretPattern]] = {}
        for pattern in self.patterns:
            if pattern.in_token and pattern.at_start:
                found = {m for m in start_minimal for k in pattern.keywords if k.startswith(m)}
            elif pattern.in_token:
                found = {m for m in inner_minimal for k in pattern.keywords if m in k}
            else:
                found = set()
            for word in found:
                by_word.setdefault(word, []).append(pattern)
        self._by_token_word = {w: tuple(ps) for w, ps in by_word.items()}
        self._context = tuple(p for p in self.patterns if not p.in_token and p.keywords)
        # how far past its token a rule's match may reach: a line, or a whole block of lines
        self._reach = {id(p): 4096 if "[\\s\\S]" in p.regex.pattern else 256 for p in self.patterns}
        self._context_rules: dict[str, tuple[SecretPattern, ...]] = {}
        self._unkeyed = tuple(p for p in self.patterns if not p.keywords)
        # the rules whose matches begin with a keyword, tried only where it is (a rule that
        # ignores case has no literal start for the regex engine to skip to)
        self._leading = {id(p): w for p in self.patterns if (w := leading_word(p)) is not None}
        self._run_marks = {id(p): run_marks(p.runs[0]) for p in self._unkeyed if p.runs}

    def _by_context_word(self, word: str) -> tuple[SecretPattern, ...]:
        """The rules whose ordinary-word keywords hold ``word`` (a word the gate found)."""
        found = self._context_rules.get(word)
        if found is None:
            found = tuple(p for p in self._context if any(word in k for k in p.keywords))
            bounded_put(self._context_rules, word, found)
        return found

    def _segment_starts(self, tokens: str) -> dict[str, list[int]]:
        """Where in ``tokens`` a start keyword begins a segment (not after a letter or a
        digit), as a search from the left finds them: one ends before the next begins."""
        at: dict[str, list[int]] = {}
        if self._start_gate is not None:
            free = 0
            for start, word in self._start_gate.starts(" " + tokens):
                # ``start`` in ``tokens``: the keyword's, one character on
                if start >= free:
                    at.setdefault(word, []).append(start)
                    free = start + len(word)
        return at

    def _inner_hits(self, tokens: str) -> dict[str, list[int]]:
        """Where in ``tokens`` an inner keyword occurs."""
        gate = self._inner_gate("".join(c for c in self._inner_marks if c not in tokens))
        return gate.hits(tokens) if gate is not None else {}

    def _inner_gate(self, absent: str) -> WordGate | None:
        """The gate over the inner keywords that hold none of the characters ``absent`` (one of
        the subsets of :attr:`_inner_marks`, each built once)."""
        try:
            return self._inner_gates[absent]
        except KeyError:
            words = [w for w in self._inner_words if not any(c in absent for c in w)]
            gate = WordGate(words) if words else None
            self._inner_gates[absent] = gate
            return gate

    def find(self, view: TextView, hits: Mapping[str, list[int]]) -> Iterable[Finding]:
        """The rules whose keywords the gates found; the unkeyed ones whose prefilter matches."""
        # the rules to run: those of ordinary words over the whole text, those of a token's
        # keyword over the token where it was found (a large text full of tokens costs the
        # tokens the keywords are in, not a pass of the rule over all of it)
        whole: dict[int, SecretPattern] = {}
        windows: dict[int, set[tuple[int, int]]] = {}
        for word in hits:
            for pattern in self._by_context_word(word):
                whole[id(pattern)] = pattern
        tokens = view.tokens_lower
        if tokens:
            for at in (self._segment_starts(tokens), self._inner_hits(tokens)):
                for word, starts in at.items():
                    for pattern in self._by_token_word.get(word, ()):
                        if len(starts) > _FEW:  # a common keyword here: one pass of the rule
                            whole[id(pattern)] = pattern
                            continue
                        reach = self._reach[id(pattern)]
                        found_at = windows.setdefault(id(pattern), set())
                        found_at.update(view.token_window(s, reach) for s in starts)
        found: list[Finding] = []
        work = view.work
        order = self._order
        by_id = self._by_id
        # in the rules' order: where two find the same text, the first wins
        for key in sorted(whole.keys() | windows.keys(), key=lambda k: order[k]):
            pattern = by_id[key]
            parts = _merged(windows[key]) if key not in whole else []
            if key in whole or len(parts) > _FEW or sum(b - a for a, b in parts) * 4 > len(work):
                lead = self._leading.get(key)
                spans: Iterable[tuple[int, int]] = (
                    pattern.spans_at(work, view.lowered, lead)  # where it can begin: fewer
                    if lead is not None and work.isascii()
                    else pattern.spans(work)  # one pass: cheaper
                )
            else:
                spans = (s for a, b in parts for s in pattern.spans(work, a, b))
            found.extend(self.finding(s, e, pattern.kind) for s, e in dict.fromkeys(spans))
        zeroed: str | None = None
        for pattern in self._unkeyed:
            if pattern.prefilter is not None:  # on the text with every digit as 0: fast
                if len(work) < 12:
                    continue
                if zeroed is None:
                    zeroed = work.translate(_DIGITS_AS_ZERO)
                if pattern.prefilter.search(zeroed) is None:
                    continue
            marks = self._run_marks.get(id(pattern))
            spans = (
                pattern.spans_in_runs(work, work.translate(marks))
                if marks is not None and work.isascii()
                else pattern.spans(work)
            )
            found.extend(self.finding(s, e, pattern.kind) for s, e in spans)
        return found


_FEW: Final = 16  # a rule found at more tokens than this runs over the whole text


def _merged(windows: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """``windows`` in order, the overlapping ones joined."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(windows):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


# -- credential names ----------------------------------------------------------------------------


class KeyNameDetector(Detector):
    """Values under credential names, in any syntax in text (:func:`.secret_keys.key_value_spans`)
    and in mappings: a value under a credential name is redacted whole, one under a
    credential-ish name when it looks generated (:meth:`Redactor.key_tier`)."""

    name = "key_name"
    family = "key_name"
    priority = 90
    keywords = KEY_WORDS
    judges_credential_names_only = True

    def find(self, view: TextView, hits: Mapping[str, list[int]]) -> Iterable[Finding]:
        """Values after the credential names the gate found."""
        positions = sorted(p for ps in hits.values() for p in ps)
        return [
            self.finding(s, e, kind)
            for s, e, kind in key_value_spans(view.work, positions, view.text)
        ]

    def judge_value(self, field: Field) -> str | None:
        """The kind of the key name when the value is worth redacting under it."""
        key, value = field.key, field.value
        if type(key) is not str or not has_content(value):
            return None
        tier = field.where.redactor.key_tier(key)
        if tier is None:
            return None
        if tier[0] == 1 or (isinstance(value, str) and looks_random(value)):
            return tier[1]
        return None


def has_content(value: Any) -> bool:
    """Whether a value under a sensitive key is worth redacting (not empty, None or a bool)."""
    return not (value is None or isinstance(value, bool) or (isinstance(value, str) and not value))


# -- tables --------------------------------------------------------------------------------------


class TableDetector(Detector):
    """The values of a table's column whose header names a credential
    (:func:`.secret_tables.table_spans`): CSV, TSV, ``psql``'s aligned output, Markdown. Run
    where a credential name's word occurs (the key names' gate: text without one pays
    nothing), and on text of one line not at all."""

    name = "table"
    family = "table"
    priority = 89
    keywords = KEY_WORDS
    samples = (
        "user,password,role\nbob,«{a14}»,admin",
        "user\tapi_key\nbob\t«{a32}»",
        " usename | passwd\n---------+---------\n bob     | «{a14}»\n(1 row)",
        "| user | token |\n|---|---|\n| bob | «{a20}» |",
        'id,"password",note\n1,"«{a10}»","a, b"',
    )
    negatives = (
        "name,token_count,model\nrun-1,{d4},gpt",
        "| Token | Meaning |\n|---|---|\n| ghp | a personal access token |",
        "user,password\nbob,password\nbob,abc,def",
        "a,b\nuser,password\nbob,{a14}",
    )

    def find(self, view: TextView, hits: Mapping[str, list[int]]) -> Iterable[Finding]:
        """The values under credential-named columns of the tables the gate found a word in."""
        if "\n" not in view.work:
            return ()
        positions = sorted(p for ps in hits.values() for p in ps)
        return [self.finding(s, e, kind) for s, e, kind in table_spans(view.work, positions)]


# -- structures ----------------------------------------------------------------------------------


class KubernetesSecretDetector(Detector):
    """Kubernetes Secrets: every value under ``data:`` / ``stringData:`` of a ``kind: Secret``
    document, as YAML text or as a mapping (base64 or not: all of them are secret)."""

    name = "kubernetes_secret"
    family = "structure"
    priority = 95  # what the document is says more than a key's name
    keywords = ("secret",)

    def find(self, view: TextView, hits: Mapping[str, list[int]]) -> Iterable[Finding]:
        """The values under data: of a YAML kind: Secret document."""
        if "kind" not in view.lowered:
            return ()
        return [self.finding(s, e, k) for s, e, k in kubernetes_secret_spans(view.work)]

    def judge_value(self, field: Field) -> str | None:
        """kubernetes_secret for a value under data or stringData of a Secret."""
        where = field.where
        if (
            where.outer is not None
            and where.outer_key in ("data", "stringData")
            and is_kubernetes_secret(where.outer.mapping)
            and has_content(field.value)
        ):
            return "kubernetes_secret"
        return None

    def judges_every_value(self, outer: MappingView | None, key: Any) -> bool:
        """Every value of the ``data``/``stringData`` of a Secret, however short."""
        return (
            outer is not None
            and key in ("data", "stringData")
            and is_kubernetes_secret(outer.mapping)
        )


def is_kubernetes_secret(value: Mapping[Any, Any]) -> bool:
    """Whether a mapping is a Kubernetes object of ``kind: Secret``."""
    kind = value.get("kind")
    return isinstance(kind, str) and kind.lower() == "secret"


def b64decode(text: str) -> str | None:
    """``text`` (standard base64, padding optional) decoded as UTF-8, or ``None``."""
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
        return raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


# Where a private key's DER body may start: "MI"/"MH"/"MC" (a SEQUENCE of its lengths) or the
# base64 of "openssh-key-v1", not inside a longer base64 run.
# (the literal first, the "not inside a run" test after it: a literal-led search is fast)
_DER_START: Final = re.compile(r"M[IHC](?<![A-Za-z0-9+/]..)[A-Za-z0-9+/]{14}")
_OPENSSH_START: Final = re.compile(r"b3BlbnNzaC1rZXktdjE(?<![A-Za-z0-9+/].{19})")
_KEY_BODY: Final = re.compile(r"[A-Za-z0-9+/=]+(?:(?:\s|\\[nr])+[A-Za-z0-9+/=]+)*")
_MIN_KEY_BODY: Final = 64
_KEY_VERSIONS: Final = frozenset({0, 1})
_AFTER_VERSION: Final = frozenset({0x02, 0x30, 0x04})  # INTEGER, SEQUENCE, OCTET STRING


def der_private_key(blob: str) -> bool:
    """Whether base64 ``blob`` starts as a private key does in DER (PKCS#1 RSA or DSA, SEC 1
    EC, PKCS#8: a SEQUENCE whose first element is the version, 0 or 1, then an INTEGER, an
    AlgorithmIdentifier or an OCTET STRING) or as an OpenSSH private key. Certificates and
    public keys (a SEQUENCE in a SEQUENCE) do not."""
    if blob.startswith("b3BlbnNzaC1rZXktdjE"):  # "openssh-key-v1"
        return True
    raw = b64bytes(blob[:24])
    if raw is None or len(raw) < 8 or raw[0] != 0x30:
        return False
    offset = {0x82: 4, 0x81: 3}.get(raw[1], 2 if raw[1] < 0x80 else 0)
    head = raw[offset : offset + 4] if offset else b""
    return (
        len(head) == 4
        and head[:2] == b"\x02\x01"
        and head[2] in _KEY_VERSIONS
        and head[3] in _AFTER_VERSION
    )


def b64bytes(text: str) -> bytes | None:
    """``text`` (standard base64) decoded, cut to whole groups of four; ``None`` if it is not
    base64."""
    text = text[: len(text) - len(text) % 4]
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


class DerPrivateKeyDetector(Detector):
    """A private key's body without its PEM lines (``MIIEowIBAAKCAQEA...``: the lines
    between ``-----BEGIN`` and ``-----END``, as a file or a field may hold them): a base64
    block of 64+ characters, over several lines or not, that starts as a private key does in
    DER (:func:`der_private_key`)."""

    name = "der_private_key"
    family = "structure"
    priority = 85
    always = True  # looked for only where a long token holds a start: cheap

    def find(self, view: TextView, hits: Mapping[str, list[int]]) -> Iterable[Finding]:
        """Base64 blocks that start as a DER private key."""
        if not view.long_tokens:
            return ()
        found = []
        work = view.work
        cursor = 0
        starts = list(_DER_START.finditer(work))
        if "b3BlbnNzaC1rZXktdjE" in work:
            starts = sorted([*starts, *_OPENSSH_START.finditer(work)], key=lambda m: m.start())
        for match in starts:
            start = match.start()
            if start < cursor:
                continue
            body = _KEY_BODY.match(work, start)
            if body is None:
                continue
            cursor = end = body.end()
            if end - start >= _MIN_KEY_BODY and der_private_key(work[start : start + 24]):
                found.append(self.finding(start, end, "private_key"))
        return found


_DATA_URL: Final = re.compile(r"data:[\w/+.-]*;base64,([A-Za-z0-9+/]{16,}={0,2})")


class DataUrlDetector(Detector):
    """``data:`` URLs whose base64 payload decodes to text holding a secret."""

    name = "data_url"
    family = "encoded"
    priority = 80
    keywords = ("base64,",)

    def find(self, view: TextView, hits: Mapping[str, list[int]]) -> Iterable[Finding]:
        """The payloads of data: URLs that decode to a secret."""
        found = []
        for match in _DATA_URL.finditer(view.work):
            decoded = b64decode(match.group(1))
            if decoded is not None and view.holds_secret(decoded):
                found.append(self.finding(match.start(1), match.end(1), "encoded_secret"))
        return found


_MIN_BLOB: Final = 24  # base64 of a 16-character secret and a little more
_MAX_DECODE: Final = 2  # base64 layers looked through
# Runs are tried from where they start only (the lookbehind): a run too short fails once.
_BLOB: Final = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{24,}={0,2}")


def b64text(blob: str) -> str | None:
    """``blob`` decoded from base64 (standard or URL-safe) when the result is printable text."""
    text = b64decode(blob.replace("-", "+").replace("_", "/"))
    return (
        text if text is not None and all(c.isprintable() or c in "\t\n\r" for c in text) else None
    )


# Base64 of ASCII text: the first character of every group of four encodes a byte under 128,
# so it is one of A-Z, a-f. Any other there, early on, and the blob is not text (a fast no).
_ASCII_FIRST: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef")


class EncodedBlobDetector(Detector):
    """Runs of base64 (two layers deep) that decode to printable text holding a secret. Base64
    of text has both cases, so hex and names are not tried. It gives way to any other finding."""

    name = "encoded_blob"
    family = "encoded"
    priority = 10
    yields = True
    always = True

    def find(self, view: TextView, hits: Mapping[str, list[int]]) -> Iterable[Finding]:
        """The base64 runs that decode to a secret (where nothing was found)."""
        if view.depth >= _MAX_DECODE or not view.long_tokens:
            return ()
        found = []
        # what was found so far, by end, with the least start from each one on: blobs come in
        # order, so one pass tells whether a blob overlaps anything found
        taken = sorted((f.end, f.start) for f in view.findings)
        least = [s for _, s in taken]
        for i in range(len(least) - 2, -1, -1):
            least[i] = min(least[i], least[i + 1])
        index = 0
        for number, token in enumerate(view.long_tokens):
            if len(token) < _MIN_BLOB or token.islower() or token.isupper():
                continue  # no run of it could be base64 of text
            for blob in _BLOB.findall(token):
                if not (blob.islower() or blob.isupper()) and _ASCII_FIRST.issuperset(blob[:64:4]):
                    break
            else:
                continue  # none of its runs could be
            at = view.token_at(number)
            for match in _BLOB.finditer(token):  # each run at its own place in the token
                blob = match.group()
                if blob.islower() or blob.isupper() or not _ASCII_FIRST.issuperset(blob[:64:4]):
                    continue
                start, end = at + match.start(), at + match.end()
                while index < len(taken) and taken[index][0] <= start:
                    index += 1
                if index < len(least) and least[index] < end:
                    continue
                decoded = b64text(blob)
                if decoded is not None and view.holds_secret(decoded):
                    found.append(self.finding(start, end, "encoded_secret"))
        return found


# -- evidence nearby -----------------------------------------------------------------------------

# A token a service's name may vouch for (tried where a run starts only).
_CANDIDATE: Final = re.compile(r"(?<![a-z0-9+_~:|=-])[a-z0-9+_~:|=-]{16,}")
_LABEL: Final = re.compile(r"\[redacted:[a-z0-9_]*\]")
_NAME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_ALPHA_RUN: Final = re.compile(r"[a-z]+")
_BLOB_CHARS: Final = "abcdefghijklmnopqrstuvwxyz0123456789+/"
# Everything but letters and digits as a space: ``str.split`` then gives the words of a text.
_WORDS_APART: Final = str.maketrans(
    {chr(c): " " for c in range(128) if not chr(c).isalnum()}  # ASCII: the text is folded
)
_HEX_ID: Final = re.compile(r"[0-9a-f]+|[0-9A-F]+")
_HINT_VALUE_MAX: Final = 48
_SERVICES: Final = frozenset(w for w, s in near.PROXIMITY_WORDS.items() if s != near.STRONG)


@functools.lru_cache(maxsize=256)
def _named_words(words: frozenset[str]) -> re.Pattern[str]:
    """Where any of ``words`` stands as a word of its own."""
    return re.compile(r"(?<![a-z0-9])(?:" + trie_regex(sorted(words)) + r")(?![a-z0-9])")


def _inside_blob(lowered: str, start: int) -> bool:
    """Whether ``start`` is inside a run of 40+ base64 characters (no word stands there)."""
    before = lowered[max(0, start - 40) : start]  # the run's part before, up to 40
    after = lowered[start : start + 40]  # and from it on
    run = (
        len(before) - len(before.rstrip(_BLOB_CHARS)) + len(after) - len(after.lstrip(_BLOB_CHARS))
    )
    return run >= 40


def strength_at(text: str, lowered: str, start: int) -> int:
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
    if any(w in word for w in near.CREDENTIAL_WORDS) or word in ("pw", "pwd"):
        return near.STRONG
    return near.PROXIMITY_WORDS.get(word, 1) if word else 1


class NearbyEvidenceDetector(Detector):
    """A random-looking token shortly after a credential word or a service's name
    (:mod:`.secret_context`); in a mapping, a value or key no other detector found anything in,
    when the mapping (or the one it is in) names a credential or a service in its keys or short
    values. It gives way to any detector of higher priority."""

    name = "nearby"
    family = "nearby"
    priority = 50
    yields = True
    always = True  # a service's name counts only near a long token: looked for in find
    keywords = tuple(w for w, s in near.PROXIMITY_WORDS.items() if s == near.STRONG)

    def find(self, view: TextView, hits: Mapping[str, list[int]]) -> Iterable[Finding]:
        """Tokens after the credential words the gate found, or a service name."""
        work, lowered = view.work, view.lowered
        positions = [(p, strength_at(work, lowered, p)) for ps in hits.values() for p in ps]
        tokens = view.tokens_lower
        if tokens and _CANDIDATE.search(tokens) is not None:
            named = _SERVICES.intersection(lowered.translate(_WORDS_APART).split())
            if named:  # rare: find where
                positions.extend(
                    (m.start(), strength_at(work, lowered, m.start()))
                    for m in _named_words(frozenset(named)).finditer(lowered)
                )
        if not positions:
            return ()
        positions.sort()
        if "[redacted:" in lowered:  # a label's words are no evidence
            labels = [m.span() for m in _LABEL.finditer(lowered)]
            positions = [(p, s) for p, s in positions if not any(a <= p < b for a, b in labels)]
        return [
            self.finding(s, e, kind)
            for s, e, kind in near.proximity_spans(work, lowered, positions)
            if not view.taken(s, e)
        ]

    def judge_unfound(self, field: Field, text: str) -> str | None:
        """secret when the evidence of the mapping vouches for the text (a base64 body
        wrapped over lines judged as one)."""
        text = near.unwrapped(text)
        if len(text) < 8:
            return None
        if text is field.value and type(field.key) is str and public_tail(field.key):
            return None  # request_id, name, url: identifiers meant to be seen
        if not near.qualifies(text, near.STRONG):
            return None  # not even the strongest evidence would make it a secret
        evidence = self.evidence(field.where)
        return "secret" if evidence and near.qualifies(text, evidence) else None

    def may_judge_unfound(self, text: str) -> bool:
        """Only a text that the strongest evidence would make a secret."""
        return near.qualifies(near.unwrapped(text), near.STRONG)

    def evidence(self, where: MappingView) -> int:
        """The evidence a mapping gives its values and keys: its own, or the mapping's it is
        in (one level up)."""
        own = self._own(where)
        return max(own, self._own(where.outer)) if where.outer is not None else own

    def _own(self, where: MappingView) -> int:
        known = where.memo.get(self.name)
        if known is None:
            known = where.memo[self.name] = self._from_mapping(where)
        return int(known)

    def _from_mapping(self, where: MappingView) -> int:
        """Strong when a key or a short value names a credential (``{"name":
        "DATADOG_API_KEY", "value": ...}``), weak when one names a service, else none."""
        best = 0
        cache = where.redactor.cache
        for key, item in where.mapping.items():
            strength = max(
                self._hint(key, where.redactor, cache.key_hints, True) if type(key) is str else 0,
                self._hint(item, where.redactor, cache.value_hints, False)
                if type(item) is str
                else 0,
            )
            if strength == near.STRONG:
                return strength
            best = max(best, strength)
        return best

    @staticmethod
    def _hint(text: str, redactor: Walker, cache: dict[str, int], as_key: bool) -> int:
        known = cache.get(text)
        if known is not None:
            return known
        if not 2 <= len(text) <= _HINT_VALUE_MAX:
            return 0  # not remembered: long values are mostly unique
        if len(text) >= 16 and _HEX_ID.fullmatch(text) is not None:
            return 0  # a trace, span or commit id, not remembered: no name is bare hex
        # a value that names a credential, or a key the redactor would redact for its name
        if classify(text) is not None and (not as_key or redactor.key_tier(text)):
            strength = near.STRONG
        elif as_key and public_tail(text):
            strength = 0  # docker_version, github_url: a service's name on something public
        else:
            strength = min(near.proximity_strength(text), near.STRONG)
        bounded_put(cache, text, strength)
        return strength


# -- shapes --------------------------------------------------------------------------------------


class ShapeDetector(Detector):
    """Secrets known by their shape alone (:mod:`.secret_shapes`): a vendor-prefixed token, a
    generated password. Tried in the text's long tokens that hold an underscore, a hyphen, a
    ``%`` or a password symbol."""

    name = "shape"
    family = "shape"
    priority = 40
    always = True  # joins what others found in the same run: a part left over is a leak

    def find(self, view: TextView, hits: Mapping[str, list[int]]) -> Iterable[Finding]:
        """The runs of a secret's shape in the text's tokens that may hold one: those of
        :data:`SHORTEST` characters or more (where the text has a ``_`` or a ``-``), and those
        around a password symbol (found by position: most texts have none)."""
        work = view.work
        found: list[Finding] = []
        tried: set[int] = set()
        if "_" in work or "-" in work:
            cursor = 0
            long = [t for t in view.long_tokens if len(t) >= SHORTEST and ("_" in t or "-" in t)]
            for token in long:
                at = work.find(token, cursor)
                cursor = at + len(token)
                tried.add(at)
                self._add(found, work, at, token)
        for symbol in PASSWORD_GATE:
            at = work.find(symbol)
            while at >= 0:
                start = max(work.rfind(c, 0, at) for c in _SPACES) + 1
                run = _NON_SPACE.match(work, start)
                if run is not None and start not in tried and len(run.group()) >= LONG:
                    tried.add(start)
                    self._add(found, work, start, run.group())
                at = work.find(symbol, max(run.end(), at + 1) if run is not None else at + 1)
        return found

    def _add(self, found: list[Finding], work: str, at: int, token: str) -> None:
        found.extend(
            self.finding(at + a, at + b, "secret")
            for a, b in shape_spans(token)
            if not labelled_public(work[max(0, at + a - 80) : at + a])
        )


_SPACES: Final = (" ", "\n", "\t", "\r")
_NON_SPACE: Final = re.compile(r"\S+")


# -- identifiers the model chose -----------------------------------------------------------------

_ID_RUN: Final = re.compile(r"[A-Za-z0-9+/=_.~-]{16,}")
_ID_PREFIX: Final = re.compile(r"[A-Za-z]+[_-]")
_PROVIDER_ID: Final = re.compile(
    r"(?:call|toolu|srvtoolu|fc|tool|chatcmpl|msg|run|resp|item|pyd_ai)_([A-Za-z0-9-]{8,48})"
)
# The prefixes of the call ids providers and frameworks mint: a handle, not a secret.
CALL_ID_PROVIDERS: Final = (
    *(
        f"{p}{sep}"
        for p in ("call", "toolu", "srvtoolu", "tooluse", "fc", "tool", "chatcmpl", "msg")
        for sep in "_-"
    ),
    *(f"{p}_" for p in ("run", "resp", "item", "pyd_ai")),
)
_HEXISH: Final = re.compile(r"[0-9a-fA-F-]+")


def _generated(part: str) -> bool:
    return looks_random(part) and _HEXISH.fullmatch(part) is None


# What a call id looks like where a provider or a framework minted it: a provider's prefix and a
# handle (``call_...``, ``toolu_...``, ``tooluse_...``, ``fc_...``), hex or a UUID, digits, a
# ULID, Mistral's nine letters and digits, a name and a counter (``call_1``,
# ``functions.get_weather:0``), or lower-case words joined as a tool's name is (``e-sync_echo``:
# a part of it that looks generated is found by :func:`identifier_findings`).
_CALL_ID: Final = re.compile(
    r"(?:call|toolu|srvtoolu|tooluse|fc|tool|chatcmpl|msg|run|resp|item|pyd_ai)[_-]"
    r"[A-Za-z0-9_-]{1,64}"
    r"|[0-9a-fA-F-]+"
    r"|[0-9A-HJKMNP-TV-Z]{26}"
    r"|[A-Za-z0-9]{9}"
    r"|[A-Za-z][A-Za-z0-9_]*(?:[.:-][A-Za-z][A-Za-z0-9_]*)*[._:-][0-9]{1,9}"
    r"|[a-z][a-z0-9]*(?:[._:-][a-z0-9]+)+"
)
CALL_ID_MIN: Final = 8  # the shortest secret the redactor looks for


def call_id_shaped(text: str) -> bool:
    """Whether ``text`` has a call id's shape (:data:`_CALL_ID`), or is too short to hold a
    secret. A call id is a handle the provider or framework mints to pair a call with its
    result; the model writes it back, so a value in its place that has no id's shape (words,
    a password, an alphabet, base64) is what a model told to leak a secret would put there."""
    return len(text) < CALL_ID_MIN or _CALL_ID.fullmatch(text) is not None


def identifier_findings(text: str, pipeline: Pipeline) -> Iterator[Finding]:
    """In a name the model chose (a tool name, a call id): every part that looks generated and
    is not an id's usual shape (hex, a UUID, a provider's ``call_...``/``toolu_...``), and
    every known format after a word prefix (``lookup_ghp_...``: the prefix hides the token's
    start from the formats), a provider's prefix included (``call_sk-proj-...``: the handle of
    a provider's id is searched as text of its own by every detector but the shape's, since a
    handle is generated by its nature)."""
    for match in _ID_RUN.finditer(text):
        run = match.group()
        provider = _PROVIDER_ID.fullmatch(run)
        start = match.start()
        if provider is not None:
            base = start + provider.start(1)
            found = pipeline.find(provider.group(1))
            yield from (
                Finding(base + f.start, base + f.end, f.kind, f.detector, 100)
                for f in found
                if f.detector != ShapeDetector.name  # every handle looks generated
            )
            continue
        prefix = _ID_PREFIX.match(run)
        if not _generated(run) and prefix is not None:
            rest = run[prefix.end() :]
            if not _generated(rest):
                found = pipeline.find(rest)
                base = start + prefix.end()
                yield from (
                    Finding(base + f.start, base + f.end, f.kind, f.detector, 100) for f in found
                )
                continue
            start += prefix.end()
        elif not _generated(run):
            continue
        yield Finding(start, match.end(), "secret", "identifier", 100)


@functools.lru_cache(maxsize=32)
def pipeline_of(detectors: tuple[Detector, ...]) -> Pipeline:
    """The pipeline of ``detectors`` (built once per tuple of detector objects)."""
    return Pipeline(detectors)


__all__ += [
    "CALL_ID_PROVIDERS",
    "b64decode",
    "call_id_shaped",
    "has_content",
    "identifier_findings",
    "is_placeholder",
]


# -- the rules against their samples ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RuleProblem:
    """What :func:`validate` found wrong with a rule."""

    kind: str
    problem: str
    sample: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.problem}: {self.sample!r}"


def validate_detectors(detectors: Sequence[Detector]) -> list[RuleProblem]:
    """Every detector against its own samples (:attr:`Detector.samples`,
    :attr:`Detector.negatives`), through its gate: each true sample found whole by the
    detector alone and among all of ``detectors``, no false sample by the detector alone. An
    empty list means they hold."""
    together = Pipeline(detectors)
    problems: list[RuleProblem] = []
    for detector in detectors:
        alone = Pipeline([detector])
        for i, template in enumerate(detector.samples):
            found = sample(template, f"{detector.name}:{i}")
            if not any(f.start <= found.start < found.end <= f.end for f in alone.find(found.text)):
                problems.append(RuleProblem(detector.name, "does not find its sample", found.text))
            elif not any(
                f.start <= found.start < found.end <= f.end for f in together.find(found.text)
            ):
                problems.append(
                    RuleProblem(detector.name, "is not reached among the detectors", found.text)
                )
        for i, template in enumerate(detector.negatives):
            negative = sample(template, f"{detector.name}:-{i}")
            if alone.find(negative.text):
                problems.append(RuleProblem(detector.name, "finds its false sample", negative.text))
    return problems


def validate(patterns: Sequence[SecretPattern], *, require: bool = True) -> list[RuleProblem]:
    """Every rule against its samples, through the gate the redactor runs it behind: each true
    sample must be found whole by the rule alone and among all of ``patterns``, no false sample
    by the rule alone. ``require``: a rule without a true and a false sample is a problem too.
    An empty list means the rules hold."""
    together = Pipeline([FormatDetector(patterns)])
    problems: list[RuleProblem] = []
    for pattern in patterns:
        if require and not pattern.samples:
            problems.append(RuleProblem(pattern.kind, "no true sample", ""))
        if require and not pattern.negatives:
            problems.append(RuleProblem(pattern.kind, "no false sample", ""))
        if not pattern.keywords and pattern.prefilter is None:
            problems.append(RuleProblem(pattern.kind, "runs on every text (no keyword)", ""))
        alone = Pipeline([FormatDetector([pattern])])
        for found in samples_of(pattern):
            own = alone.find(found.text)
            if not any(
                f.kind == pattern.kind and f.start <= found.start < found.end <= f.end for f in own
            ):
                problems.append(RuleProblem(pattern.kind, "does not find its sample", found.text))
            elif not any(
                f.start <= found.start < found.end <= f.end for f in together.find(found.text)
            ):
                problems.append(
                    RuleProblem(pattern.kind, "is not reached among the rules", found.text)
                )
        for negative in negatives_of(pattern):
            if alone.find(negative.text):
                problems.append(RuleProblem(pattern.kind, "finds its false sample", negative.text))
    return problems
