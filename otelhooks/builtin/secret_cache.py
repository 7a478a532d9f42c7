"""Every cache of the redactor, in one place: what it remembers, and how much.

The redactor's rules depend on the text alone, so what it learnt about a text or a key name can
be reused. Each cache is a dict with a bound: when it is full it is emptied (the entries are
cheap to learn again, and a redactor must not grow without end in a long-lived process).
"""

from __future__ import annotations

from typing import Final, TypeVar

_K = TypeVar("_K")
_V = TypeVar("_V")

KNOWN_MAX: Final = 8192  # texts remembered by identity, and clean texts by value
CLEAN_MAX_LEN: Final = 256  # clean texts up to this length are remembered by value
NAMES_MAX: Final = 10_000  # key names and short values


class ScanCache:
    """What one redactor remembers (safe to share between threads: a lost update only costs a
    second look).

    * ``known``: texts the redactor returned or found clean, by identity (the result the hook
      produced, seen again as a span attribute or a log field, is not scanned twice);
    * ``clean``: short texts found clean, by value;
    * ``clean_names``: identifiers (tool names, not call ids) found clean by
      :meth:`Redactor.redact_identifier`, by value: a gateway's tool names are a handful, seen on
      every call;
    * ``key_tiers``: the tier of each key name (:meth:`Redactor.key_tier`);
    * ``key_plans``: what each key name needs (see :meth:`Redactor.key_plan`);
    * ``key_hints`` / ``value_hints``: the evidence a mapping's key or short value gives.
    """

    __slots__ = (
        "clean",
        "clean_names",
        "key_hints",
        "key_plans",
        "key_tiers",
        "known",
        "value_hints",
    )

    def __init__(self) -> None:
        self.known: dict[int, str] = {}
        self.clean: dict[str, None] = {}
        self.clean_names: dict[str, None] = {}
        self.key_tiers: dict[str, tuple[int, str] | None] = {}
        self.key_plans: dict[str, int] = {}
        self.key_hints: dict[str, int] = {}
        self.value_hints: dict[str, int] = {}

    def clear(self) -> None:
        """Forget everything (a benchmark that must scan every round anew)."""
        for name in self.__slots__:
            getattr(self, name).clear()

    def is_known(self, text: str) -> bool:
        """Whether ``text`` (this very object) was returned or found clean before."""
        return self.known.get(id(text)) is text

    def remember(self, text: str) -> None:
        """``text`` was returned or found clean: recognise it by identity."""
        known = self.known
        if len(known) >= KNOWN_MAX:
            known.clear()
        known[id(text)] = text

    def remember_clean(self, text: str) -> None:
        """A short ``text`` was found clean: recognise it by value."""
        clean = self.clean
        if len(clean) >= KNOWN_MAX:
            clean.clear()
        clean[text] = None


def bounded_put(cache: dict[_K, _V], key: _K, value: _V) -> None:
    """``cache[key] = value``, emptying the cache first when it holds :data:`NAMES_MAX`."""
    if len(cache) >= NAMES_MAX:
        cache.clear()
    cache[key] = value
