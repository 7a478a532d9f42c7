"""5. Redactor cost: realistic tool outputs, per KB, side by side."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.harness import Report, time_per_call
from benchmarks.inputs import realistic_inputs
from otelhooks.builtin import Redactor

NAME = "redactor"
NUMBER = "5"
TITLE = "Redactor cost: realistic tool outputs, per KB, side by side"


def run(report: Report, quick: bool) -> None:
    from benchmarks.baseline_redactor import Redactor as BaselineRedactor

    current, baseline = Redactor(), BaselineRedactor()
    scrubbers: dict[str, Callable[[str], Any]] = {
        "otelhooks": lambda text: current.redact(text, "result"),
        "otelhooks 0.1.0 (today's)": lambda text: baseline.redact(text, "result"),
    }
    try:
        from logfire._internal.scrubbing import Scrubber

        logfire_scrubber = Scrubber(None)
        scrubbers["logfire scrubber"] = lambda text: logfire_scrubber.scrub_value(
            ("attributes", "result"), text
        )
    except ImportError:
        report.row("logfire scrubber", "not installed", "pip install logfire (benchmark extra)")
    min_time = 0.05 if quick else 0.5
    out: dict[str, Any] = {}
    for label, text in realistic_inputs().items():
        kb = len(text) / 1000
        for name, scrub in scrubbers.items():
            # each round scans anew: the redactor would recognise text it has seen
            cost = time_per_call(
                lambda scrub=scrub, text=text: (current._known.clear(), scrub(text)), min_time
            )
            out[f"{label} {name}"] = cost / kb
            report.row(f"{label} ({kb:.0f} KB): {name}", f"{cost / kb:.1f} µs/KB")
    for label in realistic_inputs():
        ratio = out[f"{label} otelhooks"] / out[f"{label} otelhooks 0.1.0 (today's)"]
        out[f"{label} ratio to 0.1.0"] = ratio
        report.row(f"{label}: otelhooks over 0.1.0", f"{ratio:.2f}×", "target ≤ 1.0×")
    clean = {f"field_{i}": f"ordinary value number {i} with some words" for i in range(10)}
    out["10_fields_clean_us"] = time_per_call(lambda: current.redact(clean), min_time)
    report.row("10 string fields, clean", f"{out['10_fields_clean_us']:.1f} µs")
    report.results["redactor"] = out
