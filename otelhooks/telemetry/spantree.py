"""Span trees as indented text with durations: for the demo, tests and ``otelhooks traces``.

:class:`TreeSpan` is the little a tree needs of a span. It is built from an SDK ``ReadableSpan``
(:meth:`TreeSpan.from_readable`) or from a trace read back from a backend (see
:mod:`otelhooks.jaeger_query`), so the demo and ``otelhooks traces`` print the same picture. This
module does not need the SDK.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import attributes as A

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan


@dataclass(frozen=True, slots=True)
class TreeSpan:
    """One span of a tree: ids as hex text, times in nanoseconds since the epoch."""

    name: str
    span_id: str
    parent_id: str | None
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any] = field(default_factory=dict)
    events: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    trace_id: str = ""
    service: str = ""
    error: bool = False

    @property
    def duration_ms(self) -> float:
        """The span's duration in milliseconds."""
        return (self.end_ns - self.start_ns) / 1e6

    @classmethod
    def from_readable(cls, span: ReadableSpan) -> TreeSpan:
        context = span.context
        parent = span.parent
        return cls(
            name=span.name,
            span_id=f"{context.span_id:016x}" if context is not None else "",
            parent_id=f"{parent.span_id:016x}" if parent is not None else None,
            start_ns=span.start_time or 0,
            end_ns=span.end_time or 0,
            attributes=dict(span.attributes or {}),
            events=tuple((e.name, dict(e.attributes or {})) for e in span.events),
            trace_id=f"{context.trace_id:032x}" if context is not None else "",
            service=str(span.resource.attributes.get("service.name", "")),
            error=span.status.status_code.name == "ERROR",
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (what ``otelhooks traces --json`` prints per span)."""
        return {
            "name": self.name,
            "span_id": self.span_id,
            "parent_id": self.parent_id,
            "start_ns": self.start_ns,
            "duration_ms": round(self.duration_ms, 3),
            "attributes": {k: _plain(v) for k, v in self.attributes.items()},
            "events": [{"name": n, **{k: _plain(v) for k, v in a.items()}} for n, a in self.events],
            "error": self.error,
        }


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


_SHOWN = (
    (A.DECISION, "decision"),
    (A.VERDICT, "verdict"),  # shown when it is not the decision
    (A.APPROVAL_ANSWER, "approval"),
    (A.APPROVAL_BY, "approver"),
    (A.DECISION_HOOK, "by"),
    (A.BLOCK_REASON, "reason"),
    (A.ARGUMENTS_REWRITTEN, "rewritten"),
    (A.ERROR_TYPE, "error"),
    (A.REDACTED_PATHS, "redacted"),
    (A.GEN_AI_RESPONSE_FINISH_REASONS, "finish"),
)


def _label(span: TreeSpan) -> str:
    attrs = span.attributes
    extras: list[str] = []
    for key, short in _SHOWN:
        value: Any = attrs.get(key)
        if value is None or (key == A.ARGUMENTS_REWRITTEN and not value):
            continue
        if key == A.VERDICT and value == attrs.get(A.DECISION):
            continue
        text = ",".join(map(str, value)) if isinstance(value, (tuple, list)) else str(value)
        extras.append(f"{short}={text}")
    hooks = [a for name, a in span.events if name == A.EVENT_HOOK and a]
    if hooks:
        extras.append(
            "hooks="
            + ",".join(
                f"{h.get(A.EVENT_HOOK_NAME)!s}:{h.get(A.EVENT_HOOK_DECISION)!s}" for h in hooks
            )
        )
    approvals = [a for name, a in span.events if name == A.EVENT_APPROVAL and a]
    for event in approvals:
        who = event.get(A.APPROVAL_BY)
        how = f" ({event.get(A.APPROVAL_HOW)})" if event.get(A.APPROVAL_HOW) else ""
        extras.append(
            f"approval={event.get(A.APPROVAL_ANSWER)!s}" + (f":{who}{how}" if who else "")
        )
    suffix = f"  [{' '.join(extras)}]" if extras else ""
    return f"{span.name}  {span.duration_ms:.2f} ms{suffix}"


def as_tree_spans(spans: Iterable[ReadableSpan | TreeSpan]) -> list[TreeSpan]:
    """SDK spans as :class:`TreeSpan` values, for :func:`render_tree`."""
    return [s if isinstance(s, TreeSpan) else TreeSpan.from_readable(s) for s in spans]


def render_tree(spans: Iterable[ReadableSpan | TreeSpan]) -> str:
    """One line per span, children indented under their parent, siblings in start order."""
    tree = sorted(as_tree_spans(spans), key=lambda s: s.start_ns)
    ids = {s.span_id for s in tree}
    children: dict[str | None, list[TreeSpan]] = {}
    for span in tree:
        parent = span.parent_id if span.parent_id in ids else None
        children.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(parent: str | None, depth: int) -> None:
        for span in children.get(parent, []):
            lines.append("  " * depth + _label(span))
            walk(span.span_id, depth + 1)

    walk(None, 0)
    return "\n".join(lines)
