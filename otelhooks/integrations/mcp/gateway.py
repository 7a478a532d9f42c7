"""The proxy's core, the same under every way of serving it (Streamable HTTP, stdio through an
SDK server, the stdio line relay): who may use which MCP method, a call through the hook
boundary, the upstreams' own requests kept with the host they belong to, redaction of what
passes, and the caller on spans, log events and the audit log.

Methods are an allowlist, by identity. :data:`METHODS` names the capability each client method
belongs to (tools, resources, prompts, completion, logging); a caller may use a method only when
its grant (:mod:`~otelhooks.integrations.mcp.access`) gives it that capability, and a list
method shows only what the grant lets it see. :data:`PROTOCOL` are the methods of the protocol
itself. Any other method, a future one included, is answered ``-32601``. A refusal is a
JSON-RPC error the host sees, with a span and an audit line; it never names what the caller may
not see (a hidden tool is answered as an unknown one, a hidden resource as a missing one).

A serving path (an adapter) turns its wire into calls of :class:`Gateway`: ``refusal`` for a
method, ``visible_tools``/``shows_*`` for listings, ``call_tool`` for ``tools/call``, ``scrub``
for results and log data, ``ask_host`` for an upstream's requests, ``refuse`` to record one.
"""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import uuid
import warnings
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar

import mcp.types as mcp_types
import structlog
from opentelemetry import trace
from opentelemetry.trace import Link, StatusCode, TracerProvider
from pydantic import BaseModel, ValidationError

from ...builtin import StructlogEvents
from ...builtin.policy import check_guards
from ...core import (
    NO_SCRUBBING,
    AgentContext,
    Hooks,
    ToolCall,
    ToolCallRecord,
    ToolCallRecorder,
    ToolCheckError,
    ToolCheckWarning,
    ToolExecutor,
    ToolResult,
)
from ...core.approvals import CallIdentity
from ...telemetry import attributes as A
from ...telemetry.content import capture_from_env
from ...telemetry.instruments import Instruments
from .access import CALLER, EVERYTHING, Caller, Grant, IdentityRules
from .auth import Identity
from .cedar import GatewayCedar
from .client import rebuilt_result, wire_result
from .host_approval import gateway_approvals
from .pinning import Pinning, open_pins, upstream_key
from .policy import ProxyPolicy, UpstreamConfig
from .records import CallerRecords, RecordsError
from .upstreams import UpstreamSet

logger = logging.getLogger("otelhooks.mcp.proxy")
_events = structlog.get_logger("otelhooks.mcp")

ModelT = TypeVar("ModelT", bound=BaseModel)

METHODS: Final = {
    "tools/list": "tools",
    "tools/call": "tools",
    "resources/list": "resources",
    "resources/read": "resources",
    "resources/templates/list": "resources",
    "resources/subscribe": "resources",
    "resources/unsubscribe": "resources",
    "prompts/list": "prompts",
    "prompts/get": "prompts",
    "completion/complete": "completion",
    "logging/setLevel": "logging",
}
"""The client methods the proxy serves, each with the capability a caller's grant must give."""
PROTOCOL: Final = frozenset({"initialize", "ping", "server/discover", "subscriptions/listen"})
"""The methods of the protocol itself, open to every caller that got in."""
NOTIFICATIONS: Final = frozenset(
    {
        "notifications/initialized",
        "notifications/cancelled",
        "notifications/progress",
        "notifications/roots/list_changed",
    }
)
"""The notifications a host may send (any other is dropped)."""

RESOURCE_NOT_FOUND: Final = -32002
"""The MCP error code of a resource that does not exist (what a hidden one is answered)."""


class ProxyStartError(RuntimeError):
    """The proxy cannot serve: no upstream started, the policy does not fit the tools, or a
    listener would be open without authentication."""


class Refused(Exception):
    """A request the caller may not make: the JSON-RPC error it is answered with."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def error(self) -> mcp_types.ErrorData:
        """The refusal as the ``mcp`` SDK's error data."""
        return mcp_types.ErrorData(code=self.code, message=self.message)


@dataclass(frozen=True, slots=True)
class ToolAnswer:
    """What a ``tools/call`` is answered: a ``CallToolResult`` (JSON data), or a JSON-RPC
    error (a tool the caller may not see, answered as unknown)."""

    result: dict[str, Any] | None = None
    error: Refused | None = None


def method_not_found(method: str) -> Refused:
    """``-32601`` for ``method``: one the proxy does not serve, or not to this caller."""
    return Refused(mcp_types.METHOD_NOT_FOUND, f"Method not found: {method[:100]}")


def unknown_tool(name: str) -> Refused:
    """The answer to a call of a tool that does not exist, or that the caller may not see."""
    return Refused(mcp_types.INVALID_PARAMS, f"Unknown tool: {name[:100]!r}")


class Gateway:
    """The core under every serving path (see the module's docs).

    ``policy`` gives the hooks, limits, redaction, identities, audit and pinning; ``upstreams``
    adds upstreams to the policy's; ``hooks`` are more hook objects, run after the policy's;
    ``tracer_provider`` defaults to the global one.
    """

    def __init__(
        self,
        policy: ProxyPolicy | None = None,
        upstreams: Sequence[UpstreamConfig] = (),
        *,
        hooks: Iterable[Any] = (),
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.policy = policy or ProxyPolicy()
        self.configs = [*self.policy.upstreams, *upstreams]
        if not self.configs:
            raise ValueError("the proxy needs at least one upstream server")
        names = [c.name for c in self.configs]
        if len(set(names)) != len(names):
            raise ValueError(f"upstream names must differ: {names}")
        prefixes = [c.prefix for c in self.configs if c.prefix is not None]
        if len(set(prefixes)) != len(prefixes):
            raise ValueError(f"upstream prefixes must differ: {prefixes}")
        self.pinning = self._pinning()
        auth = self.policy.auth
        self.identity_rules = (
            IdentityRules(self.policy.identities, unmatched=auth.unmatched)
            if self.policy.identities and auth is not None
            else None
        )
        try:
            self.records = CallerRecords(self.policy)
        except RecordsError as exc:
            raise ProxyStartError(str(exc)) from None
        self.audit = self.records.audit
        self.refusals = self.records.refusals
        self.identity_attributes = self.records.identity_attributes
        self.log_fields = self.records.log_fields
        self.durable = self.records.durable
        self.cedar = GatewayCedar.of(self.policy)
        self.approvals = gateway_approvals(self.policy, self.pinning)
        self.guards: list[Any] = []  # the argument guards, for their notes and URL upstreams
        self.guard_notes: dict[str, list[str]] = {}  # tool -> what its guards leave unchecked
        self.hooks = self._hooks(hooks)
        self.recorder = ToolCallRecorder(
            tracer_provider,
            capture=capture_from_env(),
            max_content_length=4096,
            instruments=Instruments(None),
            scrubber=self.policy.redactor if self.policy.redaction else NO_SCRUBBING,
        )
        self.tracer = trace.get_tracer("otelhooks.mcp.proxy", tracer_provider=tracer_provider)
        self._shown: dict[tuple[Grant, str], bool] = {}
        self._reviewed: weakref.WeakSet[UpstreamSet] = weakref.WeakSet()

    # -- set-up ------------------------------------------------------------------------------

    def _pinning(self) -> Pinning | None:
        """The pinning over the store; a pin file of an earlier version is imported once."""
        config = self.policy.pinning
        if not config.enabled:
            return None
        store = open_pins(self.policy.store.file)
        if config.import_file:
            count = store.import_file(config.import_file)
            if count:
                logger.info("imported %d pins of %s into the store", count, config.import_file)
        return Pinning(store, approved=config.approve, new_tools=config.new_tools)

    def _hooks(self, extra: Iterable[Any]) -> Hooks:
        """Pinning first (a changed tool never runs), then the identity rules, the Cedar
        policies, the policy's hooks and the caller's own; observers: the caller's attributes
        on the span, the structlog event, the audit line. Results are redacted by the
        executors' scrubber (the recorder's: the policy's redactor), before any after-hook
        sees them, and so is every override a hook makes: no redaction hook runs again over
        what it already redacted."""
        hooks = Hooks()
        policy = self.policy
        if self.pinning is not None:
            hooks.add(self.pinning)
        if self.identity_rules is not None:
            hooks.add(self.identity_rules)
        if self.cedar is not None:
            hooks.add(self.cedar.hook)
        for spec in policy.hook_specs():
            hooks.add(
                spec.hook,
                tools=spec.tools,
                timeout=spec.timeout,
                before_failure=spec.before_failure or policy.before_failure,  # type: ignore[arg-type]
                after_failure=spec.after_failure or policy.after_failure,  # type: ignore[arg-type]
            )
        extra = list(extra)
        for hook in extra:
            hooks.add(hook)
        self.guards = [
            *(spec.hook for spec in policy.hook_specs()),
            *(self.identity_rules.guards if self.identity_rules is not None else ()),
            *extra,
        ]
        hooks.add(observe=self.records.caller_attributes, name="caller")
        hooks.add(StructlogEvents())
        if self.audit is not None:
            hooks.add(self.audit)
        return hooks

    def environment(self, config: UpstreamConfig) -> dict[str, str] | None:
        """The environment of an upstream's process (the allowlist; never the audit key)."""
        audit = self.policy.audit
        return config.environment(audit.key_env if audit is not None else None)

    def check_policy(self, uset: UpstreamSet) -> list[str]:
        """Check the hooks against the tools of ``uset`` (the core's check: tool patterns that
        match no tool, guards whose argument no tool takes), as log lines naming the tools
        there are; raise :class:`ProxyStartError` for them when the policy is strict. Note the
        tools whose path-like arguments a guard leaves unchecked (their calls are blocked), and
        have guards check the paths of URL upstreams' tools lexically (they mean nothing on this
        filesystem)."""
        remote = [
            entry.name
            for config in self.configs
            if config.url is not None and config.name in uset.servers
            for entry in uset.servers[config.name].listings
        ]
        for guard in self.guards:
            lexical_for = getattr(guard, "lexical_for", None)
            if remote and lexical_for is not None:
                lexical_for(remote)
        specs = uset.registry.specs()
        if self.cedar is not None:
            self.cedar.bind_refs(uset.refs)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ToolCheckWarning)
            try:
                problems = self.hooks.check_tools(specs, strict=self.policy.strict)
            except ToolCheckError as exc:
                raise ProxyStartError(
                    f"{self.policy.source}: {exc} (a typo would leave the tool it meant "
                    "unguarded; strict = false in [proxy] lets the proxy start anyway)"
                ) from None
        for warning in caught:
            logger.warning("%s: %s", self.policy.source, warning.message)
        _, self.guard_notes = check_guards(self.guards, specs)
        for tool, notes in self.guard_notes.items():
            for note in notes:
                logger.warning("%s: %s: %s", self.policy.source, tool, note)
        return problems

    def review(self, uset: UpstreamSet) -> None:
        """Check the listings of a set's upstreams against the pins. Pins are kept per
        upstream (its name and command or URL); what a review holds back is kept per set
        (``uset.key``, on the caller of each call as ``upstream_set``), and forgotten with
        it."""
        if self.pinning is not None and uset not in self._reviewed:
            self._reviewed.add(uset)
            weakref.finalize(uset, self.pinning.forget, uset.key)
        for config in self.configs:
            server = uset.servers.get(config.name)
            if server is not None:
                self.review_listing(
                    uset.key, config, [(e.name, e.listing) for e in server.listings]
                )

    def review_listing(
        self,
        owner: str,
        config: UpstreamConfig,
        tools: Iterable[tuple[str, mcp_types.Tool]],
    ) -> None:
        """Check one upstream's listing (served name, listing) against the pins, as the
        upstream set ``owner`` (its key) sees it, and key its tools for the Cedar policies."""
        tools = list(tools)
        if self.cedar is not None:
            self.cedar.bind_listing(config.name, tools)
        if self.pinning is not None:
            key = upstream_key(config.name, config.url or " ".join(config.command))
            self.pinning.review(key, tools, owner=owner)

    def held_back(self, name: str, owner: str | None) -> bool:
        """Whether the pins hold the tool served as ``name`` back from the upstream set
        ``owner`` (from any set when ``None``)."""
        return self.pinning is not None and self.pinning.refused(name, owner)

    async def close(self) -> None:
        """Write the refused logins still counted, and close the audit log (its lines and its
        head made durable)."""
        self.records.close()

    # -- who may do what ---------------------------------------------------------------------

    def grant(self, identity: Identity | None) -> Grant:
        """What ``identity`` may use."""
        rules = self.identity_rules
        return EVERYTHING if rules is None else rules.grant(identity)

    def refusal(self, grant: Grant, method: str) -> Refused | None:
        """Why ``method`` is refused to a caller with ``grant`` (``None``: it may go on; a list
        or get method then filters by what the caller may see)."""
        capability = METHODS.get(method)
        if capability is None:
            return None if method in PROTOCOL else method_not_found(method)
        if capability in ("completion", "logging") and not grant.may(capability):
            return method_not_found(method)  # not advertised to it
        return None

    def shows_tool(self, grant: Grant, name: str) -> bool:
        """Whether a caller with ``grant`` sees (and may call) the tool served as ``name``:
        not denied by the policy (unless ``list_denied``), allowed by its grant."""
        key = (grant, name)
        found = self._shown.get(key)
        if found is None:
            policy = self.policy
            found = not (policy.denies(name) and not policy.list_denied) and grant.tool(name)
            if len(self._shown) >= 8192:
                self._shown.clear()
            self._shown[key] = found
        return found

    def visible_tools(self, grant: Grant, uset: UpstreamSet) -> list[mcp_types.Tool]:
        """The tools of ``uset`` a caller with ``grant`` is shown, under their served names
        (held-back definitions left out)."""
        listed: list[mcp_types.Tool] = []
        pinning = self.pinning
        for server in uset.servers.values():
            for entry in server.listings:
                if uset.refs.get(entry.name) is None:
                    continue  # a name another upstream serves
                if not self.shows_tool(grant, entry.name):
                    continue
                if pinning is not None and pinning.refused(entry.name, uset.key):
                    continue
                listed.append(entry.listing.model_copy(update={"name": entry.name}))
        return listed

    def cedar_refusal(
        self, caller: Caller, kind: Literal["resource", "prompt"], upstream: str, target: str
    ) -> str | None:
        """Why the Cedar policies refuse ``caller`` the resource read or prompt ``target`` of
        ``upstream`` (``None``: permitted, or no ``[cedar]``)."""
        return None if self.cedar is None else self.cedar.refusal(caller, kind, upstream, target)

    def tool_schema(self, grant: Grant, uset: UpstreamSet, name: str) -> dict[str, Any] | None:
        """The input schema of the tool ``uset`` serves as ``name``, when
        :meth:`visible_tools` shows it to a caller with ``grant`` (``None`` otherwise)."""
        ref = uset.refs.get(name)
        if ref is None or not self.shows_tool(grant, name) or self.held_back(name, uset.key):
            return None
        server = uset.servers.get(ref.upstream)
        for entry in server.listings if server is not None else ():
            if entry.name == name:
                return entry.listing.input_schema
        return None

    # -- a call ------------------------------------------------------------------------------

    async def call_tool(
        self,
        caller: Caller,
        executor: ToolExecutor,
        name: str,
        arguments: Mapping[str, Any] | None,
        *,
        call_id: str,
        run_id: str,
        links: Sequence[Link] | None = None,
    ) -> ToolAnswer:
        """One ``tools/call`` through before -> run -> after with ``executor``, as ``caller``.

        A tool the caller may not see (or none of that name) never runs and is answered as
        unknown (its span and audit line say why); any other call's result is its
        ``CallToolResult``. The audit line is durable before this returns.
        """
        grant = caller.grant or EVERYTHING
        call = ToolCall(call_id, name, dict(arguments or {}))
        context = AgentContext(run_id=run_id, agent_name=self.policy.name)
        token = CALLER.set(caller)
        bound = structlog.contextvars.bind_contextvars(**self.log_fields(caller.identity))
        try:
            asking = CallIdentity(
                self.policy.name,
                run_id,
                caller.identity.principal if caller.identity is not None else None,
            )
            prepared = await executor.prepare(
                call,
                context=context,
                timeout=self.timeout_for(name),
                links=links,
                identity=asking,
            )
            if name not in executor.registry or not self.shows_tool(grant, name):
                # The policy's own hooks block it (their reason is on the span and in the audit
                # log); were none to, it is skipped: a hidden tool never runs either way.
                executor.skip_prepared(prepared, "not a tool this caller may see")
                answer = ToolAnswer(error=unknown_tool(name))
            else:
                answer = ToolAnswer(result=wire_result(await executor.finish(prepared)))
        finally:
            structlog.contextvars.reset_contextvars(**bound)
            CALLER.reset(token)
        await self.durable()
        return answer

    def timeout_for(self, tool: str) -> float | None:
        """The policy's timeout for ``tool`` (``[tools] timeouts``), if any."""
        for pattern, seconds in self.policy.tool_timeouts.items():
            if fnmatch.fnmatchcase(tool, pattern):
                return seconds
        return None

    async def refuse(
        self,
        caller: Caller,
        method: str,
        target: str | None,
        refused: Refused,
        why: str,
        *,
        hook: str = "gateway",
    ) -> None:
        """Record a refused request: on the current span (the request's), and in the audit
        log (``why`` is for them, never for the caller; ``hook`` names what decided). A
        ``tools/call`` is logged under the tool it named."""
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attributes(
                {
                    A.DECISION: A.DECISION_BLOCK,
                    A.BLOCK_REASON: why,
                    A.ERROR_TYPE: str(refused.code),
                    A.RPC_RESPONSE_STATUS_CODE: str(refused.code),
                }
            )
            span.set_status(StatusCode.ERROR, refused.message)
        _events.warning(
            "request.refused",
            method=method,
            target=target,
            reason=why,
            code=refused.code,
            **self.log_fields(caller.identity),
        )
        if self.audit is None:
            return
        named = target if method == "tools/call" and target is not None else method
        arguments = {"target": target} if target is not None and named == method else {}
        record = ToolCallRecord(
            tool_call=ToolCall(uuid.uuid4().hex, named, arguments),
            tool_name=named,
            result=ToolResult(
                tool_call_id="",
                tool_name=named,
                content=refused.message,
                details=None,
                is_error=True,
            ),
            decision="block",
            deciding_hook=hook,
            block_reason=why,
            arguments_rewritten=False,
            error_type=str(refused.code),
            duration_ms=0.0,
        )
        token = CALLER.set(caller)
        try:
            self.audit.on_tool_call_end(record)
        finally:
            CALLER.reset(token)
        await self.durable()

    # -- what passes -------------------------------------------------------------------------

    def scrub(self, model: ModelT, kind: str = "result") -> ModelT:
        """``model`` with secrets redacted from its text (unchanged when redaction is off)."""
        if not self.policy.redaction:
            return model
        data = model.model_dump(mode="json", by_alias=True, exclude_none=True)
        clean, paths = self.policy.redactor.redact(data, kind)
        return model if not paths else type(model).model_validate(clean)

    def scrub_data(self, data: Any, kind: str = "result") -> Any:
        """JSON data with secrets redacted (unchanged when redaction is off)."""
        if not self.policy.redaction:
            return data
        clean, paths = self.policy.redactor.redact(data, kind)
        return clean if paths else data


def call_tool_result(data: Mapping[str, Any]) -> mcp_types.CallToolResult:
    """A ``CallToolResult`` (JSON data) as the ``mcp`` model."""
    try:
        return mcp_types.CallToolResult.model_validate(data)
    except ValidationError:
        result = ToolResult(
            tool_call_id="",
            tool_name="",
            content=str(data.get("content")),
            details=dict(data),
            is_error=data.get("isError") is True,
        )
        return mcp_types.CallToolResult.model_validate(rebuilt_result(result))


def upstream_of(uset: UpstreamSet, tool: str) -> str | None:
    """The name of the upstream that serves ``tool`` in ``uset``."""
    ref = uset.refs.get(tool)
    return ref.upstream if ref is not None else None


@contextlib.contextmanager
def as_caller(caller: Caller) -> Any:
    """``caller`` is the caller of what runs in the block (hooks, observers, the audit)."""
    token = CALLER.set(caller)
    try:
        yield caller
    finally:
        CALLER.reset(token)
