"""Content on telemetry: when it is captured, how it becomes text, and how it is cut.

Content capture follows ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` with the values the
OpenTelemetry GenAI utilities accept (``NO_CONTENT``, ``SPAN_ONLY``, ``EVENT_ONLY``,
``SPAN_AND_EVENT``) and the older ``true``/``false``. An unknown value is warned about and means
no content, as in those utilities.

A cut never leaves a usable piece of a secret behind: :func:`cap_text` cuts before the token the
limit falls in, so a key that straddles the limit is dropped whole rather than kept in part.
Redact first, then cut.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import re
from typing import Any, Final

from . import attributes as A

logger = logging.getLogger(__name__)


class Capture(enum.Enum):
    """Where content goes: nowhere, on spans (attributes), as events, or both."""

    NO_CONTENT = "NO_CONTENT"
    SPAN_ONLY = "SPAN_ONLY"
    EVENT_ONLY = "EVENT_ONLY"
    SPAN_AND_EVENT = "SPAN_AND_EVENT"

    @property
    def on_span(self) -> bool:
        """Whether content goes on spans as attributes."""
        return self in (Capture.SPAN_ONLY, Capture.SPAN_AND_EVENT)

    @property
    def as_event(self) -> bool:
        """Whether content goes on span events."""
        return self in (Capture.EVENT_ONLY, Capture.SPAN_AND_EVENT)


_TRUE: Final = frozenset({"true", "1", "yes", "on"})
_FALSE: Final = frozenset({"false", "0", "no", "off", ""})


def parse_capture(value: str | bool | Capture | None) -> Capture:
    """A capture mode from a flag, a mode or the environment variable's text."""
    if isinstance(value, Capture):
        return value
    if value is None or value is False:
        return Capture.NO_CONTENT
    if value is True:
        return Capture.SPAN_ONLY
    text = value.strip()
    if text.lower() in _TRUE:
        return Capture.SPAN_ONLY
    if text.lower() in _FALSE:
        return Capture.NO_CONTENT
    try:
        return Capture[text.upper()]
    except KeyError:
        logger.warning(
            "%s=%r is not valid (use %s, or true/false); no content is captured",
            A.CAPTURE_CONTENT_ENV,
            value,
            ", ".join(c.name for c in Capture),
        )
        return Capture.NO_CONTENT


def capture_from_env() -> Capture:
    """The capture mode set by ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``."""
    return parse_capture(os.environ.get(A.CAPTURE_CONTENT_ENV))


def to_json_text(value: Any) -> str:
    """JSON for anything: unknown objects by ``str``; never raises."""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):  # circular, invalid keys, too deep
        try:
            return str(value)
        except Exception:
            return f"<{type(value).__name__} that cannot be shown>"


# A run of characters a token, key or password can be made of. A cut that falls inside one
# backs off to its start (up to _MAX_BACKOFF characters), so no part of it is kept.
_TOKEN_TAIL: Final = re.compile(r"[^\s\"'<>()\[\]{},;|`]+\Z")
_MAX_BACKOFF: Final = 4096


def cap_text(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, saying how long it was when cut.

    The cut backs off to the start of the token it would split, so a secret straddling the
    limit is not kept in part; the marker says how many characters there were in all.
    """
    if len(text) <= limit:
        return text
    head = text[:limit]
    # Does the cut split a token? Only then back off to the token's start.
    if limit < len(text) and not text[limit].isspace():
        tail = _TOKEN_TAIL.search(head, max(0, limit - _MAX_BACKOFF))
        if tail is not None:
            head = head[: tail.start()]
    return f"{head}…[truncated: {len(text)} chars in all]"
