"""Cedar decisions through ``cedarpy``: a loaded set of policies (validated against the schema
generated from the model and the tools), a decision cache keyed on what the policies read, and
reloads on change that swap the whole set at once.

**The cache.** A decision is a function of the request's principal (and its groups), action,
resource and the context attributes the policies read, given the policies and entities. For
each action, otelhooks reads from Cedar's own parse tree which context paths the policies that
can apply to it read; the key is the principal with its groups, the action, the agent and the
client when a policy reads them, and the values at the argument paths read. An action any of
whose policies reads ``context.now`` (time) or the context as a whole is never cached. A
reload makes a new cache (the old one goes with the old set): no decision outlives the
policies and entities it was made with.

**The request.** Cedar is given the policies that can apply to the action (a set parsed once
per action and loaded set) and a context of what they read: the top-level attributes of the
context and of the arguments that some policy reads (all of them when one reads the whole),
``agent`` and ``client`` as entity references. A policy cannot tell it from the whole context;
building and parsing the rest (the time, above all) is most of what a request costs.

**Reloads.** The files are looked at (their size, time and inode) at most every
``reload_interval`` seconds, when a decision is asked for. A change is loaded only once it has
settled: when a later look finds the files as the look that first saw the change did, and
they did not change while they were read (a file rewritten in place can be read when only its
first policies are written: a valid set without the forbid that follows). The new set is
validated, and replaces the old one in one assignment (a decision uses the set it started
with). A new set that does not load is logged as an error and the last good one stays.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

import cedarpy
from cedarpy import pst

from .cedar_model import (
    AGENT,
    CALL_TOOL,
    CLIENT,
    GET_PROMPT,
    PROMPT,
    READ_RESOURCE,
    RESOURCE,
    TOOL,
    UPSTREAM,
    Principal,
    ToolKey,
    arguments_type,
    merge_schema,
    model_entities,
    model_schema,
    now_value,
    record_value,
    uid,
)
from .cedar_source import (
    CedarError,
    PolicyInfo,
    known_names,
    parse_entities,
    parse_operator_schema,
    parse_policies,
    read_text,
    validate,
)

logger = logging.getLogger("otelhooks.cedar")

DEFAULT_RELOAD_INTERVAL: Final = 0.5
"""Seconds between looks at the files (while decisions are asked for, a change is in force
within twice this: one look sees it, the next finds it settled)."""
DEFAULT_CACHE_SIZE: Final = 8192
_UNCACHED: Final = object()
ARGUMENTS: Final = "arguments"

Effect = Literal["allow", "deny", "ask"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """A Cedar decision: ``allow``, ``deny`` or ``ask`` (permitted only with an approval), the
    policies that determined it (their ``@id``, else Cedar's id), why, and whether it came
    from the cache."""

    effect: Effect
    policies: tuple[str, ...]
    reason: str
    cached: bool = False


@dataclass(frozen=True, slots=True)
class Requester:
    """Who asks: the principal, the agent and the client."""

    principal: Principal
    agent: str
    client: str


@dataclass(slots=True)
class _Plan:
    """What the decisions of one action depend on: the policies whose action scope can match
    it (and their own set: a policy whose scope cannot match never takes part in a decision,
    so Cedar decides the same without it), what they read, whether that is all in the key, and
    which parts of the context a request gives them (the rest no policy of the set can see)."""

    reads: tuple[tuple[str, ...], ...]
    argument_reads: tuple[tuple[str, ...], ...]  # the reads under context.arguments
    cacheable: bool
    policies: tuple[PolicyInfo, ...]
    policy_set: cedarpy.PolicySet
    given: frozenset[str]  # the context's attributes given to Cedar
    argument_names: tuple[str, ...] | None  # the arguments' attributes given (None: all)


def _plan(reads: Sequence[tuple[str, ...]]) -> tuple[frozenset[str], tuple[str, ...] | None]:
    """The context's attributes a request gives for these reads (a read of the whole context
    gives them all) and the arguments' attributes (``None``: all of them)."""
    if () in reads:
        return frozenset((ARGUMENTS, "agent", "client", "now")), None
    given = frozenset(path[0] for path in reads)
    if (ARGUMENTS,) in reads:
        return given, None
    return given, tuple(sorted({path[1] for path in reads if path[0] == ARGUMENTS}))


def _stamp(paths: Sequence[str | None]) -> tuple[Any, ...]:
    out: list[Any] = []
    for path in paths:
        if path is None:
            continue
        try:
            st = os.stat(path)
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append(None)
    return tuple(out)


@dataclass(slots=True)
class _PolicySet:
    """One loaded set: never changed once built, but for its caches."""

    tree: pst.PolicySet
    infos: dict[str, PolicyInfo]
    tools: dict[ToolKey, Mapping[str, Any]]
    entity_list: list[dict[str, Any]]
    entities: cedarpy.Entities
    file_uids: dict[tuple[str, str], dict[str, Any]]
    types: dict[str, dict[str, Any]]  # action id -> type of context.arguments
    stamp: tuple[Any, ...]
    texts: tuple[str, str | None, str | None]  # the policies, entities and schema it was read from
    plans: dict[str, _Plan] = field(default_factory=dict)
    cache: dict[Any, Verdict] = field(default_factory=dict)
    principals: dict[Principal, cedarpy.Entities] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0
    uncached: int = 0

    def plan(self, action_id: str) -> _Plan:
        found = self.plans.get(action_id)
        if found is None:
            groups = (CALL_TOOL,) if "/" in action_id else ()
            applying = tuple(
                info for info in self.infos.values() if info.applies_to_action(action_id, groups)
            )
            reads = sorted({path for info in applying for path in info.reads})
            cacheable = all(path and path[0] in (ARGUMENTS, "agent", "client") for path in reads)
            subset = pst.PolicySet(
                templates={},
                static_policies={
                    i.cedar_id: self.tree.static_policies[i.cedar_id] for i in applying
                },
                template_links=(),
            )
            under = tuple(path[1:] for path in reads if path[:1] == (ARGUMENTS,))
            found = self.plans[action_id] = _Plan(
                tuple(reads),
                under,
                cacheable,
                applying,
                cedarpy.PolicySet.from_pst(subset),
                *_plan(reads),
            )
        return found

    def entities_for(self, principal: Principal) -> cedarpy.Entities:
        """The entities with ``principal`` in them (its groups as parents, beside those the
        entities file gives it)."""
        found = self.principals.get(principal)
        if found is not None:
            return found
        key = (principal.type, principal.id)
        given = self.file_uids.get(key)
        parents = [uid("Group", group) for group in principal.groups]
        if given is None:
            entity = {"uid": principal.uid(), "attrs": {}, "parents": parents}
            found = self.entities.with_added_json_str(json.dumps([entity]))
        else:
            old = given.get("parents") or []
            extra = [p for p in parents if p not in old]
            if not extra:
                found = self.entities
            else:
                merged = [
                    {**e, "parents": [*old, *extra]} if e is given else e for e in self.entity_list
                ]
                found = cedarpy.Entities.from_json_str(json.dumps(merged))
        if len(self.principals) >= 1024:
            self.principals.clear()
        self.principals[principal] = found
        return found


class CedarEngine:
    """Cedar policies (a ``.cedar`` file), optional entities (Cedar's JSON entities) and an
    optional operator's schema (Cedar's JSON schema format, merged into the generated one).

    The policies are parsed at once (a syntax error raises :class:`CedarError` with the file
    and line); they are validated against the schema when the tools are known
    (:meth:`bind_tools`), and again for a tool first seen in a call. ``now`` gives the time of
    a call (a test's clock)."""

    def __init__(
        self,
        policies: str | os.PathLike[str],
        entities: str | os.PathLike[str] | None = None,
        schema: str | os.PathLike[str] | None = None,
        *,
        reload_interval: float = DEFAULT_RELOAD_INTERVAL,
        cache_size: int = DEFAULT_CACHE_SIZE,
        now: Callable[[], Any] | None = None,
    ) -> None:
        self.paths = (str(policies), str(entities) if entities else None)
        self.schema_path = str(schema) if schema else None
        self.reload_interval = reload_interval
        self.cache_size = cache_size
        self.now = now
        self._lock = threading.Lock()
        self._checked = time.monotonic()
        self._failed_stamp: tuple[Any, ...] | None = None
        self._changed_stamp: tuple[Any, ...] | None = None  # a change seen, not yet settled
        self._upstreams: set[str] = set()
        self.reloads = 0
        self._state = self._load({})

    # -- loading -----------------------------------------------------------------------------

    def _files(self) -> list[str | None]:
        return [*self.paths, self.schema_path]

    def _read(self) -> tuple[tuple[Any, ...], tuple[str, str | None, str | None]]:
        """The files' stamp and texts, as they are now."""
        stamp = _stamp(self._files())
        policies_path, entities_path = self.paths
        schema_path = self.schema_path
        return stamp, (
            read_text(policies_path, "Cedar policies"),
            read_text(entities_path, "Cedar entities") if entities_path is not None else None,
            read_text(schema_path, "Cedar schema") if schema_path is not None else None,
        )

    def _load(
        self,
        tools: Mapping[ToolKey, Mapping[str, Any]],
        read: tuple[tuple[Any, ...], tuple[str, str | None, str | None]] | None = None,
    ) -> _PolicySet:
        """A set from the texts ``read`` (the files as they are now when not given)."""
        stamp, texts = read if read is not None else self._read()
        text, entities_text, schema_text = texts
        policies_path, entities_path = self.paths
        tree, infos = parse_policies(text, policies_path)
        generated = model_schema(tools)
        if self.schema_path is not None and schema_text is not None:
            operator = parse_operator_schema(schema_text, self.schema_path)
            try:
                generated = merge_schema(generated, operator)
            except ValueError as exc:
                raise CedarError(self.schema_path, None, str(exc)) from None
        try:
            schema = cedarpy.Schema.from_json_str(json.dumps(generated))
        except ValueError as exc:
            raise CedarError(self.schema_path or policies_path, None, f"schema: {exc}") from None
        known = known_names(generated)
        if tools:
            validate(text, policies_path, infos, schema, known)
        file_entities: list[dict[str, Any]] = []
        if entities_path is not None and entities_text is not None:
            file_entities = parse_entities(entities_text, entities_path, known, schema)
        entity_list = [*model_entities(list(tools), sorted(self._upstreams)), *file_entities]
        try:
            entities = cedarpy.Entities.from_json_str(json.dumps(entity_list), schema=schema)
        except ValueError as exc:
            raise CedarError(entities_path or policies_path, None, f"entities: {exc}") from None
        return _PolicySet(
            tree=tree,
            infos={info.cedar_id: info for info in infos},
            tools=dict(tools),
            entity_list=entity_list,
            entities=entities,
            file_uids={(e["uid"]["type"], e["uid"]["id"]): e for e in file_entities},
            types={key.id: arguments_type(params) for key, params in tools.items()},
            stamp=stamp,
            texts=texts,
        )

    def bind_tools(self, tools: Mapping[ToolKey, Mapping[str, Any]]) -> None:
        """Validate the policies in force (the texts they were read from, not the files as
        they are now: a change is put in force by :meth:`maybe_reload` alone, once settled)
        against the schema of these tools (key -> input schema), and decide with it from now
        on; raises :class:`CedarError` (the set in force stays)."""
        with self._lock:
            state = self._state
            merged = {**state.tools, **tools}
            self._state = self._load(merged, (state.stamp, state.texts))

    def bind_upstreams(self, names: Sequence[str]) -> None:
        """Name upstreams with no tools yet (their ``Upstream`` entities exist)."""
        self._upstreams.update(names)

    @property
    def policies(self) -> list[PolicyInfo]:
        """The policies in force."""
        return list(self._state.infos.values())

    def matching(self, key: ToolKey) -> list[PolicyInfo]:
        """The policies whose scope can match a call of the tool ``key`` (whatever the
        principal), in file order."""
        state = self._state
        parents = [(UPSTREAM, key.upstream)]
        return [
            info
            for info in state.plan(key.id).policies
            if info.applies_to_resource(TOOL, key.id, parents)
        ]

    def tools(self) -> list[ToolKey]:
        """The tools the set in force knows."""
        return list(self._state.tools)

    def stats(self) -> dict[str, int]:
        """The cache's hits, misses and uncached decisions of the set in force."""
        state = self._state
        return {"hits": state.hits, "misses": state.misses, "uncached": state.uncached}

    def maybe_reload(self) -> bool:
        """Load the files again if they changed and the change settled (two looks, at most
        every ``reload_interval``, found them alike); whether a new set is in force."""
        now = time.monotonic()
        if now - self._checked < self.reload_interval:
            return False
        self._checked = now
        stamp = _stamp(self._files())
        state = self._state
        if stamp == state.stamp or stamp == self._failed_stamp:
            self._changed_stamp = None
            return False
        if stamp != self._changed_stamp:  # first seen: maybe a write still going on
            self._changed_stamp = stamp
            return False
        if not self._lock.acquire(blocking=False):
            return False  # another thread reloads
        try:
            new = self._load(state.tools)
            if new.stamp != stamp or _stamp(self._files()) != stamp:
                self._changed_stamp = None  # written to while read: look again
                return False
        except CedarError as exc:
            self._failed_stamp = stamp
            logger.error("Cedar policies not reloaded (the last good set stays): %s", exc)
            return False
        finally:
            self._lock.release()
        self._state = new
        self._failed_stamp = None
        self.reloads += 1
        logger.info("Cedar policies reloaded: %d policies", len(new.infos))
        return True

    # -- deciding ----------------------------------------------------------------------------

    def decide_tool(
        self,
        key: ToolKey,
        parameters: Mapping[str, Any],
        requester: Requester,
        arguments: Mapping[str, Any],
    ) -> Verdict:
        """The decision on calling the tool ``key`` (its input schema ``parameters``) with
        ``arguments`` for ``requester``. An argument Cedar cannot hold exactly raises
        :class:`~otelhooks.builtin.cedar_model.Unrepresentable`; a tool the set does not know
        yet is added to it (and the policies validated again: a failure denies)."""
        self.maybe_reload()
        state = self._state
        action = key.id
        type_ = state.types.get(action)
        if type_ is None:
            try:
                self.bind_tools({key: parameters})
            except CedarError as exc:
                logger.error("Cedar policies do not validate with tool %s: %s", action, exc)
                return Verdict("deny", (), f"the Cedar policies do not validate: {exc}")
            state = self._state
            type_ = state.types[action]
        return self._decide(state, action, requester, record_value(arguments, type_, ""))

    def decide_other(
        self, kind: Literal["resource", "prompt"], upstream: str, target: str, requester: Requester
    ) -> Verdict:
        """The decision on reading the resource ``target`` (a URI) or getting the prompt
        ``target`` (its own name) of ``upstream``."""
        self.maybe_reload()
        state = self._state
        if kind == "resource":
            action, resource = READ_RESOURCE, uid(RESOURCE, target)
            attrs = {"uri": target}
        else:
            action, resource = GET_PROMPT, uid(PROMPT, f"{upstream}/{target}")
            attrs = {"name": target}
        entity = {"uid": resource, "attrs": attrs, "parents": [uid(UPSTREAM, upstream)]}
        entities = state.entities_for(requester.principal).with_added_json_str(json.dumps([entity]))
        plan = state.plan(action)
        context = self._context(plan, requester, None)
        return self._evaluate(state, plan, action, resource, requester, context, entities)

    def _context(
        self, plan: _Plan, requester: Requester, arguments: dict[str, Any] | None
    ) -> dict[str, Any]:
        """A request's context for the policies of ``plan``: the attributes they read (the
        arguments cut to the attributes read), entities escaped as entities (Cedar is given no
        schema with a request); no policy of the set can tell it from the whole context."""
        given = plan.given
        context: dict[str, Any] = {}
        if arguments is not None and ARGUMENTS in given:
            names = plan.argument_names
            if names is not None:
                arguments = {name: arguments[name] for name in names if name in arguments}
            context[ARGUMENTS] = arguments
        if "agent" in given:
            context["agent"] = {"__entity": uid(AGENT, requester.agent)}
        if "client" in given:
            context["client"] = {"__entity": uid(CLIENT, requester.client)}
        if "now" in given:
            context["now"] = now_value(self.now() if self.now else None)
        return context

    def _decide(
        self, state: _PolicySet, action: str, requester: Requester, arguments: dict[str, Any]
    ) -> Verdict:
        plan = state.plan(action)
        key: Any = _UNCACHED
        if plan.cacheable and self.cache_size:
            # the principal (with its groups: parents in the entities), and the agent and the
            # client when a policy reads them (entities: no path under them needs projecting)
            principal, given = requester.principal, plan.given
            key = (
                action,
                principal.type,
                principal.id,
                principal.groups,
                requester.agent if "agent" in given else None,
                requester.client if "client" in given else None,
                *[_project(arguments, path) for path in plan.argument_reads],
            )
            found = state.cache.get(key)
            if found is not None:
                state.hits += 1
                return found
            state.misses += 1
        else:
            state.uncached += 1
        context = self._context(plan, requester, arguments)
        entities = state.entities_for(requester.principal)
        resource = uid(TOOL, action)
        verdict = self._evaluate(state, plan, action, resource, requester, context, entities)
        if key is not _UNCACHED:
            if len(state.cache) >= self.cache_size:
                del state.cache[next(iter(state.cache))]  # the oldest
            state.cache[key] = replace(verdict, cached=True)
        return verdict

    def _evaluate(
        self,
        state: _PolicySet,
        plan: _Plan,
        action: str,
        resource: dict[str, str],
        requester: Requester,
        context: dict[str, Any],
        entities: cedarpy.Entities,
    ) -> Verdict:
        request = {
            "principal": requester.principal.uid(),
            "action": uid("Action", action),
            "resource": resource,
            "context": context,
        }
        result = cedarpy.is_authorized(request, plan.policy_set, entities)
        infos = [state.infos[r] for r in result.diagnostics.reasons if r in state.infos]
        names = tuple(info.name for info in infos)
        errors = [str(error) for error in result.diagnostics.errors]
        if errors:
            # Cedar skips a policy that fails to evaluate; a forbid skipped so (an attribute
            # missing from an entity, an overflow) would let the call through. Fail closed.
            for error in errors:
                logger.warning("Cedar: a policy did not evaluate for %s: %s", action, error)
            return Verdict(
                "deny", names, f"a Cedar policy did not evaluate for {action}: {errors[0]}"
            )
        if result.allowed:
            marked = [info for info in infos if info.approval]
            if marked:
                where = ", ".join(info.where for info in marked)
                return Verdict("ask", names, f"Cedar policy {where} permits it only with approval")
            return Verdict("allow", names, "permitted by Cedar policy " + ", ".join(names))
        if infos:
            where = ", ".join(info.where for info in infos)
            return Verdict("deny", names, f"forbidden by Cedar policy {where}")
        return Verdict("deny", (), f"no Cedar policy permits {action}")


class _Missing:
    """An absent attribute in a decision's key (no value of an argument can equal it)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


_MISSING: Final = _Missing()


def _project(arguments: dict[str, Any], path: tuple[str, ...]) -> Any:
    """The value at ``path`` in the arguments as Cedar gets them (JSON text for a set or a
    record, :data:`_MISSING` when absent): a part of a decision's key."""
    value: Any = arguments
    for part in path:
        if type(value) is not dict:
            return _MISSING
        value = value.get(part, _MISSING)
        if value is _MISSING:
            return _MISSING
    if type(value) is dict or type(value) is list:
        return json.dumps(value, sort_keys=True)
    return value
