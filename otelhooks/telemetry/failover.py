"""An exporter over several equivalent destinations (the gateways of a fleet): each batch goes
to the one that answered last; when it fails, the same batch goes to the next, so a dead gateway
costs one export timeout and loses nothing while another one answers.

``setup_tracing("otlp", otlp_endpoint=[a, b])`` builds one over an OTLP exporter per endpoint.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

logger = logging.getLogger(__name__)


class FailoverSpanExporter(SpanExporter):
    """Exports each batch to the first of ``exporters`` that accepts it, starting with the one
    that accepted the previous batch; FAILURE only when every one failed. ``names`` (the
    destinations) appear in the warning logged when it switches."""

    def __init__(self, exporters: Sequence[SpanExporter], names: Sequence[str] = ()) -> None:
        if not exporters:
            raise ValueError("FailoverSpanExporter needs at least one exporter")
        self.exporters = list(exporters)
        self.names = list(names) or [type(e).__name__ for e in self.exporters]
        self.current = 0
        self.switches = 0
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Send ``spans`` to the current destination, then to each other one in turn."""
        with self._lock:  # the batch processor exports from one thread; keep order anyway
            count = len(self.exporters)
            for step in range(count):
                index = (self.current + step) % count
                try:
                    result = self.exporters[index].export(spans)
                except Exception:  # an exporter must never take the application down
                    logger.exception("span exporter %s raised", self.names[index])
                    result = SpanExportResult.FAILURE
                if result is SpanExportResult.SUCCESS:
                    if index != self.current:
                        self.switches += 1
                        logger.warning(
                            "spans go to %s: %s did not accept them",
                            self.names[index],
                            self.names[self.current],
                        )
                        self.current = index
                    return result
            return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        """Shut every destination's exporter down."""
        for exporter in self.exporters:
            exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush every destination's exporter."""
        return all(exporter.force_flush(timeout_millis) for exporter in self.exporters)
