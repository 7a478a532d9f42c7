"""Place 2 of the redactor: a span processor that scrubs spans before any exporter sees them.

Lives apart from :mod:`otelhooks.builtin.redaction` because it needs ``opentelemetry-sdk``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanProcessor
from opentelemetry.trace import Status

from ..telemetry import attributes as A
from .redaction import IDENTIFIER_KEYS, Redactor

_T = TypeVar("_T")


class RedactingSpanProcessor(SpanProcessor):
    """Scrubs each ended span, then hands it to ``downstream`` processors (e.g. a
    ``BatchSpanProcessor``). Attributes, event attributes (exception messages and stack traces
    included), link attributes and the status description are scrubbed; the span gets
    ``otelhooks.redacted.paths`` listing what was redacted. Unchanged spans pass through as is.
    """

    def __init__(self, redactor: Redactor, *downstream: SpanProcessor) -> None:
        self.redactor = redactor
        self.downstream = downstream

    def on_start(self, span: Any, parent_context: otel_context.Context | None = None) -> None:
        """Pass the start on to the processors downstream."""
        for processor in self.downstream:
            processor.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        """Scrub the ended span and pass the copy on (a span that cannot be scrubbed is dropped)."""
        try:
            scrubbed = self.scrub(span)
        except Exception:  # never let a secret through because redaction failed: drop the span
            return
        for processor in self.downstream:
            processor.on_end(scrubbed)

    def scrub(self, span: ReadableSpan) -> ReadableSpan:
        """A copy of ``span`` with its attributes, events, links and status scrubbed."""
        return scrub_span(self.redactor, span)

    def shutdown(self) -> None:
        """Shut the downstream processors down."""
        for processor in self.downstream:
            processor.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush the downstream processors within ``timeout_millis``."""
        return all(p.force_flush(timeout_millis) for p in self.downstream)


def scrub_span(redactor: Redactor, span: ReadableSpan) -> ReadableSpan:
    """``span`` with its attributes, event and link attributes and status description scrubbed,
    and ``otelhooks.redacted.paths`` listing what was redacted; the same span when nothing was.

    Only what can carry content is looked at: string values (and sequences of them) and the
    names they are under; numbers and booleans cannot, and text the redactor already produced
    or found clean is recognised without a second scan."""
    if not redactor.enabled:
        return span
    paths: list[str] = []
    attributes = span.attributes or {}
    new_attrs = _scrub_attributes(redactor, attributes, "", paths)
    events = _scrub_each(
        redactor, span.events, "events", paths, lambda e, attrs: Event(e.name, attrs, e.timestamp)
    )
    links = _scrub_each(
        redactor, span.links, "links", paths, lambda link, attrs: trace.Link(link.context, attrs)
    )
    status = span.status
    if status.description:
        description, kinds = redactor.redact_text(status.description, "status")
        if kinds:
            paths.append("status.description")
            status = Status(status.status_code, description)
    if not paths:
        return span
    new_attrs = dict(new_attrs if new_attrs is not None else attributes)
    existing = attributes.get(A.REDACTED_PATHS)
    recorded = tuple(existing) if isinstance(existing, (list, tuple)) else ()
    new_attrs[A.REDACTED_PATHS] = tuple(dict.fromkeys((*recorded, *paths)))
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=new_attrs,
        events=events,
        links=links,
        kind=span.kind,
        status=status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


_INERT = frozenset({bool, int, float})
_MIN_SECRET = 8


def _scrub_attributes(
    redactor: Redactor, attributes: Mapping[str, Any], prefix: str, paths: list[str]
) -> dict[str, Any] | None:
    """Scrubbed attributes (``None`` when nothing changed); redacted keys go to ``paths``."""
    out: dict[str, Any] | None = None
    for key, value in attributes.items():
        if type(value) in _INERT:
            continue
        plain_key = redactor.key_tier(key) is None
        if plain_key and type(value) is str:  # the common case: scan the text alone
            if len(value) < _MIN_SECRET:
                continue
            where = f"{prefix}.{key}" if prefix else key
            if key in IDENTIFIER_KEYS:
                text, kinds = redactor.redact_identifier(value, where)
            else:
                text, kinds = redactor.redact_text(value, where)
            if not kinds:
                continue
            paths.append(f"{prefix}.{key}" if prefix else key)
            new_value: Any = text
        else:
            if plain_key and isinstance(value, (bool, int, float)):
                continue
            new, found = redactor.redact({key: value}, prefix)
            if not found:
                continue
            paths.extend(found)
            new_value = new[key]
        if out is None:
            out = dict(attributes)
        out[key] = new_value
    return out


def _scrub_each(
    redactor: Redactor,
    items: Sequence[_T],
    name: str,
    paths: list[str],
    rebuild: Callable[[_T, dict[str, Any]], _T],
) -> Sequence[_T]:
    """Events or links with their attributes scrubbed (the same sequence if none changed)."""
    out: list[_T] | None = None
    for i, item in enumerate(items):
        attrs = getattr(item, "attributes", None) or {}
        found: list[str] = []
        scrubbed = _scrub_attributes(redactor, attrs, f"{name}[{i}]", found)
        if scrubbed is not None:
            paths.extend(found)
            if out is None:
                out = list(items)
            out[i] = rebuild(item, scrubbed)
    return out if out is not None else items
