"""The secret formats the redactor knows, as services document them, each with its own samples.

Each :class:`SecretPattern` finds one kind of token wherever it appears (under any key, in any
text). ``keywords`` are literal parts every match contains (matched against the lower-cased
text); the redactor runs a pattern only where one of its keywords occurs, so a clean text costs
one scan whatever the number of rules. Credentials without a recognisable format (a password, a
Datadog or Cohere key) are found by the key they are stored under instead: see
:mod:`otelhooks.builtin.secret_keys`.

**Every rule carries its own samples**, as gitleaks' rules do: ``samples`` it must find and
``negatives`` (look-alikes) it must leave alone. A sample is a template: ``{a36}`` stands for 36
letters and digits, ``{h32}`` 32 lower-case hex digits, ``{H24}`` upper-case letters and digits,
``{l40}`` lower-case letters and digits, ``{d10}`` digits, ``{s43}`` URL-safe base64, ``{b40}``
base64, ``{z58}`` bech32, ``{u}`` a UUID, filled deterministically (:func:`fill`); ``«...»``
marks the part that is the secret (without it, the whole sample is).
:func:`otelhooks.builtin.secret_detectors.validate` checks every sample against its rule through
the gate the redactor uses, so a rule whose keywords can never let it run, or whose regex has
drifted from its format, is found when the rules load (``tests/test_secret_rules.py``; a redactor
given rules of its own checks them when it is built).
"""

from __future__ import annotations

import base64
import binascii
import random
import re
import string
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .secret_keys import is_placeholder


@dataclass(frozen=True, slots=True)
class SecretPattern:
    """A secret format. ``keywords``: at least one must occur in the lower-cased text for the
    regex to run. ``group``: the part of the match that is replaced (0 = all). ``check``: a
    final test of the matched text (a Luhn check, say). ``prefilter``: for a pattern without
    keywords, a cheap regex that must find something first (on the text with every digit as
    ``0``). ``samples`` / ``negatives``: what it must find and leave alone (see the module)."""

    kind: str
    regex: re.Pattern[str]
    keywords: tuple[str, ...] = ()
    group: int = 0
    check: Callable[[str], bool] | None = None
    prefilter: re.Pattern[str] | None = None
    not_after: re.Pattern[str] | None = None  # a character that may not precede the match
    in_token: bool = False  # the keywords occur inside a 16+ character token (a faster gate)
    at_start: bool = False  # ... where a token segment starts (not after a letter or digit)
    # ``(characters, shortest)``: every match is made of these ASCII characters alone and is
    # at least this long, so in an ASCII text the rule is run over such runs only (see
    # :meth:`spans_in_runs`)
    runs: tuple[str, int] | None = None
    samples: tuple[str, ...] = ()
    negatives: tuple[str, ...] = ()

    def spans(
        self, text: str, pos: int = 0, endpos: int | None = None
    ) -> Iterator[tuple[int, int]]:
        """Where this format occurs in ``text`` (between ``pos`` and ``endpos``): the replaced
        part of each match that passes the rule's checks and is not a placeholder (``Bearer
        <token>``, ``$PASSWORD``)."""
        for match in self.regex.finditer(text, pos, len(text) if endpos is None else endpos):
            span = self._accepted(text, match)
            if span is not None:
                yield span

    def spans_at(self, text: str, lowered: str, word: str) -> Iterator[tuple[int, int]]:
        """:meth:`spans` of a rule every match of which begins with ``word`` (case aside; see
        :func:`leading_word`), tried only where ``word`` is in ``lowered`` (``text`` in lower
        case, of the same length): the same matches as a search of the whole text, which
        tries every position."""
        free = 0
        at = lowered.find(word)
        while at >= 0:
            match = self.regex.match(text, at) if at >= free else None
            if match is not None:
                free = match.end()  # a search goes on after a match, kept or not
                span = self._accepted(text, match)
                if span is not None:
                    yield span
            at = lowered.find(word, at + 1)

    def _accepted(self, text: str, match: re.Match[str]) -> tuple[int, int] | None:
        """The replaced part of ``match``, unless a check of the rule rejects it."""
        begin = match.start()
        if self.not_after is not None and begin and self.not_after.match(text, begin - 1):
            return None
        start, end = match.span(self.group)
        if start == end or text.startswith("[REDACTED:", start):
            return None
        value = match.group(self.group)
        if self.check is not None and not self.check(value):
            return None
        if is_placeholder(value) or (value.endswith(">") and "<" in match.group()):
            return None  # --user "$USER:$PASSWORD", Bearer <token>, -u <user:password>
        return start, end

    def spans_in_runs(self, text: str, marked: str) -> Iterator[tuple[int, int]]:
        """:meth:`spans` over the runs of :attr:`runs`' characters long enough to hold a match:
        ``marked`` is ``text`` with those characters as ``0`` and every other as ``.``
        (:func:`run_marks`). The same matches as a search of the whole text: none can reach
        past its run, and each is read with the characters after its run that a lookahead may
        need."""
        assert self.runs is not None
        shortest = self.runs[1]
        need = "0" * shortest
        at = marked.find(need)
        while at >= 0:
            end = marked.find(".", at + shortest)
            end = len(marked) if end < 0 else end
            for span in self.spans(text, at, min(len(text), end + _RUN_LOOKAHEAD)):
                if span[0] < end:  # a match of the next run, cut short here, is not one
                    yield span
            at = marked.find(need, end)


_RUN_LOOKAHEAD = 8  # characters after a run a rule's lookahead may read


def leading_word(pattern: SecretPattern) -> str | None:
    """The keyword of ``pattern`` every match begins with, when its regex reads ``(?i)``, the
    word, and no alternative at its top level (``(?i)okta.{0,20}?[=:]...``), else ``None``."""
    source = pattern.regex.pattern
    if not source.startswith("(?i)"):
        return None
    for word in pattern.keywords:
        rest = source[4 + len(word) :]
        if (
            word.isascii()
            and word.isalpha()
            and source.startswith(word, 4)
            and rest[:1] not in ("", "*", "+", "?", "{")  # nothing quantifies its last letter
            and not _top_level_bar(rest)
        ):
            return word
    return None


def _top_level_bar(source: str) -> bool:
    """Whether the regex ``source`` has a ``|`` outside its groups and sets."""
    if "[]" in source or "[^]" in source:
        return True  # a set that opens with its own ``]``: not read here, so not trusted
    depth, escaped, in_set = 0, False, False
    for char in source:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_set:
            in_set = char != "]"
        elif char == "[":
            in_set = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            return True
    return False


def run_marks(characters: str) -> dict[int, str]:
    """The table :meth:`SecretPattern.spans_in_runs` marks an ASCII text with."""
    return {c: "0" if chr(c) in characters else "." for c in range(128)}


def luhn_valid(text: str) -> bool:
    """Whether the digits of ``text`` pass the Luhn check (13 to 19 digits)."""
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


def _has_digit_or_upper(text: str) -> bool:
    return any(c.isdigit() or c.isupper() for c in text)


def _generated_after_padding(text: str) -> bool:
    """Whether what follows the run of ``A`` a Twitter bearer token starts with looks
    generated: lower-case letters and digits (or ``%``-escapes) in it, not one letter repeated
    (5,000 ``A`` characters are no token)."""
    rest = text.lstrip("A")
    return (
        len(rest) >= 20
        and any(c.islower() for c in rest)
        and any(c.isdigit() or c == "%" for c in rest)
        and len(set(rest)) >= 8
    )


def _basic_credential(text: str) -> bool:
    """Whether ``text`` is base64 of ``user:password``."""
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    return ":" in raw


def trie_regex(words: Sequence[str]) -> str:
    """A regex matching any of ``words``, shaped as a trie: ``p(?:ass|wd)`` for pass, pwd. A
    word that ends where a longer one goes on matches the shorter one (enough for a gate)."""
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def build(node: dict[str, Any]) -> str:
        if "" in node:
            return ""
        alternatives = [re.escape(char) + build(sub) for char, sub in sorted(node.items())]
        return alternatives[0] if len(alternatives) == 1 else f"(?:{'|'.join(alternatives)})"

    return build(trie)


# The end of a token: not followed by another token character.
_END = r"(?![A-Za-z0-9_\-])"
_B64 = r"A-Za-z0-9+/"
# A password in SQL: quoted (one group: the quote is read before it), or unquoted with a digit
_SQL_VALUE = (
    r"[\"']?((?<=[\"'])[^\"'\n]{1,256}(?=[\"'])|(?<![\w\"'])(?=[^\s\"';,)]*\d)[^\s\"';,)]{8,256})"
)


# A leading "not after a token character" lookbehind would cost a regex its fast literal-prefix
# search; it is taken off the regex and checked on the one character before a match instead.
_LEADING = re.compile(r"^(\(\?i\))?\(\?<!(\[[^\]]*\])\)")


def _p(
    kind: str,
    regex: str,
    *keywords: str,
    group: int = 0,
    context: bool = False,
    inner: bool = False,
    check: Callable[[str], bool] | None = None,
    samples: tuple[str, ...] = (),
    negatives: tuple[str, ...] = (),
) -> SecretPattern:
    """A pattern. ``context``: its keywords are ordinary words (``authorization``, ``machine``)
    found anywhere in the text, not part of a long token. A pattern that starts with "not after
    a token character" has its keywords at the start of a token segment, unless ``inner`` (the
    keyword is further in: ``_live_`` of ``sk_live_...``)."""
    not_after = None
    match = _LEADING.match(regex)
    if match is not None:
        not_after = re.compile(match.group(2))
        regex = (match.group(1) or "") + regex[match.end() :]
    return SecretPattern(
        kind,
        re.compile(regex),
        tuple(k.lower() for k in keywords),
        group,
        not_after=not_after,
        check=check,
        in_token=not context,
        at_start=not_after is not None and not inner and not context,
        samples=samples,
        negatives=negatives,
    )


def _prefixed(
    kind: str,
    prefix: str,
    body: str,
    *keywords: str,
    samples: tuple[str, ...] = (),
    negatives: tuple[str, ...] = (),
) -> SecretPattern:
    """A token that starts with a literal ``prefix`` (which is its keyword) and has ``body``."""
    return _p(
        kind,
        rf"(?<![A-Za-z0-9_]){re.escape(prefix)}{body}{_END}",
        *(keywords or (prefix,)),
        samples=samples,
        negatives=negatives,
    )


PATTERNS: tuple[SecretPattern, ...] = (
    # -- keys and certificates --------------------------------------------------------------
    _p(
        "private_key",
        # a body of base64 after the header (its own header lines first: Proc-Type, DEK-Info),
        # over lines, spaces and escape residue (a JSON string in JSON), to its END line if
        # there is one; or the end of the text right after the header (a key cut there). A
        # header round nothing else (in a table, in code) holds no key.
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----[\s\\]*"
        r"(?:(?:[A-Za-z-]+:[^\n]*\n[\s\\]*)*[A-Za-z0-9+/=]{16}[A-Za-z0-9+/=]*"
        r"(?:[\s\\]+[A-Za-z0-9+/=]+)*(?:[\s\\]*-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----)?"
        r"|…|\Z)",
        "private key",
        context=True,
        samples=(
            "-----BEGIN RSA PRIVATE KEY-----\n«MIIEowIBAAKCAQEA{b64}\n{b64}\n{b40}»\n"
            "-----END RSA PRIVATE KEY-----",
            "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n"
            "DEK-Info: AES-128-CBC,{H32}\n\n«{b64}\n{b64}»\n-----END RSA PRIVATE KEY-----",
            '{"key": "-----BEGIN EC PRIVATE KEY-----\\n«MHcCAQEEI{b40}\\n{b40}»\\n'
            '-----END EC PRIVATE KEY-----\\n"}',
            "-----BEGIN OPENSSH PRIVATE KEY-----\n«b3BlbnNzaC1rZXktdjEAAAAA{b40}»",
            "error: unknown tool '«-----BEGIN RSA PRIVATE KEY-----\\n…»[truncated: 190 chars]'",
        ),
        negatives=(
            "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n"
            "-----END PUBLIC KEY-----",
            "| Asymmetric Private Key | -----BEGIN RSA PRIVATE KEY----- |",
            "_SK_START = b'-----BEGIN OPENSSH PRIVATE KEY-----'",
            "-----BEGIN PRIVATE KEY-----\nNONONONO\n-----END PRIVATE KEY-----",
        ),
    ),
    _p(
        "putty_private_key",
        r"PuTTY-User-Key-File-\d:[\s\S]*?(?:Private-MAC:\s*[0-9a-f]+|\Z)",
        "putty-user-key-file",
        samples=(
            "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPrivate-Lines: 1\n«{b44}»\n"
            "Private-MAC: {h64}",
        ),
        negatives=("PuTTY is a free SSH client: putty.exe -ssh host",),
    ),
    _prefixed(
        "age_secret_key",
        "AGE-SECRET-KEY-1",
        r"[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
        samples=("AGE-SECRET-KEY-1{z58}",),
        negatives=("age1{z58}",),
    ),
    # -- JWTs (signed and unsigned) -----------------------------------------------------------
    _p(
        "jwt",
        r"(?<![A-Za-z0-9_-])(?:eyJ|ewog|ew0K)[A-Za-z0-9_-]{5,}={0,2}\.(?:eyJ|ewog|ew0K)"
        r"[A-Za-z0-9_-]{5,}={0,2}\.[A-Za-z0-9_-]*={0,2}",
        "eyj",
        "ewog",
        "ew0k",
        samples=("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ7{s20}In0.«{s43}»",),
        negatives=("eyJhbGciOiJIUzI1NiJ9 is a base64 header only",),
    ),
    # -- cloud --------------------------------------------------------------------------------
    _p(
        "aws_access_key_id",
        r"(?<![A-Z0-9])(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)"
        r"[A-Z0-9]{16}(?![A-Z0-9])",
        "akia",
        "asia",
        "abia",
        "acca",
        "agpa",
        "aida",
        "aroa",
        "aipa",
        "anpa",
        "anva",
        "apka",
        "a3t",
        samples=("AKIA{H16}",),
        negatives=("AKIA is the prefix of AWS access key ids",),
    ),
    _p(
        "aws_secret_access_key",
        rf"(?i)aws.{{0,24}}?(?:secret|key).{{0,24}}?[=:>]\s*[\"']?([{_B64}]{{40}})(?![{_B64}=])",
        "aws",
        group=1,
        context=True,
        samples=("aws_secret_access_key = «{b40}»",),
        negatives=("aws_region = eu-west-1",),
    ),
    _p(
        "aws_session_token",
        rf"(?<![{_B64}])(?:IQoJb3JpZ2lu|FwoGZXIvYXdz|FQoGZXIvYXdz)[{_B64}]{{100,}}={{0,2}}",
        "iqojb3jpz2lu",
        "fwogzxivyxdz",
        "fqogzxivyxdz",
        samples=("IQoJb3JpZ2luX2VjE{b140}",),
        negatives=("IQoJb3Jp is short",),
    ),
    _p(
        "google_api_key",
        r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}" + _END,
        "aiza",
        samples=("AIza{s35}",),
        negatives=("AIzaSy is how Google API keys begin",),
    ),
    _prefixed(
        "gcp_oauth_client_secret",
        "GOCSPX-",
        r"[A-Za-z0-9_-]{28}",
        samples=("GOCSPX-{s28}",),
        negatives=("GOCSPX-short",),
    ),
    _p(
        "google_oauth_access_token",
        r"(?<![A-Za-z0-9_])ya29\.[0-9A-Za-z_-]{20,}",
        "ya29.",
        samples=("ya29.{s60}",),
        negatives=("ya29 is a prefix",),
    ),
    _p(
        "google_oauth_refresh_token",
        r"(?<![A-Za-z0-9_])1//0[0-9A-Za-z_-]{40,}",
        "1//0",
        samples=("1//0{s60}",),
        negatives=("1//0 at the start",),
    ),
    _p(
        "azure_ad_client_secret",
        r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])",
        "q~",
        inner=True,
        samples=("{a3}8Q~{s34}",),
        negatives=("Q~ alone",),
    ),
    _p(
        "azure_storage_key",
        rf"(?i)(?:AccountKey|SharedAccessKey)\s*=\s*([{_B64}]{{20,}}={{0,2}})",
        "accountkey",
        "sharedaccesskey",
        group=1,
        samples=(
            "DefaultEndpointsProtocol=https;AccountName=demo;AccountKey=«{b86}==»;EndpointSuffix=core.windows.net",
        ),
        negatives=(
            "DefaultEndpointsProtocol=https;AccountName=demo;EndpointSuffix=core.windows.net",
        ),
    ),
    _p(
        "azure_sas_signature",
        r"(?i)[?&;]sig=([A-Za-z0-9%+/=]{30,})",
        "sig=",
        group=1,
        samples=("https://demo.blob.core.windows.net/c/f.txt?sv=2022-11-02&sp=r&sig=«{b43}»%3D",),
        negatives=("https://demo.blob.core.windows.net/c/f.txt?sv=2022-11-02&sp=r",),
    ),
    _p(
        "azure_devops_pat",
        r"(?<![A-Za-z0-9])[A-Za-z0-9]{52}AZDO[A-Za-z0-9]{28}(?![A-Za-z0-9])",
        "azdo",
        inner=True,
        samples=("{a52}AZDO{a28}",),
        negatives=("AZDO pipelines",),
    ),
    _prefixed(
        "alibaba_access_key_id",
        "LTAI",
        r"[A-Za-z0-9]{12,20}",
        samples=("LTAI{a20}",),
        negatives=("LTAI alone",),
    ),
    _prefixed(
        "digitalocean_token",
        "dop_v1_",
        r"[a-f0-9]{64}",
        samples=("dop_v1_{h64}",),
        negatives=("dop_v1_short",),
    ),
    _prefixed(
        "digitalocean_oauth_token",
        "doo_v1_",
        r"[a-f0-9]{64}",
        samples=("doo_v1_{h64}",),
        negatives=("doo_v1_short",),
    ),
    _prefixed(
        "digitalocean_refresh_token",
        "dor_v1_",
        r"[a-f0-9]{64}",
        samples=("dor_v1_{h64}",),
        negatives=("dor_v1_short",),
    ),
    _prefixed(
        "heroku_api_key",
        "HRKU-",
        r"[A-Za-z0-9_-]{20,}",
        samples=("HRKU-{s60}",),
        negatives=("HRKU-1",),
    ),
    _p(
        "flyio_token",
        r"(?<![A-Za-z0-9_])(?:fo1_|fm[12][ar]?_)[A-Za-z0-9+/=_-]{40,}",
        "fo1_",
        "fm1",
        "fm2",
        samples=("fo1_{s43}",),
        negatives=("fo1_short",),
    ),
    _prefixed(
        "netlify_token",
        "nfp_",
        r"[A-Za-z0-9]{36,}",
        samples=("nfp_{a36}",),
        negatives=("nfp_short",),
    ),
    _prefixed(  # the gateway's own tokens (otelhooks mcp token add): ohk_ and 43 URL-safe base64
        "otelhooks_token",
        "ohk_",
        r"[A-Za-z0-9_-]{40,}",
        samples=("ohk_{s43}",),
        negatives=("ohk_ is the prefix of gateway tokens",),
    ),
    _p(
        "cloudflare_origin_ca_key",
        r"(?<![A-Za-z0-9])v1\.0-[a-f0-9]{24}-[a-f0-9]{146}",
        "v1.0-",
        samples=("v1.0-{h24}-{h146}",),
        negatives=("v1.0-beta release notes",),
    ),
    _p(
        "tailscale_key",
        r"(?<![A-Za-z0-9_])tskey-[a-z]+-[A-Za-z0-9]+-[A-Za-z0-9]{16,}" + _END,
        "tskey-",
        samples=("tskey-auth-{a10}CNTRL-{a30}",),
        negatives=("tskey-auth is the prefix",),
    ),
    _p(
        "vault_token",
        r"(?<![A-Za-z0-9_])hv[sbr]\.[A-Za-z0-9_-]{24,}" + _END,
        "hvs.",
        "hvb.",
        "hvr.",
        samples=("hvs.{s90}",),
        negatives=("hvs.short",),
    ),
    _p(
        "terraform_cloud_token",
        r"(?<![A-Za-z0-9])[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}",
        ".atlasv1.",
        inner=True,
        samples=("{a14}.atlasv1.{s67}",),
        negatives=("app.atlasv1.short",),
    ),
    _prefixed(
        "pulumi_token", "pul-", r"[a-f0-9]{40}", samples=("pul-{h40}",), negatives=("pul-request",)
    ),
    # AWS Bedrock API keys: long-term (ABSK + base64 of "BedrockAPIKey-..."), short-term
    _p(
        "aws_bedrock_api_key",
        r"(?<![A-Za-z0-9_])(?:ABSKQmVkcm9ja0FQSUtleS[A-Za-z0-9+/]{60,300}={0,2}"
        r"|bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t[A-Za-z0-9+/=&%._-]*)",
        "absk",
        "bedrock-api-key-",
        samples=("ABSKQmVkcm9ja0FQSUtleS{b120}",),
        negatives=("ABSK is a prefix",),
    ),
    _p(
        "doppler_token",
        r"(?<![A-Za-z0-9_])dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}" + _END,
        "dp.pt.",
        "dp.st.",
        "dp.sa.",
        "dp.ct.",
        "dp.scim.",
        "dp.audit.",
        samples=("dp.pt.{a43}",),
        negatives=("dp.pt.short",),
    ),
    _prefixed(
        "databricks_token",
        "dapi",
        r"[a-fA-F0-9]{32}(?:-\d)?",  # hex, written in either case
        samples=("dapi{h32}", "dapi0A1b2C3d4E5f6A7b8C9d0E1f2A3b4C5d"),
        negatives=("dapi is the prefix",),
    ),
    _p(
        "supabase_token",
        r"(?<![A-Za-z0-9_])(?:sbp_[a-f0-9]{40}|sb_secret_[A-Za-z0-9_-]{20,})",
        "sbp_",
        "sb_secret_",
        samples=("sbp_{h40}",),
        negatives=("sbp_short",),
    ),
    _prefixed(
        "render_api_key",
        "rnd_",
        r"[A-Za-z0-9]{32}",
        samples=("rnd_{a32}",),
        negatives=("rnd_short",),
    ),
    _p(
        "openshift_token",
        r"(?<![A-Za-z0-9_])sha256~[A-Za-z0-9_-]{43}" + _END,
        "sha256~",
        samples=("sha256~{s43}",),
        negatives=("sha256:{h64}",),
    ),
    _p(
        "planetscale_token",
        r"(?<![A-Za-z0-9_])pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.=-]{32,64}",
        "pscale_",
        samples=("pscale_tkn_{s43}",),
        negatives=("pscale_tkn_short",),
    ),
    _prefixed(
        "prefect_api_key",
        "pnu_",
        r"[A-Za-z0-9]{36}",
        samples=("pnu_{a36}",),
        negatives=("pnu_short",),
    ),
    _p(
        "scalingo_token",
        r"(?<![A-Za-z0-9_])tk-us-[A-Za-z0-9_-]{48}",
        "tk-us-",
        samples=("tk-us-{s48}",),
        negatives=("tk-us-short",),
    ),
    _p(
        "yandex_token",
        r"(?<![A-Za-z0-9_])(?:AQVN[A-Za-z0-9_-]{35,38}|YC[A-Za-z0-9_-]{38}|t1\.[A-Z0-9a-z_-]+[=]{0,2}\.[A-Z0-9a-z_-]{86}[=]{0,2})"
        + _END,
        "aqvn",
        "yc",
        "t1.",
        samples=("AQVN{s36}",),
        negatives=("AQVN short",),
    ),
    _prefixed(
        "infracost_api_key",
        "ico-",
        r"[A-Za-z0-9]{32}",
        samples=("ico-{a32}",),
        negatives=("ico-short",),
    ),
    _prefixed(
        "fastly_api_token",
        "fastly_",
        r"[A-Za-z0-9_-]{32}",
        samples=("fastly_{s32}",),
        negatives=("fastly_cdn",),
    ),
    _prefixed(
        "defined_networking_token",
        "dnkey-",
        r"[a-z0-9=_-]{26}-[a-z0-9=_-]{52}",
        samples=("dnkey-{l26}-{l52}",),
        negatives=("dnkey-short",),
    ),
    # -- version control and CI -------------------------------------------------------------
    _p(
        "github_token",
        r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})",
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "github_pat_",
        samples=("ghp_{a36}", "github_pat_{a22}_{a59}", "ghs_{a36}"),
        negatives=("ghp_short", "github_pat_short", "ghs_1"),
    ),
    _p(
        "gitlab_token",
        r"(?<![A-Za-z0-9_])gl(?:pat|dt|ft|soat|rt|ptt|cbt|imt|agent|oas|ffct|wt|cst|sst)-"
        r"[A-Za-z0-9_.\-]{20,}",
        "glpat-",
        "gldt-",
        "glft-",
        "glsoat-",
        "glrt-",
        "glptt-",
        "glcbt-",
        "glimt-",
        "glagent-",
        "gloas-",
        "glffct-",
        "glwt-",
        "glcst-",
        "glsst-",
        samples=("glpat-{s20}", "gldt-{s20}"),
        negatives=("glpat-short", "gldt-x"),
    ),
    _prefixed(
        "gitlab_runner_registration_token",
        "GR1348941",
        r"[A-Za-z0-9_-]{20}",
        samples=("GR1348941{s20}",),
        negatives=("GR1348941",),
    ),
    _p(
        "atlassian_token",
        r"(?<![A-Za-z0-9_])(?:ATATT3|ATCTT3|ATBB)[A-Za-z0-9_\-=]{24,}",
        "atatt3",
        "atctt3",
        "atbb",
        samples=("ATATT3xFfGF0{s180}", "ATBB{a32}"),
        negatives=("ATATT3 short", "ATBB"),
    ),
    _p(
        "circleci_token",
        r"(?<![A-Za-z0-9_])CCI(?:PAT|PRJ)_[A-Za-z0-9]{22}_[a-f0-9]{40}",
        "ccipat_",
        "cciprj_",
        samples=("CCIPAT_{a22}_{h40}",),
        negatives=("CCIPAT_short",),
    ),
    _prefixed(
        "buildkite_token",
        "bkua_",
        r"[a-f0-9]{40}",
        samples=("bkua_{h40}",),
        negatives=("bkua_short",),
    ),
    _p(
        "harness_token",
        r"(?<![A-Za-z0-9_])pat\.[A-Za-z0-9_-]{22}\.[a-f0-9]{24}\.[A-Za-z0-9]{20}",
        "pat.",
        samples=("pat.{s22}.{h24}.{a20}",),
        negatives=("pat.short.x",),
    ),
    _p(
        "harness_token",
        r"(?<![A-Za-z0-9_])sat\.[A-Za-z0-9_-]{22}\.[a-f0-9]{24}\.[A-Za-z0-9]{20}",
        "sat.",
        samples=("sat.{s22}.{h24}.{a20}",),
        negatives=("sat.short.x", "sat. 12 players"),
    ),
    _prefixed(
        "octopus_deploy_key",
        "API-",
        r"[A-Z0-9]{26}",
        samples=("API-{H26}",),
        negatives=("API-KEY",),
    ),
    _prefixed(
        "postman_api_key",
        "PMAK-",
        r"[a-fA-F0-9]{24}-[a-fA-F0-9]{34}",
        samples=("PMAK-{h24}-{h34}",),
        negatives=("PMAK-short",),
    ),
    _p(
        "sonar_token",
        r"(?<![A-Za-z0-9_])sq[uap]_[a-f0-9]{40}" + _END,
        "squ_",
        "sqa_",
        "sqp_",
        samples=("squ_{h40}",),
        negatives=("squ_short",),
    ),
    _p(
        "sourcegraph_token",
        r"(?<![A-Za-z0-9_])sgp_(?:[a-f0-9]{16}_)?[a-f0-9]{40}" + _END,
        "sgp_",
        samples=("sgp_{h16}_{h40}",),
        negatives=("sgp_short",),
    ),
    _p(
        "drone_ci_token",
        r"(?i)drone[_-]?(?:ci)?[_-]?token\W{0,5}([a-z0-9]{32})",
        "drone",
        group=1,
        context=True,
        samples=("drone_token: «{a32}»",),
        negatives=("drone_version: 2",),
    ),
    # -- package registries -----------------------------------------------------------------
    _prefixed(
        "npm_token", "npm_", r"[A-Za-z0-9]{36}", samples=("npm_{a36}",), negatives=("npm_install",)
    ),
    _p(
        "pypi_token",
        r"(?<![A-Za-z0-9_])pypi-AgE[A-Za-z0-9_-]{50,}",
        "pypi-age",
        samples=("pypi-AgEIcHlwaS5vcmc{s70}",),
        negatives=("pypi-AgE short",),
    ),
    _prefixed(
        "rubygems_api_key",
        "rubygems_",
        r"[a-f0-9]{48}",
        samples=("rubygems_{h48}",),
        negatives=("rubygems_org",),
    ),
    _p(
        "docker_hub_token",
        r"(?<![A-Za-z0-9_])dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,}",
        "dckr_pat_",
        "dckr_oat_",
        samples=("dckr_pat_{s27}",),
        negatives=("dckr_pat_x",),
    ),
    _p(
        "nuget_api_key",
        r"(?<![A-Za-z0-9_])oy2[a-z0-9]{43}" + _END,
        "oy2",
        samples=("oy2{l43}",),
        negatives=("oy2 short",),
    ),
    _prefixed(
        "clojars_token",
        "CLOJARS_",
        r"[a-z0-9]{60}",
        samples=("CLOJARS_{l60}",),
        negatives=("CLOJARS_x",),
    ),
    _p(
        "artifactory_token",
        r"(?<![A-Za-z0-9_])(?:AKCp[A-Za-z0-9]{69}|cmVmdGtu[A-Za-z0-9]{56})" + _END,
        "akcp",
        "cmvmdgtu",
        samples=("AKCp{a69}",),
        negatives=("AKCp short",),
    ),
    _prefixed(
        "readme_api_key", "rdme_", r"[a-z0-9]{70}", samples=("rdme_{l70}",), negatives=("rdme_x",)
    ),
    # -- observability ------------------------------------------------------------------------
    _p(
        "grafana_token",
        r"(?<![A-Za-z0-9_])(?:glc_[A-Za-z0-9+/]{32,}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|"
        r"eyJrIjoi[A-Za-z0-9]{70,}={0,2})",
        "glc_",
        "glsa_",
        "eyjrijoi",
        samples=("glc_{a40}==", "glsa_{a32}_{h8}"),
        negatives=("glc_short", "glsa_x"),
    ),
    _p(
        "new_relic_key",
        r"(?<![A-Za-z0-9_])(?:NRAK-[A-Z0-9]{27}|NRII-[A-Za-z0-9_-]{32}|NRJS-[a-f0-9]{19}|"
        r"NRAA-[a-f0-9]{27})" + _END,
        "nrak-",
        "nrii-",
        "nrjs-",
        "nraa-",
        samples=("NRAK-{H27}",),
        negatives=("NRAK-X",),
    ),
    _p(
        "new_relic_key",
        r"(?<![A-Za-z0-9_])[a-f0-9]{36}NRAL" + _END,
        "nral",
        inner=True,
        samples=("{h36}NRAL",),
        negatives=("NRAL alone",),
    ),
    _p(
        "sentry_token",
        r"(?<![A-Za-z0-9_])(?:sntrys_[A-Za-z0-9+/=_]{50,}|sntryu_[a-f0-9]{64})",
        "sntrys_",
        "sntryu_",
        samples=("sntrys_{a80}", "sntryu_{h64}"),
        negatives=("sntrys_x",),
    ),
    _p(
        "sentry_dsn_key",
        r"(?i)https?://([a-f0-9]{32})(?::[a-f0-9]{32})?@[a-z0-9.-]*sentry",
        "sentry",
        group=1,
        samples=("https://«{h32}»@o123456.ingest.sentry.io/4504",),
        negatives=("https://o123456.ingest.sentry.io/4504",),
    ),
    _p(
        "honeycomb_key",
        r"(?<![A-Za-z0-9_])hc[a-z]{2,3}_[A-Za-z0-9]{20,}" + _END,
        "hc",
        samples=("hcaik_{l58}",),
        negatives=("hcaik_x",),
    ),
    _p(
        "dynatrace_token",
        r"(?<![A-Za-z0-9_])dt0[a-zA-Z]\d{2}\.[A-Z0-9]{24}\.[A-Z0-9]{64}",
        "dt0",
        samples=("dt0c01.{H24}.{H64}",),
        negatives=("dt0c01.short",),
    ),
    _p(
        "mapbox_token",
        r"(?<![A-Za-z0-9_])[ps]k\.eyJ1[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}",
        "pk.eyj1",
        "sk.eyj1",
        samples=("sk.eyJ1{s60}.{s22}",),
        negatives=("sk.eyJ1 short",),
    ),
    _p(
        "langsmith_key",
        r"(?<![A-Za-z0-9_])lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}",
        "lsv2_",
        samples=("lsv2_pt_{h32}_{h10}",),
        negatives=("lsv2_pt_short",),
    ),
    _p(
        "slack_token",
        r"(?<![A-Za-z0-9_])(?:xox[abposer]-[0-9A-Za-z-]{10,}|xoxe\.xox[bp]-[0-9A-Za-z-]{10,}|"
        r"xoxe-\d-[A-Za-z0-9]{100,}|xapp-\d-[A-Za-z0-9]+-\d+-[a-f0-9]+)",
        "xox",
        "xapp-",
        samples=("xoxb-{d12}-{d12}-{a24}", "xapp-1-A{H10}-{d13}-{h64}"),
        negatives=("xoxb is a bot token prefix", "xapp-1"),
    ),
    _p(
        "slack_webhook",
        r"(?i)https?://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_+-]+",
        "hooks.slack.com",
        samples=("https://hooks.slack.com/services/T{H8}/B{H8}/{a24}",),
        negatives=("https://slack.com/help/articles/115005265063",),
    ),
    _p(
        "discord_webhook",
        r"(?i)https?://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]+",
        "discord",
        samples=("https://discord.com/api/webhooks/{d18}/{s68}",),
        negatives=("https://discord.com/developers/docs",),
    ),
    _p(
        "telegram_bot_token",
        r"(?<![0-9])\d{8,10}:AA[A-Za-z0-9_-]{33}" + _END,
        ":aa",
        inner=True,
        samples=("https://api.telegram.org/bot«{d10}:AA{s33}»/getMe",),
        negatives=("12:30 AA meeting",),
    ),
    _p(
        "teams_webhook",
        r"(?i)https://[a-z0-9-]+\.webhook\.office\.com/webhookb2/[A-Za-z0-9@/_-]+",
        "webhook.office.com",
        samples=("https://contoso.webhook.office.com/webhookb2/{u}@{u}/IncomingWebhook/{h32}/{u}",),
        negatives=("https://contoso.sharepoint.com/sites/team",),
    ),
    _p(
        "mattermost_token",
        r"(?i)mattermost.{0,20}?[=:]\s*[\"']?([a-z0-9]{26})(?![a-z0-9])",
        "mattermost",
        group=1,
        context=True,
        samples=("mattermost_token = «{l26}»",),
        negatives=("mattermost_url = chat",),
    ),
    # -- payments -----------------------------------------------------------------------------
    _p(
        "stripe_key",
        r"(?<![A-Za-z0-9_])(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{16,}",  # pk_: publishable
        "_live_",
        "_test_",
        "_prod_",
        inner=True,
        samples=("sk_live_{a24}", "rk_test_{a24}"),
        negatives=("sk_live_x", "rk_test"),
    ),
    _prefixed(
        "stripe_webhook_secret",
        "whsec_",
        r"[A-Za-z0-9+/=]{24,}",
        samples=("whsec_{a32}",),
        negatives=("whsec_x",),
    ),
    _p(
        "square_token",
        r"(?<![A-Za-z0-9_])(?:EAAA[A-Za-z0-9_+=-]{60}|sq0atp-[0-9A-Za-z_-]{22}|"
        r"sq0csp-[0-9A-Za-z_-]{43})",
        "eaaa",
        "sq0atp-",
        "sq0csp-",
        samples=("EAAA{s60}", "sq0csp-{s43}"),
        negatives=("EAAA short", "sq0csp-x"),
    ),
    _p(
        "braintree_token",
        r"access_token\$(?:production|sandbox)\$[0-9a-z]{16}\$[0-9a-f]{32}",
        "access_token$",
        samples=("access_token$production${l16}${h32}",),
        negatives=("access_token$production",),
    ),
    _p(
        "shopify_token",
        r"(?<![A-Za-z0-9_])shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}" + _END,
        "shpat_",
        "shpca_",
        "shppa_",
        "shpss_",
        samples=("shpat_{h32}",),
        negatives=("shpat_x",),
    ),
    _p(
        "plaid_token",
        r"(?<![A-Za-z0-9_])(?:access|public)-(?:sandbox|development|production)-"
        r"[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}",
        "-sandbox-",
        "-development-",
        "-production-",
        inner=True,
        samples=("access-sandbox-{u}",),
        negatives=("access-sandbox-guide",),
    ),
    _p(
        "razorpay_key",
        r"(?<![A-Za-z0-9_])rzp_(?:live|test)_[A-Za-z0-9]{14,}",
        "rzp_",
        samples=("rzp_live_{a14}",),
        negatives=("rzp_live",),
    ),
    _p(
        "flutterwave_key",
        r"FLW(?:SEC|PUB)K(?:_TEST)?-[a-h0-9]{32}-X",
        "flwseck",
        "flwpubk",
        samples=("FLWSECK-{h32}-X",),
        negatives=("FLWSECK-x",),
    ),
    _p(
        "shippo_token",
        r"(?<![A-Za-z0-9_])shippo_(?:live|test)_[a-f0-9]{40}",
        "shippo_",
        samples=("shippo_live_{h40}",),
        negatives=("shippo_live_x",),
    ),
    _p(
        "easypost_key",
        r"(?<![A-Za-z0-9_])EZ[AT]K[A-Za-z0-9]{54}" + _END,
        "ezak",
        "eztk",
        samples=("EZAK{a54}",),
        negatives=("EZAK short",),
    ),
    _p(
        "duffel_token",
        r"(?<![A-Za-z0-9_])duffel_(?:test|live)_[A-Za-z0-9_=-]{43}",
        "duffel_",
        samples=("duffel_test_{s43}",),
        negatives=("duffel_test_x",),
    ),
    _p(
        "coinbase_key",
        r"organizations/[a-f0-9-]{36}/apiKeys/[a-f0-9-]{36}",
        "apikeys/",
        samples=("organizations/{u}/apiKeys/{u}",),
        negatives=("organizations/acme/projects/web",),
    ),
    # -- mail and SMS ---------------------------------------------------------------------------
    _p(
        "sendgrid_key",
        r"(?<![A-Za-z0-9_])SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}" + _END,
        "sg.",
        samples=("SG.{s22}.{s43}",),
        negatives=("SG.short",),
    ),
    _p(
        "mailgun_key",
        r"(?<![A-Za-z0-9_])(?:pub)?key-[a-f0-9]{32}" + _END,
        "key-",
        samples=("key-{h32}",),
        negatives=("key-value store",),
    ),
    _p(
        "mailchimp_key",
        r"(?<![A-Za-z0-9_])[a-f0-9]{32}-us\d{1,2}" + _END,
        "-us",
        inner=True,
        samples=("{h32}-us21",),
        negatives=("us21 region",),
    ),
    _p(
        "twilio_key",
        r"(?<![A-Za-z0-9_])SK[a-f0-9]{32}" + _END,
        "sk",
        samples=("SK{h32}",),
        negatives=("SKU 12345",),
    ),
    _p(
        "brevo_key",
        r"(?<![A-Za-z0-9_])x(?:keysib|smtpsib)-[a-f0-9]{64}-[A-Za-z0-9]{16}",
        "xkeysib-",
        "xsmtpsib-",
        samples=("xkeysib-{h64}-{a16}",),
        negatives=("xkeysib-x",),
    ),
    _prefixed(
        "mandrill_key", "md-", r"[A-Za-z0-9_-]{22}", samples=("md-{s22}",), negatives=("md-file",)
    ),
    _p(
        "resend_key",
        r"(?<![A-Za-z0-9_])re_[A-Za-z0-9]{8}_[A-Za-z0-9]{24}" + _END,
        "re_",
        samples=("re_{a8}_{a24}",),
        negatives=("re_compile",),
    ),
    _p(
        "postmark_token",
        r"(?i)x-postmark-(?:server|account)-token:\s*([a-f0-9-]{36})",
        "postmark",
        group=1,
        context=True,
        samples=("X-Postmark-Server-Token: «{u}»",),
        negatives=("X-Postmark-Server-Token: (missing)",),
    ),
    # -- AI APIs ------------------------------------------------------------------------------
    _p(
        "anthropic_api_key",
        r"(?<![A-Za-z0-9_])sk-ant-[A-Za-z0-9_-]{20,}",
        "sk-ant-",
        samples=("sk-ant-api03-{s93}AA",),
        negatives=("sk-ant is the prefix",),
    ),
    _p(
        "openai_api_key",
        r"(?<![A-Za-z0-9_-])sk-(?:proj-|svcacct-|admin-|None-|or-v1-)?[A-Za-z0-9_-]{20,}",
        "sk-",
        samples=("sk-proj-{s74}", "sk-{a20}T3BlbkFJ{a20}", "sk-or-v1-{h64}"),
        negatives=("sk-proj", "task-force", "sk-or"),
    ),
    _p(
        "huggingface_token",
        r"(?<![A-Za-z0-9_])(?:hf_[A-Za-z0-9]{34,}|api_org_[A-Za-z0-9]{34})" + _END,
        "hf_",
        "api_org_",
        samples=("hf_{a34}",),
        negatives=("hf_hub",),
    ),
    _prefixed(
        "groq_api_key", "gsk_", r"[A-Za-z0-9]{52}", samples=("gsk_{a52}",), negatives=("gsk_x",)
    ),
    _prefixed(
        "replicate_token", "r8_", r"[A-Za-z0-9]{37}", samples=("r8_{a37}",), negatives=("r8_x",)
    ),
    _prefixed(
        "perplexity_api_key",
        "pplx-",
        r"[A-Za-z0-9]{48}",
        samples=("pplx-{a48}",),
        negatives=("pplx-x",),
    ),
    _prefixed(
        "xai_api_key", "xai-", r"[A-Za-z0-9]{70,}", samples=("xai-{a80}",), negatives=("xai-x",)
    ),
    _prefixed(
        "fireworks_api_key",
        "fw_",
        r"[A-Za-z0-9]{24}",
        samples=("fw_{a24}",),
        negatives=("fw_update",),
    ),
    _prefixed(
        "pinecone_api_key",
        "pcsk_",
        r"[A-Za-z0-9_]{50,}",
        samples=("pcsk_{a60}",),
        negatives=("pcsk_x",),
    ),
    _prefixed(
        "cerebras_api_key", "csk-", r"[a-z0-9]{48}", samples=("csk-{l48}",), negatives=("csk-x",)
    ),
    _p(
        "elevenlabs_api_key",
        r"(?<![A-Za-z0-9_])sk_[a-f0-9]{48}" + _END,
        "sk_",
        samples=("sk_{h48}",),
        negatives=("sk_x",),
    ),
    # -- productivity and platforms -------------------------------------------------------------
    _prefixed(
        "linear_api_key",
        "lin_api_",
        r"[A-Za-z0-9]{40}",
        samples=("lin_api_{a40}",),
        negatives=("lin_api_x",),
    ),
    _p(
        "airtable_token",
        r"(?<![A-Za-z0-9_])pat[A-Za-z0-9]{14}\.[a-f0-9]{64}" + _END,
        "pat",
        samples=("pat{a14}.{h64}",),
        negatives=("pattern.example",),
    ),
    _p(
        "notion_token",
        r"(?<![A-Za-z0-9_])(?:secret_[A-Za-z0-9]{43}|ntn_[A-Za-z0-9]{40,})" + _END,
        "secret_",
        "ntn_",
        samples=("ntn_{a46}",),
        negatives=("ntn_x",),
    ),
    _prefixed(
        "figma_token",
        "figd_",
        r"[A-Za-z0-9_-]{40,}",
        samples=("figd_{s40}",),
        negatives=("figd_x",),
    ),
    _p(
        "dropbox_token",
        r"(?<![A-Za-z0-9_])sl\.[A-Za-z0-9_-]{130,}",
        "sl.",
        samples=("sl.{s140}",),
        negatives=("sl.short",),
    ),
    _prefixed(
        "contentful_token",
        "CFPAT-",
        r"[A-Za-z0-9_-]{43}",
        samples=("CFPAT-{s43}",),
        negatives=("CFPAT-x",),
    ),
    _prefixed(
        "typeform_token",
        "tfp_",
        r"[A-Za-z0-9_-]{40,}",
        samples=("tfp_{s44}",),
        negatives=("tfp_x",),
    ),
    _p(
        "frameio_token",
        r"(?<![A-Za-z0-9_])fio-u-[A-Za-z0-9_=-]{64}",
        "fio-u-",
        samples=("fio-u-{s64}",),
        negatives=("fio-u-x",),
    ),
    _p(
        "hubspot_token",
        r"(?<![A-Za-z0-9_])pat-(?:na|eu)1-[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}",
        "pat-na1-",
        "pat-eu1-",
        samples=("pat-na1-{u}",),
        negatives=("pat-na1-x",),
    ),
    _p(
        "lob_key",
        r"(?<![A-Za-z0-9_])(?:live|test)_(?:pub_)?[a-f0-9]{35}" + _END,
        "live_",
        "test_",
        samples=("live_{h35}",),
        negatives=("live_stream",),
    ),
    _prefixed(
        "adafruit_key", "aio_", r"[A-Za-z0-9]{28}", samples=("aio_{a28}",), negatives=("aio_x",)
    ),
    _p(
        "twitter_bearer_token",
        r"(?<![A-Za-z0-9])A{20,}[A-Za-z0-9%]{30,}",
        "aaaaaaaaaaaaaaaaaaaa",
        check=_generated_after_padding,
        samples=("AAAAAAAAAAAAAAAAAAAAA{a40}", "AAAAAAAAAAAAAAAAAAAAAMLheAAAAAAA0%2B{a40}"),
        negatives=(
            "AAAA battery",
            "A" * 80,
            "A" * 40 + "B" * 40,
            "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA0",
        ),
    ),
    _p(
        "facebook_token",
        r"(?<![A-Za-z0-9_])EAA[A-Za-z0-9]{100,}",
        "eaa",
        samples=("EAA{a120}",),
        negatives=("EAA short",),
    ),
    _p(
        "firebase_fcm_key",
        r"(?<![A-Za-z0-9_])AAAA[A-Za-z0-9_-]{7}:[A-Za-z0-9_-]{140}",
        "aaaa",
        samples=("AAAA{s7}:{s140}",),
        negatives=("AAAA:short",),
    ),
    _prefixed(
        "onepassword_service_token",
        "ops_",
        r"eyJ[A-Za-z0-9+/=_-]{100,}",
        samples=("ops_eyJ{s150}",),
        negatives=("ops_x",),
    ),
    _p(
        "okta_token",
        r"(?i)okta.{0,20}?[=:]\s*[\"']?(00[A-Za-z0-9_-]{40})(?![A-Za-z0-9_-])",
        "okta",
        group=1,
        context=True,
        samples=("okta_api_token: «00{s40}»",),
        negatives=("okta_org: acme",),
    ),
    _prefixed(
        "authress_key",
        "sc_",
        r"[a-z0-9]{5,30}\.[a-z0-9]{4,6}\.acc[_-][a-z0-9-]{10,32}\.[A-Za-z0-9+/_=-]{30,120}",
        samples=("sc_{l10}.{l5}.acc_{l20}.{s60}",),
        negatives=("sc_x.short",),
    ),
    # -- credentials in general-purpose forms -------------------------------------------------
    _p(
        "connection_string_password",
        r"://[^\s:/?#@\"'<>]*:([^\s@/\"'<>]+)@",
        "://",
        group=1,
        samples=(
            "postgres://app:«{a16}»@db.internal:5432/prod",
            "mongodb+srv://admin:«{a20}»@cluster0.example.mongodb.net/test",
            "redis://:«{a24}»@cache:6379/0",
        ),
        negatives=(
            "postgres://db.internal:5432/prod",
            "mongodb+srv://cluster0.example.mongodb.net/test",
            "redis://cache:6379/0",
        ),
    ),
    _p(
        "bearer_token",
        r"(?i)\bbearer\s+([A-Za-z0-9\-._~+/]{12,}=*)",
        "bearer",
        group=1,
        context=True,
        check=_has_digit_or_upper,
        samples=("Bearer «{s40}»",),
        negatives=("bearer of bad news",),
    ),
    _p(
        "authorization_header",
        r"(?i)\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:basic|bearer|token|digest|"
        r"apikey|api-key|sso-key|ssws|negotiate|ntlm)\s+(?![<{$%\[])([^\s\"',;]{4,})",
        "authorization",
        group=1,
        context=True,
        samples=("Authorization: token «{a40}»",),
        negatives=("Authorization: required",),
    ),
    _p(
        "basic_auth",
        rf"(?<![A-Za-z0-9])[Bb]asic\s+([{_B64}]{{8,}}={{0,2}})(?![{_B64}=])",
        "basic",
        group=1,
        context=True,
        check=_basic_credential,
        samples=("Basic «dXNlcjpQNHNzdzByZCEx»",),
        negatives=("Basic understanding",),
    ),
    _p(
        "cookie_header",
        r"(?i)(?<![\w-])(?:set-)?cookie[\"']?\s*:\s*[\"']?([^\r\n\"'\\]+)",
        "cookie",
        group=1,
        context=True,
        samples=("Cookie: sessionid=«{a32}»; csrftoken={a32}",),
        negatives=("Cookies help us deliver our services.",),
    ),
    _p(
        "curl_user",
        r"(?:\s-u|--user)[ \t=]+[\"']?[^\s:\"']+:([^\s\"']+)",
        "-u",
        "--user",
        group=1,
        context=True,
        samples=("curl -u admin:«{a16}» https://api.example.com",),
        negatives=("curl -u admin https://x",),
    ),
    _p(
        "ldap_bind_password",
        r"\bldap(?:search|modify|add|delete|whoami|passwd|compare|modrdn)\b[^\n]*?\s-w\s+"
        r"[\"']?([^\s\"']+)",
        "ldap",
        group=1,
        context=True,
        samples=("ldapsearch -x -D cn=admin,dc=example,dc=org -w «{a16}» -H ldap://ldap.internal",),
        negatives=("ldapsearch -x -W -H ldap://ldap.internal",),
    ),
    _p(
        "netrc_password",
        r"(?i)\bmachine\s+\S+(?:\s+login\s+\S+)?\s+password\s+(\S+)",
        "machine",
        group=1,
        context=True,
        samples=("machine api.example.com login bot password «{a20}»",),
        negatives=("machine learning login page",),
    ),
    # SQL that sets a password: MySQL's and Oracle's ``IDENTIFIED [WITH plugin] BY 'x'``
    # (Oracle's unquoted too, then with a digit and 8+ characters: ``identified by their
    # email`` is prose), and the hash of ``IDENTIFIED BY PASSWORD '*...'``
    _p(
        "password",
        rf"(?i)identified\s+(?:with\s+[\w'\"]+\s+)?by\s+(?:password\s+)?(?!values\b|random\b)"
        rf"{_SQL_VALUE}",
        "tified",  # in every match; a word of a first letter the gate has (``token``'s t)
        group=1,
        context=True,
        samples=(
            "CREATE USER 'bob'@'%' IDENTIFIED BY '«{a16}»';",
            "ALTER USER bob IDENTIFIED WITH mysql_native_password BY '«{a12}»'",
            'CREATE USER app IDENTIFIED BY "«{a14}»" DEFAULT TABLESPACE users;',
            "create user scott identified by «tiger2024x»;",
        ),
        negatives=(
            "Users are identified by their email address.",
            "ALTER USER bob IDENTIFIED BY RANDOM PASSWORD",
        ),
    ),
    # PostgreSQL's ``[WITH] [ENCRYPTED] PASSWORD 'x'`` (CREATE/ALTER ROLE and USER), SQL
    # Server's ``PASSWORD = 'x'``, MySQL's ``SET PASSWORD [FOR u] = [PASSWORD(]'x'``: a
    # password followed by a single-quoted SQL string
    _p(
        "password",
        r"(?i)password(?:\s+for\s+\S+?)?(?:\s*=\s*|\s+)(?:password\s*\(\s*)?'([^'\n]{1,256})'",
        "password",
        group=1,
        context=True,
        samples=(
            "CREATE USER bob WITH PASSWORD '«{a14}»';",
            "ALTER ROLE app ENCRYPTED PASSWORD '«{a16}»' VALID UNTIL 'infinity';",
            "SET PASSWORD FOR 'bob'@'localhost' = '«{a12}»';",
            "SET PASSWORD = PASSWORD('«{a12}»');",
            "CREATE LOGIN app WITH PASSWORD = '«{a12}»', CHECK_POLICY = OFF",
        ),
        negatives=(
            "the password field is required",
            "ALTER ROLE app PASSWORD NULL;",
            "password = 'password'",
        ),
    ),
    SecretPattern(
        "credit_card",
        re.compile(
            r"(?:4\d{3}|5[1-5]\d{2}|2[2-7]\d{2}|3[47]\d{2}|3[0689]\d{2}|"
            r"6(?:011|5\d{2}|4[4-9]\d|2\d{2})|35\d{2})(?:[ -]?\d){9,15}(?![\w-]|\.\d)"
        ),
        check=luhn_valid,
        not_after=re.compile(r"[\w.-]"),
        runs=("0123456789 -", 13),  # four digits, then nine or more, each after a space or -
        # on the text with every digit as 0: a literal-led search, fast
        prefilter=re.compile(r"0000[ -]?0000[ -]?0000"),
        samples=("card «4111 1111 1111 1111» on file", "amex «378282246310005»"),
        negatives=("order 4111 1111 1111 1112", "id 378282246310006"),
    ),
)
"""The token formats, in the order they are tried (the more specific first)."""


# -- the rules' samples ---------------------------------------------------------------------------

_ALPHABETS = {
    "a": string.ascii_letters + string.digits,
    "h": "0123456789abcdef",
    "H": string.ascii_uppercase + string.digits,
    "l": string.ascii_lowercase + string.digits,
    "d": string.digits,
    "s": string.ascii_letters + string.digits + "_-",
    "b": string.ascii_letters + string.digits + "+/",
    "z": "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",
}
_FIELD = re.compile(r"\{([ahHldsbz])(\d+)\}|\{u\}")


def fill(template: str, seed: str) -> str:
    """``template`` with its placeholders (``{a36}``, ``{h32}``, ``{u}``...) replaced by seeded
    random characters: letters and digits both present where the alphabet has both, as in a
    generated token. The same seed gives the same text on every machine."""
    rng = random.Random(seed)

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "{u}":
            h = "".join(rng.choice(_ALPHABETS["h"]) for _ in range(32))
            return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
        alphabet, count = _ALPHABETS[match.group(1)], int(match.group(2))
        while True:
            text = "".join(rng.choice(alphabet) for _ in range(count))
            if (
                count < 8
                or alphabet in (_ALPHABETS["d"], _ALPHABETS["h"])
                or (any(c.isdigit() for c in text) and any(c.isalpha() for c in text))
            ):
                return text

    return _FIELD.sub(one, template)


@dataclass(frozen=True, slots=True)
class Sample:
    """A rule's sample, filled: the text, and where in it the secret is."""

    text: str
    start: int
    end: int

    @property
    def secret(self) -> str:
        """The part of :attr:`text` that must not survive."""
        return self.text[self.start : self.end]


def sample(template: str, seed: str) -> Sample:
    """A sample template filled (:func:`fill`), its ``«»`` marks taken out."""
    text = fill(template, seed)
    if "«" not in text:
        return Sample(text, 0, len(text))
    start = text.index("«")
    end = text.index("»") - 1
    return Sample(text.replace("«", "", 1).replace("»", "", 1), start, end)


def samples_of(pattern: SecretPattern) -> list[Sample]:
    """A rule's true samples, filled."""
    return [sample(s, f"{pattern.kind}:{i}") for i, s in enumerate(pattern.samples)]


def negatives_of(pattern: SecretPattern) -> list[Sample]:
    """A rule's false samples, filled."""
    return [sample(s, f"{pattern.kind}:-{i}") for i, s in enumerate(pattern.negatives)]
