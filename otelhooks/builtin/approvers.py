"""Approvers that come with otelhooks: a person at a terminal, the consistent store answered by
other processes (``otelhooks approvals``), and scripted answers (demos and tests).

Each is an async callable taking an :class:`~otelhooks.core.approvals.ApprovalRequest` and
answering :class:`~otelhooks.core.approvals.Approve` or :class:`~otelhooks.core.approvals.Deny`
with who decided and how. Every one fails closed: no terminal, an answer it does not know, a
store it cannot use, a request that expires unanswered: each is a denial that says why. A
request whose arguments held a secret is shown by its digest only.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import IO, Any, Final

from ..core.approvals import ApprovalDecision, ApprovalRequest, Approve, Deny
from .store import ApprovalRequest as PendingRequest
from .store import SQLiteStore, Store, StoreError, default_store_file

DEFAULT_POLL: Final = 0.2
"""Seconds between two looks at the store's revision while a request waits."""
_YES: Final = frozenset({"a", "approve", "y", "yes"})
_NO: Final = frozenset({"d", "deny", "n", "no", ""})


def describe(request: ApprovalRequest) -> str:
    """The request as a person reads it: tool, arguments (the digest only when they held a
    secret), who asks, why."""
    who = request.identity
    asker = f"agent {who.agent!r}, run {who.run}" + (f", user {who.user!r}" if who.user else "")
    if request.secret:
        shown = f"(held a secret; not shown) {request.digest}"
    else:
        shown = json.dumps(dict(request.arguments), sort_keys=True, default=str)
    policies = f" [policies: {', '.join(request.policies)}]" if request.policies else ""
    return (
        f"tool {request.tool!r} asks for approval: {request.reason}{policies}\n"
        f"  arguments: {shown}\n  asked by: {asker}\n  request: {request.id}"
    )


class TerminalApprover:
    """Asks the person at the controlling terminal: ``approve`` (``a``, ``y``) or ``deny``
    (anything else, an empty line included). Without a terminal (``stdin`` not a TTY) every
    request is denied, saying so. ``who`` is recorded as the approver (default: the OS user).
    One question at a time: concurrent requests wait their turn."""

    def __init__(
        self,
        *,
        stdin: IO[str] | None = None,
        stdout: IO[str] | None = None,
        who: str | None = None,
    ) -> None:
        self.stdin = stdin if stdin is not None else sys.stdin
        self.stdout = stdout if stdout is not None else sys.stderr
        self.who = who or getpass.getuser()
        self._turn = asyncio.Lock()

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        if not _is_tty(self.stdin):
            return Deny("terminal", "terminal", "no terminal to ask (stdin is not a TTY)")
        async with self._turn:
            answer = await asyncio.to_thread(self._ask, request)
        word = answer.strip().lower()
        if word in _YES:
            return Approve(self.who, "terminal")
        reason = "denied at the terminal" if word in _NO else f"unknown answer {word!r}: denied"
        return Deny(self.who, "terminal", reason)

    def _ask(self, request: ApprovalRequest) -> str:
        self.stdout.write(describe(request) + "\n  approve? [a]pprove / [d]eny: ")
        self.stdout.flush()
        return self.stdin.readline()


def _is_tty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed, or not a file
        return False


class StoreApprover:
    """Puts each request in the consistent store (:class:`~otelhooks.builtin.store.SQLiteStore`,
    the gateway's ``[store] file``) as a pending approval and waits for another process to
    answer it (``otelhooks approvals approve ID`` / ``deny ID``), at most until the request
    expires. An approval is bound there to the tool, the argument digest and the identity, and
    is used (spent) before the call runs: approved twice, it still runs once. Anyone who can
    write the store's file can approve (see the threat model in docs/reliability.md)."""

    def __init__(
        self,
        store: Store | str | os.PathLike[str] | None = None,
        *,
        poll: float = DEFAULT_POLL,
        on_pending: Callable[[ApprovalRequest, str], Any] | None = None,
    ) -> None:
        self.store: Store = (
            store
            if store is not None and not isinstance(store, (str, os.PathLike))
            else SQLiteStore(Path(store) if store is not None else default_store_file())
        )
        self.poll = poll
        self.on_pending = on_pending
        """Called with each request and its id in the store once it waits (to tell someone)."""

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        try:
            return await self._wait(request)
        except (StoreError, sqlite3.Error, OSError) as exc:
            return Deny("store", "store", f"the approval store cannot be used: {exc}")

    async def _wait(self, request: ApprovalRequest) -> ApprovalDecision:
        identity = request.identity.key()
        detail = {
            "call_id": request.shown_call_id,
            "request": request.id,
            "arguments": None if request.secret else _plain(request.arguments),
            "secret": request.secret,
            "reasons": list(request.reasons),
            "policies": list(request.policies),
            "identity": request.identity.as_dict(),
        }
        store = self.store
        pending = await asyncio.to_thread(
            store.request_approval,
            PendingRequest(request.tool, request.digest, identity, request.expires_at, detail),
        )
        if self.on_pending is not None:
            self.on_pending(request, pending.id)
        seen = -1
        while True:
            revision = await asyncio.to_thread(store.revision)
            if revision != seen:
                seen = revision
                found = await asyncio.to_thread(store.get_approval, pending.id)
                if found is None:
                    return Deny("store", "store", "the pending approval disappeared")
                if found.state == "approved":
                    used = await asyncio.to_thread(
                        partial(store.consume, pending.id, tool=request.tool,
                                digest=request.digest, identity=identity)
                    )  # fmt: skip
                    if used:
                        return Approve(found.decided_by or "unknown", "store", id=pending.id)
                    return Deny("store", "store", "the approval was used or expired already")
                if found.state == "denied":
                    return Deny(found.decided_by or "unknown", "store", "denied in the store")
                if found.state != "pending":
                    return Deny("store", "store", f"the approval is {found.state}")
            if time.time() >= request.expires_at:
                return Deny("store", "store", "nobody answered before the request expired")
            await asyncio.sleep(self.poll)

    def close(self) -> None:
        """Release the store."""
        self.store.close()


def _plain(arguments: Mapping[str, Any]) -> Any:
    return json.loads(json.dumps(dict(arguments), default=str))


class ScriptedApprover:
    """Answers from a script: ``answers`` maps a tool name to ``"approve"`` or ``"deny"`` (or
    is a sequence of them, used in order); a tool it has no answer for is denied. ``asked``
    keeps every request."""

    def __init__(self, answers: Mapping[str, str] | Iterable[str], *, who: str = "script") -> None:
        self.by_tool = dict(answers) if isinstance(answers, Mapping) else None
        self.queue = list(answers) if not isinstance(answers, Mapping) else []
        for answer in self.by_tool.values() if self.by_tool is not None else self.queue:
            if answer not in ("approve", "deny"):
                raise ValueError(f"a scripted answer is 'approve' or 'deny', not {answer!r}")
        self.who = who
        self.asked: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        self.asked.append(request)
        if self.by_tool is not None:
            answer = self.by_tool.get(request.tool, "deny")
        else:
            answer = self.queue.pop(0) if self.queue else "deny"
        if answer == "approve":
            return Approve(self.who, "scripted")
        return Deny(self.who, "scripted", "the script says no")
