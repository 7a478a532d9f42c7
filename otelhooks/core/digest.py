"""The one canonical digest: what the audit log keeps of a call's arguments, what telemetry shows
instead of a person, what a pin holds of a tool's definition, what an approval is bound to.

A value is first written as canonical JSON (RFC 8785, the JSON Canonicalization Scheme, through
the ``rfc8785`` package): keys sorted by their UTF-16 code units, no whitespace, numbers as
ECMAScript prints them, strings with the minimal escapes. Two values that are the same JSON have
the same bytes, whatever the order of their keys or the spelling of their numbers (``1.0`` and
``1`` are one number). Then:

* :func:`keyed_digest` is an HMAC-SHA256 of those bytes with a secret key (``hmac-sha256:`` and
  64 hex digits). Arguments and identities are small, guessable sets (a four-entry dictionary
  reverses a plain hash of a user name); without the key, the digest tells nothing.
* :func:`content_digest` is a plain SHA-256 (``sha256:`` and 64 hex digits), for content that is
  public anyway and that people compare by hand: a tool's definition.
* :func:`derive_key` gives each use its own key from one secret, so that a digest made for one
  purpose (a pseudonym) is never comparable with one made for another (an argument digest).

**What RFC 8785 cannot represent.** JSON numbers are IEEE 754 doubles there, so an integer
beyond ±(2^53 − 1) has no canonical form (a JavaScript server would round it), and neither have
NaN, the infinities, nor a string holding a lone surrogate. Such values are never rounded and
never refused: the digest then covers a *tagged* form, in a domain of its own (its bytes start
with a NUL, which no JSON text does), in which every string becomes ``"s:<text>"``, every such
integer ``"n:<decimal digits>"``, a non-finite float ``"f:nan"``, ``"f:inf"`` or ``"f:-inf"``
and a string with a lone surrogate ``"u:<hex of its UTF-8 with surrogates>"``. The tagged form is
one-to-one, so two different values never share a digest: 2^53 + 1 and 2^53 differ, and neither
equals the string ``"9007199254740993"``. Anything else that is not JSON (bytes, sets, objects)
raises :class:`NotCanonical`. :func:`canonical` itself is strict: it raises for all of these.

Pure functions of their inputs; nothing here reads files, clocks or the environment.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from collections.abc import Mapping
from typing import Any, Final

import rfc8785

__all__ = [
    "CONTENT_PREFIX",
    "KEYED_PREFIX",
    "NotCanonical",
    "canonical",
    "content_digest",
    "derive_key",
    "digest_input",
    "keyed_digest",
    "pseudonym",
]

CONTENT_PREFIX: Final = "sha256:"
KEYED_PREFIX: Final = "hmac-sha256:"
SAFE_INTEGER: Final = 2**53 - 1
"""The largest integer RFC 8785 represents (and its negation the smallest)."""

_TAGGED: Final = b"\x00otelhooks-tagged-json\x00"


class NotCanonical(ValueError):
    """A value that has no canonical JSON form (see the module's docs for what is tagged)."""


def canonical(value: Any) -> bytes:
    """``value`` as RFC 8785 canonical JSON (UTF-8). Tuples are arrays; mapping keys must be
    strings. Raises :class:`NotCanonical` for what RFC 8785 cannot represent."""
    try:
        return rfc8785.dumps(value)  # dicts, lists, tuples and scalars as they are
    except rfc8785.CanonicalizationError:
        pass
    try:  # other mappings (a read-only view of arguments), or not JSON at all
        return rfc8785.dumps(_plain(value))
    except rfc8785.CanonicalizationError as exc:
        raise NotCanonical(str(exc)) from None


def digest_input(value: Any) -> bytes:
    """The bytes every digest here is computed over: :func:`canonical` when the value has a
    canonical form, else the tagged form in its own domain (see the module's docs)."""
    try:
        return canonical(value)
    except NotCanonical:
        return _TAGGED + rfc8785.dumps(_tagged(value))


def content_digest(value: Any) -> str:
    """``sha256:`` and the hex SHA-256 of the value's canonical JSON (for public content)."""
    return CONTENT_PREFIX + hashlib.sha256(digest_input(value)).hexdigest()


def keyed_digest(key: bytes, value: Any) -> str:
    """``hmac-sha256:`` and the hex HMAC-SHA256, with ``key``, of the value's canonical JSON."""
    if not key:
        raise ValueError("a keyed digest needs a non-empty key")
    return KEYED_PREFIX + hmac.new(key, digest_input(value), hashlib.sha256).hexdigest()


def derive_key(secret: bytes, purpose: str) -> bytes:
    """A key for one ``purpose`` (``"audit chain"``, ``"arguments"``, ``"pseudonym"``, …) from
    one secret: HMAC-SHA256(secret, purpose). Keys of different purposes are independent."""
    if not secret:
        raise ValueError("a key is derived from a non-empty secret")
    return hmac.new(secret, b"otelhooks key for: " + purpose.encode(), hashlib.sha256).digest()


def pseudonym(key: bytes, *parts: str | None, length: int = 16) -> str:
    """A stable pseudonym of a person or client named by ``parts`` (issuer, subject, …): the
    first ``length`` hex digits of their keyed digest. Without the key it cannot be reversed by
    trying names."""
    return keyed_digest(key, list(parts))[len(KEYED_PREFIX) : len(KEYED_PREFIX) + length]


# -- the two forms --------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """``value`` with tuples as lists and any mapping as a dict (what ``rfc8785`` walks)."""
    if isinstance(value, Mapping) and not isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise NotCanonical(f"{type(value).__name__} is not a JSON value")


def _tagged(value: Any) -> Any:
    """The one-to-one tagged form of a value that has no canonical form."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return _tagged_text(value)
    if isinstance(value, int):
        return value if -SAFE_INTEGER <= value <= SAFE_INTEGER else f"n:{value}"
    if isinstance(value, float):
        if math.isnan(value):
            return "f:nan"
        if math.isinf(value):
            return "f:inf" if value > 0 else "f:-inf"
        return value
    if isinstance(value, Mapping):
        items: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotCanonical(f"an object key must be a string, not {type(key).__name__}")
            items[_tagged_text(key)] = _tagged(item)
        return items
    if isinstance(value, (list, tuple)):
        return [_tagged(v) for v in value]
    raise NotCanonical(f"{type(value).__name__} is not a JSON value")


def _tagged_text(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "u:" + text.encode("utf-8", "surrogatepass").hex()
    return "s:" + text
