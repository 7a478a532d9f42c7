"""How much of a secret nobody here wrote the redactor removes, and how much harmless text it
alters: the measurement behind benchmark 13 and tests/test_secret_recall.py.

**Secrets.** gitleaks' rules come with the samples gitleaks validates each rule against, from
the formats as the services document them (``scripts/install-secret-corpus.sh`` records them from
the pinned gitleaks source). Every secret gitleaks finds in its own true positives is a sample
(at most three per rule; identifiers that are public by design, client and access ids and public
keys, are left out). Each sample is placed the way secrets reach a tool's output: in gitleaks'
own line, and in contexts (an env file, HTTP headers, a JSON response, a log line, an exception,
bare text, code) and variants (URL-encoded, JSON-escaped inside text, a key name with look-alike
Unicode letters, the secret as a dictionary key, ``pw=``, the secret split over two fields, the
secret as the tool call's id or its tool name) with the service's name nearby. A placed secret
is *removed* from a channel when no eight characters of it (nor of its URL- or JSON-encoded form)
remain there.

**Channels.** Every placed secret goes through the real pipeline: a tool that returns (and logs)
it, run by a :class:`~otelhooks.ToolExecutor` with the redaction hook, structlog events and
content capture on. The *result* channel is what the model gets; *spans* every attribute, event
and status of every span exported; *logs* every field of every structlog event.

**Harmless text.** Lines that mention keys, tokens, secrets or passwords without holding one:
the source of Python's standard library and of the SDKs installed here (``openai``,
``anthropic``, ``httpx``, ``mcp``), gitleaks' false positives that carry no random-looking token
(no run of 16 or more token characters with three character classes: ``ghp_xxxx...`` and
``AKIAIOSFODNN7EXAMPLE`` are harmless, a real-format Google key is not), and the kinds of
look-alikes issue reports name (public keys, charset constants, placeholders, booleans and digits
under password keys). A line is a false positive when the redactor changes it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import io
import json
import os
import random
import re
import subprocess
import sys
import sysconfig
import urllib.parse
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PER_RULE = 3
WINDOW = 8
PUBLIC_RULE = re.compile(r"(client-id|access-id|api-id|public-key|pub-key|pub-api-key|-id)$")
_SERVICE_WORDS = frozenset(
    [
        "access",
        "token",
        "api",
        "key",
        "secret",
        "client",
        "id",
        "pat",
        "app",
        "personal",
        "oauth",
        "bot",
        "user",
        "org",
        "organization",
        "private",
        "auth",
        "admin",
        "long",
        "lived",
        "short",
        "service",
        "account",
        "password",
        "refresh",
        "legacy",
        "webhook",
        "url",
        "sensitive",
        "global",
        "cloud",
        "upload",
        "live",
        "test",
        "prod",
        "routable",
    ]
)


@dataclass(frozen=True)
class Sample:
    """A secret from a scanner's samples, with the line it was written in (``source``: whose
    samples; ``generated``: made from the rule's own expression, not written by hand)."""

    rule: str
    service: str
    secret: str
    line: str
    source: str = "gitleaks"
    generated: bool = False


@dataclass(frozen=True)
class Placed:
    """A sample placed in a tool's output (``value``: text, or a structure), or in the call
    itself (``call_id``, ``tool_name``)."""

    sample: Sample
    context: str
    value: Any
    call_id: str = "call_1"
    tool_name: str = "emit"
    pieces: tuple[str, ...] = ()  # what must not survive (default: the secret)

    def secrets(self) -> tuple[str, ...]:
        return self.pieces or (self.sample.secret,)


def built(script: str, variable: str) -> Path | None:
    """What an install script built: the path in ``variable`` when set, else the first line
    the script prints (``None`` when it fails here)."""
    given = os.environ.get(variable)
    if given:
        return Path(given)
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / script)], capture_output=True, text=True, check=False
    )
    return Path(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None


def corpus_file() -> Path | None:
    """The samples file scripts/install-secret-corpus.sh made (``OTELHOOKS_SECRET_CORPUS``, or
    the one it prints), or ``None`` when it cannot be made here."""
    path = built("install-secret-corpus.sh", "OTELHOOKS_SECRET_CORPUS")
    return path if path is not None and path.is_file() else None


def _rules(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def service_name(rule: str) -> str:
    """The service a rule is about, as a person writes it (``new-relic-user-api-id``: New
    Relic)."""
    words = [w for w in rule.split("-") if w not in _SERVICE_WORDS and not w.isdigit()]
    name = " ".join(words) or rule.split("-")[0]
    return name.title() if name.islower() else name


def _the_secret(rule: str, found: str, line: str) -> str:
    """What must not leak of what a rule found: without the quotes around it, and of a
    ``user:password`` pair the longer part (the password, or a token given as the user)."""
    secret = found.strip("\"'")
    if rule == "jwt-base64":  # the rule names a fragment; the secret is the whole blob
        runs = re.findall(r"[A-Za-z0-9+/=]+", line)
        secret = next((r for r in runs if found in r), secret)
    if rule == "curl-auth-user":
        secret = max(secret.split(":", 1), key=len)
    return secret


def samples(path: Path) -> list[Sample]:
    """The secrets of gitleaks' true positives, at most ``PER_RULE`` per rule."""
    found: list[Sample] = []
    for rule in _rules(path):
        if PUBLIC_RULE.search(rule["rule"]):
            continue
        seen: dict[str, str] = {}
        for tp in sorted(rule["tps"] or [], key=lambda t: t["text"]):
            for found_secret in tp["secrets"]:
                secret = _the_secret(rule["rule"], found_secret, tp["text"])
                if len(secret) >= WINDOW and secret not in seen:
                    seen[secret] = tp["text"]
        for secret in sorted(seen)[:PER_RULE]:
            found.append(Sample(rule["rule"], service_name(rule["rule"]), secret, seen[secret]))
    return found


# How placeholders are written where a secret would go: $VAR, ${VAR}, $(cmd), <token>, %VAR%,
# {Name}, [PASSWORD], your-..., changeme, ...
_PLACEHOLDER = re.compile(
    r"\$\{[^}]*\}|\$\([^)]*\)|\$[A-Za-z_][A-Za-z0-9_]*|<[^<>\n]{1,40}>|%[A-Za-z_]\w*%|"
    r"\{[A-Za-z_]\w*\}|\[[A-Z_ ]{3,}\]|\byour[-_]\w+|changeme|\.\.\."
)
_GENERATED_RUN = re.compile(r"[A-Za-z0-9+/_=.-]{8,}")


def _placeholder_only(text: str) -> bool:
    """Whether ``text`` holds a placeholder where a secret would go and, apart from it, no run
    of 8+ token characters with letters and digits (what a live secret has)."""
    if _PLACEHOLDER.search(text) is None:
        return False
    rest = _PLACEHOLDER.sub(" ", text)
    for run in _GENERATED_RUN.findall(rest):
        if re.search(r"[A-Za-z]", run) and re.search(r"[0-9]", run):
            return False
    return True


def gitleaks_harmless(path: Path) -> list[str]:
    """gitleaks' false positives that hold a placeholder and nothing else secret-like
    (``SUMO_ACCESS_KEY=${SUMO_ACCESS_KEY:=$2}``); the others (short, low-entropy or
    wrong-length strings in a secret's place) a redactor is right to remove."""
    return sorted({fp for r in _rules(path) for fp in r["fps"] or [] if _placeholder_only(fp)})


_MENTIONS = re.compile(r"key|token|secret|passw|credential|auth", re.IGNORECASE)
_LIBRARIES = ("openai", "anthropic", "httpx", "mcp")


def source_lines(limit: int | None = None) -> list[tuple[str, str]]:
    """Lines of code nobody here wrote that mention keys, tokens, secrets or passwords:
    ``(where, line)`` from the standard library (tests left out: they hold test keys) and the
    SDKs installed here."""
    roots = [Path(sysconfig.get_paths()["stdlib"])]
    for name in _LIBRARIES:
        try:
            module = __import__(name)
        except ImportError:
            continue
        roots.append(Path(module.__file__ or "").parent)
    lines: list[tuple[str, str]] = []
    for root in roots:
        for file in sorted(root.rglob("*.py")):
            rel = file.relative_to(root.parent)
            if any(
                part in ("test", "tests", "idlelib", "site-packages") for part in rel.parts[:-1]
            ):
                continue
            if root.name != "site-packages" and "site-packages" in file.parts:
                continue
            try:
                text = file.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            for number, line in enumerate(text.splitlines(), 1):
                stripped = line.strip()
                if 8 <= len(stripped) <= 400 and _MENTIONS.search(stripped):
                    lines.append((f"{rel}:{number}", stripped))
    lines = sorted(set(lines))
    return lines[:limit] if limit else lines


LOOK_ALIKES = (
    # public keys and identifiers labelled public
    'public_key = "pk_live_51HxJ2nKmNq3rT8vY"',
    "STRIPE_PUBLISHABLE_KEY=pk_test_TYooMQauvdEDq54NiTphI7jx",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGJ8N3q7sXoH9m2kQ4uYt6dW5rP0fZcL1vB8eA3nK2xM dev@laptop",
    '"publicKey": "BEl62iUYgUivxIkv69yViEuiBIa-Ib9-SkvMeAtA3LFgDzkrxZJjSgSnfckjBJuBkr3q"'
    'BUYIHBQFLXYp5Nksh8U"',
    "-----BEGIN PUBLIC KEY-----",
    # alphabets and charsets
    'ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"',
    'key_chars = "0123456789abcdefghijklmnopqrstuvwxyz"',
    "BASE32_ALPHABET: ABCDEFGHIJKLMNOPQRSTUVWXYZ234567",
    # configuration identifiers under key or secret names
    "secret_name: prod-db-credentials",
    "kms_key_id: alias/payments-prod",
    'secretRef: {"name": "registry-pull-secret", "key": ".dockerconfigjson"}',
    "SECRET_KEY_BASE_FILE=/run/secrets/rails_secret_key_base",
    "api_key_header: X-API-Key",
    "token_endpoint: https://auth.example.com/oauth2/token",
    "token_type: Bearer",
    "primary_key: order_id",
    "cache_key = f'user:{user_id}:profile'",
    "password_policy: min_length=12, require_symbols=true",
    # placeholders
    "OPENAI_API_KEY=your-api-key",
    "api_key: <YOUR_API_KEY>",
    'token = "${GITHUB_TOKEN}"',
    "password: changeme",
    "SECRET=xxxxxxxxxxxxxxxxxxxxxxxx",
    "AWS_SECRET_ACCESS_KEY=...",
    "Authorization: Bearer <token>",
    "export STRIPE_KEY=sk_test_...",
    # booleans, digits and lengths under password keys
    "password_required: true",
    "PASSWORD_MIN_LENGTH=12",
    '"password": null',
    "password_expiry_days = 90",
    "requires_password=false",
    "max_tokens: 4096",
)


@dataclass
class Outcome:
    """What one placed secret left in each channel (``None``: removed)."""

    placed: Placed
    left: dict[str, str | None] = field(default_factory=dict)


def leftover(secrets: Iterable[str], text: str, around: str = "") -> str | None:
    """A piece of ``WINDOW`` characters of one of ``secrets`` (or of its URL- or JSON-encoded
    form) in ``text``, if any; labels aside (``[REDACTED:kind]`` names the kind), and pieces
    that the text ``around`` the secret holds anyway (``rubygems`` of ``rubygems.client``)."""
    text = re.sub(r"\[REDACTED:[^\]]*\]", "", text)
    for secret in secrets:
        for form in {secret, urllib.parse.quote(secret, safe=""), json.dumps(secret)[1:-1]}:
            if len(form) < WINDOW:
                if form in text:
                    return form
                continue
            for i in range(len(form) - WINDOW + 1):
                piece = form[i : i + WINDOW]
                if piece in text and piece not in around:
                    return piece
    return None


# -- placing the samples ------------------------------------------------------------------------

_LOOKALIKE_KEYS = ("ѕеcrеt", "аpі_kеy", "раsswоrd", "tоkеn", "аccеss_kеy")  # Cyrillic letters


def _slug(service: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", service.lower()).strip("_") or "service"


def place(sample: Sample, index: int) -> Iterator[Placed]:
    """The sample in every context and variant."""
    s, service, slug = sample.secret, sample.service, _slug(sample.service)
    upper = slug.upper()
    pick = index % 3
    yield Placed(sample, "scanner line", f"$ cat config\n{sample.line}\n$ ")
    yield Placed(sample, ".env", f"# {service}\n{upper}_API_KEY={s}\nLOG_LEVEL=info\n")
    headers = (
        f"Authorization: Bearer {s}",
        f"X-{service.replace(' ', '-')}-Key: {s}",
        f"X-Api-Key: {s}",
    )[pick]
    yield Placed(
        sample, "HTTP headers", f"HTTP/1.1 200 OK\nContent-Type: application/json\n{headers}\n"
    )
    shapes = (
        {"id": 42, "integration": slug, "config": {"value": s, "enabled": True}},
        {"provider": service, "credentials": [{"type": "api", "data": s}]},
        {slug: s, "region": "eu-west-1"},
    )
    yield Placed(sample, "JSON", json.dumps(shapes[pick]))
    yield Placed(
        sample,
        "log line",
        f"2026-12-03T10:15:02.113Z INFO  {slug}.client: authenticating with {s} (attempt 1)",
    )
    yield Placed(
        sample,
        "exception",
        f'Traceback (most recent call last):\n  File "sync.py", line 12, in <module>\n'
        f"{service.replace(' ', '')}AuthError: the {service} API rejected '{s}': 401 Unauthorized",
    )
    bare = (
        f"Here is what I found in the {service} dashboard: {s}",
        f"The {service} integration is configured with {s} and runs hourly.",
        f"{service}: {s}",
    )[pick]
    yield Placed(sample, "bare text", bare)
    code = (
        f'client = {service.replace(" ", "")}Client("{s}")',
        f"{slug}.init('{s}')",
        f'const {slug} = new Api({{ auth: "{s}" }});',
    )[pick]
    yield Placed(sample, "code", code)
    # variants
    yield Placed(
        sample,
        "URL-encoded",
        f"GET /callback?{slug}_key={urllib.parse.quote(s, safe='')}&state=ok HTTP/1.1",
    )
    inner = json.dumps({slug: {"key": s}})
    yield Placed(sample, "JSON-escaped in text", f"response body: {json.dumps(inner)}")
    key = _LOOKALIKE_KEYS[index % len(_LOOKALIKE_KEYS)]
    yield Placed(sample, "look-alike key name", f"{slug}_{key} = {s}")
    yield Placed(sample, "secret as a key", {"tokens": {s: f"{service} (read-only)"}})
    yield Placed(sample, "pw=", f"host=db.internal port=5432 user={slug} pw={s} dbname=main")
    half = len(s) // 2
    yield Placed(
        sample,
        "split over two fields",
        {f"{slug}_key_part_1": s[:half], f"{slug}_key_part_2": s[half:]},
        pieces=(s[:half], s[half:]),
    )
    yield Placed(sample, "call id", "ok", call_id=s)
    yield Placed(sample, "tool name", "ok", tool_name=f"lookup_{s}")


# -- the pipeline -------------------------------------------------------------------------------


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)
    elif value is not None:
        yield str(value)


class Pipeline:
    """The real pipeline a tool's output goes through: a :class:`~otelhooks.ToolExecutor` with
    the redaction hook and structlog events (mirrored to spans), content capture on, the
    redacting span processor in front of an in-memory exporter and the redacting structlog
    processor in front of a JSON renderer. :meth:`run` gives what each channel carried."""

    def __init__(self, redactor: Any = None, max_content_length: int | None = None) -> None:
        from otelhooks import Hooks, ToolExecutor, ToolRegistry
        from otelhooks.builtin import RedactionHook, Redactor, StructlogEvents, json_logger
        from otelhooks.telemetry.testing import in_memory_tracing

        redactor = redactor or Redactor()
        self.tracing = in_memory_tracing(redactor=redactor)
        self.logs = io.StringIO()
        logger = json_logger(self.logs, redactor)
        registry = ToolRegistry()
        self.current: dict[str, Any] = {}

        @registry.tool
        def emit() -> Any:
            """Return the placed output."""
            logger.info("tool output", output=self.current["value"])
            return self.current["value"]

        hooks = Hooks([RedactionHook(redactor), StructlogEvents(logger, mirror_to_span=True)])
        options: dict[str, Any] = {}
        if max_content_length is not None:
            options["max_content_length"] = max_content_length
        self.executor = ToolExecutor(
            registry,
            hooks,
            tracer_provider=self.tracing.provider,
            capture_content=True,
            scrubber=redactor,
            **options,
        )

    async def run(
        self, value: Any, call_id: str = "call_1", tool_name: str = "emit"
    ) -> dict[str, Any]:
        """``value`` returned by a tool: the result the model got, the exported spans and the
        log events, each as it left the pipeline."""
        from otelhooks import ToolCall

        self.current["value"] = value
        self.tracing.clear()
        self.logs.seek(0)
        self.logs.truncate()
        result = await self.executor.execute(ToolCall(call_id, tool_name, {}))
        return {
            "result": result,
            "spans": self.tracing.spans(),
            "logs": [json.loads(line) for line in self.logs.getvalue().splitlines() if line],
        }


def _span_strings(spans: Any) -> list[str]:
    out: list[str] = []
    for span in spans:
        out.extend(_strings(dict(span.attributes or {})))
        for event in span.events:
            out.append(event.name)
            out.extend(_strings(dict(event.attributes or {})))
        out.append(span.name)
        out.append(span.status.description or "")
    return out


def run_channels(placed: list[Placed], redactor: Any = None) -> list[Outcome]:
    """Every placed secret through the real pipeline; what each channel kept."""
    pipeline = Pipeline(redactor)
    outcomes: list[Outcome] = []

    async def main() -> None:
        for item in placed:
            seen = await pipeline.run(item.value, item.call_id, item.tool_name)
            result = seen["result"]
            channels = {
                "result": "\n".join(_strings([result.content, result.details])),
                "spans": "\n".join(_span_strings(seen["spans"])),
                "logs": "\n".join(_strings(seen["logs"])),
            }
            around = "\n".join(_strings([item.value, item.tool_name, item.call_id]))
            for secret in item.secrets():
                around = around.replace(secret, "\n")
            outcomes.append(
                Outcome(item, {k: leftover(item.secrets(), v, around) for k, v in channels.items()})
            )

    asyncio.run(main())
    return outcomes


CHANNELS = ("result", "spans", "logs")


def benign_channels(texts: list[tuple[str, str]], redactor: Any = None) -> list[dict[str, bool]]:
    """Each harmless text returned by a tool through the real pipeline: for each channel,
    whether it carried the text unchanged (the result's content; the ``gen_ai.tool.call.result``
    span attribute, captured whole; the ``output`` field of the tool's log event)."""
    from otelhooks.telemetry import attributes as A

    pipeline = Pipeline(redactor, max_content_length=10_000_000)
    kept: list[dict[str, bool]] = []

    async def main() -> None:
        for _, text in texts:
            seen = await pipeline.run(text)
            results = [
                s.attributes.get(A.GEN_AI_TOOL_CALL_RESULT)
                for s in seen["spans"]
                if s.attributes and A.GEN_AI_TOOL_CALL_RESULT in s.attributes
            ]
            outputs = [e.get("output") for e in seen["logs"] if e.get("event") == "tool output"]
            kept.append(
                {
                    "result": seen["result"].content == text,
                    "spans": results == [text],
                    "logs": outputs == [text],
                }
            )

    asyncio.run(main())
    return kept


@dataclass
class Recall:
    """Removed / placed, by context, channel and rule; the misses."""

    outcomes: list[Outcome]

    def rate(self, keep: Callable[[Outcome, str], bool] = lambda o, c: True) -> tuple[int, int]:
        removed = placed = 0
        for outcome in self.outcomes:
            for channel, left in outcome.left.items():
                if keep(outcome, channel):
                    placed += 1
                    removed += left is None
        return removed, placed

    def by(self, what: str) -> dict[str, tuple[int, int]]:
        """Removed / placed per ``context``, ``channel``, ``rule``, ``source`` or ``family``."""
        groups: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for outcome in self.outcomes:
            for channel, left in outcome.left.items():
                key = channel if what == "channel" else _group(outcome, what)
                groups[key][0] += left is None
                groups[key][1] += 1
        return {k: (v[0], v[1]) for k, v in groups.items()}

    def only(self, keep: Callable[[Outcome], bool]) -> Recall:
        """The outcomes ``keep`` selects."""
        return Recall([o for o in self.outcomes if keep(o)])

    def misses(self) -> list[tuple[str, str, str, str]]:
        """``(rule, context, channel, what was left)`` of every miss."""
        return [
            (o.placed.sample.rule, o.placed.context, channel, left)
            for o in self.outcomes
            for channel, left in o.left.items()
            if left is not None
        ]


def _group(outcome: Outcome, what: str) -> str:
    sample = outcome.placed.sample
    if what == "context":
        return outcome.placed.context
    if what == "family":
        return family(sample.secret)
    return str(getattr(sample, what))


@functools.lru_cache(maxsize=4096)
def family(secret: str) -> str:
    """The detector family a secret depends on: ``format`` when a token-format rule removes it
    standing alone (wherever it stands, that family must find it), else ``context`` (only a
    credential's name, evidence nearby or a structure around it can)."""
    from otelhooks.builtin.redaction import PATTERNS, Redactor

    formats = _format_only(Redactor, PATTERNS)
    return "format" if leftover((secret,), formats.scrub_text(secret)) is None else "context"


@functools.lru_cache(maxsize=1)
def _format_only(redactor_type: Any, patterns: Any) -> Any:
    return redactor_type(patterns=patterns, use_defaults=False)


_MADE_UP_CONSONANTS = "bdfgkmnprstvz"
_MADE_UP_VOWELS = "aeiou"


def names_withheld(found: list[Sample]) -> list[Sample]:
    """``found`` with each service's name replaced by a made-up one (``Vakoru``, seeded by the
    rule): what the redactor removes of a service nobody listed, where only the secret's looks
    and its context's shape can tell (the scanner line keeps the sample's own words)."""
    from otelhooks.builtin.secret_context import PROXIMITY_WORDS

    out = []
    for sample in found:
        rng = random.Random(sample.rule)
        while True:
            name = "".join(
                rng.choice(_MADE_UP_CONSONANTS) + rng.choice(_MADE_UP_VOWELS) for _ in range(3)
            )
            if name not in PROXIMITY_WORDS:
                break
        out.append(dataclasses.replace(sample, service=name.title()))
    return out


def measure_recall(path: Path, redactor: Any = None) -> Recall:
    placed = [p for i, s in enumerate(samples(path)) for p in place(s, i)]
    return Recall(run_channels(placed, redactor))


def false_positives(
    texts: Iterable[tuple[str, str]], redactor: Any = None
) -> list[tuple[str, str, str]]:
    """``(where, text, as redacted)`` of the harmless texts the redactor changes."""
    from otelhooks.builtin import Redactor

    redactor = redactor or Redactor()
    altered = []
    for where, text in texts:
        out = redactor.scrub_text(text)
        if out != text:
            altered.append((where, text, out))
    return altered


def harmless(path: Path | None) -> dict[str, list[tuple[str, str]]]:
    """The harmless texts, by source."""
    sources: dict[str, list[tuple[str, str]]] = {
        "library source": source_lines(),
        "look-alikes": [("look-alikes", t) for t in LOOK_ALIKES],
    }
    if path is not None:
        sources["gitleaks false positives"] = [("gitleaks", t) for t in gitleaks_harmless(path)]
    return sources


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}% ({part}/{whole})" if whole else "-"


if __name__ == "__main__":  # a quick look: python benchmarks/recall.py
    sys.path.insert(0, str(ROOT))
    corpus = corpus_file()
    assert corpus is not None, "no secret corpus"
    recall = measure_recall(corpus)
    print("recall", percent(*recall.rate()))
    for name in ("context", "channel"):
        for key, (r, n) in sorted(recall.by(name).items()):
            print(f"  {key:<24} {percent(r, n)}")
    rules = Counter(m[0] for m in recall.misses())
    print("misses by rule", rules.most_common(40))
    for source, texts in harmless(corpus).items():
        altered = false_positives(texts)
        print("false positives", source, percent(len(altered), len(texts)))
        for where, text, out in altered[:40]:
            print("   ", where, repr(text[:100]), "->", repr(out[:100]))
