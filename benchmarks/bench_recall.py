"""13. Redaction recall: the samples of every gitleaks rule in tool outputs of many shapes,
through the real pipeline (result, spans, logs); harmless text from libraries nobody here wrote.
The misses are named."""

from __future__ import annotations

from collections import Counter
from typing import Any

from benchmarks import recall as R
from benchmarks.harness import Report

NAME = "recall"
NUMBER = "13"
TITLE = "Redaction recall and false positives on secrets nobody here wrote"

RECALL_GOAL = 95.0
FALSE_POSITIVE_GOAL = 1.0


def _percent(part: int, whole: int) -> float:
    return 100 * part / whole if whole else 0.0


def run(report: Report, quick: bool) -> None:
    corpus = R.corpus_file()
    if corpus is None:
        report.row("gitleaks samples", "not built", "bash scripts/install-secret-corpus.sh (Go)")
        return
    samples = R.samples(corpus)
    if quick:
        samples = samples[::10]
    placed = [p for i, s in enumerate(samples) for p in R.place(s, i)]
    recall = R.Recall(R.run_channels(placed))
    out: dict[str, Any] = {"samples": len(samples), "rules": len({s.rule for s in samples})}
    removed, total = recall.rate()
    out["removed_pct"] = _percent(removed, total)
    met = "✓" if out["removed_pct"] >= RECALL_GOAL else "missed"
    report.row(
        f"removed, {out['samples']} samples of {out['rules']} rules",
        f"{out['removed_pct']:.1f}%",
        f"target ≥ {RECALL_GOAL:.0f}% {met}",
    )
    for what in ("channel", "context"):
        out[f"by_{what}"] = {}
        for key, (r, n) in sorted(recall.by(what).items()):
            out[f"by_{what}"][key] = _percent(r, n)
            report.row(f"  {what}: {key}", f"{_percent(r, n):.1f}%")
    misses = Counter(m[0] for m in recall.misses())
    out["misses_by_rule"] = dict(misses.most_common())
    report.row("most missed rules", ", ".join(f"{r} {n}" for r, n in misses.most_common(8)))
    external = [0, 0]  # altered, all: the text nobody here wrote (not our look-alikes)
    for source, texts in R.harmless(corpus).items():
        if quick:
            texts = texts[::10]
        altered = R.false_positives(texts)
        pct = _percent(len(altered), len(texts))
        out[f"false_positive_pct {source}"] = pct
        if source != "look-alikes":
            external[0] += len(altered)
            external[1] += len(texts)
        report.row(f"altered: {source} ({len(texts)})", f"{pct:.1f}%")
        for where, text, _ in altered[:3]:
            report.row(f"    {where}", repr(text[:40]))
    pct = _percent(*external)
    out["false_positive_pct external"] = pct
    met = "✓" if pct <= FALSE_POSITIVE_GOAL else "missed"
    report.row(
        f"altered: all harmless text nobody here wrote ({external[1]})",
        f"{pct:.2f}%",
        f"target ≤ {FALSE_POSITIVE_GOAL:.0f}% {met}",
    )
    report.results[NAME] = out
