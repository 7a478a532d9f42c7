"""The held-out part of benchmark 13: secrets and harmless text from sources the redactor's rules
were not tuned on, built by scripts/install-secret-heldout.sh (``OTELHOOKS_SECRET_HELDOUT``).

**The split** (written down before any tuning; :data:`SPLIT`). The rules are tuned on gitleaks'
rule samples, Nosey Parker's rule ``examples``/``negative_examples`` and CredSweeper's test
samples; Trivy's secret rules with their test data, secretlint's recommended rules and
TruffleHog's detector tests are held out. Nothing from a held-out source is read while rules are
written; its figures are measured, not tuned on. Trivy and secretlint were looked at in later
tuning rounds (which misses remained), so their figure is no longer untouched; TruffleHog
(:data:`FRESH_SOURCES`) was added after those rounds and measured once before any rule change
for it: its recall is recorded, not asserted.

**Held-out secrets.**

* *Trivy* (the Go module ``github.com/aquasecurity/trivy``): every finding of Trivy's built-in
  rules in Trivy's own test data (``pkg/fanal/secret/testdata``), at most three per rule. These
  are real samples, written by hand for Trivy's tests. Trivy ships them for about a third of its
  rules; the rules without any are counted, not sampled.
* *secretlint* (``@secretlint/*`` on npm): the packages ship no samples (their files are the
  built module, its TypeScript source, README and LICENSE). The samples are **generated** from
  the rules' own expressions and kept when the rule itself reports them
  (tools/secret-heldout/secretlint.mjs): they test the formats secretlint knows, they are not
  independent strings, and they are reported apart (``generated``).

* *TruffleHog* (the Go module ``github.com/trufflesecurity/trufflehog/v3``, pinned with its hash
  in tools/secret-heldout/trufflehog/PIN): the strings each detector's unit test
  (``pkg/detectors/<name>/<name>_test.go``) says must be found, with the test's input as the
  sample's line, at most three per detector (tools/secret-heldout/trufflehog/main.go parses the
  tests: literals, names bound to them, ``+`` and ``fmt.Sprintf`` of literals around a literal
  secret). A wanted string built by ``fmt.Sprintf`` or by any other call (environment, secret
  store, a generator) is skipped and counted, as are the integration tests (their secrets come
  from a secret store at test time); of a wanted string the detector joins from two parts (an
  id and a secret), the longest piece the input holds as written is the secret. These are
  written for the tests, by hand or with a generator; :func:`looks_written` tells which.

Each secret is placed in the same contexts and variants as the tuning samples
(:func:`benchmarks.recall.place`) and goes through the real pipeline.

**Held-out harmless text** (every artifact listed with its SHA-256, :func:`manifest`):

* ``go.sum``: the lines of the pinned Trivy module's go.sum (``h1:`` base64 hashes);
* npm lock files: the ``integrity`` (``sha512-`` base64) and ``resolved`` lines of the lock file
  in Trivy's test data and of the held-out build's own;
* documentation: lines of Trivy's documentation that mention keys, tokens, secrets, passwords or
  credentials (prose and examples), without those that assign a value to a credential's name
  (``--password mypassword``, ``TOKEN=xyz``: a documentation example of a credential is a
  credential) and without lines Trivy's own scanner reports;
* JSON documents: Trivy's JSON scan reports (``integration/testdata/*.json.golden``, 1-100 KB
  each, hashes, digests and ids throughout) and the JSON files installed Python packages ship
  (CycloneDX SBOMs, JSON Schema metaschemas), each as one document;
* scanner false-positive fixtures: the lines of the files of Trivy's test data its scanner finds
  nothing in, without credential assignments and without a run of 16+ token characters that
  mixes lower case, upper case and digits (what a redactor is right to remove);
* the venv's ``RECORD`` files (``path,sha256=...,size`` lines) and source lines of installed
  packages the rules were not tuned on (PyJWT, structlog, OpenTelemetry, pydantic, Starlette,
  cryptography) that mention keys, tokens, secrets or passwords, without those that assign a
  quoted literal to a credential's name (``password=b'password1'`` in an example).

A harmless text is a false positive in a channel when that channel does not carry it unchanged.
"""

from __future__ import annotations

import hashlib
import json
import re
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import recall as R
from benchmarks.recall import CHANNELS, WINDOW, Recall, Sample, service_name

SPLIT: dict[str, tuple[str, ...]] = {
    "tuning": ("gitleaks", "noseyparker", "credsweeper"),
    "held-out": ("trivy", "secretlint", "trufflehog"),
}
"""Which sources the rules may be tuned on and which are only measured."""

FRESH_SOURCES = ("trufflehog",)
"""Held-out sources added after the tuning rounds that looked at the others: measured once and
recorded before any rule change for them, reported on their own, never asserted against the
goal."""

PER_RULE = 3
PUBLIC_RULES = re.compile(r"publishable|public|client-id|access-key-id$")
_MENTIONS = re.compile(r"key|token|secret|passw|credential|auth", re.IGNORECASE)
# An assignment of a value to a credential's name (a documentation example of a credential).
_CREDENTIAL_ASSIGNMENT = re.compile(
    r"(?i)(?:pass(?:word|wd)?|secret|token|api[_-]?key|credentials?)[\"']?\s*(?:[:=]|\s)\s*"
    r"[\"']?(?!\$|<|\{|\[|\*)[A-Za-z0-9+/_.~!@#%^&*=-]{6,}"
)
# ... in code: a quoted literal (``password=b'password1'``), not a name (``password: SecretStr``).
_LITERAL_CREDENTIAL = re.compile(
    r"(?i)(?:pass(?:word|wd)?|secret|token|api[_-]?key|credentials?)[\"']?\s*[:=]\s*[bru]?"
    r"[\"'][^\"'\s]{3,}[\"']"
)
_MIXED_RUN = re.compile(r"[A-Za-z0-9+/=_.-]{16,}")
_SOURCE_PACKAGES = ("jwt", "structlog", "opentelemetry", "pydantic", "starlette", "cryptography")
_MAX_LINES = 600  # per line-based source, taken at an even stride


def corpus_dir() -> Path | None:
    """The folder scripts/install-secret-heldout.sh built (``OTELHOOKS_SECRET_HELDOUT``, or the
    one it prints), or ``None`` when it cannot be built here."""
    path = R.built("install-secret-heldout.sh", "OTELHOOKS_SECRET_HELDOUT")
    return path if path is not None and (path / "DONE").is_file() else None


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _findings(corpus: Path) -> list[dict[str, Any]]:
    return _jsonl(corpus / "trivy-findings.jsonl")


def _artifact(corpus: Path, file: str) -> Path:
    """The artifact a finding names (the build wrote absolute paths of its own folder)."""
    return corpus / "artifacts" / file.split("/artifacts/", 1)[1]


def _lines_around(text: str, start: int, end: int) -> str:
    first = text.rfind("\n", 0, start) + 1
    last = text.find("\n", end)
    return text[first : len(text) if last < 0 else last]


def _clean_secret(secret: str) -> str:
    """A finding's secret without the quotes or the JSON line breaks around it."""
    secret = secret.strip().strip("\"'")
    while secret.startswith("\\n"):
        secret = secret[2:]
    while secret.endswith("\\n"):
        secret = secret[:-2]
    return secret


@dataclass(frozen=True)
class SourceReport:
    """What a held-out source offers: rules, rules with samples, samples kept."""

    rules: int
    rules_with_samples: int
    samples: int
    generated: bool


def trivy_samples(corpus: Path) -> list[Sample]:
    """Secrets Trivy's rules find in Trivy's own test data, at most :data:`PER_RULE` a rule."""
    by_rule: dict[str, dict[str, str]] = {}
    for finding in _findings(corpus):
        rule = finding["rule"]
        if rule is None or "/trivy-testdata/" not in finding["file"]:
            continue
        if PUBLIC_RULES.search(rule):
            continue  # meant to be seen: Stripe's publishable keys
        secret = _clean_secret(finding["secret"])
        if len(secret) < WINDOW:
            continue
        text = _artifact(corpus, finding["file"]).read_text(errors="replace")
        line = _lines_around(text, finding["start"], finding["end"])
        by_rule.setdefault(rule, {}).setdefault(secret, line)
    return [
        Sample(rule, service_name(rule), secret, line, source="trivy")
        for rule, found in sorted(by_rule.items())
        for secret, line in sorted(found.items())[:PER_RULE]
    ]


def secretlint_samples(corpus: Path) -> list[Sample]:
    """Samples generated from secretlint's rules and confirmed by them, at most
    :data:`PER_RULE` per rule and message."""
    kept: dict[tuple[str, str], dict[str, str]] = {}
    for line in _jsonl(corpus / "secretlint-samples.jsonl"):
        if line["secret"] is None or len(line["secret"]) < WINDOW:
            continue
        rule = line["rule"].removeprefix("@secretlint/secretlint-rule-")
        kept.setdefault((rule, line["message"]), {}).setdefault(line["secret"], line["text"])
    return [
        Sample(
            f"{rule}/{message}",
            service_name(rule),
            secret,
            text,
            source="secretlint",
            generated=True,
        )
        for (rule, message), found in sorted(kept.items())
        for secret, text in sorted(found.items())[:PER_RULE]
    ]


_EMAIL = re.compile(r"[^@\s:/]+@[\w.-]+\.[A-Za-z]{2,}")


def trufflehog_tests(corpus: Path) -> list[dict[str, Any]]:
    """What the build read of TruffleHog's detector tests: one line per wanted string (a sample,
    or ``skipped`` with the reason) and one per test file (``integration``: a test of the live
    service, not read)."""
    return _jsonl(corpus / "trufflehog-tests.jsonl")


def trufflehog_samples(corpus: Path) -> list[Sample]:
    """The secrets TruffleHog's detector tests say must be found, at most :data:`PER_RULE` a
    detector; each with the line of the test's input that holds it."""
    by_detector: dict[str, dict[str, str]] = {}
    for line in trufflehog_tests(corpus):
        secret = line.get("secret")
        if secret is None or len(secret) < WINDOW or _EMAIL.fullmatch(secret):
            continue  # a user's e-mail address the detector pairs with a key is no secret
        at = line["input"].find(secret)
        context = _lines_around(line["input"], at, at + len(secret)).strip()
        by_detector.setdefault(line["detector"], {}).setdefault(secret, context)
    return [
        Sample(detector, service_name(detector.split("/")[0]), secret, line, source="trufflehog")
        for detector, found in sorted(by_detector.items())
        for secret, line in sorted(found.items())[:PER_RULE]
    ]


@dataclass(frozen=True)
class TruffleHogCounts:
    """What was read of TruffleHog's detector tests: test files (unit and integration),
    wanted strings, those kept (``literal`` as written in the input, or a ``part`` of a joined
    string), those skipped by reason, and the samples kept (at most :data:`PER_RULE` a detector),
    of which ``written`` look written by hand (:func:`looks_written`)."""

    unit_files: int
    integration_files: int
    wanted: int
    kept: dict[str, int]
    skipped: dict[str, int]
    samples: int
    detectors: int
    written: int


def trufflehog_counts(corpus: Path) -> TruffleHogCounts:
    """The counts behind :func:`trufflehog_samples`."""
    tests = trufflehog_tests(corpus)
    files = [t for t in tests if "integration" in t]
    wanted = [t for t in tests if "integration" not in t]
    kept: dict[str, int] = {}
    skipped: dict[str, int] = {}
    for t in wanted:
        if "secret" in t:
            kept[t["how"]] = kept.get(t["how"], 0) + 1
        else:
            reason = re.sub(r"\(.*\)$|\w+ is bound \d+ times", "", t["skipped"]).strip()
            skipped[reason] = skipped.get(reason, 0) + 1
    chosen = trufflehog_samples(corpus)
    return TruffleHogCounts(
        unit_files=sum(not f["integration"] for f in files),
        integration_files=sum(bool(f["integration"]) for f in files),
        wanted=len(wanted),
        kept=kept,
        skipped=skipped,
        samples=len(chosen),
        detectors=len({s.rule for s in chosen}),
        written=sum(looks_written(s.secret) for s in chosen),
    )


def tuning_overlap(corpus: Path, tuning_corpus: Path) -> list[tuple[str, str, str]]:
    """``(detector, secret, gitleaks rule)`` of each TruffleHog sample that gitleaks' rule
    samples (the tuning corpus: true and false positives) hold, or that holds a gitleaks
    sample."""
    texts = [
        (rule["rule"], case["text"], secret)
        for rule in R._rules(tuning_corpus)
        for case in (rule["tps"] or [])
        for secret in case["secrets"]
    ] + [(rule["rule"], text, "") for rule in R._rules(tuning_corpus) for text in rule["fps"] or []]
    out = []
    for sample in trufflehog_samples(corpus):
        for rule, text, secret in texts:
            if sample.secret in text or (len(secret) >= WINDOW and secret in sample.secret):
                out.append((sample.rule, sample.secret, rule))
                break
    return out


_WORDS = re.compile(r"(?i)fake|test|example|sample|dummy|secret|token|pass|xxxx|aaaa|0000")
_RUNS = ("abcdefghijklmnopqrstuvwxyz", "0123456789", "qwertyuiop", "asdfghjkl", "zxcvbnm")


def looks_written(secret: str) -> bool:
    """Whether a sample looks written by a person rather than drawn at random from the format's
    alphabet, as a generator for the detector's expression would draw it: a word (``fake``,
    ``test``), a run of the alphabet, of digits or of the keyboard, forwards or backwards and
    with other characters between (``aB1cD2eF3``, ``asdf0987mnbv1234``), or a repeated piece.
    A heuristic, for the report: a random string typed once and a generated one look alike."""
    if _WORDS.search(secret):
        return True
    letters = "".join(c for c in secret.lower() if c.isalpha())
    digits = "".join(c for c in secret if c.isdigit())
    for run in _RUNS:
        for text in (letters, digits):
            for i in range(len(run) - 3):
                piece = run[i : i + 4]
                if piece in text or piece[::-1] in text:
                    return True
    body = re.sub(r"[^A-Za-z0-9]", "", secret)
    return any(body[i : i + 4] in body[i + 4 :] for i in range(len(body) - 7))


def samples(corpus: Path) -> list[Sample]:
    """Every held-out secret."""
    return trivy_samples(corpus) + secretlint_samples(corpus) + trufflehog_samples(corpus)


def source_reports(corpus: Path) -> dict[str, SourceReport]:
    """How many rules each held-out source has, how many of them come with samples."""
    trivy_rules = {r["rule"] for r in _jsonl(corpus / "trivy-rules.jsonl")}
    trivy = trivy_samples(corpus)
    secretlint_rules = {
        r["rule"].removeprefix("@secretlint/secretlint-rule-")
        for r in _jsonl(corpus / "secretlint-samples.jsonl")
    }
    secretlint = secretlint_samples(corpus)
    tests = trufflehog_tests(corpus)
    trufflehog = trufflehog_samples(corpus)
    return {
        "trivy": SourceReport(
            len(trivy_rules), len({s.rule for s in trivy}), len(trivy), generated=False
        ),
        "secretlint": SourceReport(
            len(secretlint_rules),
            len({s.rule.split("/")[0] for s in secretlint}),
            len(secretlint),
            generated=True,
        ),
        "trufflehog": SourceReport(
            len({t["detector"] for t in tests if t.get("integration") is False}),
            len({s.rule for s in trufflehog}),
            len(trufflehog),
            generated=False,
        ),
    }


# -- harmless text ---------------------------------------------------------------------------


def _stride(items: list[Any], limit: int = _MAX_LINES) -> list[Any]:
    step = max(1, -(-len(items) // limit))
    return items[::step]


def _flagged_lines(corpus: Path) -> dict[Path, set[int]]:
    """The line numbers (0-based) of each artifact in which Trivy's scanner found a secret."""
    flagged: dict[Path, set[int]] = {}
    for finding in _findings(corpus):
        if finding["rule"] is None:
            continue
        path = _artifact(corpus, finding["file"])
        text = path.read_text(errors="replace")
        first = text.count("\n", 0, finding["start"])
        last = text.count("\n", 0, finding["end"])
        flagged.setdefault(path, set()).update(range(first, last + 1))
    return flagged


def _mixed_token(line: str) -> bool:
    return any(
        any(c.islower() for c in run)
        and any(c.isupper() for c in run)
        and any(c.isdigit() for c in run)
        for run in _MIXED_RUN.findall(line)
    )


def _lines(
    paths: list[Path], flagged: dict[Path, set[int]], root: Path
) -> Iterator[tuple[str, str]]:
    for path in paths:
        skip = flagged.get(path, set())
        for number, line in enumerate(path.read_text(errors="replace").splitlines()):
            if number not in skip:
                yield f"{path.relative_to(root)}:{number + 1}", line


def harmless(corpus: Path) -> dict[str, list[tuple[str, str]]]:
    """The held-out harmless texts, by source: ``(where, text)``."""
    artifacts = corpus / "artifacts"
    flagged = _flagged_lines(corpus)
    out: dict[str, list[tuple[str, str]]] = {}
    go_sum = list(_lines([artifacts / "trivy-go-sum" / "go.sum"], flagged, artifacts))
    out["go.sum lines"] = _stride([(w, t) for w, t in go_sum if t.strip()])
    locks = sorted((artifacts / "npm-locks").glob("*.json"))
    out["npm lock integrity lines"] = _stride(
        [
            (w, t.strip())
            for w, t in _lines(locks, flagged, artifacts)
            if '"integrity"' in t or '"resolved"' in t
        ]
    )
    docs = sorted((artifacts / "trivy-docs").rglob("*.md"))
    out["documentation lines"] = _stride(
        [
            (w, t.strip())
            for w, t in _lines(docs, flagged, artifacts)
            if 8 <= len(t.strip()) <= 400
            and _MENTIONS.search(t)
            and not _CREDENTIAL_ASSIGNMENT.search(t)
        ]
    )
    fixtures = [p for p in sorted((artifacts / "trivy-testdata").iterdir()) if p not in flagged]
    out["scanner false-positive fixtures"] = [
        (w, t)
        for w, t in _lines(fixtures, flagged, artifacts)
        if len(t.strip()) >= 8 and not _CREDENTIAL_ASSIGNMENT.search(t) and not _mixed_token(t)
    ]
    reports = [
        p for p in sorted((artifacts / "trivy-reports").glob("*.json.golden")) if p not in flagged
    ]
    out["JSON documents"] = [(str(p.relative_to(artifacts)), p.read_text()) for p in reports] + [
        (f"site-packages/{p.relative_to(_site_packages())}", p.read_text()) for p in _package_json()
    ]
    out["venv RECORD lines"] = _stride(
        [
            (f"{p.parent.name}/RECORD:{i + 1}", line)
            for p in _records()
            for i, line in enumerate(p.read_text().splitlines())
        ]
    )
    out["package source lines"] = _stride(
        [(w, t) for w, t in _package_source_lines() if not _LITERAL_CREDENTIAL.search(t)], 1500
    )
    return out


def _site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def _records() -> list[Path]:
    return sorted(_site_packages().glob("*.dist-info/RECORD"))


def _package_json() -> list[Path]:
    return sorted(p for p in _site_packages().rglob("*.json") if p.stat().st_size <= 200_000)


def _package_source_lines() -> Iterator[tuple[str, str]]:
    root = _site_packages()
    for name in _SOURCE_PACKAGES:
        package = root / name
        if not package.is_dir():
            continue
        for file in sorted(package.rglob("*.py")):
            if "tests" in file.relative_to(root).parts:
                continue
            for number, line in enumerate(file.read_text(errors="replace").splitlines(), 1):
                stripped = line.strip()
                if 8 <= len(stripped) <= 400 and _MENTIONS.search(stripped):
                    yield f"{file.relative_to(root)}:{number}", stripped


def manifest(corpus: Path) -> list[dict[str, str]]:
    """Every artifact the held-out texts come from, with its origin and SHA-256: the build's
    (manifest.json) and the installed packages' read here."""
    files: list[dict[str, str]] = json.loads((corpus / "manifest.json").read_text())["files"]
    for path in [*_records(), *_package_json(), *_package_sources()]:
        files.append(
            {
                "path": f"site-packages/{path.relative_to(_site_packages())}",
                "origin": "this environment's installed packages",
                "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            }
        )
    return files


def _package_sources() -> list[Path]:
    root = _site_packages()
    return [
        file
        for name in _SOURCE_PACKAGES
        if (root / name).is_dir()
        for file in sorted((root / name).rglob("*.py"))
        if "tests" not in file.relative_to(root).parts
    ]


# -- the evaluation ------------------------------------------------------------------------------


@dataclass
class Evaluation:
    """Recall and false positives over every source, through the real pipeline.

    ``recall``: every placed secret of every source (tuning and held-out); ``harmless``: the
    harmless texts by category, with ``held_out`` naming the held-out categories and ``fresh``
    those of the second held-out set (benchmarks/fresh_harmless.py); ``kept``: for each text,
    whether each channel carried it unchanged."""

    recall: Recall
    harmless: dict[str, list[tuple[str, str]]]
    kept: dict[str, list[dict[str, bool]]]
    held_out: tuple[str, ...]
    fresh: tuple[str, ...] = ()

    def recall_of(self, sources: tuple[str, ...]) -> Recall:
        """The outcomes of the secrets of ``sources``."""
        return self.recall.only(lambda o: o.placed.sample.source in sources)

    def altered(self, categories: tuple[str, ...]) -> dict[str, tuple[int, int]]:
        """Per channel: harmless texts of ``categories`` altered, and all of them."""
        out = {}
        for channel in CHANNELS:
            altered = total = 0
            for category in categories:
                for kept in self.kept[category]:
                    total += 1
                    altered += not kept[channel]
            out[channel] = (altered, total)
        return out

    def examples(self, category: str, limit: int = 5) -> list[tuple[str, str]]:
        """Harmless texts of ``category`` some channel altered."""
        texts = self.harmless[category]
        bad = [texts[i] for i, kept in enumerate(self.kept[category]) if not all(kept.values())]
        return bad[:limit]

    def leave_one_source_out(self) -> dict[str, tuple[int, int]]:
        """Removed / placed over every source but one, for each source."""
        sources = sorted({o.placed.sample.source for o in self.recall.outcomes})
        return {
            source: self.recall.only(lambda o, s=source: o.placed.sample.source != s).rate()
            for source in sources
        }


def evaluate(
    tuning_corpus: Path | None,
    corpus: Path,
    *,
    stride: int = 1,
    redactor: Any = None,
    fresh_limit: int = 600,
) -> Evaluation:
    """Every secret of the held-out corpus and of the tuning one (gitleaks' samples, when given)
    placed and run through the pipeline, and the harmless texts of both and of the second
    held-out set (at most ``fresh_limit`` texts a source; 0: none). ``stride``: every n-th
    sample and text only, for a quick look."""
    groups = [(trivy_samples(corpus) + secretlint_samples(corpus))[::stride]]
    groups.append(trufflehog_samples(corpus)[::stride])
    if tuning_corpus is not None:
        groups.append(R.samples(tuning_corpus)[::stride])
    # each source's samples numbered on their own: a sample's variants do not depend on which
    # other sources are measured with it
    placed = [p for group in groups for i, s in enumerate(group) for p in R.place(s, i)]
    recall = R.Recall(R.run_channels(placed, redactor))
    from benchmarks import fresh_harmless  # it reads this module's site-packages helpers

    held_out = harmless(corpus)
    texts = {f"held-out: {k}": v[::stride] for k, v in held_out.items()}
    fresh = fresh_harmless.harmless(fresh_limit) if fresh_limit else {}
    texts |= {f"fresh: {k}": v[::stride] for k, v in fresh.items()}
    if tuning_corpus is not None:
        texts |= {f"tuning: {k}": v[::stride] for k, v in R.harmless(tuning_corpus).items()}
    kept = {k: R.benign_channels(v, redactor) for k, v in texts.items()}
    return Evaluation(
        recall,
        texts,
        kept,
        tuple(f"held-out: {k}" for k in held_out),
        tuple(f"fresh: {k}" for k in fresh),
    )
