"""Secrets found by where they are stored: values under credential names.

A value is redacted when its key says it holds a credential, in whatever syntax the text uses:
env files and shell (``DB_PASSWORD=...``, ``export X_TOKEN=...``), INI and properties, YAML
(including ``|`` and ``>`` blocks), JSON (also JSON-escaped inside a string), XML elements, HTTP
headers, URL query strings, command-line flags (``--password x``), CSV cells and source code
assignments (``apiKey := "..."``, ``String secretKey = "...";``, ``$token .= "..."``).

Key names come in two tiers. A *credential name* (``password``, ``api_key``, ``DB_PASSWORD``,
``MAILGUN_API_KEY``, ``client_secret``, ``private_key_id``, ``passphrase``, ``signing_key``,
``access_key``, ``AccountKey``...; the last segments of the name decide, so ``max_tokens``,
``token_type`` and ``password_hash`` are not) has its value redacted whatever it looks like, unless
it is empty, a placeholder (``${VAR}``, ``<token>``, ``****``) or, in code, a reference to
something else (``settings.SECRET_KEY``, ``os.getenv("X")``). A *credential-ish name* (one that
merely contains ``key``, ``api``, ``client``, ``auth``, ``access``, ``token``...; ``client_id``,
``cache_key``) has its value redacted only when the value looks random (high entropy): an
identifier that happens to be secret is caught, ``cache_key: user:42`` is left alone.
"""

from __future__ import annotations

import functools
import math
import operator
import re
from collections import Counter
from collections.abc import Iterator
from typing import Final, NamedTuple


class ValueSpan(NamedTuple):
    """Where a secret value is in a text, and the kind it is reported as."""

    start: int
    end: int
    kind: str


# Words that make a key name worth a look (matched in the lower-cased text).
KEY_WORDS: Final = (
    "pass",
    "pwd",
    "secret",
    "token",
    "key",
    "auth",
    "credential",
    "creds",
    "cookie",
    "session",
    "sid",
    "jwt",
    "dsn",
    "signature",
    "client",
    "ssn",
    "cvv",
    "cvc",
    "card",
    "conn",
    "dockercfg",
    "dockerconfig",
    "private",
)  # every credential name contains one of these (``api_key`` has ``key``)

# The last segment(s) of a normalised key name that make it a credential name, with the kind
# the redaction is reported as.
_CREDENTIAL_TAILS: Final[dict[tuple[str, ...], str]] = {}


def _add(kind: str, *names: str) -> None:
    for name in names:
        _CREDENTIAL_TAILS[tuple(name.split("_"))] = kind


_add(
    "password",
    "password",
    "passwd",
    "pwd",
    "pass",
    "passphrase",
    "pswd",
    "passw",
    "passcode",
    "pass_phrase",
    "pw",
    "db_pass",
    "pgpassword",
    "mysql_pwd",
)
_add(
    "secret",
    "secret",
    "secrets",
    "client_secret",
    "secret_key",
    "sec_key",
    "secret_key_base",
    "app_secret",
    "consumer_secret",
    "webhook_secret",
    "shared_secret",
    "secret_access_key",
    "secret_token",
    "api_secret",
    "jwt_secret",
    "signing_secret",
    "encryption_secret",
    "oauth_secret",
)
_add(
    "token",
    "token",
    "access_token",
    "auth_token",
    "refresh_token",
    "id_token",
    "bearer_token",
    "api_token",
    "session_token",
    "csrf_token",
    "xsrf_token",
    "private_token",
    "security_token",
    "oauth_token",
    "bot_token",
    "app_token",
    "personal_access_token",
    "deploy_token",
    "registration_token",
    "webhook_token",
    "amz_security_token",
    "x_amz_security_token",
    "csrftoken",
    "xsrftoken",
    "authtoken",
    "accesstoken",
    "refreshtoken",
    "oauth_state",
    "oauth_code",
    "code_verifier",
    "authorization_code",
    "auth_code",
    "otp",
    "totp",
    "mfa_code",
)
_add(
    "api_key",
    "api_key",
    "apikey",
    "access_key",
    "private_key",
    "private_key_id",
    "signing_key",
    "encryption_key",
    "master_key",
    "account_key",
    "subscription_key",
    "license_key",
    "app_key",
    "auth_key",
    "client_key",
    "session_key",
    "shared_access_key",
    "shared_key",
    "service_key",
    "admin_key",
    "write_key",
    "ingest_key",
    "sdk_key",
    "deploy_key",
    "secret_access_key",
    "access_key_secret",
    "consumer_key",
    "server_key",
    "encryptionkey",
    "accountkey",
    "privatekey",
    "secretkey",
    "accesskey",
    "sharedaccesskey",
    "master_password",
)
_add("credentials", "credential", "credentials", "creds", "cred")
# a Kubernetes Secret's registry credentials (kubernetes.io/dockerconfigjson, dockercfg)
_add("credentials", "dockerconfigjson", "dockercfg")
_add(
    "auth",
    "auth",
    "authorization",
    "basic_auth",
    "http_auth",
    "proxy_authorization",
    "x_auth",
    "authentication",
)
_add(
    "session",
    "session_id",
    "sessionid",
    "sid",
    "session",
    "cookie",
    "cookies",
    "set_cookie",
    "phpsessid",
    "jsessionid",
    "connect_sid",
    "session_cookie",
    "remember_token",
)
_add("jwt", "jwt", "jwt_token", "id_jwt")
_add(
    "connection_string",
    "dsn",
    "connection_string",
    "conn_str",
    "connstr",
    "connectionstring",
    "database_url_password",
)
_add(
    "signature",
    "signature",
    "sig",
    "shared_access_signature",
    "amz_signature",
    "x_amz_signature",
    "webhook_signature",
)
_add("ssn", "ssn", "social_security_number")
_add(
    "credit_card",
    "card_number",
    "credit_card",
    "credit_card_number",
    "cc_number",
    "cvv",
    "cvc",
    "cvv2",
    "card_cvv",
    "card_cvc",
    "pan",
)

# Segments after a credential word that still name the credential (``password_confirmation``).
_QUALIFIERS: Final = frozenset(
    {
        "confirm",
        "confirmation",
        "new",
        "old",
        "current",
        "plain",
        "plaintext",
        "raw",
        "value",
        "str",
        "string",
        "b64",
        "base64",
        "encoded",
        "enc",
        "repeat",
        "again",
        "text",
        "input",
        "hex",
        "data",
        "1",
        "2",
        "3",
    }
)
_QUALIFIED_WORDS: Final = frozenset(
    {"password", "passwd", "pwd", "secret", "passphrase", "token", "apikey", "credentials"}
)

# Words after a credential name that say the value is a piece of it (``token_part_2``).
_PIECES: Final = frozenset({"part", "parts", "chunk", "piece", "segment", "half", "fragment"})

# A key that merely contains one of these (as a segment) is credential-ish.
_CREDENTIALISH: Final = frozenset(
    {
        "key",
        "keys",
        "api",
        "token",
        "tokens",
        "secret",
        "client",
        "passwd",
        "password",
        "auth",
        "access",
        "credential",
        "credentials",
        "private",
        "signing",
        "apikey",
        "oauth",
        "bearer",
    }
)
# Env-style names that are not credentials though they look like it.
_NOT_SECRETS: Final = frozenset({"PWD", "OLDPWD", "SSH_AUTH_SOCK", "GPG_AGENT_INFO"})
_PUBLIC_TAILS: Final = frozenset(
    {
        "public",
        "publishable",
        "pub",
        "id",
        "ids",
        "name",
        "names",
        "path",
        "file",
        "type",
        "url",
        "uri",
        "length",
        "len",
        "size",
        "count",
        "hash",
        "digest",
        "format",
        "method",
        "mode",
        "prefix",
        "suffix",
        "alias",
        "version",
        "expires",
        "expiry",
        "expiration",
        "ttl",
        "timeout",
        "field",
        "header",
        "param",
        "env",
        "var",
        "policy",
        "scope",
        "scopes",
        "provider",
        "endpoint",
        "dir",
        "location",
        "ref",
        "arn",
        "label",
        "enabled",
        "required",
        "placeholder",
        "hint",
        "prompt",
        "strength",
        "reset",
        "changed",
        "at",
        "limit",
        "usage",
        "used",
        "budget",
        "rotation",
        "algorithm",
        "store",
        "manager",
        "vault",
        "sync",
        "uid",
        "guid",
        "uuid",
        "fingerprint",
        "checksum",
        "sha",
        "sha1",
        "sha256",
        "md5",
        "etag",
        "commit",
        "revision",
        "purl",
    }
)

_CAMEL: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS: Final = re.compile(r"[^a-z0-9]+")


def normalise(name: str) -> tuple[str, ...]:
    """A key name as lower-case segments: ``MAILGUN_API_KEY``, ``mailgunApiKey`` and
    ``mailgun-api-key`` are all ``("mailgun", "api", "key")``."""
    return tuple(s for s in _SEPARATORS.split(_CAMEL.sub("_", name).lower()) if s)


@functools.lru_cache(maxsize=8192)
def classify(name: str) -> tuple[int, str] | None:
    """``(1, kind)`` for a credential name, ``(2, kind)`` for a credential-ish one, else None."""
    if name in _NOT_SECRETS:
        return None
    segments = normalise(name)
    if not segments:
        return None
    parts = len(segments)
    while len(segments) > 1 and (segments[-1].isdigit() or segments[-1] in _PIECES):
        segments = segments[:-1]  # api_key_part_1: one piece of a credential is one too
    if len(segments) < parts and len(segments) >= 1:
        found = classify("_".join(segments))
        return (1, found[1]) if found is not None else None
    while len(segments) > 1 and segments[-1] in _QUALIFIERS and segments[-2] in _QUALIFIED_WORDS:
        segments = segments[:-1]
    for length in (4, 3, 2, 1):
        kind = _CREDENTIAL_TAILS.get(segments[-length:]) if len(segments) >= length else None
        if kind is not None:
            return 1, kind
    if segments[-1] == "key" and len(segments) > 1 and segments[-2] in _PUBLIC_WORDS:
        return None  # public_key, STRIPE_PUBLISHABLE_KEY: meant to be seen
    if (
        segments[-1] == "key"
        and name.isupper()
        and len(segments) > 1
        and segments[-2] not in ("public", "publishable", "primary", "sort", "partition", "cache")
    ):
        return 2, "api_key"  # an env-style *_KEY: a credential when its value looks generated
    if segments[-2:] == ("secret", "id") and len(segments) <= 3:
        return 1, "secret"  # Vault AppRole's secret_id is the secret
    if segments[-1] in _PUBLIC_TAILS and not _credentialish_tail(segments):
        if segments[-1] == "id" and "client" in segments:
            return 2, "secret"  # an OAuth client id: redacted when it looks generated
        return None
    if any(s in _CREDENTIALISH for s in segments):
        return 2, "secret"
    return None


_PUBLIC_WORDS: Final = frozenset({"public", "publishable", "pub", "verifying", "verification"})


@functools.lru_cache(maxsize=2048)
def public_name(name: str) -> bool:
    """Whether a key name labels its value public (``STRIPE_PUBLISHABLE_KEY``, ``publicKey``,
    ``request_id``)."""
    return public_tail(name) or any(s in _PUBLIC_WORDS for s in normalise(name))


@functools.lru_cache(maxsize=4096)
def public_tail(name: str) -> bool:
    """Whether a key name ends in a word for something meant to be seen (``request_id``,
    ``display_name``, ``callback_url``)."""
    segments = normalise(name)
    return bool(segments) and segments[-1] in _PUBLIC_TAILS and not _credentialish_tail(segments)


def _credentialish_tail(segments: tuple[str, ...]) -> bool:
    return segments[-1] in ("key", "token", "secret")


# -- what a value must look like ---------------------------------------------------------------

_PLACEHOLDER: Final = re.compile(
    r"""^(?:
        \$\{?[A-Za-z_][A-Za-z0-9_]*\}? | \$\{[^}]*\}? | \$\d   # $VAR, ${VAR:=x}, ${a.b}, $1
      | [A-Za-z0-9]{0,12}[_-](?:x{4,}|X{4,})    # api_org_XXXXXXXX
      | %\w+%? | \{\w+\}?                  # %VAR%, {Name}
      | \{\{.*\}\} | \$\{\{.*\}\}            # templates
      | <[^<>]{1,64}> | \[[A-Z_ ]{2,40}\]    # <token>, [YOUR KEY]
      | %\(?[A-Za-z_]*\)?[sd]                # %s, %(name)s
      | \*{3,} | (?i:x{4,}) | \.{3,} | \?   # ****, xxxx, XXXXxx, ...
      | \$\(.* | `.*                          # $(command ...) or `command ...`: output
      | (?i:pass(?:word|wd)?|pwd|secret|token|api[_-]?key|key|credentials?)  # the word itself
      | (?i:str|string|bytes|int|integer|number|bool|boolean|secretstr|secretbytes|any|object)
      | (?i:(?:optional|list|dict|union)\[.*\])   # a type, not a value: password: str
      | (?i:null|none|nil|true|false|undefined|changeme_please|redacted|hidden|masked|
          your[\w-]*|\w*[_-]here|changeme\w*|example|sample|dummy|placeholder|todo|tbd|n/a|
          yes|no|on|off)
      | \d{1,2}                            # a flag or a count under a password key
      | [\w-]{0,16}\.{3,} | [\w-]{0,16}…    # sk_test_...: shown cut, by whoever wrote it
      | \$\([^()]*\) | %\w+% | \{\w+\}       # $(cmd), %VAR%, {Name}
      | \[REDACTED[^\]]*\]
    )$""",
    re.VERBOSE,
)
_CODE_REFERENCE: Final = re.compile(
    r"^[A-Za-z_$][\w$]*(?:(?:\.|->|::)[A-Za-z_$][\w$]*)+(?:\(.*)?$"  # settings.SECRET_KEY
    r"|^[A-Za-z_$][\w$.]*\(.*$"  # getenv("X"), get_password()
    r"|^(?:self|this|os|env|process|config|settings|ENV)\b"
)
_URLISH: Final = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//|^/[^/\s]|^\.{1,2}/|^~/", re.IGNORECASE)
_UUID: Final = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)


def entropy(text: str) -> float:
    """Shannon entropy in bits per character."""
    counts = Counter(text)
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


_TOKEN_CHARS: Final = re.compile(r"[A-Za-z0-9+/=_.~-]+")


def looks_random(value: str) -> bool:
    """A value that looks like a generated secret: 16+ characters of one token, letters and
    digits, high entropy; not a UUID, a path, a URL, a version or a plain word."""
    if not 16 <= len(value) <= 1024 or _TOKEN_CHARS.fullmatch(value) is None:
        return False
    if _UUID.match(value) or _URLISH.match(value) or value.isalpha():
        return False
    if value.replace(".", "").replace("-", "").isdigit() or _word_like(value):
        return False
    if _VERSION.match(value) or DIGEST.search(value):
        return False  # v0.0.0-20160628152529-48b4e1c0c4d0, sha256=9rnSZ...: no secret
    return entropy(value) >= 3.5 and not charset(value) and not made_of_words(value)


def charset(value: str) -> bool:
    """An alphabet written out (``0123456789abcdef...``, ``ABCDEFGHIJKLMNOPQRSTUVWXYZ``): most
    neighbours are consecutive characters, as they never are in a generated token."""
    codes = [ord(c) for c in value]
    steps = list(map(operator.sub, codes[1:], codes)).count(1)  # the loops in C
    return steps >= 0.9 * (len(value) - 1)


_VOWELS: Final = frozenset("aeiouAEIOU")
_VOWEL_LETTERS: Final = "aeiouAEIOU"


def _word_like(value: str) -> bool:
    """Made of words (``self.default_section``, ``OrderedDictKeysView``), not generated: the
    letters of words are about 40% vowels, those of a random token under 20%."""
    letters = sum(map(str.isalpha, value))
    if not letters:
        return False
    vowels = sum(map(value.count, _VOWEL_LETTERS)) / letters
    digits = sum(map(str.isdigit, value))
    return (digits == 0 and vowels >= 0.25) or (digits <= 1 and vowels >= 0.3)


# A version (Go's pseudo-versions included: v0.0.0-20160628152529-48b4e1c0c4d0).
_VERSION: Final = re.compile(r"v?\d+(?:\.\d+)+(?:[-+.][0-9A-Za-z]+)*(?:/go\.mod)?$")
# A digest labelled with its algorithm: go.sum's ``h1:``, npm's ``sha512-``, a RECORD's
# ``sha256=``, an image's ``@sha256:``. A hash, not a secret.
DIGEST: Final = re.compile(
    r"(?:^|[@/=])(?:h1|sha(?:1|224|256|384|512)|sha3-\d{3}|md5|blake2[bs]?|xxh\d+)[:=-]", re.I
)
_SEGMENT: Final = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_WORD_VOWELS: Final = frozenset("aeiouyAEIOUY")
_DIGIT_THEN_LOWER: Final = re.compile(r"[0-9][a-z]")


def made_of_words(value: str) -> bool:
    """Whether ``value`` is a name built of words, acronyms and a number or two
    (``Ed25519PrivateKey``, ``rust_pkcs12.load_key_and_certificates``,
    ``self._crypto_key_types``), as code names are and generated tokens are not: its runs of
    letters (split at case changes) are three and a half letters long on average or more; a
    run of four letters or more is a word (a quarter of its letters vowels; twice at most a
    short one may have fewer: ``pkcs``) or an acronym (capitals: up to six, or a third of them
    vowels); at most two runs are digits, and no digit is followed by a small letter."""
    if _DIGIT_THEN_LOWER.search(value):
        return False  # c28wlso: digits inside a word, as in a generated token, not a name
    segments = _SEGMENT.findall(value)
    letters = [s for s in segments if not s.isdigit()]
    if not letters or len(segments) - len(letters) > 2:
        return False
    if sum(len(s) for s in letters) < 3.5 * len(letters):
        return False
    odd = 0
    for segment in letters:
        if len(segment) <= 3 or (segment.isupper() and len(segment) <= 6):
            continue
        vowels = sum(c in _WORD_VOWELS for c in segment)
        if segment.isupper():
            if vowels < 0.35 * len(segment):
                return False
        elif vowels < 0.25 * len(segment):
            if len(segment) > 5 or odd == 2:
                return False
            odd += 1
    return True


def is_placeholder(value: str) -> bool:
    """Whether ``value`` is what people write where a secret goes (``$VAR``, ``${VAR}``,
    ``<token>``, ``%VAR%``, ``your-api-key``, ``changeme``, ``xxxx``, ``sk_test_...``)."""
    return _PLACEHOLDER.match(value.strip()) is not None


def worth_redacting(value: str, tier: int, *, code: bool) -> bool:
    """Whether a value found under a key of ``tier`` is a secret to redact. ``code``: the value
    stood unquoted after an assignment with spaces around it, where it may name another
    variable instead of being one."""
    value = value.strip()
    if not value or _PLACEHOLDER.match(value) or not any(c.isalnum() for c in value):
        return False
    if tier == 2:
        return looks_random(value)
    return not (code and _CODE_REFERENCE.match(value))


# -- finding key/value pairs in text -----------------------------------------------------------

# a key's characters (a string, for str.strip: the run around a key word is stripped off)
_KEY_CHARS: Final = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-$@"
_MAX_KEY: Final = 80
_AFTER_KEY: Final = frozenset("\"'`\\ \t:=,(>?+.!\r\n")  # what may follow a key
_OPERATOR: Final = re.compile(
    r"""(?P<close>\\?["'`])?                    # the key's closing quote, maybe escaped
        (?P<type>[ \t]+[A-Za-z_][\w.*\[\]]*(?=[ \t]*=))?  # Go: var apiToken string = "..."
        [ \t]*
        (?P<op>:::=|::=|:=|\?=|\+=|\.=|=>|=(?!=)|:(?!//|:)|,|\(|>)
        [ \t]*""",
    re.VERBOSE,
)
_QUOTED: Final = re.compile(
    r"""\\"(?P<e>(?:[^"\\]|\\(?!")|\\\\)*?)\\"   # \"...\" (JSON inside a JSON string)
      | "(?P<d>(?:[^"\\\n]|\\.)*)"
      | '(?P<s>(?:[^'\\\n]|\\.)*)'
      | `(?P<b>[^`]*)`""",
    re.VERBOSE,
)
_UNQUOTED: Final = re.compile(r"(?:[^\s\"'`;,&<>)\]}|\\]|\|(?=[^\s|]))+")  # a|b: one value
_TO_EOL: Final = re.compile(r"[^\r\n]*")
_BLOCK: Final = re.compile(r"[|>][-+]?[ \t]*\r?\n")
_XML_VALUE: Final = re.compile(r"\s*([^<]*?)\s*</")


PLACEHOLDER: Final = "[REDACTED:"  # how every replacement starts (redaction.redacted)


def key_around(text: str, pos: int) -> tuple[int, int]:
    """Where the run of key characters (letters, digits, ``_.-$@``) through ``pos`` starts and
    ends, looked for up to :data:`_MAX_KEY` characters each way from ``pos``."""
    before = text[max(0, pos - _MAX_KEY) : pos]
    after = text[pos : pos + _MAX_KEY]
    return (
        pos - len(before) + len(before.rstrip(_KEY_CHARS)),
        pos + len(after) - len(after.lstrip(_KEY_CHARS)),
    )


def key_value_spans(
    text: str, positions: list[int], original: str | None = None
) -> Iterator[ValueSpan]:
    """Value spans under credential names; ``positions`` are where a key word occurs.
    ``original``: the text before JSON escapes were read as line breaks (``text`` is read with
    them); an unquoted value goes on over escaped line breaks there (a PEM key in an env
    file: ``KEY=MIIE...\\nuks3...``)."""
    seen_keys: set[int] = set()
    for pos in positions:
        start, end = key_around(text, pos)
        if start in seen_keys:
            continue
        seen_keys.add(start)
        if end < len(text) and text[end] not in _AFTER_KEY:
            continue  # no assignment can follow (``/api/items``)
        raw = text[start:end]
        key = raw.strip(".-$@")
        if not key or (end - start) >= _MAX_KEY:
            continue
        found = classify(key)
        if found is None:
            continue
        span = _value_after(text, start, end, raw)
        if span is None:
            continue
        vstart, vend, code, loose = span
        if original is not None and original.startswith("\\n", vend):
            vend = _escaped_lines(original, vend)
        if text.startswith(PLACEHOLDER, vstart):
            continue  # already redacted: redacting twice changes nothing
        value = text[vstart:vend]
        tier = found[0]
        if loose and not looks_random(value.strip()):  # CSV cell or call argument: be sure
            continue
        if code and _code_expression(value, key, text[vend : vend + 3]):
            continue  # token = line[start:pos], password = password + pad
        if (not vstart or text[vstart - 1] not in "\"'`") and _EXPRESSION.match(value):
            continue  # password=parts['password'], password: SecretStr('**********')
        if normalise(value) == normalise(key):
            continue  # CLIENT_KEY = "CLIENT_KEY": a name repeated, not a value
        if worth_redacting(value, tier, code=code):
            yield ValueSpan(vstart, vend, found[1])


_ESCAPED_LINE: Final = re.compile(r"(?:\\n[A-Za-z0-9+/=]+)+")


def _escaped_lines(original: str, end: int) -> int:
    """Where a value that goes on over escaped line breaks of base64 (``\\nuks3...``)
    ends."""
    more = _ESCAPED_LINE.match(original, end)
    return more.end() if more is not None else end


_IDENTIFIER: Final = re.compile(r"[(\[]*[A-Za-z_][\w.]*(?:[\[(].*)?")
_CONTINUES: Final = re.compile(r"\s*(?:[-+*/%|&]|=(?!=)|\bor\b|\band\b|\bif\b)|[\[(.]")
# An unquoted value that is code whatever the spacing: a call or a subscript
# (``password=parts['password']``, ``signature=sign(msg)``).
_EXPRESSION: Final = re.compile(r"[A-Za-z_][\w.]*[\[(]")


def _code_expression(value: str, key: str, after: str) -> bool:
    """Whether an unquoted value after a spaced ``=`` reads as code: a name that the key
    repeats, an expression that goes on, or a constant's or a variable's name made of words."""
    if _IDENTIFIER.fullmatch(value) is None or looks_random(value.strip("([")):
        return False
    name = value.strip("([").split("[", 1)[0].split("(", 1)[0]
    if name.lower() in key.lower() or any(c in value for c in "[(") or _CONTINUES.match(after):
        return True
    return "_" in name or "." in name or name.isupper() or (name.islower() and _word_like(name))


def _value_after(text: str, kstart: int, kend: int, raw: str) -> tuple[int, int, bool, bool] | None:
    """The value span after a key, whether it may be a code reference, and whether the pairing
    was loose (a comma or a parenthesis): ``None`` when no value follows."""
    before = text[kstart - 1] if kstart else "\n"
    if before == "<":  # <apiToken>value</apiToken>
        if kend < len(text) and text[kend] == ">":
            match = _XML_VALUE.match(text, kend + 1)
            if match is not None and match.group(1):
                return match.start(1), match.end(1), False, False
        return None
    if raw.startswith("-") and kend < len(text) and text[kend] in " \t":  # --password x
        value = _UNQUOTED.match(text, kend + 1)
        if value is not None and raw.startswith("--"):
            return value.start(), value.end(), False, False
        return None
    if kend < len(text) and text[kend] in " \t" and _DOCKER_ENV.search(text, 0, kstart):
        return _docker_env_value(text, kend)  # Dockerfile: ENV NAME value
    match = _OPERATOR.match(text, kend)
    if match is None:
        return None
    op = match.group("op")
    if op == ">" and not match.group("close"):
        return None
    pos = match.end()
    loose = op in (",", "(")
    block = _BLOCK.match(text, pos) if op == ":" else None
    if block is not None:  # YAML | or > block: the more-indented lines that follow
        line_start = text.rfind("\n", 0, kstart) + 1
        return _yaml_block(text, block.end(), text[line_start] in "+-")
    quoted = _QUOTED.match(text, pos)
    if quoted is not None:
        group = next(g for g in ("e", "d", "s", "b") if quoted.group(g) is not None)
        return quoted.start(group), quoted.end(group), False, loose
    if op == ":":
        line = _TO_EOL.match(text, pos)
        assert line is not None
        rest = line.group().split(" #", 1)[0].rstrip().rstrip(",;")
        if not rest or " " in rest or rest.startswith(("{", "[")):
            return None  # prose, a nested mapping, a flow sequence
        return pos, pos + len(rest), False, loose
    unquoted = _UNQUOTED.match(text, pos)
    if unquoted is None:
        return None
    spaced = pos > kend + 1 and text[pos - 1] in " \t"
    return unquoted.start(), unquoted.end(), spaced and op not in (",", "("), loose


# A Dockerfile's ``ENV`` before a key (``ENV NAME value``; also in an image's history).
_DOCKER_ENV: Final = re.compile(r"(?:^|[\"']|#\(nop\))[ \t]*ENV[ \t]+\Z", re.MULTILINE)


def _docker_env_value(text: str, kend: int) -> tuple[int, int, bool, bool] | None:
    """The value of ``ENV NAME value``: quoted, or up to the end of the line."""
    pos = kend
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    quoted = _QUOTED.match(text, pos)
    if quoted is not None:
        group = next(g for g in ("e", "d", "s", "b") if quoted.group(g) is not None)
        return quoted.start(group), quoted.end(group), False, False
    value = _UNQUOTED.match(text, pos)
    return (value.start(), value.end(), False, False) if value is not None else None


def _yaml_block(text: str, start: int, diff: bool = False) -> tuple[int, int, bool, bool] | None:
    """The body of a YAML ``|`` or ``>`` block starting at ``start``: the lines indented more
    than its key. In a unified diff (``diff``: the key's line starts with ``+`` or ``-``, or
    the body's first line does, then a space) each line's first character is the diff's, not
    the document's: the body is found as it is without it, over lines that stay in the diff."""
    lines = text[start:].split("\n")
    first = lines[0] if lines else ""
    diff = diff or (first[:1] in ("+", "-") and first[1:2] in (" ", "\t"))
    skip = 1 if diff else 0
    body = first[skip:]
    indent = len(body) - len(body.lstrip()) if body.strip() else 0
    if indent == 0:
        return None
    end = start
    for line in lines:
        if diff and line[:1] not in ("+", "-", " "):
            break  # the hunk, or the diff, ends
        content = line[skip:]
        if content.strip() and len(content) - len(content.lstrip()) < indent:
            break
        end += len(line) + 1
    end = min(end, len(text))
    while end > start and text[end - 1] in "\r\n \t":
        end -= 1
    return start + skip + indent, end, False, False


# -- Kubernetes Secrets written as YAML ----------------------------------------------------------

_K8S_KIND: Final = re.compile(r"(?im)^\s*kind:[ \t]*[\"']?secret[\"']?[ \t]*$")
_K8S_DATA: Final = re.compile(r"(?m)^([ \t]*)(?:data|stringData):[ \t]*\r?\n")
_K8S_ITEM: Final = re.compile(
    r"(?m)^([ \t]+)([\w.-]+):[ \t]*(?:[|>][-+]?[ \t]*\r?\n[ \t]+)?[\"']?([^\s\"'#]+)[\"']?"
)


def kubernetes_secret_spans(text: str) -> Iterator[ValueSpan]:
    """Every value under ``data:`` / ``stringData:`` of a YAML document of ``kind: Secret``
    (base64 or not: all of them are secret by definition)."""
    if _K8S_KIND.search(text) is None:
        return
    for data in _K8S_DATA.finditer(text):
        indent = len(data.group(1).expandtabs(4))
        pos = data.end()
        for item in _K8S_ITEM.finditer(text, pos):
            if (
                item.start() != pos
                and text[pos : item.start()].strip("\r\n \t")
                and not text[pos : item.start()].lstrip().startswith("#")
            ):
                break
            if len(item.group(1).expandtabs(4)) <= indent:
                break
            value = item.group(3)
            if value and not _PLACEHOLDER.match(value) and not value.startswith("{{"):
                yield ValueSpan(item.start(3), item.end(3), "kubernetes_secret")
            line_end = text.find("\n", item.end())
            pos = len(text) if line_end < 0 else line_end + 1
