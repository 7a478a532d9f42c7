"""An audit log of tool calls: JSON lines, append-only, one per call, each chained to the last,
with a keyed head beside it so that lines cut from the end are seen.

:class:`AuditLog` is an observer (``on_tool_call_end``): every call, allowed, blocked or failed,
writes one line with the time, who called (``fields`` adds what the host knows: identity,
upstream, session), the tool, a keyed digest of the arguments (never the arguments; see
:mod:`otelhooks.core.digest`), the decision and the hook that made it, the outcome and the trace
and span ids; :meth:`AuditLog.append` writes other events (refused logins, recorded gaps). Each
line is written whole with one ``write`` and flushed to the operating system before the call's
result is returned (``fsync`` also to the disk), so a crash loses nothing already answered.
Lines are ASCII (every other character escaped), so no reader splits one in two.

**Tamper evidence.** Each line carries ``seq``, ``prev`` (the ``hash`` of the line before) and
its own ``hash``, last: an HMAC, with a key derived from the log's secret, of the line's exact
bytes before it (the line as written, closed after ``prev``), so rewriting, removing or
reordering a line, or only its spacing, needs the secret. Beside the log, ``<log>.head`` holds
the number of lines and the last hash, with an HMAC of its own: a log cut at the end no longer
matches its head. :func:`verify_audit_log` (``otelhooks mcp audit verify``) recomputes the chain,
compares its end with the head and names the lines missing. On start a log that does not match
its head is refused (:class:`AuditLogError`), unless ``record_gap`` writes a signed gap record
naming what is missing and goes on from there.

**The secret** comes from the caller (``[audit] key_env`` at the gateway), else from
``<log>.key``, made once (32 random bytes, mode 0600) when it does not exist. From it,
:class:`AuditKeys` derives independent keys: for the chain, for argument digests and for
pseudonyms.

Limits: the head is written after each line without its own ``fsync`` (the line is made durable
first, so after a power loss the head can only be behind the log, which a restart accepts when
the lines after it chain correctly). Whoever holds the secret can rewrite everything, and a log
and head both put back to an earlier state of theirs are consistent: ship the lines elsewhere
too when that matters (see the threat model).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import hmac
import json
import logging
import os
import secrets
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from opentelemetry import trace

from ..core import digest as canonical
from ..core.hooks import ToolCallRecord

logger = logging.getLogger("otelhooks.audit")

GENESIS: Final = "0" * 64
"""The ``prev`` of a log's first line."""
VERSION: Final = 2
"""The line format: keyed canonical hashes (lines without ``v`` are of the first format)."""
_HEAD_SIZE: Final = 512


class AuditLogError(RuntimeError):
    """An audit log that does not match its head (lines missing, or the head gone or forged),
    or a secret that cannot be read."""


def head_path(path: str | os.PathLike[str]) -> Path:
    """Where the head of the log at ``path`` is kept: ``<path>.head``."""
    return Path(f"{os.fspath(path)}.head")


def key_path(path: str | os.PathLike[str]) -> Path:
    """Where the secret of the log at ``path`` is kept by default: ``<path>.key``."""
    return Path(f"{os.fspath(path)}.key")


def load_secret(file: str | os.PathLike[str], *, create: bool = True) -> bytes:
    """The secret in ``file``; made once (32 random bytes, hex, mode 0600) when it does not
    exist and ``create``. A file that others may read is refused."""
    path = Path(file)
    if create and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another process made it first: read theirs
        else:
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_hex(32) + "\n")
                out.flush()
                os.fsync(out.fileno())
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="ascii").strip()
    except (OSError, ValueError) as exc:
        raise AuditLogError(f"{path}: cannot read the audit secret: {exc}") from None
    if mode & 0o077:
        raise AuditLogError(f"{path}: the audit secret is readable by others (chmod 600 it)")
    if len(text) < 32:
        raise AuditLogError(f"{path}: the audit secret is too short (at least 32 characters)")
    return text.encode()


@dataclass(frozen=True, slots=True)
class AuditKeys:
    """The keys derived from a log's secret (see :func:`otelhooks.core.digest.derive_key`);
    ``legacy`` checks lines of the first format (their HMAC used the secret as it is)."""

    chain: bytes
    arguments: bytes
    pseudonym: bytes
    legacy: bytes | None = None

    @classmethod
    def of(cls, secret: bytes, *, legacy: bool = True) -> AuditKeys:
        """The keys of ``secret`` (``legacy``: the secret itself keyed first-format lines)."""
        return cls(
            chain=canonical.derive_key(secret, "audit chain"),
            arguments=canonical.derive_key(secret, "arguments"),
            pseudonym=canonical.derive_key(secret, "pseudonym"),
            legacy=secret if legacy else None,
        )


def arguments_digest(arguments: Any, key: bytes) -> str:
    """The keyed canonical digest of a call's arguments (what the log keeps of them); a JSON
    text is read first. ``hmac-sha256:`` and 64 hex digits (see :mod:`otelhooks.core.digest`);
    arguments that are not JSON at all get the digest of their ``repr``, marked ``repr:``."""
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments)
    try:
        return canonical.keyed_digest(key, arguments)
    except canonical.NotCanonical:
        return "repr:" + canonical.keyed_digest(key, repr(arguments))


def _body(entry: Mapping[str, Any]) -> bytes:
    """A line's bytes without its hash (what the hash covers): sorted keys, no spaces, ASCII."""
    return json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _sealed_line(body: bytes, digest: str) -> bytes:
    return body[:-1] + b',"hash":"' + digest.encode() + b'"}'


def _raw_hash(raw: bytes, keys: AuditKeys) -> str | None:
    """The hash a line of the current format should carry (``None``: it does not end with a
    hash where one belongs)."""
    if len(raw) < _HASH_TAIL or not raw.endswith(b'"}') or raw[-_HASH_TAIL:-66] != b',"hash":"':
        return None
    return hmac.new(keys.chain, raw[:-_HASH_TAIL] + b"}", hashlib.sha256).hexdigest()


_HASH_TAIL: Final = len(b',"hash":"') + 64 + len(b'"}')


def _line_hash(entry: Mapping[str, Any], keys: AuditKeys, raw: bytes | None = None) -> str | None:
    body = {k: v for k, v in entry.items() if k != "hash"}
    if entry.get("v") == VERSION:
        return _raw_hash(raw.rstrip(b"\r\n"), keys) if raw is not None else None
    legacy = json.dumps(
        body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    ).encode()
    if keys.legacy is None:
        return hashlib.sha256(legacy).hexdigest()
    return hmac.new(keys.legacy, legacy, hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class Head:
    """What the head says: the number of lines and the last line's hash."""

    count: int
    hash: str

    def sealed(self, keys: AuditKeys) -> bytes:
        """The head as written: JSON with its HMAC, padded to a fixed size (so that it is
        rewritten in place)."""
        body = b'{"count":%d,"hash":"%s","v":%d}' % (self.count, self.hash.encode(), VERSION)
        mac = hmac.new(keys.chain, b"head" + body, hashlib.sha256).hexdigest()
        return (body[:-1] + b',"mac":"' + mac.encode() + b'"}').ljust(_HEAD_SIZE - 1) + b"\n"

    @classmethod
    def read(cls, path: Path, keys: AuditKeys) -> Head | None:
        """The head at ``path`` (``None`` when there is none); :class:`AuditLogError` when it
        is not one, or its HMAC does not fit."""
        try:
            data = json.loads(path.read_bytes())
            head = cls(int(data["count"]), str(data["hash"]))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise AuditLogError(f"{path}: not an audit head ({exc})") from None
        want = json.loads(head.sealed(keys))["mac"]
        if not hmac.compare_digest(str(data.get("mac")), want):
            raise AuditLogError(
                f"{path}: the head's HMAC does not fit (forged, or the audit secret changed)"
            )
        return head


class AuditLog:
    """Appends one chained JSON line per tool call to ``path`` (see the module's docs).

    ``fields(record)`` adds fields (the gateway adds the identity, the upstream, the session and
    the deciding identity rule). ``secret`` is the log's secret (default: ``key_file``, else
    ``<path>.key``, made once). ``fsync`` (default on) makes each line durable on disk, not only
    written. ``record_gap``: a log that does not match its head gets a signed gap record instead
    of refusing to open (:class:`AuditLogError`).
    """

    name = "audit"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        fields: Callable[[ToolCallRecord], Mapping[str, Any]] | None = None,
        secret: bytes | None = None,
        key_file: str | os.PathLike[str] | None = None,
        fsync: bool = True,
        record_gap: bool = False,
    ) -> None:
        self.path = Path(path)
        self.fields = fields
        self.fsync = fsync
        self.path.parent.mkdir(parents=True, exist_ok=True)
        from_env = secret is not None
        if secret is None:
            secret = load_secret(key_file if key_file is not None else key_path(self.path))
        self.keys = AuditKeys.of(secret, legacy=from_env)
        self._lock = threading.Lock()
        self._head_path = head_path(self.path)
        tail, torn = _tail(self.path, self.keys)
        gap = _mismatch(self.path, tail, self.keys)
        if gap is not None and not record_gap:  # before anything is opened: the evidence stays
            raise AuditLogError(
                f"{self.path}: {gap.problem}; refusing to go on (verify it with `otelhooks mcp "
                "audit verify`; to go on with a signed record of the gap, start once with "
                "--audit-record-gap)"
            )
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._head_fd = os.open(self._head_path, os.O_RDWR | os.O_CREAT, 0o600)
        self._prev, self._seq = (tail.hash, tail.count) if tail else (GENESIS, 0)
        if torn:  # a crash mid-line: that line is left as it is, and says so to the verifier
            logger.warning("%s ends in an incomplete line; the log goes on after it", self.path)
            os.write(self._fd, b"\n")
        if gap is not None:
            logger.error("%s: %s; a gap record is written", self.path, gap.problem)
            self.append("audit_gap", {"missing": gap.missing, "problem": gap.problem})
        else:
            self._seal()

    @property
    def argument_key(self) -> bytes:
        """The key of the argument digests (another process computes the same digest with it)."""
        return self.keys.arguments

    def on_tool_call_end(self, record: ToolCallRecord) -> None:
        """Write the call's line (called with the call's span current)."""
        span = trace.get_current_span().get_span_context()
        entry: dict[str, Any] = {
            "tool": record.tool_name,
            "call_id": record.tool_call.id,
            "arguments": arguments_digest(record.tool_call.arguments, self.keys.arguments),
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
        self.append("tool_call", entry)

    def append(self, event: str, fields: Mapping[str, Any]) -> int:
        """Write one line of ``event`` with ``fields`` (JSON values); returns its ``seq``."""
        entry: dict[str, Any] = {
            "time": dt.datetime.now(dt.UTC).isoformat(timespec="microseconds"),
            "event": event,
            **fields,
            "v": VERSION,
        }
        with self._lock:
            entry["seq"] = self._seq + 1
            entry["prev"] = self._prev
            body = _body(entry)
            digest = hmac.new(self.keys.chain, body, hashlib.sha256).hexdigest()
            os.write(self._fd, _sealed_line(body, digest) + b"\n")
            if self.fsync:
                os.fsync(self._fd)
            self._seq += 1
            self._prev = digest
            self._seal()
        return int(entry["seq"])

    def _seal(self) -> None:
        """Rewrite the head in place (after the line it names is written)."""
        os.pwrite(self._head_fd, Head(self._seq, self._prev).sealed(self.keys), 0)

    def close(self) -> None:
        """Close the file and make the head durable (later calls are not logged)."""
        with self._lock:
            if self._fd < 0:
                return
            os.fsync(self._head_fd)
            os.close(self._head_fd)
            os.close(self._fd)
            self._fd = self._head_fd = -1


def outcome_of(record: ToolCallRecord) -> str:
    """``ok``, ``blocked``, ``skipped`` or ``error``."""
    if record.decision == "block":
        return "blocked"
    if record.decision == "skip":
        return "skipped"
    return "error" if record.result.is_error else "ok"


# -- the end of a log, against its head -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Gap:
    problem: str
    missing: str


def _lines_backwards(path: Path, block: int = 65536) -> Iterator[bytes]:
    """The complete lines of a file, last first (a trailing incomplete line is skipped)."""
    if not path.exists():
        return
    with open(path, "rb") as handle:
        position = handle.seek(0, os.SEEK_END)
        pending = b""
        ended = False  # the last newline found: what follows it is not a line
        while position > 0:
            size = min(block, position)
            position -= size
            handle.seek(position)
            pending = handle.read(size) + pending
            if not ended:
                last = pending.rfind(b"\n")
                if last < 0:
                    continue
                pending, ended = pending[:last], True
            parts = pending.split(b"\n")
            pending = parts[0]
            for line in reversed(parts[1:]):
                if line.strip():
                    yield line
        if ended and pending.strip():
            yield pending


def _tail(path: Path, keys: AuditKeys) -> tuple[Head | None, bool]:
    """The last complete line's (seq, hash), and whether a torn line ends the file."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            if size:
                handle.seek(size - 1)
            torn = bool(size) and handle.read(1) != b"\n"
    except FileNotFoundError:
        return None, False
    for raw in _lines_backwards(path):
        try:
            entry = json.loads(raw)
            return Head(int(entry["seq"]), str(entry["hash"])), torn
        except (ValueError, KeyError, TypeError):
            continue
    return None, torn


def _mismatch(path: Path, tail: Head | None, keys: AuditKeys) -> _Gap | None:
    """How the end of the log differs from its head (``None`` when it fits, or the lines after
    the head are the ones a crash left before the head was rewritten)."""
    head = Head.read(head_path(path), keys)
    found = tail.count if tail is not None else 0
    if head is None:
        if found == 0:
            return None  # a new log
        return _Gap(
            f"its head ({head_path(path).name}) is missing: lines after line {found} may have "
            "been removed",
            f"after line {found} (unknown)",
        )
    if found < head.count:
        return _Gap(
            f"lines {found + 1}-{head.count} are missing: the log ends at line {found}, its "
            f"head says {head.count}",
            f"{found + 1}-{head.count}",
        )
    if found == head.count:
        if tail is not None and tail.hash != head.hash:
            return _Gap(
                f"line {found} is not the line its head names (the end was rewritten)",
                f"{found} (rewritten)",
            )
        return None
    # The log goes on after the head: fine when those lines chain from the head's line.
    chain: list[tuple[bytes, Mapping[str, Any]]] = []
    for raw in _lines_backwards(path):
        try:
            entry = json.loads(raw)
        except ValueError:
            break
        chain.append((raw, entry))
        if entry.get("seq") == head.count:
            break
        if len(chain) > 10_000:
            break
    chain.reverse()
    first = chain[0][1] if chain else {}
    if first.get("seq") == head.count and first.get("hash") == head.hash:
        prev = head.hash
        for raw, entry in chain[1:]:
            if entry.get("prev") != prev or _line_hash(entry, keys, raw) != entry.get("hash"):
                break
            prev = str(entry["hash"])
        else:
            logger.warning(
                "%s: lines %d-%d were written after its head (a crash): the head is brought up "
                "to date",
                path,
                head.count + 1,
                found,
            )
            return None
    return _Gap(
        f"lines {head.count + 1}-{found} do not follow the line its head names ({head.count})",
        f"{head.count + 1}-{found} (unverified)",
    )


# -- verification ---------------------------------------------------------------------------------


@dataclass
class AuditCheck:
    """What :func:`verify_audit_log` found: the lines read, each problem (line, why; line 0 for
    the file as a whole), the lines missing (first, last; ``last`` None when unknown) and the
    gaps the log itself records."""

    lines: int = 0
    problems: list[tuple[int, str]] = field(default_factory=list)
    missing: tuple[int, int | None] | None = None
    gaps: list[tuple[int, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the whole chain holds, matches its head and records no gap."""
        return not self.problems and not self.gaps


def verify_audit_log(
    path: str | os.PathLike[str],
    *,
    secret: bytes | None = None,
    key_file: str | os.PathLike[str] | None = None,
    head: bool = True,
) -> AuditCheck:
    """Recompute the chain of an audit log: every line's hash, its link to the line before (a
    line removed, changed, added or reordered breaks it), and the end against the head (lines
    cut from the end, an emptied file, a head missing, stale or forged). ``secret`` as the log
    was written with (default: ``key_file``, else ``<path>.key``); ``head=False`` skips the
    head (a copy of a log without it)."""
    from_env = secret is not None
    if secret is None:
        secret = load_secret(key_file if key_file is not None else key_path(path), create=False)
    keys = AuditKeys.of(secret, legacy=from_env)
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
            if _line_hash(entry, keys, raw) != entry["hash"]:
                check.problems.append((number, "its hash does not match its content"))
            elif entry.get("event") == "audit_gap":
                check.gaps.append((number, f"records a gap: lines {entry.get('missing')}"))
            prev, seq = str(entry["hash"]), int(entry.get("seq") or 0)
    if head:
        _check_head(Path(path), keys, seq, prev, check)
    return check


def _check_head(path: Path, keys: AuditKeys, seq: int, last: str, check: AuditCheck) -> None:
    try:
        found = Head.read(head_path(path), keys)
    except AuditLogError as exc:
        check.problems.append((0, str(exc)))
        return
    if found is None:
        what = "the file is empty" if seq == 0 else f"lines after line {seq} may be missing"
        check.problems.append(
            (0, f"its head ({head_path(path).name}) is missing: {what}, and nothing says how many")
        )
        check.missing = (seq + 1, None)
    elif seq < found.count:
        end = "the file is empty" if seq == 0 else f"the log ends at line {seq}"
        check.problems.append(
            (0, f"lines {seq + 1}-{found.count} are missing: {end}, its head says {found.count}")
        )
        check.missing = (seq + 1, found.count)
    elif seq > found.count:
        check.problems.append(
            (
                0,
                f"the head is stale: it names line {found.count}, and lines "
                f"{found.count + 1}-{seq} follow (written after it: a crash the gateway has "
                "not restarted from, or an older head put back)",
            )
        )
    elif found.hash != last:
        check.problems.append((0, f"line {seq} is not the line its head names (rewritten)"))
