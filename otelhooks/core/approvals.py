"""Approvals: what a before-hook's ``ask`` is answered with, by whom, and what it authorises.

Contracts
---------
* An **approver** is an async callable (:class:`Approver`) given to the executor or the agent.
  It gets an :class:`ApprovalRequest` (the tool, the keyed digest of the canonical arguments
  after every rewrite, the arguments as redacted for display, the identity asking, the reasons
  and policy ids that asked) and answers :class:`Approve`, :class:`ApproveWithEdit` or
  :class:`Deny`, each saying who decided and how. Without an approver an ask is a block whose
  reason says so (fail closed); an approver that raises, times out or answers anything else
  denies the call (its failure is recorded).
* An **approval** (:class:`Grant`) is bound to the tool, the argument digest, the identity and
  the call it was made for (its id); it is used at most once and expires
  (:data:`DEFAULT_APPROVAL_TTL`, a setting). Another call, even of the same tool with the same
  arguments for the same identity, needs a new one.
* An approve-with-edit is validated and runs through the before-hooks again with the edited
  arguments; the approval it creates is bound to the edited arguments and answers that second
  pass's ask. An edit the second pass rewrites again, or asks about again for other arguments,
  goes to the approver again (at most :data:`MAX_EDITS` edits per call).
* The digest is :func:`otelhooks.core.digest.keyed_digest` with a key derived for approvals
  (:func:`approval_key`): without the key, a digest in telemetry or in the store tells nothing
  about the arguments.
"""

from __future__ import annotations

import inspect
import secrets
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal, Protocol, TypeAlias

from .deadline import deadline
from .digest import derive_key, keyed_digest

__all__ = [
    "DEFAULT_APPROVAL_TTL",
    "MAX_EDITS",
    "ApprovalDecision",
    "ApprovalOutcome",
    "ApprovalRequest",
    "ApprovalSettings",
    "Approve",
    "ApproveWithEdit",
    "Approver",
    "CallIdentity",
    "Deny",
    "Grant",
    "Grants",
    "approval_key",
    "arguments_digest",
]

DEFAULT_APPROVAL_TTL: Final = 600.0
"""Seconds an approval stays usable (and an approver may take to answer): ten minutes."""
MAX_EDITS: Final = 2
"""Approve-with-edit answers one call may get; the next ask is denied."""
_NO_ARGUMENTS: Final[Mapping[str, Any]] = MappingProxyType({})


def approval_key(secret: bytes | None = None) -> bytes:
    """The key argument digests of approvals are made with: derived from ``secret`` (give the
    same secret to every process that must agree on digests: a resumed run, a store shared by
    several agents), else a random one for this process."""
    return derive_key(secret if secret else secrets.token_bytes(32), "approval arguments")


def arguments_digest(key: bytes, tool: str, arguments: Mapping[str, Any]) -> str:
    """The keyed digest an approval of a call of ``tool`` with ``arguments`` is bound to."""
    return keyed_digest(key, {"tool": tool, "arguments": arguments})


@dataclass(frozen=True, slots=True)
class CallIdentity:
    """Who asks for a call: in-process the agent, the run and an optional user (given to
    ``run()``); at the gateway the agent is the gateway's name and ``user`` the authenticated
    principal. An approval is bound to all three."""

    agent: str
    run: str
    user: str | None = None

    def key(self) -> str:
        """The identity as one string (what an approval is bound to and the store keeps)."""
        return "\x1f".join((self.agent, self.run, self.user or ""))

    def as_dict(self) -> dict[str, str | None]:
        """The identity as JSON."""
        return {"agent": self.agent, "run": self.run, "user": self.user}


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What an approver is asked: may ``tool`` run with these arguments for ``identity``?

    ``call_id`` is the call's id as the model wrote it (the key a resumed run's decisions are
    given under; never shown or stored as it is: the model may have put anything there);
    ``shown_call_id`` is the same id as redacted for display, the one an approver shows or
    stores. ``digest`` is the keyed digest of the canonical arguments (after every rewrite) the
    approval is bound to; ``arguments`` the same arguments as redacted for display (never shown
    anywhere when ``secret`` is true: a form or a terminal gets the digest only); ``reasons``
    and ``policies`` say which hooks and policies asked; ``expires_at`` (seconds since the
    epoch) is when the request stops being answerable.
    """

    id: str
    tool: str
    call_id: str
    shown_call_id: str
    digest: str
    arguments: Mapping[str, Any]
    identity: CallIdentity
    reasons: tuple[str, ...]
    policies: tuple[str, ...]
    hooks: tuple[str, ...]
    expires_at: float
    secret: bool = False

    @property
    def reason(self) -> str:
        """The reasons, as one sentence."""
        return "; ".join(self.reasons) or "approval required"


@dataclass(frozen=True, slots=True)
class Approve:
    """Run the call as asked. ``by`` is who approved, ``how`` through what (``terminal``,
    ``store``, ``elicitation``, ``scripted``, ``resume``, ...); ``id`` the approval's own id
    where it has one (the store's), recorded with the call."""

    by: str
    how: str = "callable"
    id: str = ""


@dataclass(frozen=True, slots=True)
class ApproveWithEdit:
    """Run the call with ``arguments`` instead: they are validated and go through the
    before-hooks again; the approval made is bound to them."""

    arguments: Mapping[str, Any]
    by: str
    how: str = "callable"
    note: str = ""


@dataclass(frozen=True, slots=True)
class Deny:
    """Do not run the call; the model gets ``blocked: <reason>``."""

    by: str
    how: str = "callable"
    reason: str = ""


ApprovalDecision: TypeAlias = Approve | ApproveWithEdit | Deny
"""What an approver answers."""
DecisionKind = Literal["approve", "edit", "deny"]


def decision_kind(decision: ApprovalDecision) -> DecisionKind:
    """``approve``, ``edit`` or ``deny``."""
    if isinstance(decision, ApproveWithEdit):
        return "edit"
    return "approve" if isinstance(decision, Approve) else "deny"


AnswerKind = Literal[
    "approve", "edit", "deny", "timeout", "failed", "missing", "granted", "pending"
]
"""How an ask ended: an approver approved, approved with an edit, denied, did not answer in
time, failed; no approver was configured (``missing``); an approval made earlier for this exact
call was used (``granted``: an edit's second pass); or the call was deferred and waits for a
decision (``pending``)."""


@dataclass(frozen=True, slots=True)
class ApprovalOutcome:
    """What became of one ask, for the call's span, its record and the audit log: the request
    (its id and the argument digest), the answer, who gave it and how, how long the call waited,
    the id of the approval used (``grant``), whether the hooks asked or deferred and the
    policies that did."""

    request_id: str
    digest: str
    answer: AnswerKind
    by: str | None
    how: str | None
    wait_ms: float
    reason: str = ""
    grant: str | None = None
    asked: Literal["ask", "defer"] = "ask"  # what the hooks answered
    policies: tuple[str, ...] = ()  # the policies that asked

    @property
    def approved(self) -> bool:
        """Whether the call may run."""
        return self.answer in ("approve", "edit", "granted")


class Approver(Protocol):
    """Answers approval requests (async)."""

    def __call__(self, request: ApprovalRequest, /) -> Awaitable[ApprovalDecision]: ...


ApproverFn: TypeAlias = Callable[[ApprovalRequest], Awaitable[ApprovalDecision]]


@dataclass(frozen=True, slots=True)
class ApprovalSettings:
    """How asks are answered: the ``approver`` (``None``: every ask is a block), how long an
    approval (and the wait for one) lasts (``ttl``, seconds), and the ``secret`` argument
    digests are keyed with (``None``: a random key for this process)."""

    approver: Approver | None = None
    ttl: float = DEFAULT_APPROVAL_TTL
    secret: bytes | None = None
    key: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not (isinstance(self.ttl, (int, float)) and self.ttl > 0):
            raise ValueError(
                f"the approval ttl must be a positive number of seconds, not {self.ttl!r}"
            )
        if self.approver is not None and not callable(self.approver):
            raise TypeError(
                f"an approver must be an async callable, not {type(self.approver).__name__}"
            )
        object.__setattr__(self, "key", approval_key(self.secret))

    def digest(self, tool: str, arguments: Mapping[str, Any]) -> str:
        """See :func:`arguments_digest`."""
        return arguments_digest(self.key, tool, arguments)


NO_APPROVALS: Final = ApprovalSettings()
"""No approver: every ask is a block."""


@dataclass(frozen=True, slots=True)
class Grant:
    """An approval: of ``tool`` with the arguments of ``digest`` for ``identity`` (its key) in
    the call ``call`` (its id), decided by ``by`` through ``how``, usable once until
    ``expires_at``."""

    id: str
    tool: str
    digest: str
    identity: str
    by: str
    how: str
    expires_at: float
    arguments: Mapping[str, Any] = field(default_factory=dict)  # an edit's arguments
    call: str = ""


class Grants:
    """Approvals made in this process and not used yet: :meth:`add` one, :meth:`take` it for
    the exact call it was made for (once)."""

    __slots__ = ("_grants", "_lock")

    def __init__(self) -> None:
        self._grants: dict[str, Grant] = {}
        self._lock = threading.Lock()

    def add(
        self,
        tool: str,
        digest: str,
        identity: CallIdentity,
        *,
        by: str,
        how: str,
        ttl: float,
        call: str,
        arguments: Mapping[str, Any] = _NO_ARGUMENTS,
    ) -> Grant:
        """A new approval, bound to ``tool``, ``digest``, ``identity`` and the call ``call``
        (its id)."""
        grant = Grant(
            uuid.uuid4().hex[:12], tool, digest, identity.key(), by, how, time.time() + ttl,
            arguments, call,
        )  # fmt: skip
        with self._lock:
            now = time.time()
            for stale in [g for g in self._grants.values() if g.expires_at <= now]:
                del self._grants[stale.id]
            self._grants[grant.id] = grant
        return grant

    def take(self, tool: str, digest: str, identity: CallIdentity, *, call: str) -> Grant | None:
        """The approval made for exactly this call (``call``: its id), now spent; ``None`` when
        there is none (never made, made for other arguments, another identity or another
        call, used, or expired)."""
        key = identity.key()
        with self._lock:
            now = time.time()
            for grant in list(self._grants.values()):
                if grant.expires_at <= now:
                    del self._grants[grant.id]
                elif (
                    grant.tool == tool
                    and grant.digest == digest
                    and grant.identity == key
                    and grant.call == call
                ):
                    del self._grants[grant.id]
                    return grant
        return None

    def discard(self, grant_id: str) -> None:
        """Drop an approval (used or not)."""
        with self._lock:
            self._grants.pop(grant_id, None)

    def __len__(self) -> int:
        return len(self._grants)


async def ask_approver(
    approver: Approver, request: ApprovalRequest, timeout: float
) -> tuple[ApprovalDecision | None, AnswerKind, str]:
    """Ask ``approver`` about ``request`` within ``timeout`` seconds: its decision and how the
    ask ended (``approve``, ``edit``, ``deny``; ``timeout`` or ``failed`` with no decision, and
    a reason naming the fault). An outside cancellation passes through."""
    try:
        with deadline(timeout) as bound:
            value = approver(request)
            decision = await value if inspect.isawaitable(value) else value
    except TimeoutError:
        if bound.expired:
            return None, "timeout", f"no answer from the approver within {timeout:g}s"
        return None, "failed", "the approver raised TimeoutError"
    except Exception as exc:
        return None, "failed", f"the approver raised {type(exc).__name__}"
    if not isinstance(decision, (Approve, ApproveWithEdit, Deny)):
        return (
            None,
            "failed",
            (
                f"the approver answered {type(decision).__name__}; "
                "expected Approve, ApproveWithEdit or Deny"
            ),
        )
    if not isinstance(decision.by, str) or not decision.by:
        return None, "failed", "the approver's decision names nobody (by=...)"
    return decision, decision_kind(decision), ""
