"""Assert on otelhooks spans in your own tests, with the real SDK's in-memory exporter.

    from otelhooks.telemetry.testing import in_memory_tracing

    tracing = in_memory_tracing()
    executor = ToolExecutor(registry, hooks, tracer_provider=tracing.provider)
    await executor.execute(ToolCall("c1", "dangerous", {}))
    tracing.assert_children(tracing.tool_span(call_id="c1"), ["before"])   # blocked: no run

With pytest, the ``otelhooks_tracing`` fixture (registered by the package's pytest plugin) gives a
fresh, isolated instance per test. Nothing here touches the global tracer provider.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from . import attributes as A


@dataclass
class InMemoryTracing:
    """A tracer provider exporting synchronously into memory, plus span-tree helpers."""

    provider: TracerProvider
    exporter: InMemorySpanExporter

    def spans(self) -> list[ReadableSpan]:
        """Every ended span so far, in the order they ended."""
        return list(self.exporter.get_finished_spans())

    def clear(self) -> None:
        """Forget the spans exported so far."""
        self.exporter.clear()

    def shutdown(self) -> None:
        """Shut the provider down."""
        self.provider.shutdown()

    # -- finding spans -------------------------------------------------------------------------

    def find(self, name: str | None = None, **attributes: Any) -> list[ReadableSpan]:
        """Spans with this name (if given) whose attributes include ``attributes``.

        Attribute keys use ``__`` for dots: ``find(gen_ai__tool__name="echo")``.
        """
        wanted = {k.replace("__", "."): v for k, v in attributes.items()}
        found = []
        for span in self.spans():
            if name is not None and span.name != name:
                continue
            attrs = span.attributes or {}
            if all(attrs.get(k) == v for k, v in wanted.items()):
                found.append(span)
        return found

    def find_one(self, name: str | None = None, **attributes: Any) -> ReadableSpan:
        """The one span :meth:`find` gives; fails showing the near misses (spans of that name
        with the attributes they do have)."""
        found = self.find(name, **attributes)
        if len(found) == 1:
            return found[0]
        wanted = {k.replace("__", "."): v for k, v in attributes.items()}
        near = [
            f"{s.name} {{{', '.join(f'{k}={(s.attributes or {}).get(k)!r}' for k in wanted)}}}"
            for s in self.spans()
            if name is None or s.name == name
        ]
        raise AssertionError(
            f"expected one span name={name!r} with {wanted}, found {len(found)}; "
            + (f"near misses: {near}" if near else self.describe())
        )

    def tool_spans(self, tool_name: str | None = None) -> list[ReadableSpan]:
        """The ``execute_tool`` spans, optionally of one tool, in start order."""
        spans = [
            s
            for s in self.spans()
            if (s.attributes or {}).get(A.GEN_AI_OPERATION_NAME) == A.OP_EXECUTE_TOOL
            and (tool_name is None or (s.attributes or {}).get(A.GEN_AI_TOOL_NAME) == tool_name)
        ]
        return sorted(spans, key=lambda s: s.start_time or 0)

    def tool_span(self, *, call_id: str | None = None, name: str | None = None) -> ReadableSpan:
        """The one tool span of a call id (or of a tool name); fails if there is not exactly one,
        saying which tool spans (names and call ids) were captured."""
        spans = self.tool_spans(name)
        if call_id is not None:
            spans = [s for s in spans if (s.attributes or {}).get(A.GEN_AI_TOOL_CALL_ID) == call_id]
        if len(spans) != 1:
            raise AssertionError(
                f"expected one tool span for call_id={call_id!r} name={name!r}, "
                f"found {len(spans)}; {self.describe()}"
            )
        return spans[0]

    def describe(self) -> str:
        """What was captured, for a failure message: the tool spans with their call ids, or the
        span names, or a hint when nothing was captured at all."""
        spans = self.spans()
        if not spans:
            return (
                "no spans were captured at all: was the executor or agent built with "
                "tracer_provider=<this fixture>.provider? (without it, spans go to the global "
                "provider)"
            )
        tools = [
            f"{s.name} (call_id={(s.attributes or {}).get(A.GEN_AI_TOOL_CALL_ID)!r})"
            for s in self.tool_spans()
        ]
        if tools:
            return "captured tool spans: " + ", ".join(tools)
        return "captured spans: " + ", ".join(s.name for s in spans)

    def children(self, span: ReadableSpan) -> list[ReadableSpan]:
        """The direct children of ``span``, in start order."""
        assert span.context is not None
        parent_id = span.context.span_id
        kids = [s for s in self.spans() if s.parent is not None and s.parent.span_id == parent_id]
        return sorted(kids, key=lambda s: s.start_time or 0)

    def child(self, span: ReadableSpan, name: str) -> ReadableSpan:
        """The one child of ``span`` with this name; fails listing the children there are."""
        matches = [c for c in self.children(span) if c.name == name]
        if len(matches) != 1:
            raise AssertionError(
                f"expected one {name!r} child of {span.name!r}, found {len(matches)}; "
                f"its children: {self.child_names(span)}"
            )
        return matches[0]

    def child_names(self, span: ReadableSpan) -> list[str]:
        """The names of ``span``'s children, in start order."""
        return [c.name for c in self.children(span)]

    def assert_children(self, span: ReadableSpan, names: Sequence[str]) -> None:
        """Fail unless ``span``'s children have exactly these names, in this order."""
        actual = self.child_names(span)
        if actual != list(names):
            raise AssertionError(f"{span.name!r} has children {actual}, expected {list(names)}")

    def events(self, span: ReadableSpan, name: str | None = None) -> list[dict[str, Any]]:
        """A span's events as ``{"name": ..., **attributes}`` dicts."""
        return [
            {"name": e.name, **dict(e.attributes or {})}
            for e in span.events
            if name is None or e.name == name
        ]

    def render(self) -> str:
        """The recorded spans as an indented tree (see :func:`otelhooks.spantree.render_tree`)."""
        from .spantree import render_tree

        return render_tree(self.spans())


def in_memory_tracing(*processors: SpanProcessor, redactor: Any = None) -> InMemoryTracing:
    """A fresh provider with a synchronous in-memory exporter.

    With a ``redactor``, spans are scrubbed before the exporter sees them, as in production.
    Extra ``processors`` are added first, in order.
    """
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    for processor in processors:
        provider.add_span_processor(processor)
    export: SpanProcessor = SimpleSpanProcessor(exporter)
    if redactor is not None:
        from ..builtin.span_redaction import RedactingSpanProcessor

        export = RedactingSpanProcessor(redactor, export)
    provider.add_span_processor(export)
    return InMemoryTracing(provider, exporter)
