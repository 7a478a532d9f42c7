"""The scrubber: what removes secrets from the text the runtime writes, and where it is called.

A :class:`Scrubber` is a collaborator declared to the executor (``ToolExecutor(...,
scrubber=...)``, ``Agent(..., scrubber=...)``) and through it to the recorder; it is never looked
for on hook objects. :class:`otelhooks.builtin.Redactor` is one.

Safe by default: a runtime given no scrubber gets the default one (:func:`default_scrubber`:
the ``otelhooks`` package names its default :class:`~otelhooks.builtin.Redactor` when it is
imported). ``scrubber=NO_SCRUBBING`` is the explicit way to write text as it is.

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

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Final, Protocol

from .messages import ToolResult


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
"""The null scrubber: ``scrubber=NO_SCRUBBING`` turns scrubbing off."""

_default_factory: list[Callable[[], Scrubber]] = []


def use_default_scrubber(factory: Callable[[], Scrubber]) -> None:
    """Name what :func:`default_scrubber` makes (the last one named wins). The ``otelhooks``
    package names its default redactor when it is imported; the core never imports it."""
    _default_factory[:] = [factory]


def default_scrubber() -> Scrubber:
    """The scrubber of a runtime given none: the default one named with
    :func:`use_default_scrubber`, else :data:`NO_SCRUBBING`."""
    return _default_factory[0]() if _default_factory else NO_SCRUBBING


def resolve(scrubber: Scrubber | None) -> Scrubber:
    """``scrubber``, or the default one when ``None``."""
    return scrubber if scrubber is not None else default_scrubber()


def scrub_result(scrubber: Scrubber, result: ToolResult) -> tuple[ToolResult, list[str]]:
    """``result`` as the model may see it: its content and details through ``scrubber``; the
    paths that changed (the same object when none did)."""
    content, paths = scrubber.redact(result.content, "result")
    details = result.details
    if details is not None:
        details, more = scrubber.redact(details, "details")
        paths = [*paths, *more] if more else paths
    if not paths:
        return result, paths
    return replace(result, content=content, details=details), paths


def scrub_override(
    scrubber: Scrubber, new: ToolResult, old: ToolResult
) -> tuple[ToolResult, list[str]]:
    """An after-hook's override of ``old`` with the fields it changed (only those) through
    ``scrubber``; the paths that changed."""
    content, details = new.content, new.details
    paths: list[str] = []
    if content is not old.content:
        content, found = scrubber.redact(content, "result")
        paths += found
    if details is not old.details and details is not None:
        details, found = scrubber.redact(details, "details")
        paths += found
    if not paths:
        return new, paths
    return replace(new, content=content, details=details), paths
