"""An audit log of tool calls: JSON lines, append-only, one per call, each chained to the last.

:class:`AuditLog` is an observer (``on_tool_call_end``): every call, allowed, blocked or failed,
writes one line with the time, who called (``fields`` adds what the host knows: identity,
upstream, session), the tool, a SHA-256 of the arguments (never the arguments), the decision and
the hook that made it, the outcome and the trace and span ids. Each line is written whole with
one ``write`` and flushed to the operating system before the call's result is returned (``fsync``
also to the disk), so a crash loses nothing already answered.

Tamper evidence: each line carries ``prev``, the ``hash`` of the line before, and its own
``hash`` over its content and ``prev`` (an HMAC with ``key``, when one is given, so that
rewriting the file also needs the key). :func:`verify_audit_log` (``otelhooks mcp audit verify``)
recomputes the chain and names the first line that does not fit. A restarted log continues the
chain of the file it appends to.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import hmac
import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from opentelemetry import trace

from ..core.hooks import ToolCallRecord

logger = logging.getLogger("otelhooks.audit")

GENESIS: Final = "0" * 64
"""The ``prev`` of a log's first line."""


def _canonical(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    ).encode()


def arguments_digest(arguments: Any) -> str:
    """The SHA-256 of a call's arguments as canonical JSON (what the log keeps of them)."""
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments)
    return "sha256:" + hashlib.sha256(_canonical(arguments)).hexdigest()


def _line_hash(entry: Mapping[str, Any], key: bytes | None) -> str:
    body = _canonical({k: v for k, v in entry.items() if k != "hash"})
    if key is None:
        return hashlib.sha256(body).hexdigest()
    return hmac.new(key, body, hashlib.sha256).hexdigest()


def outcome_of(record: ToolCallRecord) -> str:
    """``ok``, ``blocked``, ``skipped`` or ``error``."""
    if record.decision == "block":
        return "blocked"
    if record.decision == "skip":
        return "skipped"
    return "error" if record.result.is_error else "ok"


class AuditLog:
    """Appends one chained JSON line per tool call to ``path`` (see the module's docs).

    ``fields(record)`` adds fields (the proxy adds the identity, the upstream, the session and
    the deciding identity rule). ``key`` turns the chain's hashes into HMACs. ``fsync`` (default
    on) makes each line durable on disk, not only written.
    """

    name = "audit"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        fields: Callable[[ToolCallRecord], Mapping[str, Any]] | None = None,
        key: bytes | None = None,
        fsync: bool = True,
    ) -> None:
        self.path = Path(path)
        self.fields = fields
        self.key = key
        self.fsync = fsync
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._prev, self._seq, torn = _tail(self.path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        if torn:  # a crash mid-line: that line is left as it is, and says so to the verifier
            logger.warning("%s ends in an incomplete line; the log goes on after it", self.path)
            os.write(self._fd, b"\n")

    def on_tool_call_end(self, record: ToolCallRecord) -> None:
        """Write the call's line (called with the call's span current)."""
        span = trace.get_current_span().get_span_context()
        entry: dict[str, Any] = {
            "time": dt.datetime.now(dt.UTC).isoformat(timespec="microseconds"),
            "tool": record.tool_name,
            "call_id": record.tool_call.id,
            "arguments": arguments_digest(record.tool_call.arguments),
            "decision": record.decision or "none",
            "deciding_hook": record.deciding_hook,
            "outcome": outcome_of(record),
            "error_type": record.error_type,
            "duration_ms": round(record.duration_ms, 3),
            "trace_id": trace.format_trace_id(span.trace_id) if span.is_valid else None,
            "span_id": trace.format_span_id(span.span_id) if span.is_valid else None,
        }
        if self.fields is not None:
            entry.update(self.fields(record))
        with self._lock:
            self._seq += 1
            entry["seq"] = self._seq
            entry["prev"] = self._prev
            entry["hash"] = _line_hash(entry, self.key)
            os.write(self._fd, _canonical(entry) + b"\n")
            if self.fsync:
                os.fsync(self._fd)
            self._prev = entry["hash"]

    def close(self) -> None:
        """Close the file (later calls are not logged)."""
        with self._lock:
            os.close(self._fd)


def _tail(path: Path) -> tuple[str, int, bool]:
    """The hash and number of the file's last complete line, and whether a torn line ends it."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return GENESIS, 0, False
    torn = bool(data) and not data.endswith(b"\n")
    for raw in reversed(data.splitlines()[: -1 if torn else None]):
        try:
            entry = json.loads(raw)
            return str(entry["hash"]), int(entry["seq"]), torn
        except (ValueError, KeyError, TypeError):
            continue
    return GENESIS, 0, torn


@dataclass
class AuditCheck:
    """What :func:`verify_audit_log` found: the lines read, and each problem (line, why)."""

    lines: int = 0
    problems: list[tuple[int, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the whole chain holds."""
        return not self.problems


def verify_audit_log(path: str | os.PathLike[str], *, key: bytes | None = None) -> AuditCheck:
    """Recompute the chain of an audit log: every line's hash, and its link to the line before
    (a line removed, changed, added or reordered breaks it)."""
    check = AuditCheck()
    prev, seq = GENESIS, 0
    with open(path, "rb") as lines:
        for number, raw in enumerate(lines, 1):
            check.lines = number
            if not raw.strip():
                continue
            try:
                entry = json.loads(raw)
            except ValueError:
                check.problems.append((number, "not JSON (a torn or edited line)"))
                continue
            if not isinstance(entry, dict) or "hash" not in entry:
                check.problems.append((number, "not an audit line"))
                continue
            if entry.get("prev") != prev:
                check.problems.append((number, "does not follow the line before"))
            if entry.get("seq") != seq + 1:
                check.problems.append((number, f"sequence {entry.get('seq')} after {seq}"))
            if _line_hash(entry, key) != entry["hash"]:
                check.problems.append((number, "its hash does not match its content"))
            prev, seq = str(entry["hash"]), int(entry.get("seq") or 0)
    return check
