"""The spans as an OpenInference viewer (Arize Phoenix) reads them, for an exporter that sends to
one: added on copies of the spans at export, so that nothing changes (and nothing more is sent)
when no viewer is used.

:class:`OpenInferenceExporter` wraps an exporter (``setup_tracing(openinference=True)`` or
``OTELHOOKS_OPENINFERENCE=true`` wraps the OTLP one) and adds, the GenAI attributes left as they
are:

* the resource's ``openinference.project.name``: the service name, so each service is a
  project of its own (Phoenix otherwise puts every service in "default");
* ``openinference.span.kind``: ``AGENT`` for ``invoke_agent``, ``LLM`` for ``chat``, ``TOOL`` for
  ``execute_tool``, ``GUARDRAIL`` for the ``before`` and ``after`` phases (the hooks that decide),
  ``CHAIN`` for ``run``;
* on ``execute_tool``: ``tool.name``, ``tool.description``, and ``metadata`` (JSON) with the
  decision, the hook that made it, the reason of a block, and whether the result was rewritten;
  ``input.value`` and ``output.value`` only when content capture put the arguments and result
  on the span (they went through the redactor first, like every attribute);
* on a phase: ``metadata`` with each hook's decision.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, Final

from openinference.semconv.resource import ResourceAttributes
from openinference.semconv.trace import OpenInferenceMimeTypeValues as MimeType
from openinference.semconv.trace import OpenInferenceSpanKindValues as Kind
from openinference.semconv.trace import SpanAttributes
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from . import attributes as A

ENV: Final = "OTELHOOKS_OPENINFERENCE"
"""``true`` makes :func:`~otelhooks.telemetry.tracing.setup_tracing` send spans an OpenInference
viewer reads (what ``otelhooks ui`` tells a shell to set)."""

SPAN_KIND: Final = SpanAttributes.OPENINFERENCE_SPAN_KIND
PROJECT: Final = ResourceAttributes.PROJECT_NAME
TOOL_NAME: Final = SpanAttributes.TOOL_NAME
TOOL_DESCRIPTION: Final = SpanAttributes.TOOL_DESCRIPTION
INPUT_VALUE: Final = SpanAttributes.INPUT_VALUE
INPUT_MIME_TYPE: Final = SpanAttributes.INPUT_MIME_TYPE
OUTPUT_VALUE: Final = SpanAttributes.OUTPUT_VALUE
METADATA: Final = SpanAttributes.METADATA

_KIND_OF_PHASE: Final = {
    A.SPAN_BEFORE: Kind.GUARDRAIL.value,
    A.SPAN_AFTER: Kind.GUARDRAIL.value,
    A.SPAN_RUN: Kind.CHAIN.value,
}
_KIND_OF_OPERATION: Final = {
    A.OP_INVOKE_AGENT: Kind.AGENT.value,
    A.OP_CHAT: Kind.LLM.value,
    A.OP_EXECUTE_TOOL: Kind.TOOL.value,
}
_DECISION_KEYS: Final = (
    (A.DECISION, "decision"),
    (A.DECISION_HOOK, "decided_by"),
    (A.BLOCK_REASON, "block_reason"),
    (A.ARGUMENTS_REWRITTEN, "arguments_rewritten"),
    (A.RESULT_OVERRIDDEN, "result_overridden"),
    (A.ERROR_TYPE, "error_type"),
)


def enabled_by_env() -> bool:
    """Whether ``OTELHOOKS_OPENINFERENCE`` asks for OpenInference attributes."""
    return os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on")


def openinference_attributes(span: ReadableSpan) -> dict[str, Any]:
    """What :class:`OpenInferenceExporter` adds to ``span`` (empty for spans not otelhooks')."""
    attrs = span.attributes or {}
    operation = attrs.get(A.GEN_AI_OPERATION_NAME)
    kind = _KIND_OF_OPERATION.get(str(operation)) if operation else _KIND_OF_PHASE.get(span.name)
    if kind is None:
        return {}
    added: dict[str, Any] = {SPAN_KIND: kind}
    if kind == Kind.TOOL.value:
        added[TOOL_NAME] = attrs.get(A.GEN_AI_TOOL_NAME)
        if A.GEN_AI_TOOL_DESCRIPTION in attrs:
            added[TOOL_DESCRIPTION] = attrs[A.GEN_AI_TOOL_DESCRIPTION]
        meta = {short: attrs[key] for key, short in _DECISION_KEYS if key in attrs}
        if meta:
            added[METADATA] = json.dumps(meta, default=str)
        if A.GEN_AI_TOOL_CALL_ARGUMENTS in attrs:
            added[INPUT_VALUE] = attrs[A.GEN_AI_TOOL_CALL_ARGUMENTS]
            added[INPUT_MIME_TYPE] = MimeType.JSON.value
        if A.GEN_AI_TOOL_CALL_RESULT in attrs:
            added[OUTPUT_VALUE] = attrs[A.GEN_AI_TOOL_CALL_RESULT]
    elif kind == Kind.GUARDRAIL.value:
        hooks = [
            {
                "hook": e.attributes.get(A.EVENT_HOOK_NAME),
                "decision": e.attributes.get(A.EVENT_HOOK_DECISION),
            }
            for e in span.events
            if e.name == A.EVENT_HOOK and e.attributes
        ]
        if hooks:
            added[METADATA] = json.dumps({"hooks": hooks}, default=str)
    return {k: v for k, v in added.items() if v is not None}


def with_project(resource: Resource) -> Resource:
    """``resource`` with ``openinference.project.name`` set to its service name, unless it has
    one: what an OpenInference viewer (Phoenix) files a service's traces under. Every OTLP
    exporter ``setup_tracing`` makes sends it, so a viewer never puts them in "default"."""
    name = resource.attributes.get(SERVICE_NAME)
    if not name or PROJECT in resource.attributes:
        return resource
    return resource.merge(Resource({PROJECT: str(name)}))


class OpenInferenceExporter(SpanExporter):
    """Exports copies of the spans with the attributes an OpenInference viewer reads (see the
    module's documentation) through ``inner``."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self._resources: dict[int, tuple[Resource, Resource]] = {}  # id -> (given, adapted)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Add the attributes and export."""
        return self.inner.export([self._adapt(span) for span in spans])

    def _adapt(self, span: ReadableSpan) -> ReadableSpan:
        added = openinference_attributes(span)
        resource = self._resource(span.resource)
        if not added and resource is span.resource:
            return span
        attributes: Mapping[str, Any] = {**(span.attributes or {}), **added}
        return ReadableSpan(
            name=span.name,
            context=span.context,
            parent=span.parent,
            resource=resource,
            attributes=attributes,
            events=span.events,
            links=span.links,
            kind=span.kind,
            status=span.status,
            start_time=span.start_time,
            end_time=span.end_time,
            instrumentation_scope=span.instrumentation_scope,
        )

    def _resource(self, resource: Resource) -> Resource:
        found = self._resources.get(id(resource))
        if found is None or found[0] is not resource:
            found = self._resources[id(resource)] = (resource, with_project(resource))
        return found[1]

    def shutdown(self) -> None:
        """Shut the inner exporter down."""
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush the inner exporter."""
        return self.inner.force_flush(timeout_millis)
