"""An audit log of tool calls: JSON lines, append-only, one per call, each chained to the last,
with a keyed head beside it so that lines cut from the end are seen.

:class:`AuditLog` is an observer (``on_tool_call_end``): every call, allowed, blocked or failed,
writes one line with the time, who called (``fields`` adds what the host knows: identity,
upstream, session), the tool, a keyed digest of the arguments (never the arguments; see
:mod:`otelhooks.core.digest`), the decision and the hook that made it, the outcome and the trace
and span ids; :meth:`AuditLog.append` writes other events (refused logins, recorded gaps). Each
line is written whole with one ``write``. Lines are ASCII (every other character escaped), so no
reader splits one in two.

**Tamper evidence.** Each line carries ``seq``, ``prev`` (the ``hash`` of the line before) and
its own ``hash``, last: an HMAC, with a key derived from the log's secret, of the line's exact
bytes before it (the line as written, closed after ``prev``), so rewriting, removing or
reordering a line, or only its spacing, needs the secret. Beside the log, ``<log>.head`` holds
the number of lines, the last one's hash and the log's length in bytes up to it, with an HMAC of
its own: a log cut at the end no longer matches its head. :func:`verify_audit_log` (``otelhooks
mcp audit verify``) recomputes the chain, compares its end with the head and names the lines
missing. On start a log that does not match its head is refused (:class:`AuditLogError`), unless
``record_gap`` writes a signed gap record naming what is missing and goes on from there.

**Durable, then sealed.** The head never names a line that is not on disk. With ``fsync`` (the
default) each line is made durable and the head rewritten after it. With ``group_commit`` the
lines are only written, and :meth:`AuditLog.commit` (a group commit: one ``fsync`` for the lines
of every caller waiting) makes them durable and *then* rewrites the head: between the two, and
after a crash there, the log runs ahead of its head. That is the one state a crash leaves, and it
is told apart from tampering: the lines after the head still chain from the line it names (at
its byte offset). The next start checks them and seals them (the head brought up to date);
``verify`` names them as not yet sealed (exit 3), never as missing. A line the crash cut in two
(or a tail of garbage a power loss left after the last ``fsync``) is kept as it is and named by
a signed ``audit_torn`` record (its offset, length and SHA-256) that the start writes after it,
so that ``verify`` reports it as what it is. The head itself is rewritten in place (one sector)
and made durable at start and at close; after a power loss it can only be behind the log.

**The secret** comes from the caller (``[audit] key_env`` at the gateway), else from
``<log>.key``, made once (32 random bytes, mode 0600) when it does not exist. From it,
:class:`AuditKeys` derives independent keys: for the chain, for argument digests and for
pseudonyms.

Limits: lines after the head (written, not yet sealed) can be cut without a trace until the
head names them; with a group commit their callers have not been answered yet. Without
``fsync`` nothing is durable, and the head is sealed as each line is written: after a power
loss it can name lines the disk lost (a start then refuses, as for a cut). Whoever holds the
secret can rewrite everything, and a log and head both put back to an earlier state of theirs
are consistent: ship the lines elsewhere too when that matters (see the threat model).
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
from ..core.approvals import ApprovalOutcome
from ..core.hooks import ToolCallRecord
from .redaction import Redactor, resolve

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
    """What the head says: the number of lines, the last line's hash and the log's length in
    bytes up to the end of that line."""

    count: int
    hash: str
    size: int = 0

    def sealed(self, keys: AuditKeys) -> bytes:
        """The head as written: JSON with its HMAC, padded to a fixed size (so that it is
        rewritten in place, within one sector)."""
        body = b'{"count":%d,"hash":"%s","size":%d,"v":%d}' % (
            self.count,
            self.hash.encode(),
            self.size,
            VERSION,
        )
        mac = hmac.new(keys.chain, b"head" + body, hashlib.sha256).hexdigest()
        return (body[:-1] + b',"mac":"' + mac.encode() + b'"}').ljust(_HEAD_SIZE - 1) + b"\n"

    @classmethod
    def read(cls, path: Path, keys: AuditKeys) -> Head | None:
        """The head at ``path`` (``None`` when there is none); :class:`AuditLogError` when it
        is not one, or its HMAC does not fit."""
        try:
            data = json.loads(path.read_bytes())
            head = cls(int(data["count"]), str(data["hash"]), int(data["size"]))
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


NO_LINES: Final = Head(0, GENESIS, 0)
"""The head of an empty log."""


class AuditLog:
    """Appends one chained JSON line per tool call to ``path`` (see the module's docs).

    ``fields(record)`` adds fields (the gateway adds the identity, the upstream, the session and
    the deciding identity rule). ``secret`` is the log's secret (default: ``key_file``, else
    ``<path>.key``, made once). ``fsync`` (default on) makes the lines durable on disk before
    the head names them: each line at once, or, with ``group_commit``, at each :meth:`commit`
    (the caller's group commit, from any thread). ``record_gap``: a log that does not match its
    head gets a signed gap record instead of refusing to open (:class:`AuditLogError`).
    ``redactor`` scrubs what the model chose, the call id and an unknown tool's name, as
    :class:`~otelhooks.builtin.StructlogEvents` does (default: the default redactor; ``False``
    for none).
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
        group_commit: bool = False,
        record_gap: bool = False,
        redactor: Redactor | bool | None = None,
    ) -> None:
        self.path = Path(path)
        self.fields = fields
        self.redactor = resolve(redactor)
        """What scrubs the text the model chose (the call id, an unknown tool's name)."""
        self.fsync = fsync
        self.group_commit = group_commit and fsync
        self.path.parent.mkdir(parents=True, exist_ok=True)
        from_env = secret is not None
        if secret is None:
            secret = load_secret(key_file if key_file is not None else key_path(self.path))
        self.keys = AuditKeys.of(secret, legacy=from_env)
        self._lock = threading.Lock()  # the chain's state and the writes
        self._committing = threading.Lock()  # one commit at a time; held by close
        self._head_path = head_path(self.path)
        end = _recover(self.path, self.keys)
        if end.gap is not None and not record_gap:  # before anything is opened: evidence stays
            raise AuditLogError(
                f"{self.path}: {end.gap.problem}; refusing to go on (verify it with `otelhooks "
                "mcp audit verify`; to go on with a signed record of the gap, start once with "
                "--audit-record-gap)"
            )
        created = not self.path.exists()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._head_fd = os.open(self._head_path, os.O_RDWR | os.O_CREAT, 0o600)
        self._written = end.last  # the last line written (seq, hash, bytes up to its end)
        self._sealed = NO_LINES  # what the head names
        self._size = os.fstat(self._fd).st_size
        if end.torn is not None:
            offset, debris = end.torn
            logger.warning(
                "%s: %d bytes after line %d are not a whole line of the chain (a crash while "
                "it was written): kept, and recorded",
                self.path,
                len(debris),
                end.last.count,
            )
            if not debris.endswith(b"\n"):
                self._size += os.write(self._fd, b"\n")
                debris += b"\n"
            self._append_now(
                "audit_torn",
                {
                    "after": end.last.count,
                    "offset": offset,
                    "bytes": len(debris),
                    "sha256": hashlib.sha256(debris).hexdigest(),
                },
            )
        if end.gap is not None:
            logger.error("%s: %s; a gap record is written", self.path, end.gap.problem)
            self._append_now("audit_gap", {"missing": end.gap.missing, "problem": end.gap.problem})
        elif end.unsealed:
            logger.warning(
                "%s: lines %d-%d were written after its head and chain from it (a crash before "
                "the head was rewritten): the head is brought up to date",
                self.path,
                end.unsealed[0],
                end.unsealed[1],
            )
        # What the log holds now is made durable, then named by a durable head.
        os.fsync(self._fd)
        self._seal(self._written)
        os.fsync(self._head_fd)
        if created:
            _sync_directory(self.path.parent)

    @property
    def argument_key(self) -> bytes:
        """The key of the argument digests (another process computes the same digest with it)."""
        return self.keys.arguments

    def on_tool_call_end(self, record: ToolCallRecord) -> None:
        """Write the call's line (called with the call's span current)."""
        span = trace.get_current_span().get_span_context()
        tool, call_id = record.tool_name, record.tool_call.id
        if self.redactor is not None:  # the model chose them
            tool = self.redactor.scrub_identifier(tool)
            call_id = self.redactor.redact_identifier(call_id, "call_id")[0]
        entry: dict[str, Any] = {
            "tool": tool,
            "call_id": call_id,
            "arguments": arguments_digest(record.tool_call.arguments, self.keys.arguments),
            "decision": record.decision or "none",
            "deciding_hook": record.deciding_hook,
            "outcome": outcome_of(record),
            "error_type": record.error_type,
            "duration_ms": round(record.duration_ms, 3),
            "trace_id": trace.format_trace_id(span.trace_id) if span.is_valid else None,
            "span_id": trace.format_span_id(span.span_id) if span.is_valid else None,
        }
        if record.verdict is not None:
            entry["verdict"] = record.verdict
        if record.policies:
            entry["policies"] = list(record.policies)
        extra = self.fields(record) if self.fields is not None else None
        if extra is not None:
            entry.update(extra)
        approval = record.approval
        if approval is not None:  # its own line, before the call's
            self.append("approval", approval_entry(record, approval, entry, extra))
        self.append("tool_call", entry)

    def append(self, event: str, fields: Mapping[str, Any]) -> int:
        """Write one line of ``event`` with ``fields`` (JSON values); returns its ``seq``. With
        ``fsync`` and no group commit it is durable and sealed when this returns; with a group
        commit, at the next :meth:`commit`."""
        with self._lock:
            if self._fd < 0:
                raise AuditLogError(f"{self.path}: the audit log is closed")
            seq = self._write(event, fields)
            if self.group_commit:
                return seq
            if self.fsync:
                os.fsync(self._fd)
            self._seal(self._written)
        return seq

    def _append_now(self, event: str, fields: Mapping[str, Any]) -> None:
        with self._lock:
            self._write(event, fields)

    def _write(self, event: str, fields: Mapping[str, Any]) -> int:
        """Write one line (the lock held); the chain's state moves on."""
        entry: dict[str, Any] = {
            "time": dt.datetime.now(dt.UTC).isoformat(timespec="microseconds"),
            "event": event,
            **fields,
            "v": VERSION,
            "seq": self._written.count + 1,
            "prev": self._written.hash,
        }
        body = _body(entry)
        digest = hmac.new(self.keys.chain, body, hashlib.sha256).hexdigest()
        line = _sealed_line(body, digest) + b"\n"
        written = os.write(self._fd, line)
        if written != len(line):  # a full disk: what was written is debris for the next start
            raise AuditLogError(f"{self.path}: short write ({written} of {len(line)} bytes)")
        self._size += written
        self._written = Head(self._written.count + 1, digest, self._size)
        return self._written.count

    def commit(self) -> None:
        """Make every line written so far durable (one ``fsync``), then have the head name
        them. Thread-safe: the gateway's group commit calls it from a worker thread while lines
        go on being written; the head never names a line this has not made durable."""
        with self._committing:
            with self._lock:
                fd, upto = self._fd, self._written
            if fd < 0 or upto.count <= self._sealed.count:
                return
            os.fsync(fd)  # outside the lock: writers go on meanwhile
            with self._lock:
                if self._fd >= 0:
                    self._seal(upto)

    def _seal(self, head: Head) -> None:
        """Rewrite the head in place to name ``head`` (only ever a line already durable)."""
        if head.count < self._sealed.count:
            return
        os.pwrite(self._head_fd, head.sealed(self.keys), 0)
        self._sealed = head

    @property
    def sealed(self) -> Head:
        """What the head names now."""
        return self._sealed

    def close(self) -> None:
        """Make the lines and the head durable and close the files (later lines are refused)."""
        with self._committing, self._lock:
            if self._fd < 0:
                return
            os.fsync(self._fd)
            self._seal(self._written)
            os.fsync(self._head_fd)
            os.close(self._head_fd)
            os.close(self._fd)
            self._fd = self._head_fd = -1


def _sync_directory(folder: Path) -> None:
    """Make a file's creation in ``folder`` durable."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def approval_entry(
    record: ToolCallRecord,
    approval: ApprovalOutcome,
    call: Mapping[str, Any],
    extra: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The line of an approval decision: which call (tool, call id, the audit's digest of its
    arguments and the approval's own keyed digest they were bound to), the answer, who gave it,
    how, when the call waited, the approval used, the policies that asked, and the caller's
    fields (at the gateway: who asked)."""
    entry: dict[str, Any] = {
        "tool": call["tool"],
        "call_id": call["call_id"],
        "arguments": call["arguments"],
        "approval_digest": approval.digest,
        "request": approval.request_id,
        "answer": approval.answer,
        "by": approval.by,
        "how": approval.how,
        "approval": approval.grant,
        "wait_ms": round(approval.wait_ms, 3),
        "reason": approval.reason or None,
        "verdict": record.verdict,
        "policies": list(record.policies),
        "trace_id": call["trace_id"],
        "span_id": call["span_id"],
    }
    if extra is not None:
        entry.update(extra)
    return entry


def outcome_of(record: ToolCallRecord) -> str:
    """``ok``, ``blocked``, ``deferred``, ``skipped`` or ``error``."""
    if record.decision == "block":
        return "blocked"
    if record.decision == "defer":
        return "deferred"
    if record.decision == "skip":
        return "skipped"
    return "error" if record.result.is_error else "ok"


# -- the end of a log, against its head -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Gap:
    problem: str
    missing: str


@dataclass(frozen=True, slots=True)
class _End:
    """Where a log opened for writing goes on from: its last line of the chain; what does not
    match the head (``gap``); a torn tail after the chain (offset, its bytes); the lines after
    the head that chain from it (first, last)."""

    last: Head
    gap: _Gap | None = None
    torn: tuple[int, bytes] | None = None
    unsealed: tuple[int, int] | None = None


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


def _tail(path: Path) -> Head:
    """The last complete line that parses (its ``seq`` and ``hash``), whatever precedes it."""
    for raw in _lines_backwards(path):
        try:
            entry = json.loads(raw)
            return Head(int(entry["seq"]), str(entry["hash"]))
        except (ValueError, KeyError, TypeError):
            continue
    return NO_LINES


def _line_ending_at(path: Path, end: int) -> bytes:
    """The line of ``path`` whose newline is the byte before ``end``, without it (empty when
    that byte is no newline)."""
    with open(path, "rb") as handle:
        handle.seek(end - 1)
        if handle.read(1) != b"\n":
            return b""
        start, chunk = end - 1, b""  # chunk: the bytes from start to that newline
        while start > 0:
            step = min(65536, start)
            start -= step
            handle.seek(start)
            chunk = handle.read(step) + chunk
            found = chunk.rfind(b"\n")
            if found >= 0:
                return chunk[found + 1 :]
        return chunk


def _chains(raw: bytes, last: Head, keys: AuditKeys) -> Mapping[str, Any] | None:
    """``raw`` parsed, when it is a whole line that follows ``last`` in the chain."""
    if not raw.endswith(b"\n"):
        return None
    try:
        entry = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(entry, dict) or entry.get("v") != VERSION:
        return None
    if entry.get("seq") != last.count + 1 or entry.get("prev") != last.hash:
        return None
    return entry if _line_hash(entry, keys, raw) == entry.get("hash") else None


def _recover(path: Path, keys: AuditKeys) -> _End:
    """How the log at ``path`` ends against its head (see the module's docs): the lines the
    head names must be there, unchanged; lines after them must chain from them (a crash left
    them unsealed); a tail that does not is a torn write, kept and recorded."""
    head = Head.read(head_path(path), keys)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        size = 0
    if head is None:
        if size == 0:
            return _End(NO_LINES)  # a new log
        found = _tail(path)
        return _End(
            found,
            gap=_Gap(
                f"its head ({head_path(path).name}) is missing: lines after line {found.count} "
                "may have been removed",
                f"after line {found.count} (unknown)",
            ),
        )
    named = _line_ending_at(path, head.size) if 0 < head.size <= size else b""
    try:
        entry = json.loads(named) if named else {}
    except ValueError:
        entry = {}
    intact = head.count == 0 or (entry.get("seq") == head.count and entry.get("hash") == head.hash)
    if size < head.size or not intact:
        found = _tail(path)
        if found.count < head.count:
            end = "the file is empty" if size == 0 else f"the log ends at line {found.count}"
            gap = _Gap(
                f"lines {found.count + 1}-{head.count} are missing: {end}, its head says "
                f"{head.count}",
                f"{found.count + 1}-{head.count}",
            )
        else:
            gap = _Gap(
                f"line {head.count} is not the line its head names (the log was rewritten)",
                f"{head.count} (rewritten)",
            )
        return _End(found, gap=gap)
    last, offset = head, head.size
    torn = None
    with open(path, "rb") as handle:
        handle.seek(offset)
        for raw in handle:
            chained = _chains(raw, last, keys)
            if chained is None:
                handle.seek(offset)
                torn = (offset, handle.read())
                break
            offset += len(raw)
            last = Head(last.count + 1, str(chained["hash"]), offset)
    unsealed = (head.count + 1, last.count) if last.count > head.count else None
    return _End(last, torn=torn, unsealed=unsealed)


# -- verification ---------------------------------------------------------------------------------


@dataclass
class AuditCheck:
    """What :func:`verify_audit_log` found: the lines read, each problem (line, why; line 0 for
    the file as a whole), the lines missing (first, last; ``last`` None when unknown), the gaps
    the log itself records, the lines after the head that chain from it (first, last: written,
    not yet sealed; a running gateway's, or a crash's) and the torn writes a restart recorded
    (line of the record, what it says)."""

    lines: int = 0
    problems: list[tuple[int, str]] = field(default_factory=list)
    missing: tuple[int, int | None] | None = None
    gaps: list[tuple[int, str]] = field(default_factory=list)
    unsealed: tuple[int, int] | None = None
    torn: list[tuple[int, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the whole chain holds, agrees with its head and records no gap (lines not
        yet sealed and recorded torn writes are what a crash leaves, not a fault)."""
        return not self.problems and not self.gaps


@dataclass
class _Scan:
    """The chain as read so far: the last line read, the last one that checked, and the
    bytes since that one (a torn write, when a restart's record names them)."""

    prev: str = GENESIS
    seq: int = 0
    good: Head = NO_LINES
    offset: int = 0
    pending: Any = field(default_factory=hashlib.sha256)  # a hashlib hash of those bytes
    pending_problems: int = 0
    ends: dict[int, tuple[str, int]] = field(default_factory=dict)  # seq -> (hash, end)


def verify_audit_log(
    path: str | os.PathLike[str],
    *,
    secret: bytes | None = None,
    key_file: str | os.PathLike[str] | None = None,
    head: bool = True,
) -> AuditCheck:
    """Recompute the chain of an audit log: every line's hash, its link to the line before (a
    line removed, changed, added or reordered breaks it), and the end against the head (lines
    cut from the end, an emptied file, a head missing or forged, lines it names rewritten;
    lines after it that chain from it are reported as not yet sealed). ``secret`` as the log
    was written with (default: ``key_file``, else ``<path>.key``); ``head=False`` skips the
    head (a copy of a log without it)."""
    from_env = secret is not None
    if secret is None:
        secret = load_secret(key_file if key_file is not None else key_path(path), create=False)
    keys = AuditKeys.of(secret, legacy=from_env)
    try:
        found = Head.read(head_path(path), keys) if head else None
    except AuditLogError as exc:
        found, head = None, False
        problem: tuple[int, str] | None = (0, str(exc))
    else:
        problem = None
    check = AuditCheck()
    scan = _Scan()
    with open(path, "rb") as lines:
        for number, raw in enumerate(lines, 1):
            check.lines = number
            _verify_line(number, raw, keys, scan, check)
            if found is not None and scan.seq == found.count and scan.good.count == found.count:
                scan.ends[found.count] = (scan.good.hash, scan.good.size)
    if problem is not None:
        check.problems.append(problem)
    if head:
        _check_head(Path(path), found, scan, check)
    return check


def _verify_line(number: int, raw: bytes, keys: AuditKeys, scan: _Scan, check: AuditCheck) -> None:
    """Check one line of the chain (see :func:`verify_audit_log`)."""
    start = scan.offset
    scan.offset += len(raw)
    before = len(check.problems)
    if scan.good.size == start:  # the line right after the last good one: nothing pending
        scan.pending = hashlib.sha256()
        scan.pending_problems = before
    if not raw.strip():
        scan.pending.update(raw)
        return
    try:
        entry = json.loads(raw)
    except ValueError:
        entry = None
    if not isinstance(entry, dict) or "hash" not in entry:
        what = "not an audit line" if entry is not None else "not JSON (a torn or edited line)"
        check.problems.append((number, what))
        scan.pending.update(raw)
        return
    valid = _line_hash(entry, keys, raw) == entry["hash"]
    if valid and entry.get("event") == "audit_torn" and _names_torn(entry, scan, start):
        # A restart's record of a torn write right before it: what a crash left, not a fault.
        del check.problems[scan.pending_problems :]
        before = len(check.problems)
        check.torn.append(
            (number, f"records a torn write of {entry.get('bytes')} bytes after line "
                     f"{entry.get('after')} (a crash while it was written)")
        )  # fmt: skip
    else:
        if entry.get("prev") != scan.prev:
            check.problems.append((number, "does not follow the line before"))
        if entry.get("seq") != scan.seq + 1:
            check.problems.append((number, f"sequence {entry.get('seq')} after {scan.seq}"))
        if not valid:
            check.problems.append((number, "its hash does not match its content"))
        elif entry.get("event") == "audit_gap":
            check.gaps.append((number, f"records a gap: lines {entry.get('missing')}"))
    scan.prev, scan.seq = str(entry["hash"]), int(entry.get("seq") or 0)
    if len(check.problems) == before:
        scan.good = Head(scan.seq, scan.prev, scan.offset)
    else:
        scan.pending.update(raw)


def _names_torn(entry: Mapping[str, Any], scan: _Scan, start: int) -> bool:
    """Whether an ``audit_torn`` record chains from the last good line and names exactly the
    bytes between it and the record."""
    good = scan.good
    return (
        entry.get("prev") == good.hash
        and entry.get("seq") == good.count + 1
        and entry.get("after") == good.count
        and entry.get("offset") == good.size
        and entry.get("bytes") == start - good.size
        and entry.get("sha256") == scan.pending.hexdigest()
    )


def _check_head(path: Path, found: Head | None, scan: _Scan, check: AuditCheck) -> None:
    seq, last = scan.seq, scan.prev
    if found is None:
        if any(p[0] == 0 for p in check.problems):
            return  # a head that is not one, or forged: said already
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
    elif found.count and scan.ends.get(found.count) != (found.hash, found.size):
        check.problems.append(
            (0, f"line {found.count} is not the line its head names (the log was rewritten)")
        )
    elif seq > found.count:
        check.unsealed = (found.count + 1, seq)
    elif found.hash != last:
        check.problems.append((0, f"line {seq} is not the line its head names (rewritten)"))
