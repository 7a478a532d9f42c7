"""Render finished spans as an indented tree with durations (used by the demo and by tests)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from . import attributes as A

_SHOWN = (
    (A.DECISION, "decision"),
    (A.DECISION_HOOK, "by"),
    (A.BLOCK_REASON, "reason"),
    (A.ARGUMENTS_REWRITTEN, "rewritten"),
    (A.ERROR_TYPE, "error"),
    (A.REDACTED_PATHS, "redacted"),
    (A.GEN_AI_RESPONSE_FINISH_REASONS, "finish"),
)


def _label(span: ReadableSpan) -> str:
    duration = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
    attrs = span.attributes or {}
    extras: list[str] = []
    for key, short in _SHOWN:
        value: Any = attrs.get(key)
        if value is None or (key == A.ARGUMENTS_REWRITTEN and not value):
            continue
        text = ",".join(map(str, value)) if isinstance(value, tuple) else str(value)
        extras.append(f"{short}={text}")
    hooks = [e.attributes for e in span.events if e.name == A.EVENT_HOOK and e.attributes]
    if hooks:
        extras.append(
            "hooks="
            + ",".join(f"{h[A.EVENT_HOOK_NAME]!s}:{h[A.EVENT_HOOK_DECISION]!s}" for h in hooks)
        )
    suffix = f"  [{' '.join(extras)}]" if extras else ""
    return f"{span.name}  {duration:.2f} ms{suffix}"


def render_tree(spans: Iterable[ReadableSpan]) -> str:
    """One line per span, children indented under their parent, siblings in start order."""
    spans = sorted(spans, key=lambda s: s.start_time or 0)
    ids = {s.context.span_id for s in spans if s.context is not None}
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent if parent in ids else None, []).append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in children.get(parent, []):
            lines.append("  " * depth + _label(span))
            if span.context is not None:
                walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return "\n".join(lines)
