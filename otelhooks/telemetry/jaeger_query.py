"""Read traces back from a Jaeger query API (``/api/services``, ``/api/traces``), as
:class:`~otelhooks.spantree.TreeSpan` lists: what ``otelhooks traces`` prints and what tests
assert on. Standard library only; every request is bounded by ``timeout`` seconds."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .spantree import TreeSpan

DEFAULT_QUERY_URL: Final = "http://localhost:16686"
QUERY_URL_ENV: Final = "OTELHOOKS_JAEGER_QUERY_URL"


class QueryError(RuntimeError):
    """The query API could not be reached or answered with an error; the message says which."""


@dataclass(frozen=True, slots=True)
class Trace:
    """One trace: its id and spans (the root service first)."""

    trace_id: str
    spans: tuple[TreeSpan, ...]

    @property
    def start_ns(self) -> int:
        """When the trace's first span started (ns since the epoch)."""
        return min((s.start_ns for s in self.spans), default=0)

    @property
    def root(self) -> TreeSpan | None:
        """The trace's root span (the earliest span without a parent in the trace)."""
        ids = {s.span_id for s in self.spans}
        roots = [s for s in self.spans if s.parent_id not in ids]
        return min(roots, key=lambda s: s.start_ns) if roots else None


class JaegerQuery:
    """A client of one Jaeger query endpoint (default ``$OTELHOOKS_JAEGER_QUERY_URL`` or
    ``http://localhost:16686``)."""

    def __init__(self, url: str | None = None, *, timeout: float = 5.0) -> None:
        self.url = (url or os.environ.get(QUERY_URL_ENV) or DEFAULT_QUERY_URL).rstrip("/")
        self.timeout = timeout

    def _get(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        url = f"{self.url}{path}{query}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:300]
            raise QueryError(f"{url} answered {exc.code}: {detail}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise QueryError(
                f"cannot reach the Jaeger query API at {self.url} ({reason}); is Jaeger running?"
            ) from None
        except ValueError as exc:
            raise QueryError(f"{url} did not answer JSON ({exc})") from None

    def services(self) -> list[str]:
        """The service names Jaeger has traces of."""
        return sorted(str(s) for s in (self._get("/api/services").get("data") or []))

    def traces(
        self,
        service: str,
        *,
        operation: str | None = None,
        tags: Mapping[str, str] | None = None,
        start_us: int | None = None,
        end_us: int | None = None,
        lookback: str | None = None,
        limit: int = 20,
    ) -> list[Trace]:
        """Traces of ``service`` matching the filters, oldest first."""
        params: dict[str, Any] = {"service": service, "limit": limit}
        if operation:
            params["operation"] = operation
        if tags:
            params["tags"] = json.dumps(dict(tags))
        if start_us is not None:
            params["start"] = start_us
        if end_us is not None:
            params["end"] = end_us
        if lookback:
            params["lookback"] = lookback
        body = self._get("/api/traces", params)
        traces = [parse_trace(t) for t in body.get("data") or []]
        return sorted(traces, key=lambda t: t.start_ns)


def parse_trace(data: Mapping[str, Any]) -> Trace:
    """A trace of the Jaeger JSON API as :class:`TreeSpan` values."""
    processes = data.get("processes") or {}
    spans = []
    for raw in data.get("spans") or []:
        attributes = {t["key"]: _tag_value(t) for t in raw.get("tags") or []}
        events = []
        for log in raw.get("logs") or []:
            fields = {f["key"]: f.get("value") for f in log.get("fields") or []}
            events.append((str(fields.pop("event", "")), fields))
        parent = next(
            (
                str(ref["spanID"])
                for ref in raw.get("references") or []
                if ref.get("refType") == "CHILD_OF"
            ),
            None,
        )
        start_us = int(raw.get("startTime") or 0)
        process = processes.get(raw.get("processID"), {})
        spans.append(
            TreeSpan(
                name=str(raw.get("operationName", "")),
                span_id=str(raw.get("spanID", "")),
                parent_id=parent,
                start_ns=start_us * 1000,
                end_ns=(start_us + int(raw.get("duration") or 0)) * 1000,
                attributes=attributes,
                events=tuple(events),
                trace_id=str(raw.get("traceID", data.get("traceID", ""))),
                service=str(process.get("serviceName", "")),
                error=attributes.get("error") in (True, "true"),
            )
        )
    return Trace(str(data.get("traceID", "")), tuple(spans))


def _tag_value(tag: Mapping[str, Any]) -> Any:
    """A tag's value as the span had it: Jaeger keeps an array attribute as its JSON text
    (``'["stop"]'``), which is read back as the list it was."""
    value = tag.get("value")
    if isinstance(value, str) and value.startswith("[") and value.endswith("]"):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        if isinstance(parsed, list) and all(not isinstance(v, (list, dict)) for v in parsed):
            return parsed
    return value


def parse_tags(items: Sequence[str]) -> dict[str, str]:
    """``key=value`` strings as a tag filter; a malformed one raises ``ValueError``."""
    tags = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"a tag filter is key=value, got {item!r}")
        tags[key.strip()] = value.strip()
    return tags
