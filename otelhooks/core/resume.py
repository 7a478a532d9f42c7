"""Deferred runs: the state a run ends with when a before-hook deferred a call, and what resuming
it takes.

Contracts
---------
* A run whose batch of tool calls had a deferred call ends after that batch. Its
  :class:`~otelhooks.core.loop.RunResult` holds a :class:`RunState`: the conversation up to the
  assistant message that asked for the calls, the results of the calls of that batch that
  already ran (they are not run again), the pending calls (each with the
  :class:`~otelhooks.core.approvals.ApprovalRequest` an approver would get), the run's id, user
  and turn, and the trace context of its ``invoke_agent`` span. :meth:`RunState.to_json` is
  plain JSON (``version`` :data:`STATE_VERSION`); :meth:`RunState.from_json` refuses another
  version or a malformed state, naming what is wrong.
* :meth:`otelhooks.Agent.resume` takes the state and one decision per pending call (by call
  id; an id that names no pending call is refused, naming the pending ones: a typo never
  approves anything). Each pending call goes through the executor again (validation and the
  before-hooks), answered by a :class:`ResumeApprover`: its decision holds for that call only,
  once, and only for the arguments it was made for (their keyed digest, computed again now);
  a pending call without a decision is refused. The results go into the conversation in source
  order with those of the calls that had run, and the run goes on under the same run id, its
  new ``invoke_agent`` span linked to the first one's.
* The state is the application's, like the conversation it holds: whoever can change it can
  change what the model said. It holds the arguments of the pending calls as the hooks left
  them (needed to check a decision against them); keep it where the conversation is kept.
  An application's own message types (:class:`~otelhooks.core.messages.CustomMessage`) are not
  kept in it.
* The state is **sealed**: :attr:`RunState.seal` is a keyed digest of its whole JSON form (the
  conversation, the results, the pending calls with their arguments, requests and argument
  digests, the run, agent and user), keyed from the agent's approval key
  (:func:`seal_state`). ``resume()`` refuses a state whose seal its own key does not give
  (:func:`check_seal`, :class:`StateError`): a state changed after the run deferred (other
  arguments shown or run, another tool, another user, a result that never ran) is refused
  before anything runs, and so is one sealed under another ``approval_secret`` (give the same
  one to every process that resumes a run). Each pending call's decision then answers only a
  call whose argument digest, computed again now, is the one recorded when it deferred.
"""

from __future__ import annotations

import hmac
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Final, TypeAlias

from opentelemetry.trace import Link, SpanContext, TraceFlags

from ..telemetry import attributes as A
from .approvals import (
    ApprovalDecision,
    ApprovalRequest,
    ApprovalSettings,
    Approve,
    ApproveWithEdit,
    CallIdentity,
    Deny,
)
from .digest import derive_key, keyed_digest
from .messages import (
    AgentMessage,
    AssistantMessage,
    MediaContent,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)

STATE_VERSION: Final = 2
"""The version of :meth:`RunState.to_json`'s format (2: sealed)."""


class StateError(ValueError):
    """A deferred run's state that cannot be resumed (malformed, another version, or decisions
    that name no pending call)."""


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A deferred call: its request (what an approver is asked) and its arguments as the hooks
    left them."""

    request: ApprovalRequest
    arguments: Mapping[str, Any]

    @property
    def call_id(self) -> str:
        """The call's id."""
        return self.request.call_id


@dataclass(frozen=True, slots=True)
class RunState:
    """What a deferred run ended with (see the module's contracts)."""

    run_id: str
    agent: str
    user: str | None
    turn: int
    messages: tuple[AgentMessage, ...]
    done: Mapping[str, ToolResult]
    pending: tuple[PendingCall, ...]
    usage: Usage
    trace_id: int = 0
    span_id: int = 0
    version: int = STATE_VERSION
    seal: str = ""  # see seal_state; "" for a state never sealed, which resume() refuses

    @property
    def message(self) -> AssistantMessage:
        """The assistant message whose calls were deferred (the last one)."""
        last = self.messages[-1]
        assert isinstance(last, AssistantMessage)
        return last

    def link(self) -> Link | None:
        """A link to the first run's ``invoke_agent`` span (``None`` when it did not record)."""
        if not self.trace_id or not self.span_id:
            return None
        context = SpanContext(self.trace_id, self.span_id, True, TraceFlags(TraceFlags.SAMPLED))
        return Link(context, {A.RESUMED_FROM: self.run_id})

    def to_json(self) -> dict[str, Any]:
        """The state as plain JSON (``json.dumps`` takes it as it is)."""
        return {
            "version": self.version,
            "run_id": self.run_id,
            "agent": self.agent,
            "user": self.user,
            "turn": self.turn,
            "messages": [_message_json(m) for m in self.messages if _kept(m)],
            "done": {k: _message_json(v) for k, v in self.done.items()},
            "pending": [_pending_json(p) for p in self.pending],
            "usage": _usage_json(self.usage),
            "trace_id": f"{self.trace_id:032x}",
            "span_id": f"{self.span_id:016x}",
            "seal": self.seal,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> RunState:
        """A state from :meth:`to_json`'s form (or its JSON text); :class:`StateError` when it
        is not one this version reads."""
        try:
            raw = json.loads(data) if isinstance(data, str) else data
            if not isinstance(raw, Mapping):
                raise StateError("a run state is a JSON object")
            if raw.get("version") != STATE_VERSION:
                raise StateError(
                    f"run state version {raw.get('version')!r}; this otelhooks reads version "
                    f"{STATE_VERSION}"
                )
            messages = tuple(_message(m) for m in raw["messages"])
            state = cls(
                str(raw["run_id"]),
                str(raw["agent"]),
                None if raw["user"] is None else str(raw["user"]),
                int(raw["turn"]),
                messages,
                MappingProxyType({str(k): _result(v) for k, v in raw["done"].items()}),
                tuple(_pending(p) for p in raw["pending"]),
                _usage(raw["usage"]),
                int(raw["trace_id"], 16),
                int(raw["span_id"], 16),
                seal=str(raw["seal"]),
            )
        except StateError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StateError(f"a malformed run state: {type(exc).__name__}: {exc}") from None
        if not messages or not isinstance(messages[-1], AssistantMessage):
            raise StateError("a run state ends with the assistant message whose calls wait")
        ids = {c.id for c in state.message.tool_calls}
        stray = [p.call_id for p in state.pending if p.call_id not in ids]
        stray += [k for k in state.done if k not in ids]
        if stray or not state.pending:
            raise StateError(f"a run state whose calls do not match its message: {stray}")
        return state

    def check(self, decisions: Mapping[str, ApprovalDecision]) -> None:
        """Refuse decisions that name no pending call or are not decisions."""
        pending = [p.call_id for p in self.pending]
        for call_id, decision in decisions.items():
            if call_id not in pending:
                raise StateError(
                    f"a decision for {call_id!r}, which is no pending call of this run; "
                    f"the pending calls are: {', '.join(pending)}"
                )
            if not isinstance(decision, (Approve, ApproveWithEdit, Deny)):
                raise StateError(
                    f"the decision for {call_id!r} is a {type(decision).__name__}; "
                    "expected Approve, ApproveWithEdit or Deny"
                )


class ResumeApprover:
    """Answers the asks of one resumed call with the decision given for it: once, and only when
    the call asks about the arguments the decision was made for (an edit's arguments count as
    what was asked about too, so the second pass of an edit is answered by the edit)."""

    __slots__ = ("decision", "digests", "pending", "used")

    def __init__(
        self, pending: PendingCall, decision: ApprovalDecision | None, settings: ApprovalSettings
    ) -> None:
        self.pending = pending
        self.decision = decision
        tool = pending.request.tool
        # What the decision was asked about: the digest recorded when the call deferred (the
        # seal vouches for it), and only while the arguments kept still give it.
        recorded = pending.request.digest
        agrees = settings.digest(tool, pending.arguments) == recorded
        self.digests = {recorded} if agrees else set()
        self.used = False

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        decision = self.decision
        if decision is None:
            return Deny("resume", "resume", "the run was resumed without a decision for this call")
        if self.used:
            return Deny("resume", "resume", "the decision given for this call was used already")
        if request.call_id != self.pending.call_id or request.digest not in self.digests:
            return Deny(
                "resume",
                "resume",
                "the call asks about other arguments than those the decision was made for",
            )
        self.used = True
        return decision


ResumeRow: TypeAlias = tuple[int, ToolCall, "ToolResult | PendingCall", "ApprovalDecision | None"]
"""A call of the deferred batch: its index, the call, its result or pending entry, its
decision."""


def resume_calls(state: RunState, decisions: Mapping[str, ApprovalDecision]) -> list[ResumeRow]:
    """The calls of the deferred batch in source order: each one's result when it ran, else its
    pending entry and decision."""
    state.check(decisions)
    pending = {p.call_id: p for p in state.pending}
    rows: list[ResumeRow] = []
    for index, call in enumerate(state.message.tool_calls):
        done = state.done.get(call.id)
        if done is not None:
            rows.append((index, call, done, None))
        elif call.id in pending:
            rows.append((index, call, pending[call.id], decisions.get(call.id)))
        else:
            raise StateError(f"call {call.id!r} of the deferred batch neither ran nor waits")
    return rows


def _seal_key(key: bytes) -> bytes:
    return derive_key(key, "run state seal")


def _sealed_body(state: RunState) -> dict[str, Any]:
    body = state.to_json()
    del body["seal"]
    return body


def seal_state(state: RunState, key: bytes) -> RunState:
    """``state`` with its seal: a keyed digest of its JSON form, keyed from ``key`` (the
    executor's approval key, :attr:`~otelhooks.core.approvals.ApprovalSettings.key`)."""
    return replace(state, seal=keyed_digest(_seal_key(key), _sealed_body(state)))


def check_seal(state: RunState, key: bytes) -> None:
    """Refuse (:class:`StateError`) a state that ``key`` did not seal as it is now."""
    expected = keyed_digest(_seal_key(key), _sealed_body(state))
    if not state.seal or not hmac.compare_digest(state.seal, expected):
        raise StateError(
            "the run state's seal does not match: it was changed after the run deferred, or it "
            "was sealed under another approval_secret (give the same one to every process that "
            "resumes this agent's runs)"
        )


def identity_of(state: RunState) -> CallIdentity:
    """The identity the resumed run's calls ask as (the first run's)."""
    return CallIdentity(state.agent, state.run_id, state.user)


# -- JSON forms -----------------------------------------------------------------------------------


def _kept(message: AgentMessage) -> bool:
    return isinstance(message, (UserMessage, AssistantMessage, ToolResult))


def _plain(value: Any) -> Any:
    """``value`` as JSON (tuples as lists, mappings as objects); what JSON cannot hold (a
    result's details of another type) is kept as its ``repr``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return repr(value)


def _media(items: Sequence[MediaContent]) -> list[dict[str, str]]:
    return [{"kind": m.kind, "data": m.data, "mime_type": m.mime_type} for m in items]


def _message_json(message: AgentMessage) -> dict[str, Any]:
    if isinstance(message, UserMessage):
        return {"role": "user", "content": message.content, "media": _media(message.media)}
    if isinstance(message, ToolResult):
        return {
            "role": "toolResult",
            "tool_call_id": message.tool_call_id,
            "tool_name": message.tool_name,
            "content": message.content,
            "details": _plain(message.details),
            "is_error": message.is_error,
            "terminate": message.terminate,
            "media": _media(message.media),
        }
    assert isinstance(message, AssistantMessage)
    return {
        "role": "assistant",
        "text": message.text,
        "tool_calls": [
            {"id": c.id, "name": c.name, "arguments": _plain(c.arguments)}
            for c in message.tool_calls
        ],
        "stop_reason": message.stop_reason,
        "model": message.model,
        "usage": _usage_json(message.usage) if message.usage is not None else None,
        "error_message": message.error_message,
        "thinking": [_thinking_json(t) for t in message.thinking],
        "response_id": message.response_id,
        "provider": message.provider,
        "refusal": message.refusal,
        "error_type": message.error_type,
        "finish_reason": message.finish_reason,
    }


def _thinking_json(block: ThinkingBlock) -> dict[str, str]:
    return {
        "text": block.text,
        "signature": block.signature,
        "encrypted": block.encrypted,
        "id": block.id,
        "provider": block.provider,
    }


def _media_of(items: Sequence[Mapping[str, str]]) -> tuple[MediaContent, ...]:
    return tuple(MediaContent(m["kind"], m["data"], m["mime_type"]) for m in items)  # type: ignore[arg-type]


def _result(data: Mapping[str, Any]) -> ToolResult:
    return ToolResult(
        str(data["tool_call_id"]),
        str(data["tool_name"]),
        str(data["content"]),
        data["details"],
        bool(data["is_error"]),
        bool(data["terminate"]),
        _media_of(data["media"]),
    )


def _message(data: Mapping[str, Any]) -> AgentMessage:
    role = data["role"]
    if role == "user":
        return UserMessage(str(data["content"]), _media_of(data["media"]))
    if role == "toolResult":
        return _result(data)
    if role != "assistant":
        raise StateError(f"a message of role {role!r}")
    usage = data["usage"]
    return AssistantMessage(
        str(data["text"]),
        tuple(ToolCall(str(c["id"]), str(c["name"]), c["arguments"]) for c in data["tool_calls"]),
        data["stop_reason"],
        str(data["model"]),
        _usage(usage) if usage is not None else None,
        data["error_message"],
        tuple(ThinkingBlock(**t) for t in data["thinking"]),
        str(data["response_id"]),
        str(data["provider"]),
        str(data["refusal"]),
        data["error_type"],
        str(data["finish_reason"]),
    )


def _usage_json(usage: Usage) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
    }


def _usage(data: Mapping[str, Any]) -> Usage:
    return Usage(**{k: int(v) for k, v in data.items()})


def _pending_json(pending: PendingCall) -> dict[str, Any]:
    request = pending.request
    return {
        "request": {
            "id": request.id,
            "tool": request.tool,
            "call_id": request.call_id,
            "shown_call_id": request.shown_call_id,
            "digest": request.digest,
            "arguments": _plain(request.arguments),
            "identity": request.identity.as_dict(),
            "reasons": list(request.reasons),
            "policies": list(request.policies),
            "hooks": list(request.hooks),
            "expires_at": request.expires_at,
            "secret": request.secret,
        },
        "arguments": _plain(pending.arguments),
    }


def _pending(data: Mapping[str, Any]) -> PendingCall:
    r = data["request"]
    identity = r["identity"]
    request = ApprovalRequest(
        str(r["id"]),
        str(r["tool"]),
        str(r["call_id"]),
        str(r["shown_call_id"]),
        str(r["digest"]),
        MappingProxyType(dict(r["arguments"])),
        CallIdentity(str(identity["agent"]), str(identity["run"]), identity["user"]),
        tuple(str(x) for x in r["reasons"]),
        tuple(str(x) for x in r["policies"]),
        tuple(str(x) for x in r["hooks"]),
        float(r["expires_at"]),
        bool(r["secret"]),
    )
    return PendingCall(request, MappingProxyType(dict(data["arguments"])))


__all__ = [
    "STATE_VERSION",
    "PendingCall",
    "ResumeApprover",
    "ResumeRow",
    "RunState",
    "StateError",
    "check_seal",
    "seal_state",
]
