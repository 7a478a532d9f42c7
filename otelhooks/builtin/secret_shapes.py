"""Secrets known by their shape alone, whatever stands around them: three shapes no harmless
text has, each with its own true and false samples (:data:`SHAPE_SAMPLES`, checked by
``tests/test_secret_shapes.py``).

* **A vendor-prefixed token** (:func:`prefixed_token`): a short lower-case prefix of one or two
  parts and an underscore or a hyphen (``ghp_``, ``xoxb-``, ``lin_api_``, ``tskey-api-``), then
  a generated body of 30+ characters. That is the shape services give their tokens so that
  scanners can find them (GitHub's token format, since copied by most vendors); the prefix is
  what tells it from an identifier, the body's length and randomness what tells it from a name.
  Object ids that providers print and mean to be seen (``call_...``, ``msg_...``,
  ``chatcmpl-...``) have bodies of 24 characters or fewer, or a prefix of their own, and are
  left alone.
* **A generated password** (:func:`password_shaped`): 16+ characters of one token holding lower
  case, upper case, digits and a symbol no identifier, path, hash or base64 has (``!``, ``*``,
  ``^``, ``~`` between letters), with the entropy of a generated string: what a password
  generator makes and a person or a program never writes for another purpose.

* **A long URL-safe token** (:func:`urlsafe_token`): 48+ characters of URL-safe base64 with
  a ``-`` or ``_`` inside, both cases and digits in each half and the entropy of random bytes
  (a session or API token), unless the name before it labels it public or an id.

None needs a keyword; the detector that holds them tries a text's long tokens that are long
enough for a vendor's token or hold a password symbol (a test of each token's length and
characters, at C speed), so a text without such a token costs one pass over its tokens.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import unquote

from .secret_keys import DIGEST, charset, entropy, looks_random, made_of_words, public_name

__all__ = [
    "SHAPE_SAMPLES",
    "labelled_public",
    "password_shaped",
    "prefixed_token",
    "shape_spans",
    "urlsafe_token",
]

# A prefix of one or two lower-case parts, then the body (what stands in a token of its own).
_PREFIXED: Final = re.compile(
    r"(?<![A-Za-z0-9_.+/-])([a-z][a-z0-9]{1,11}(?:[_-][a-z0-9]{1,10})?[_-])([A-Za-z0-9_.-]{30,})"
)
# Prefixes of identifiers meant to be seen: model providers' object and call ids, digests and
# versions written with a prefix.
_PUBLIC_PREFIX: Final = re.compile(
    r"(?:call|toolu|srvtoolu|fc|tool|chatcmpl|msg|run|resp|item|pyd|req|evt|file|asst|thread"
    r"|batch|ft|org|proj|user|sha\d*|md5|h1|commit|rev|build|trace|span|v\d*|id|uuid|hash"
    r"|test|example|sample|dummy|fake|mock|placeholder)(?:[_-]|$)"
)
_HEX: Final = re.compile(r"[0-9a-fA-F]+")
_JWT: Final = re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")
# A digest's label right before a run (a RECORD's ``,sha256=``, ``sha512-``): a hash follows.
_DIGEST_LABEL: Final = re.compile(
    r"(?i)(?:h1|sha(?:1|224|256|384|512)?|sha3-\d+|md5|blake2[bs]?|xxh\d+)[:=-]$"
)
# A candidate for the password shape: a run of token characters and the password symbols.
_URLSAFE_RUN: Final = re.compile(r"(?<![A-Za-z0-9+/=_.-])[A-Za-z0-9_-]{48,}(?![A-Za-z0-9+/=.])")
_PASSWORD_RUN: Final = re.compile(r"[A-Za-z0-9!*^~+/=_.%-]{16,}")
_PASSWORD_SYMBOLS: Final = frozenset("!*^~")
_NAME_IS: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=(?!=)")  # pw=... before a password
# What a token needs for the shapes to be tried in it: 33+ characters (a prefix and a body of
# 30) for a prefixed or URL-safe token, one of these characters for a password.
SHORTEST: Final = 33
PASSWORD_GATE: Final = frozenset("!*^~%")


def _mixed(body: str) -> bool:
    return (
        any(c.islower() for c in body)
        and any(c.isupper() for c in body)
        and any(c.isdigit() for c in body)
    )


def prefixed_token(prefix: str, body: str) -> bool:
    """Whether ``prefix`` + ``body`` (a :data:`_PREFIXED` match) is a vendor's token: a prefix
    no public identifier has, and a body that is generated — 30+ characters mixing cases and
    digits that look random, or 32+ hex digits."""
    if _PUBLIC_PREFIX.match(prefix) is not None:
        return False
    core = body.rstrip("._-")
    if len(core) < 30 or DIGEST.search(prefix + core):
        return False
    if _HEX.fullmatch(core) is not None:
        return len(core) >= 32 and not core.isdigit()
    if _JWT.fullmatch(core) is not None:
        return True  # a JWT behind the prefix (GitHub's ``ghs_<id>_<JWT>``)
    pieces = [p for p in re.split(r"[._-]", core) if p]
    return _mixed(core) and any(len(p) >= 16 and looks_random(p) for p in pieces)


def urlsafe_token(run: str) -> bool:
    """Whether ``run`` (48+ characters of the URL-safe base64 alphabet) is a generated token:
    a ``-`` or ``_`` inside it, both cases and digits throughout (in each half), and the
    entropy of random base64 (a name of words and numbers has neither)."""
    if not any(c in "-_" for c in run[1:-1]) or DIGEST.search(run):
        return False  # sha512-...: a digest labelled with its algorithm
    half = len(run) // 2
    if not (_mixed(run[:half]) and _mixed(run[half:])):
        return False
    return entropy(run) >= 4.8 and not made_of_words(run) and not charset(run)


def password_shaped(run: str) -> bool:
    """Whether ``run`` (16+ characters of one token) is a generated password: lower case, upper
    case, digits and one of ``!*^~`` inside it (not only at its ends, where punctuation of the
    text stands), and the entropy of a generated string; URL-encoded (``%21``) or not."""
    if "%" in run:
        run = unquote(run)
    inner = run[1:-1]
    if not any(c in _PASSWORD_SYMBOLS for c in inner) or not _mixed(run):
        return False
    if "://" in run or run.count("/") >= 2:
        return False  # a URL or a path
    letters = sum(c.isalpha() for c in run)
    return letters >= 8 and not charset(run) and entropy(run) >= 3.5 + min(len(run), 48) / 48


def shape_spans(token: str) -> list[tuple[int, int]]:
    """Where in ``token`` (a long whitespace-separated token of a text) the shapes stand."""
    found: list[tuple[int, int]] = []
    if len(token) >= SHORTEST and ("_" in token or "-" in token):
        for match in _PREFIXED.finditer(token):
            if _DIGEST_LABEL.search(token, 0, match.start()) is not None:
                continue
            if prefixed_token(match.group(1), match.group(2)):
                found.append((match.start(), match.end(2) - _trail(match.group(2))))
        for match in _URLSAFE_RUN.finditer(token):
            if urlsafe_token(match.group()) and not any(a <= match.start() < b for a, b in found):
                found.append(match.span())
    if not PASSWORD_GATE.isdisjoint(token):
        for match in _PASSWORD_RUN.finditer(token):
            if _DIGEST_LABEL.search(token, 0, match.start()) is not None:
                continue
            start, end = match.span()
            name = _NAME_IS.match(token, start, end)
            if name is not None:
                start = name.end()  # pw=value: the value alone
            if password_shaped(token[start:end]) and not any(a <= start < b for a, b in found):
                found.append((start, end))
    return found


# The name a value is given just before it (``"publicKey": "``, ``request_id=``).
_NAME_BEFORE: Final = re.compile(r"([A-Za-z0-9_.-]{1,64})[\"']?\s*[:=]\s*[\"']?$")


def labelled_public(before: str) -> bool:
    """Whether the text ``before`` a value ends in a name that labels it public or an id
    (``publicKey``, ``request_id``): meant to be seen, whatever its shape."""
    name = _NAME_BEFORE.search(before)
    return name is not None and public_name(name.group(1))


def _trail(body: str) -> int:
    return len(body) - len(body.rstrip("._-"))


SHAPE_SAMPLES: Final = {
    "prefixed token": (
        (
            "ghp_roZu1InHy_0YmX0mEzOd1OdZSv70NBqcy6Hb",
            "token: acme_live_Zk3mQ9vR2xT7bN4pL8wY1cF6hJ0sD5gK",
            '{"key": "zz-4Hq8Vn2Rk7Tm3Wp9Lx6Bc1Dy5Fg0Sj8Ar2Ek"}',
            "export KEY=vnd_prod_9f3c2a7be41d08c6a5f2e19d7b3c04a86e1f5d92",
            "gha_42_eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJhcHAiLCJpYXQiOjE3MDB9.c2lnbmF0dXJlX2hlcmU",
        ),
        (
            "call_Zk3mQ9vR2xT7bN4pL8wY1cF6",  # a provider's call id (24 characters)
            "msg_01XFDUDYJgAACzvnptvVoYELmsgabcdefgh",  # a provider's message id
            "test_the_redactor_keeps_a_function_name_of_many_words",
            "sha256_9f3c2a7be41d08c6a5f2e19d7b3c04a86e1f5d92a1b2c3d4",
            "build-20260101-0123456789abcdef0123",  # a build id: digits and one case
            "my-package-name-with-many-words-in-it-1.2.3",
            '"integrity": "sha512-3Qv9Kp2Yx8yWbQ1mJ0nS5p6Zx4rT7uV2wA9bC3dE6fG1hI4jK7lM0nO3pQ6"',
        ),
    ),
    "password": (
        (
            "LBq9-H!C-7MVcwQyZQ5ye7w+xukKal1.i.gilZ=VuG+jFhC",
            "db password reset to Zt8*mQ2~vN5!kR7pW3xL",
            "mongodb+srv://svc:Wq7^Rt2!Lm9zXv4kPb6@cluster0.example.net",
            "GET /login?pw=Zt8%2AmQ2~vN5%21kR7pW3xL&next=%2Fhome",
        ),
        (
            "Hello, World! See https://example.com/~user/Path2Doc",
            "if(!isValid(userInput2)){return}",
            "~/.config/Tool2/settings.json",
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!*",
            "Version 2.0 **Important** release!",
            "https%3A%2F%2Fexample.com%2FPath2%2FDoc%3Fq%3DAbc",
        ),
    ),
}
"""For each shape: texts in which it must find a secret, and texts it must leave alone."""
