"""Secrets found by what stands near them: a random-looking token shortly after a credential word
or a service's name, as mature scanners pair a keyword with the token's charset, length and
entropy.

A *credential word* (``key``, ``token``, ``secret``, ``password``, ``auth``, ``credential``,
``bearer``...) is strong evidence: a token that starts within :data:`REACH` characters after it,
on the same line, is redacted when it looks generated (:func:`~.secret_keys.looks_random`), is a
UUID or 32+ hex digits, or, after a password word, has letters, digits and symbols. A *service
name* (``datadog``, ``twilio``...) or a weak word (``client``, ``login``, ``account``) is weaker
evidence: a token that looks generated, 32+ hex digits, or an ``id:secret`` pair of hex is
redacted, unless the line speaks of a commit, a hash or an id, or the token is a host or a path.
The token is taken whole up to the next space or quote, so ``31411378:AAH...`` or
``1308742762612587|rhoK...`` go as one. Service names count only as words of their own
(``DD_DATADOG_KEY``, ``datadog:``), and only in a text with a token of 16+ characters.

The same evidence counts in structures: a value in a mapping whose keys or short values name a
credential or a service (``{"integration": "datadog", "config": {"value": "..."}}``) is judged
the same way (the redactor's mapping walk).

Key names are also compared after folding look-alike letters (Cyrillic ``ѕ``, ``е``, ``о`` in
``ѕеcrеt``; fullwidth forms) to ASCII, one character for one, so offsets do not move
(:func:`fold`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Final

from .secret_keys import DIGEST, ValueSpan, is_placeholder, looks_random, public_name

REACH: Final = 48  # characters between the end of the word and the start of the token
_AROUND: Final = 512  # how far a line is read on either side of a word
_MAX_TOKENS: Final = 6
_MAX_MESSAGE_TOKENS: Final = 24  # in an authentication error's message

STRONG: Final = 2
WEAK: Final = 1

CREDENTIAL_WORDS: Final = (
    "key",
    "keys",
    "apikey",
    "token",
    "tokens",
    "secret",
    "secrets",
    "password",
    "passwd",
    "passphrase",
    "passcode",
    "pwd",
    "credential",
    "creds",
    "auth",
    "bearer",
    "license",
)
PASSWORD_WORDS: Final = frozenset({"password", "passwd", "passphrase", "passcode", "pwd", "pw"})
WEAK_WORDS: Final = ("client", "login", "signin", "webhook", "dsn", "account")

# Services whose credentials have no distinctive prefix, or whose name stands near a key that
# has one: the name is the evidence. Lower case, as written in prose, code and config.
SERVICES: Final = (
    *tuple(
        [
            "abstract",
            "abuseipdb",
            "adafruit",
            "adobe",
            "aiven",
            "airbrake",
            "airtable",
            "algolia",
            "alibaba",
            "aliyun",
            "amplitude",
            "anthropic",
            "apify",
            "appcenter",
            "appdynamics",
            "appveyor",
            "artifactory",
            "asana",
            "assemblyai",
            "atlassian",
            "auth0",
            "autodesk",
            "azure",
            "backblaze",
            "bitbucket",
            "bitly",
            "bitfinex",
            "bitmex",
            "binance",
            "bittrex",
            "braintree",
            "brevo",
            "browserstack",
            "buildkite",
            "bugsnag",
            "bunny",
            "calendly",
            "chargebee",
            "checkout",
            "circleci",
            "clarifai",
            "clearbit",
            "clickhouse",
            "clickup",
            "clojars",
            "cloudant",
            "cloudflare",
            "cloudinary",
            "cloudsmith",
            "codacy",
            "codecov",
            "cohere",
            "coinbase",
            "confluent",
            "contentful",
            "contentstack",
            "coveralls",
            "crowdstrike",
            "databricks",
            "datadog",
            "deepgram",
            "deepl",
            "deepseek",
            "delighted",
            "digitalocean",
            "discord",
            "disqus",
            "docker",
            "dockerhub",
            "docusign",
            "doppler",
            "dropbox",
            "duffel",
            "dynatrace",
            "easypost",
            "elastic",
            "elasticsearch",
            "elevenlabs",
            "eventbrite",
            "exoscale",
            "facebook",
            "fastly",
            "figma",
            "finicity",
            "finnhub",
            "firebase",
            "flickr",
            "flutterwave",
            "fly",
            "flyio",
            "frameio",
            "freshbooks",
            "freshdesk",
            "gemini",
            "getresponse",
            "gitea",
            "github",
            "gitlab",
            "gitter",
            "gocardless",
            "godaddy",
            "google",
            "grafana",
            "groq",
            "harness",
            "hashicorp",
            "helpscout",
            "heroku",
            "honeycomb",
            "hubspot",
            "huggingface",
            "ibm",
            "instagram",
            "intercom",
            "intra42",
            "ipinfo",
            "jenkins",
            "jfrog",
            "jira",
            "kafka",
            "keen",
            "klaviyo",
            "kraken",
            "kubernetes",
            "kucoin",
            "launchdarkly",
            "linear",
            "linkedin",
            "lob",
            "logdna",
            "loggly",
            "loggly",
            "logz",
            "looker",
            "mailchimp",
            "mailerlite",
            "mailgun",
            "mailjet",
            "mandrill",
            "mapbox",
            "mattermost",
            "maxmind",
            "meraki",
            "messagebird",
            "microsoft",
            "mistral",
            "mixpanel",
            "mongodb",
            "monday",
            "netlify",
            "newrelic",
            "nexmo",
            "ngrok",
            "notion",
            "npm",
            "nuget",
            "nytimes",
            "okta",
            "onelogin",
            "onesignal",
            "openai",
            "openrouter",
            "opsgenie",
            "optimizely",
            "pagerduty",
            "papertrail",
            "paypal",
            "paystack",
            "perplexity",
            "pinecone",
            "pingdom",
            "pipedrive",
            "plaid",
            "planetscale",
            "plivo",
            "postgres",
            "postman",
            "postmark",
            "prefect",
            "pulumi",
            "pusher",
            "pypi",
            "qdrant",
            "quickbooks",
            "rabbitmq",
            "rapidapi",
            "razorpay",
            "readme",
            "recurly",
            "redis",
            "render",
            "replicate",
            "resend",
            "retool",
            "rollbar",
            "rubygems",
            "salesforce",
            "salesloft",
            "scaleway",
            "scalingo",
            "segment",
            "sendbird",
            "sendgrid",
            "sendinblue",
            "sentry",
            "shippo",
            "shopify",
            "sidekiq",
            "signalwire",
            "slack",
            "smartsheet",
            "snowflake",
            "snyk",
            "sonar",
            "sonarcloud",
            "sonarqube",
            "sourcegraph",
            "splunk",
            "spotify",
            "square",
            "squarespace",
            "stackhawk",
            "statuspage",
            "strava",
            "stripe",
            "sumologic",
            "supabase",
            "tailscale",
            "telegram",
            "teamcity",
            "terraform",
            "textmagic",
            "todoist",
            "travis",
            "trello",
            "twilio",
            "twitch",
            "twitter",
            "typeform",
            "upstash",
            "vault",
            "vercel",
            "vonage",
            "weaviate",
            "webflow",
            "wix",
            "woocommerce",
            "wordpress",
            "workato",
            "xai",
            "yandex",
            "youtube",
            "zapier",
            "zendesk",
            "zeplin",
            "zoho",
            "zoom",
            "1password",
            "authress",
            "aws",
            "bedrock",
            "beamer",
            "drone",
            "droneci",
            "etsy",
            "gcp",
            "infracost",
            "octopus",
            "openshift",
            "privateai",
            "settlemint",
            "travisci",
            "contribsys",
            "nebula",
        ]
    ),
    "new relic",
    "new_relic",
    "new-relic",
    "pager duty",
    "sumo logic",
    "ibm cloud",
    "x.ai",
)

PROXIMITY_WORDS: Final = (
    {w: STRONG for w in CREDENTIAL_WORDS}
    | {w: WEAK for w in WEAK_WORDS}
    | {w: WEAK for w in SERVICES}
    | {"pw": STRONG}
)

_UUID: Final = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_HEX: Final = re.compile(r"[0-9a-fA-F]+")
_PATH_SPLIT: Final = re.compile(r"[/.:@?&=#]+")
_HEX_PAIR: Final = re.compile(r"[0-9a-fA-F]{8,}[:|][0-9a-fA-F]{8,}")
_DIGEST_WORDS: Final = re.compile(
    r"commit|\bsha|digest|hash|checksum|revision|\brev\b|etag|md5|fingerprint|build id|trace"
    r"|\bids?\b|_id\b|request"
)
# A token: what stands between spaces, quotes and brackets.
_TOKEN: Final = re.compile(r"[^\s\"'`<>()\[\]{},;\\]+")
_TRAIL: Final = ".:!?=,"
_EXPANSION: Final = re.compile(r"\$[A-Za-z_{(]")  # a shell variable or command, not a value
_WORD_END: Final = re.compile(r"[a-z0-9]*")
_ERRORS: Final = ("error", "exception", "failure")
# A base64 body wrapped over lines (a key's body in PEM or in a JSON string: ``\\n`` between its
# lines): the next line of it, after the break.
_B64_LINE: Final = re.compile(r"[A-Za-z0-9+/]{40,}={0,2}")
_WRAPPED: Final = re.compile(r"[ \t]*\r?\n[ \t]*([A-Za-z0-9+/]{16,}={0,2})(?![^\s\"'`])")


_LINE_BREAKS: Final = re.compile(r"(?:\\[rn]|\s)+")
_B64_BODY: Final = re.compile(r"[A-Za-z0-9+/]{32,}={0,2}")


def unwrapped(text: str) -> str:
    """``text`` without its line breaks (escaped or not) when it is a base64 body wrapped over
    lines, else ``text``: what is judged is the body, not its lines."""
    if "\n" not in text and "\\n" not in text:
        return text
    joined = _LINE_BREAKS.sub("", text)
    return joined if _B64_BODY.fullmatch(joined) is not None else text


def wrapped_end(text: str, start: int, end: int) -> int:
    """Where a base64 body that starts at ``start`` and breaks at ``end`` ends, over the lines
    it is wrapped on (``end`` when ``text[start:end]`` is no full line of base64)."""
    if _B64_LINE.fullmatch(text, start, end) is None:
        return end
    while (more := _WRAPPED.match(text, end)) is not None:
        end = more.end(1)
    return end


def qualifies(token: str, strength: int, password: bool = False) -> bool:
    """Whether ``token`` is a secret given evidence of ``strength`` near it (``NAME=value``: the
    value, unless the name labels it public). A digest labelled with its algorithm
    (``h1:...``, ``sha256=...``, ``...@sha256:...``) never is."""
    if len(token) < 8 or token.startswith("[REDACTED:") or DIGEST.search(token):
        return False
    core = token
    if token.count("=") == 1 and not token.endswith("="):
        name, core = token.split("=", 1)
        if not _core_qualifies(core, strength, password):
            return False
        return not public_name(name)
    return _core_qualifies(core, strength, password)


def _core_qualifies(core: str, strength: int, password: bool) -> bool:
    if len(core) < 8:
        return False
    if strength < STRONG and _HEX.fullmatch(core) is not None:
        return len(core) >= 32  # a service's hex key (Datadog, Twilio, Sentry)
    if any(looks_random(part) for part in _parts(core)):
        if strength == STRONG:
            return True
        return (_HEX.fullmatch(core) is None or len(core) >= 32) and not path_like(core)
    if strength < STRONG:
        # near a service's name: its hex keys (Datadog, Twilio, Sentry) and id:secret pairs
        return (len(core) >= 32 and _HEX.fullmatch(core) is not None) or (
            _HEX_PAIR.fullmatch(core) is not None
        )
    if _UUID.fullmatch(core) or (len(core) >= 32 and _HEX.fullmatch(core)):
        return True
    return password and _password_like(core)


def path_like(token: str) -> bool:
    """A host, a path or a URL made of words and numbers (``db.internal:5432/prod``,
    ``slack.com/help/articles/115005265063``), not a base64 key with a ``/`` in it."""
    if "/" not in token and token.count(".") < 2:
        return False
    pieces = [p for p in _PATH_SPLIT.split(token) if p]
    return all(p.isdigit() or len(p) < 8 or not looks_random(p) for p in pieces)


def _parts(token: str) -> Iterator[str]:
    """The token, and its pieces between ``:`` and ``|`` (an id joined to a secret)."""
    yield token
    if ":" in token or "|" in token:
        yield from re.split(r"[:|]", token)


def _password_like(token: str) -> bool:
    """Three classes of characters, with a digit or a symbol that no word is spelt with (a
    hyphenated word, ``Comma-separated``, is no password)."""
    classes = (
        any(c.islower() for c in token)
        + any(c.isupper() for c in token)
        + any(c.isdigit() for c in token)
        + any(not c.isalnum() for c in token)
    )
    return (
        len(token) >= 8
        and classes >= 3
        and not token.isidentifier()
        and any(c.isdigit() or (not c.isalnum() and c not in "-._") for c in token)
    )


def proximity_spans(
    text: str, lowered: str, positions: Iterable[tuple[int, int]]
) -> Iterator[ValueSpan]:
    """Tokens after a proximity word; ``positions`` are ``(where the word starts, strength)``."""
    done = -1
    for start, strength in positions:
        if not strength:
            continue  # inside a word: ``monkey``, ``turkey``
        word_end = _WORD_END.match(lowered, start)
        assert word_end is not None
        pos = word_end.end()
        password = lowered[start:pos] in PASSWORD_WORDS or lowered.startswith("pass", start)
        # the line, as far as it matters (a text of one long line costs no more than a short)
        line_end = text.find("\n", pos, pos + _AROUND)
        if line_end < 0:
            line_end = min(len(text), pos + _AROUND)
        # an authentication error's message is about a credential: the evidence of its name
        # (``DatabaseAuthError: the API rejected '...'``) reaches over the whole message
        error = text.startswith(":", pos) and lowered.endswith(_ERRORS, start, pos)
        stop = line_end if error else min(pos + REACH, line_end)
        most = _MAX_MESSAGE_TOKENS if error else _MAX_TOKENS
        line_start = max(lowered.rfind("\n", max(0, start - _AROUND), start) + 1, start - _AROUND)
        digest: bool | None = None  # whether the line speaks of a commit, a hash, an id
        seen = 0
        if strength == STRONG and _announces(text, lowered, start, pos, line_end):
            below = _next_line_token(text, line_end)
            if (
                below is not None
                and below[0] > done
                and qualifies(below[1], STRONG, password)
                and not is_placeholder(below[1])
                and not _EXPANSION.match(below[1])
            ):
                done = below[0] + len(below[1])
                yield ValueSpan(below[0], done, "secret")
                continue
        for match in _TOKEN.finditer(text, pos, line_end):
            if match.start() > stop or seen >= most:
                break
            seen += 1
            token_start, token = match.start(), match.group()
            stripped = token.lstrip("_-.:=/#$@").rstrip(_TRAIL)
            token_start += len(token) - len(token.lstrip("_-.:=/#$@"))
            # past the usual reach (in an error's message) the evidence is weak
            here = strength if match.start() <= pos + REACH else WEAK
            if token_start <= done or not qualifies(stripped, here, password):
                continue
            if is_placeholder(token.rstrip(_TRAIL)) or _EXPANSION.match(token):
                continue  # $PASSWORD, %TestSourcePassword%, ${VAR}, $API_URL/$PATH
            if here < STRONG:
                if digest is None:
                    digest = _DIGEST_WORDS.search(lowered, max(line_start, 0), line_end) is not None
                if digest:
                    break  # a service's name near a commit, a hash or an id: no evidence
            end = wrapped_end(text, token_start, token_start + len(stripped))
            if stripped.count("=") == 1 and not stripped.endswith("="):
                token_start += stripped.index("=") + 1  # NAME=value: the value alone
            done = end
            yield ValueSpan(token_start, end, "secret")
            break


# The rest of a line after a credential's name that says its value is below (``API key:``,
# ``Your new token is:``, ``password =``): punctuation at most.
_PUBLIC_LINE: Final = re.compile(r"-----|public|publishable|certificate")
_ENDS_LINE: Final = re.compile(r"[ \t:=>*#`'\"-]*\r?")
_ALONE: Final = re.compile(r"\n[ \t]*(?:\r?\n[ \t]*)?([^\s\"'`<>()\[\]{},;\\]+)[ \t]*\r?(?:\n|$)")


def _announces(text: str, lowered: str, start: int, pos: int, line_end: int) -> bool:
    """Whether the rest of the line after a credential's name announces its value below: it is
    punctuation at most, or a few words ending in a colon (``token for you:``); not a PEM
    header's line nor one that calls the value public."""
    line_start = lowered.rfind("\n", max(0, start - _AROUND), start) + 1
    if _PUBLIC_LINE.search(lowered, line_start, line_end) is not None:
        return False
    if _ENDS_LINE.fullmatch(text, pos, line_end) is not None:
        return True
    rest = text[pos:line_end].rstrip()
    return len(rest) <= REACH and rest.endswith(":")


def _next_line_token(text: str, line_end: int) -> tuple[int, str] | None:
    """The token that stands alone on the next line that is not empty (one blank line may come
    between), and where it starts: the value a credential's name ending the line before
    announces."""
    match = _ALONE.match(text, line_end)
    if match is None:
        return None
    return match.start(1), match.group(1).rstrip(_TRAIL)


def proximity_strength(text: str) -> int:
    """The evidence a short string (a key, a value naming a service) gives its neighbours."""
    lowered = text.lower()
    if "/" in lowered or "@" in lowered:
        return 0  # a URL, a path, a package reference (pkg:npm/js-tokens@4.0.0): where, not what
    best = 0
    for word in _SPLIT.split(lowered):
        best = max(best, PROXIMITY_WORDS.get(word, 0))
    return best


_SPLIT: Final = re.compile(r"[^a-z0-9.]+|(?<=[a-z])(?=[0-9])")

# Look-alike letters, each folded to the ASCII letter it imitates (one character for one).
_CONFUSABLES: Final = {
    **dict(zip("АВЕЅІЈКМНОРСТХУаеѕіјорсхуԁһӏ", "ABESIJKMHOPCTXYaesijopcxydhl", strict=True)),
    **dict(zip("ΑΒΕΗΙΚΜΝΟΡΤΥΧΖαεικνορτυχ", "ABEHIKMNOPTYXZaeikvoptux", strict=True)),
    **{chr(c): chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F)},  # fullwidth forms
    "ı": "i",
    "ℓ": "l",
    # the one letter whose lower case is two characters: folded, a text's lower case keeps the
    # text's length (a place in one is the same place in the other)
    "İ": "I",
}
_FOLD: Final = str.maketrans(_CONFUSABLES)


def fold(text: str) -> str:
    """``text`` with look-alike letters replaced by the ASCII ones they imitate (same length)."""
    return text.translate(_FOLD)
