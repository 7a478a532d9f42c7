"""One consistent store for what people decide about tools: tool definition pins and their
approvals, and call approvals with their pending requests.

:class:`Store` is the interface; :class:`SQLiteStore` implements it on one SQLite file through
the standard library (WAL, ``synchronous=FULL``, the file and its journals readable by their
owner only), so several processes on one machine (a gateway, ``otelhooks mcp approve``,
``otelhooks approvals``, an agent asking in-process) share it without losing a write: every
change is one transaction, and a first pin never overwrites another's. The same interface can
sit on PostgreSQL for gateways run as replicas (nothing here depends on SQLite but the class).

Every change moves :meth:`Store.revision` forward, so a reader polls one number to learn that
something changed (a running gateway sees an approval made by another process that way).

Pins are keyed by (upstream, tool): the upstream's key names the server (its name and a digest
of its command or URL) and the tool its own, unprefixed name. A call approval is bound to the
tool, the digest of its canonical arguments and the identity asking; it is used at most once and
expires.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, Protocol

ApprovalState = Literal["pending", "approved", "denied", "used", "expired"]
SCHEMA_VERSION: Final = 1


def default_store_file() -> Path:
    """``$XDG_STATE_HOME/otelhooks/gateway.sqlite3`` (``~/.local/state/...`` by default)."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "otelhooks" / "gateway.sqlite3"


@dataclass(frozen=True, slots=True)
class Definition:
    """A tool's definition as one upstream lists it, with its canonical digest."""

    upstream: str
    tool: str  # the upstream's own name of it
    digest: str
    definition: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Pin:
    """The trusted definition of one tool of one upstream."""

    upstream: str
    tool: str
    digest: str
    definition: Mapping[str, Any]
    pinned_at: float  # seconds since the epoch
    pinned_by: str | None  # None: pinned on first sight; else who approved it
    version: int  # the store's revision when it was written


@dataclass(frozen=True, slots=True)
class PinChange:
    """A definition seen that differs from the pin (``pinned`` is None for a tool not pinned
    yet and held back until approved)."""

    upstream: str
    tool: str
    registered: str  # the name hosts see it by
    digest: str
    definition: Mapping[str, Any]
    pinned: str | None
    first_seen: float
    last_seen: float


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What a call approval is asked for: the tool, the digest of its canonical arguments
    (:func:`otelhooks.core.digest.keyed_digest`), the identity asking, until when; ``detail``
    is shown to whoever decides (never the arguments themselves when they hold a secret)."""

    tool: str
    digest: str
    identity: str
    expires_at: float  # seconds since the epoch
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Approval:
    """A call approval: asked for a tool, an argument digest and an identity; decided by
    someone; used at most once before it expires."""

    id: str
    tool: str
    digest: str
    identity: str
    state: ApprovalState
    requested_at: float
    expires_at: float
    decided_at: float | None = None
    decided_by: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)


class Store(Protocol):
    """What a store of pins and approvals offers (see the module's docs)."""

    def revision(self) -> int:
        """A number that grows with every change anyone makes to the store."""
        ...

    def pin(self, seen: Definition) -> Pin:
        """Pin a tool on first sight; a pin already there is kept and returned."""
        ...

    def get_pin(self, upstream: str, tool: str) -> Pin | None:
        """The pin of a tool, if any."""
        ...

    def pins(self, upstream: str | None = None) -> list[Pin]:
        """Every pin (of one upstream)."""
        ...

    def approve_pin(self, seen: Definition, *, by: str) -> Pin:
        """Pin this definition in place of the old one (``by`` approved it); its reported
        changes are settled."""
        ...

    def report_change(self, seen: Definition, *, registered: str, pinned: str | None) -> None:
        """Record a definition that differs from its pin (``pinned``; None: not pinned yet),
        for review; ``registered`` is the name hosts see the tool by."""
        ...

    def pending_changes(self, upstreams: Iterable[str] | None = None) -> list[PinChange]:
        """The changes reported and not approved (of these upstreams)."""
        ...

    def request_approval(self, request: ApprovalRequest) -> Approval:
        """A new pending call approval."""
        ...

    def decide(self, approval_id: str, *, approve: bool, by: str) -> Approval | None:
        """Approve or deny a pending approval (``None``: no such pending, unexpired one)."""
        ...

    def get_approval(self, approval_id: str) -> Approval | None:
        """One approval, in its current state."""
        ...

    def approvals(self, state: ApprovalState | None = None) -> list[Approval]:
        """Approvals (in one state), oldest first."""
        ...

    def consume(self, approval_id: str, *, tool: str, digest: str, identity: str) -> bool:
        """Use an approved approval for this exact call, once: True when it was approved, for
        this tool, digest and identity, and not expired; it is then spent."""
        ...

    def close(self) -> None:
        """Release the store."""
        ...


class StoreError(RuntimeError):
    """A store that cannot be opened or used (the message names the file)."""


_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta (key, value) VALUES ('revision', 0);
CREATE TABLE IF NOT EXISTS pins (
    upstream TEXT NOT NULL, tool TEXT NOT NULL, digest TEXT NOT NULL, definition TEXT NOT NULL,
    pinned_at REAL NOT NULL, pinned_by TEXT, version INTEGER NOT NULL,
    PRIMARY KEY (upstream, tool));
CREATE TABLE IF NOT EXISTS pin_changes (
    upstream TEXT NOT NULL, tool TEXT NOT NULL, registered TEXT NOT NULL, digest TEXT NOT NULL,
    definition TEXT NOT NULL, pinned TEXT, first_seen REAL NOT NULL, last_seen REAL NOT NULL,
    PRIMARY KEY (upstream, tool, digest));
CREATE TABLE IF NOT EXISTS approvals (
    id TEXT PRIMARY KEY, tool TEXT NOT NULL, digest TEXT NOT NULL, identity TEXT NOT NULL,
    state TEXT NOT NULL, requested_at REAL NOT NULL, expires_at REAL NOT NULL,
    decided_at REAL, decided_by TEXT, detail TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS approvals_state ON approvals (state, requested_at);
"""


class SQLiteStore:
    """:class:`Store` on one SQLite file (created with mode 0600, its directory 0700 when
    created here). One connection per store object, used under a lock: safe from several
    threads; other processes open their own."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 10.0) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            _create_private(self.path)
            self._db = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._migrate()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot open the store: {exc}") from None

    def _migrate(self) -> None:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            found = db.execute("PRAGMA user_version").fetchone()[0]
            if found > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path}: made by a newer otelhooks (schema {found}, this one knows "
                    f"{SCHEMA_VERSION})"
                )
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    # -- transactions --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken at once (``BEGIN IMMEDIATE``: no deadlock between two
        writers that first read); a change in it calls :func:`_bump`."""
        with self._lock, self._damage():
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock, self._damage():
            return list(self._db.execute(sql, args).fetchall())

    @contextlib.contextmanager
    def _damage(self) -> Iterator[None]:
        """SQLite's errors (a damaged or truncated file, a full disk) as :class:`StoreError`
        naming the file, which every caller treats as "nothing trusted" (fail closed)."""
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: the store cannot be used: {exc}") from exc

    def revision(self) -> int:
        """See :meth:`Store.revision`."""
        return int(self._read("SELECT value FROM meta WHERE key = 'revision'")[0][0])

    # -- pins ----------------------------------------------------------------------------------

    def pin(self, seen: Definition) -> Pin:
        """See :meth:`Store.pin`."""
        upstream, tool, digest, definition = _fields(seen)
        with self._write() as db:
            revision = _revision(db) + 1
            added = db.execute(
                "INSERT INTO pins (upstream, tool, digest, definition, pinned_at, pinned_by, "
                "version) VALUES (?, ?, ?, ?, ?, NULL, ?) ON CONFLICT DO NOTHING",
                (upstream, tool, digest, _json(definition), time.time(), revision),
            ).rowcount
            if added:
                _bump(db)
            row = db.execute(_PIN_SELECT + " WHERE upstream = ? AND tool = ?", (upstream, tool))
            return _pin(row.fetchone())

    def get_pin(self, upstream: str, tool: str) -> Pin | None:
        """See :meth:`Store.get_pin`."""
        rows = self._read(_PIN_SELECT + " WHERE upstream = ? AND tool = ?", (upstream, tool))
        return _pin(rows[0]) if rows else None

    def pins(self, upstream: str | None = None) -> list[Pin]:
        """See :meth:`Store.pins`."""
        if upstream is None:
            rows = self._read(_PIN_SELECT + " ORDER BY upstream, tool")
        else:
            rows = self._read(_PIN_SELECT + " WHERE upstream = ? ORDER BY tool", (upstream,))
        return [_pin(row) for row in rows]

    def approve_pin(self, seen: Definition, *, by: str) -> Pin:
        """See :meth:`Store.approve_pin`."""
        upstream, tool, digest, definition = _fields(seen)
        with self._write() as db:
            db.execute(
                "INSERT INTO pins (upstream, tool, digest, definition, pinned_at, pinned_by, "
                "version) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (upstream, tool) DO UPDATE "
                "SET digest = excluded.digest, definition = excluded.definition, "
                "pinned_at = excluded.pinned_at, pinned_by = excluded.pinned_by, "
                "version = excluded.version",
                (upstream, tool, digest, _json(definition), time.time(), by, _bump(db)),
            )
            db.execute("DELETE FROM pin_changes WHERE upstream = ? AND tool = ?", (upstream, tool))
            row = db.execute(_PIN_SELECT + " WHERE upstream = ? AND tool = ?", (upstream, tool))
            return _pin(row.fetchone())

    def report_change(self, seen: Definition, *, registered: str, pinned: str | None) -> None:
        """See :meth:`Store.report_change`."""
        upstream, tool, digest, definition = _fields(seen)
        now = time.time()
        with self._write() as db:
            known = db.execute(
                "UPDATE pin_changes SET last_seen = ?, registered = ?, pinned = ? "
                "WHERE upstream = ? AND tool = ? AND digest = ?",
                (now, registered, pinned, upstream, tool, digest),
            ).rowcount
            if not known:
                db.execute(
                    "INSERT INTO pin_changes (upstream, tool, registered, digest, definition, "
                    "pinned, first_seen, last_seen) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (upstream, tool, registered, digest, _json(definition), pinned, now, now),
                )
                _bump(db)

    def pending_changes(self, upstreams: Iterable[str] | None = None) -> list[PinChange]:
        """See :meth:`Store.pending_changes`."""
        rows = self._read(
            "SELECT upstream, tool, registered, digest, definition, pinned, first_seen, "
            "last_seen FROM pin_changes ORDER BY upstream, tool, first_seen"
        )
        wanted = set(upstreams) if upstreams is not None else None
        return [
            PinChange(u, t, r, d, json.loads(text), p, f, s)
            for u, t, r, d, text, p, f, s in rows
            if wanted is None or u in wanted
        ]

    # -- call approvals ------------------------------------------------------------------------

    def request_approval(self, request: ApprovalRequest) -> Approval:
        """See :meth:`Store.request_approval`."""
        approval = Approval(
            id=uuid.uuid4().hex[:12],
            tool=request.tool,
            digest=request.digest,
            identity=request.identity,
            state="pending",
            requested_at=time.time(),
            expires_at=request.expires_at,
            detail=dict(request.detail),
        )
        with self._write() as db:
            _bump(db)
            db.execute(
                "INSERT INTO approvals (id, tool, digest, identity, state, requested_at, "
                "expires_at, decided_at, decided_by, detail) VALUES (?, ?, ?, ?, ?, ?, ?, "
                "NULL, NULL, ?)",
                (
                    approval.id,
                    approval.tool,
                    approval.digest,
                    approval.identity,
                    "pending",
                    approval.requested_at,
                    approval.expires_at,
                    _json(approval.detail),
                ),
            )
        return approval

    def decide(self, approval_id: str, *, approve: bool, by: str) -> Approval | None:
        """See :meth:`Store.decide`."""
        now = time.time()
        with self._write() as db:
            changed = db.execute(
                "UPDATE approvals SET state = ?, decided_at = ?, decided_by = ? "
                "WHERE id = ? AND state = 'pending' AND expires_at > ?",
                ("approved" if approve else "denied", now, by, approval_id, now),
            ).rowcount
            if changed:
                _bump(db)
        return self.get_approval(approval_id) if changed else None

    def get_approval(self, approval_id: str) -> Approval | None:
        """See :meth:`Store.get_approval`."""
        rows = self._read(_APPROVAL_SELECT + " WHERE id = ?", (approval_id,))
        return _approval(rows[0]) if rows else None

    def approvals(self, state: ApprovalState | None = None) -> list[Approval]:
        """See :meth:`Store.approvals` (pending ones past their time are reported expired)."""
        if state is None:
            rows = self._read(_APPROVAL_SELECT + " ORDER BY requested_at")
        else:
            rows = self._read(_APPROVAL_SELECT + " WHERE state = ? ORDER BY requested_at", (state,))
        return [_approval(row) for row in rows]

    def consume(self, approval_id: str, *, tool: str, digest: str, identity: str) -> bool:
        """See :meth:`Store.consume`."""
        with self._write() as db:
            changed = db.execute(
                "UPDATE approvals SET state = 'used' WHERE id = ? AND state = 'approved' "
                "AND tool = ? AND digest = ? AND identity = ? AND expires_at > ?",
                (approval_id, tool, digest, identity, time.time()),
            ).rowcount
            if changed:
                _bump(db)
        return bool(changed)

    def close(self) -> None:
        """See :meth:`Store.close`."""
        with self._lock:
            self._db.close()


_PIN_SELECT: Final = (
    "SELECT upstream, tool, digest, definition, pinned_at, pinned_by, version FROM pins"
)
_APPROVAL_SELECT: Final = (
    "SELECT id, tool, digest, identity, state, requested_at, expires_at, decided_at, "
    "decided_by, detail FROM approvals"
)


def _fields(seen: Definition) -> tuple[str, str, str, Mapping[str, Any]]:
    return seen.upstream, seen.tool, seen.digest, seen.definition


def _revision(db: sqlite3.Connection) -> int:
    return int(db.execute("SELECT value FROM meta WHERE key = 'revision'").fetchone()[0])


def _bump(db: sqlite3.Connection) -> int:
    """Move the revision forward (inside a write transaction); returns the new one."""
    db.execute("UPDATE meta SET value = value + 1 WHERE key = 'revision'")
    return _revision(db)


def _json(value: Mapping[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=True, separators=(",", ":"))


def _pin(row: tuple[Any, ...]) -> Pin:
    upstream, tool, digest, definition, pinned_at, pinned_by, version = row
    return Pin(upstream, tool, digest, json.loads(definition), pinned_at, pinned_by, version)


def _approval(row: tuple[Any, ...]) -> Approval:
    id_, tool, digest, identity, state, requested, expires, decided, by, detail = row
    if state == "pending" and expires <= time.time():
        state = "expired"
    return Approval(id_, tool, digest, identity, state, requested, expires, decided, by,
                    json.loads(detail))  # fmt: skip


def _create_private(path: Path) -> None:
    """Create the store's file (and its directory) readable by the owner only; an existing
    file readable by others is made private (SQLite gives its journals the file's mode)."""
    if not path.parent.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # Never open and close a descriptor of an existing store: closing any descriptor of a file
    # drops every POSIX lock this process holds on it, those of its open connections included
    # (SQLite then reads a store another connection is writing: "disk I/O error").
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        if os.stat(path).st_mode & 0o077:
            os.chmod(path, 0o600)
