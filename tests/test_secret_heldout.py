"""Redaction measured on sources its rules were not tuned on: Trivy's secret rules with their test
data, secretlint's rules and TruffleHog's detector tests (scripts/install-secret-heldout.sh,
``OTELHOOKS_SECRET_HELDOUT``), and harmless text from pinned artifacts, every secret and text
through the real executor, redaction hook, span processor and structlog chain
(benchmarks/heldout.py).

The goals are at least 95% of the held-out secrets removed and at most 1% of the held-out
harmless texts altered, in each channel; the second is measured on two sets of harmless text,
the first held-out set and a second one no rule was written against
(benchmarks/fresh_harmless.py). Both goals are met and asserted in every channel (recall 95.5%
in each since a call id without a call id's shape is replaced: a change made after the figure
of 95.5% / 94.9% / 94.9% was recorded, see benchmark 13); also asserted are the floor reached
per source, so that no change can lose what was gained without a test saying so, and that
every held-out sample of a known format is removed in every channel. These assertions are on
the sources the tuning rounds looked at (Trivy, secretlint). TruffleHog's detector tests
(``H.FRESH_SOURCES``) are built and required the same way, but their recall is recorded in
benchmark 13 and only reported here: it was measured before any rule change for them."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import pytest

from benchmarks import heldout as H
from benchmarks import recall as R

from .secret_corpus import require_corpus

RECALL_GOAL = 0.95  # benchmark 13's goal, met in every channel (95.5% on 2026-12-07, round 3)
SOURCE_FLOORS = {"trivy": 0.845, "secretlint": 0.995}  # reached: 85.0%, 99.9%
FALSE_POSITIVE_GOAL = 0.01


@pytest.fixture(scope="module")
def corpus() -> Path:
    built = lambda path: all(  # noqa: E731
        (path / name).is_file() for name in ("DONE", "trufflehog-tests.jsonl")
    )
    return require_corpus("OTELHOOKS_SECRET_HELDOUT", built, "install-secret-heldout.sh")


FIRST = tuple(s for s in H.SPLIT["held-out"] if s not in H.FRESH_SOURCES)


@pytest.fixture(scope="module")
def evaluation(corpus: Path) -> H.Evaluation:
    return H.evaluate(None, corpus, fresh_limit=300)  # benchmark 13 measures twice as many


def test_the_split_keeps_the_held_out_sources_apart(corpus: Path) -> None:
    assert not set(H.SPLIT["tuning"]) & set(H.SPLIT["held-out"])
    assert {s.source for s in H.samples(corpus)} == set(H.SPLIT["held-out"])


def test_trivy_ships_real_samples_and_secretlint_none(corpus: Path) -> None:
    reports = H.source_reports(corpus)
    trivy, secretlint = reports["trivy"], reports["secretlint"]
    assert trivy.rules >= 100 and trivy.rules_with_samples >= 20 and not trivy.generated
    assert secretlint.generated  # made from the rules' own expressions: reported apart
    assert secretlint.rules >= 20 and secretlint.rules_with_samples >= 20
    assert all(s.generated == (s.source == "secretlint") for s in H.samples(corpus))


def test_trufflehog_ships_real_samples_for_most_detectors(corpus: Path) -> None:
    counts = H.trufflehog_counts(corpus)
    assert counts.unit_files >= 500 and counts.integration_files >= 500
    assert counts.detectors >= 500 and counts.samples >= 800
    assert sum(counts.skipped.values()) < counts.wanted // 10  # nearly all are literals
    samples = H.trufflehog_samples(corpus)
    assert not any(s.generated for s in samples)
    assert all(s.secret in s.line and len(s.secret) >= R.WINDOW for s in samples)
    per_detector = Counter(s.rule for s in samples)
    assert max(per_detector.values()) <= H.PER_RULE


def test_trufflehog_recall_is_reported_per_channel(evaluation: H.Evaluation) -> None:
    # recorded in benchmark 13 before any rule change for it, not held to the goal
    fresh = evaluation.recall_of(H.FRESH_SOURCES)
    channels = fresh.by("channel")
    assert set(channels) == set(R.CHANNELS) and all(n > 5000 for _, n in channels.values())
    for channel, (removed, placed) in sorted(channels.items()):
        print(f"trufflehog recall, {channel}: {removed}/{placed} = {removed / placed:.1%}")


def test_every_artifact_is_listed_with_its_hash(corpus: Path) -> None:
    listed = H.manifest(corpus)
    files = (corpus / "artifacts").rglob("*")
    artifacts = {str(p.relative_to(corpus)) for p in files if p.is_file()}
    assert artifacts <= {f["path"] for f in listed}
    for entry in listed:
        path = corpus / entry["path"]
        if not path.is_file():  # an installed package's file, named from site-packages
            path = H._site_packages() / entry["path"].removeprefix("site-packages/")
        assert hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"], entry["path"]


def test_the_harmless_texts_come_from_every_pinned_artifact(corpus: Path) -> None:
    texts = H.harmless(corpus)
    assert {k: len(v) > 0 for k, v in texts.items()} == dict.fromkeys(texts, True)
    assert any(t.startswith("github.com/") and " h1:" in t for _, t in texts["go.sum lines"])
    assert any(len(t) > 20_000 for _, t in texts["JSON documents"])


@pytest.mark.parametrize("channel", R.CHANNELS)
def test_at_least_95_percent_of_held_out_secrets_are_removed_in_each_channel(
    evaluation: H.Evaluation, channel: str
) -> None:
    recall = evaluation.recall_of(FIRST)
    removed, placed = recall.by("channel")[channel]
    misses = [m for m in recall.misses() if m[2] == channel][:10]
    assert removed / placed >= RECALL_GOAL, (channel, removed, placed, misses)


def test_every_held_out_secret_of_a_known_format_is_removed_in_every_channel(
    evaluation: H.Evaluation,
) -> None:
    known = evaluation.recall_of(FIRST).only(lambda o: R.family(o.placed.sample.secret) == "format")
    removed, placed = known.rate()
    assert placed > 2000 and removed == placed, known.misses()[:10]


@pytest.mark.parametrize("channel", R.CHANNELS)
def test_at_most_1_percent_of_held_out_harmless_text_is_altered(
    evaluation: H.Evaluation, channel: str
) -> None:
    altered, total = evaluation.altered(evaluation.held_out)[channel]
    examples = [e for c in evaluation.held_out for e in evaluation.examples(c, 2)]
    assert total > 2000
    assert altered / total <= FALSE_POSITIVE_GOAL, (channel, altered, total, examples)


def test_each_held_out_source_on_its_own_keeps_its_floor(evaluation: H.Evaluation) -> None:
    for source in FIRST:
        removed, placed = evaluation.recall_of((source,)).rate()
        assert placed and removed / placed >= SOURCE_FLOORS[source], (source, removed, placed)


@pytest.mark.parametrize("channel", R.CHANNELS)
def test_at_most_1_percent_of_the_fresh_harmless_text_is_altered(
    evaluation: H.Evaluation, channel: str
) -> None:
    # the second held-out set: go.sum and Go source of pinned modules, the MCP servers' npm
    # lock, twelve packages' source, package descriptions, public CA certificates
    altered, total = evaluation.altered(evaluation.fresh)[channel]
    examples = [e for c in evaluation.fresh for e in evaluation.examples(c, 2)]
    assert total > 1500, evaluation.fresh
    assert altered / total <= FALSE_POSITIVE_GOAL, (channel, altered, total, examples)
