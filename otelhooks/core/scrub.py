"""The scrubber: what removes secrets from the text the runtime writes, and where it is called.

A :class:`Scrubber` is a collaborator declared to the executor (``ToolExecutor(...,
scrubber=...)``, ``Agent(..., scrubber=...)``) and through it to the recorder; it is never looked
for on hook objects. :class:`otelhooks.builtin.Redactor` is one. Without one the runtime writes
text as it is (:data:`NO_SCRUBBING`).

Contracts
---------
Each channel is scrubbed exactly once, where its text is made:

* **the model** (the result of a call): the handler's result as the ``run`` phase ends (before any
  after-hook sees it), each override an after-hook makes (its changed fields, before the next
  hook sees them), and the text the runtime writes itself (block reasons, error messages, an
  unknown tool's name, which goes through :meth:`Scrubber.redact_identifier`). The record
  observers get, the span's result and its status description are this text: not scanned again.
* **the span**: what the recorder captures on it besides the result (the arguments, progress
  updates, hook failure messages, exception messages), when it writes it.
* **the log**: the message of the runtime's own ``hook.failed`` warning.

Paths a scrub changed are named on the call's span in ``otelhooks.redacted.paths``. A scrubber
must not raise; one that does fails the call (an internal error result), never passes text on
unscrubbed.
"""

from __future__ import annotations

from typing import Any, Final, Protocol


class Scrubber(Protocol):
    """Replaces secrets in text and values; reports the paths it changed (empty when none)."""

    def redact_text(self, text: str, path: str = "") -> tuple[str, list[str]]:
        """``text`` with secrets replaced, and what was found (empty when unchanged)."""
        ...

    def redact_identifier(self, text: str, path: str = "") -> tuple[str, list[str]]:
        """A name the model chose (a tool name, a call id), with secrets replaced."""
        ...

    def redact(self, value: Any, path: str = "") -> tuple[Any, list[str]]:
        """``value`` (text, JSON in text, mappings, lists) with secrets replaced, and the paths
        that changed; unchanged parts are returned as they are."""
        ...


class NoScrubbing:
    """The scrubber of a runtime told of none: every text passes as it is."""

    __slots__ = ()

    def redact_text(self, text: str, path: str = "") -> tuple[str, list[str]]:
        """``text`` unchanged."""
        return text, []

    def redact_identifier(self, text: str, path: str = "") -> tuple[str, list[str]]:
        """``text`` unchanged."""
        return text, []

    def redact(self, value: Any, path: str = "") -> tuple[Any, list[str]]:
        """``value`` unchanged."""
        return value, []


NO_SCRUBBING: Final = NoScrubbing()
"""The null scrubber."""
