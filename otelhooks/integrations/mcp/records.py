"""What the gateway records of its callers: who called on spans and log events (plain, a keyed
pseudonym, or nothing: ``[auth] identity_in_telemetry``), the caller's fields on each audit line,
the audit log itself made durable by group commit before each answer, and refused logins counted
per client address.

The audit log's head never names a line that is not on disk: the gateway writes lines without
an ``fsync`` each, and :class:`GroupCommit` runs the log's
:meth:`~otelhooks.builtin.audit.AuditLog.commit` (one ``fsync`` for every caller waiting, then the
head) before a caller is answered (see :mod:`otelhooks.builtin.audit`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import trace

from ...builtin.audit import AuditKeys, AuditLog, AuditLogError, load_secret
from ...builtin.store import default_store_file
from ...core import ToolCallRecord
from ...telemetry import attributes as A
from .access import CALLER
from .auth import Identity, LoginRefusals
from .policy import ProxyPolicy


class RecordsError(RuntimeError):
    """The audit log or a key cannot be opened (the message says which and why)."""


class GroupCommit:
    """Makes what was written durable before a caller goes on: ``await sync()`` returns once a
    ``flush`` (the audit log's :meth:`~otelhooks.builtin.audit.AuditLog.commit`: an ``fsync``,
    then the head) that started after the call has finished, and raises what that ``flush``
    raised. ``flush`` runs in a thread of its own, one at a time, so that the callers waiting
    together share one; the thread is started at the first ``sync`` and hands each finished
    ``flush`` back to the event loop that asked for it (one queue put and one
    ``call_soon_threadsafe``: no executor, no concurrent future)."""

    def __init__(self, flush: Callable[[], None]) -> None:
        self._flush = flush
        self._started = 0
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._running = False
        self._closed = False
        self._lock = threading.Lock()  # held by a flush, and by close
        self._jobs: queue.SimpleQueue[tuple[asyncio.AbstractEventLoop, int] | None] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None

    async def sync(self) -> None:
        """Return once what was written before the call is durable."""
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._waiters.append((self._started + 1, future))
        if not self._running:
            self._next(loop)
        await future

    def _next(self, loop: asyncio.AbstractEventLoop) -> None:
        self._running = True
        self._started += 1
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._serve, name="otelhooks-audit-commit", daemon=True
            )
            self._thread.start()
        self._jobs.put((loop, self._started))

    def _serve(self) -> None:
        """The commit thread: one ``flush`` per job, its outcome handed back to the loop."""
        while (job := self._jobs.get()) is not None:
            loop, number = job
            failure: BaseException | None = None
            try:
                with self._lock:
                    if not self._closed:
                        self._flush()
            except Exception as exc:  # handed to the callers waiting: never answered
                failure = exc
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(self._finished, loop, number, failure)

    def _finished(
        self, loop: asyncio.AbstractEventLoop, number: int, failure: BaseException | None
    ) -> None:
        waiting = []
        for need, future in self._waiters:
            if need <= number:
                if not future.done():
                    if failure is not None:
                        future.set_exception(failure)
                    else:
                        future.set_result(None)
            else:
                waiting.append((need, future))
        self._waiters = waiting
        self._running = False
        if waiting:
            self._next(loop)

    def close(self) -> None:
        """Stop flushing (later ``sync`` calls return at once) and end the commit thread."""
        with self._lock:
            self._closed = True
        self._jobs.put(None)


def open_audit(
    policy: ProxyPolicy, fields: Callable[[ToolCallRecord], Mapping[str, Any]]
) -> AuditLog | None:
    """The audit log of ``[audit]``; its secret from ``key_env`` (then taken out of this
    process's environment, so that no upstream inherits it), else its key file. Its lines are
    made durable by group commit, not by an ``fsync`` each."""
    config = policy.audit
    if config is None:
        return None
    secret = None
    if config.key_env:
        secret = os.environ.pop(config.key_env, "").encode() or None
        if secret is None:
            raise RecordsError(
                f"{policy.source}: [audit] key_env names {config.key_env}, which is not set"
            )
    try:
        return AuditLog(
            config.file,
            fields=fields,
            secret=secret,
            key_file=config.key_file,
            fsync=config.fsync,
            group_commit=True,
            record_gap=config.record_gap,
            redactor=policy.redactor if policy.redaction else False,
        )
    except AuditLogError as exc:
        raise RecordsError(str(exc)) from None


def pseudonym_key(policy: ProxyPolicy, audit: AuditLog | None) -> bytes:
    """The key of the pseudonyms telemetry shows (``user.hash``): the audit log's, else one
    kept beside the store (made once)."""
    if audit is not None:
        return audit.keys.pseudonym
    if policy.auth is None or policy.auth.identity_in_telemetry != "hash":
        return b"unused"
    store = policy.store.file or default_store_file()
    try:
        return AuditKeys.of(load_secret(f"{store}.key")).pseudonym
    except AuditLogError as exc:
        raise RecordsError(str(exc)) from None


class CallerRecords:
    """The caller on spans, log events and audit lines, and the audit log with its group
    commit and the refused logins (see the module's docs)."""

    def __init__(self, policy: ProxyPolicy) -> None:
        self.policy = policy
        self.audit = open_audit(policy, self.audit_fields)
        self.commit = (
            GroupCommit(self.audit.commit)
            if self.audit is not None and self.audit.group_commit
            else None
        )
        self.refusals = LoginRefusals(self._login_refused if self.audit is not None else None)
        self.pseudonym_key = pseudonym_key(policy, self.audit)
        self._log_fields: dict[Identity, dict[str, Any]] = {}
        self._identity_attributes: dict[Identity, Mapping[str, Any]] = {}
        self._background: set[asyncio.Future[Any]] = set()

    async def durable(self) -> None:
        """Wait until the audit lines written so far are on disk, and the head names them."""
        if self.commit is not None:
            await self.commit.sync()

    def _login_refused(self, event: str, fields: Mapping[str, Any]) -> None:
        """A count of refused logins, in the audit log, made durable in the background."""
        assert self.audit is not None
        self.audit.append(event, fields)
        with contextlib.suppress(RuntimeError):  # no event loop any more: close() seals it
            task = asyncio.ensure_future(self.durable())
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    def close(self) -> None:
        """Write the refused logins still counted; close the audit log (its lines and its head
        made durable)."""
        self.refusals.close()
        for task in list(self._background):
            task.cancel()
        if self.commit is not None:
            self.commit.close()
        if self.audit is not None:
            self.audit.close()

    # -- the caller on telemetry ------------------------------------------------------------

    def identity_attributes(self, identity: Identity | None) -> Mapping[str, Any]:
        """The identity as telemetry shows it: plain, a keyed pseudonym, or nothing (``[auth]
        identity_in_telemetry``; a proxy without ``[auth]`` shows how the host came in). Made
        once per identity (an identity is immutable, and so are the policy and the key)."""
        if identity is None:
            return {}
        found = self._identity_attributes.get(identity)
        if found is None:
            found = self._attributes_of(identity)
            if len(self._identity_attributes) >= 4096:  # bounded: identities come from tokens
                self._identity_attributes.clear()
            self._identity_attributes[identity] = found
        return found

    def _attributes_of(self, identity: Identity) -> dict[str, Any]:
        mode = self.policy.auth.identity_in_telemetry if self.policy.auth else "plain"
        attrs: dict[str, Any] = {A.IDENTITY_VIA: identity.via}
        if mode == "plain":
            attrs[A.USER_ID] = identity.label
            if identity.groups:
                attrs[A.USER_ROLES] = identity.groups
        elif mode == "hash":
            attrs[A.USER_HASH] = identity.pseudonym(self.pseudonym_key)
        return attrs

    def log_fields(self, identity: Identity | None) -> dict[str, Any]:
        """The identity's fields on structlog events (cached per identity)."""
        if identity is None:
            return {}
        found = self._log_fields.get(identity)
        if found is None:
            found = {
                k.replace(".", "_"): v
                for k, v in self.identity_attributes(identity).items()
                if k != A.IDENTITY_VIA
            }
            if len(self._log_fields) >= 4096:
                self._log_fields.clear()
            self._log_fields[identity] = found
        return found

    def caller_attributes(self, record: ToolCallRecord) -> None:
        """The host's and the caller's attributes on the call's span (an observer: the span is
        current and not yet ended)."""
        caller = CALLER.get()
        span = trace.get_current_span()
        if caller is None or not span.is_recording():
            return
        attrs: dict[str, Any] = {A.NETWORK_TRANSPORT: caller.transport}
        if caller.transport == "tcp":
            attrs[A.NETWORK_PROTOCOL_NAME] = "http"
        if caller.session_id:
            attrs[A.MCP_SESSION_ID] = caller.session_id
        upstream = caller.upstream
        if upstream:
            attrs[A.MCP_UPSTREAM] = upstream
        if caller.rule:
            attrs[A.IDENTITY_RULE] = caller.rule
        attrs.update(self.identity_attributes(caller.identity))
        span.set_attributes(attrs)

    def audit_fields(self, record: ToolCallRecord) -> dict[str, Any]:
        """The caller's fields on the call's audit line."""
        caller = CALLER.get()
        if caller is None:
            return {}
        identity = caller.identity
        fields: dict[str, Any] = {
            "identity": identity.label if identity is not None else None,
            "identity_via": identity.via if identity is not None else None,
            "issuer": identity.issuer if identity is not None else None,
            "session": caller.session_id,
            "upstream": caller.upstream,
            "rule": caller.rule or record.deciding_hook,
        }
        if record.decision in ("block", "skip") and record.block_reason:
            fields["reason"] = record.block_reason
        return fields
