"""Reading Cedar policies, entities and an operator's schema, with errors that name the file, the
line and what was probably meant; and what each policy reads, applies to and is annotated with
(from the engine's own parse tree, ``cedarpy.pst``).

Cedar reports validation errors per policy id without a position; otelhooks finds the policy's
line in the file (its own scan of where each policy starts: strings and comments are skipped)
and the line of the name the error is about, and looks for the closest known name.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import cedarpy
from cedarpy import pst

from .cedar_model import CALL_TOOL, ENTITY_TYPES

APPROVAL: Final = "approval"
"""The annotation that makes a permit "only with approval": ``@approval("required")``."""
APPROVAL_VALUES: Final = ("required",)


class CedarError(ValueError):
    """Cedar files that cannot be used: ``file:line: problem`` (``line`` may be unknown)."""

    def __init__(self, path: str, line: int | None, problem: str) -> None:
        self.path, self.line, self.problem = path, line, problem
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {problem}")


@dataclass(frozen=True, slots=True)
class PolicyInfo:
    """One policy: its Cedar id, the name it is shown by (its ``@id``, else the Cedar id), its
    line in the file, its effect, whether it needs an approval, what it reads of the context
    (attribute paths; ``()`` is the whole context), what its ``has`` tests name (see
    :func:`has_tests`) and its scope."""

    cedar_id: str
    name: str
    line: int
    effect: str
    approval: bool
    reads: frozenset[tuple[str, ...]]
    action: Any  # pst.ActionConstraint
    principal: Any
    resource: Any
    has: frozenset[tuple[str, ...]] = frozenset()

    def applies_to_action(self, action_id: str, groups: Iterable[str]) -> bool:
        """Whether its action scope can match ``action_id`` (member of ``groups``)."""
        scope = self.action
        if isinstance(scope, pst.ActionEq):
            return scope.entity.id == action_id
        if isinstance(scope, pst.ActionIn):
            ids = {e.id for e in scope.entities}
            return action_id in ids or bool(ids & set(groups))
        return True

    def applies_to_resource(self, type_: str, id_: str, parents: Iterable[tuple[str, str]]) -> bool:
        """Whether its resource scope can match the entity ``type_::id_`` (in ``parents``)."""
        scope = self.resource
        if isinstance(scope, (pst.ScopeIs, pst.ScopeIsIn)) and scope.entity_type.basename != type_:
            return False
        if isinstance(scope, pst.ScopeEq):
            return _uid(scope.entity) == (type_, id_)
        if isinstance(scope, (pst.ScopeIn, pst.ScopeIsIn)):
            return _uid(scope.entity) in {(type_, id_), *parents}
        return True

    def summary(self) -> str:
        """How ``--check`` names it: effect, name, line, and who it is for."""
        effect = "ask" if self.approval else self.effect
        who = _scope_text("principal", self.principal)
        return f"{effect} {self.name} (line {self.line}{', ' + who if who else ''})"

    @property
    def where(self) -> str:
        """Its name and line, as reasons give them."""
        return f"{self.name} (line {self.line})"


def _uid(entity: Any) -> tuple[str, str] | None:
    if isinstance(entity, pst.EntityUid):
        return (entity.type.basename, entity.id)
    return None


def _scope_text(var: str, scope: Any) -> str:
    if isinstance(scope, pst.ScopeEq) and isinstance(scope.entity, pst.EntityUid):
        return f'{var} == {scope.entity.type.basename}::"{scope.entity.id}"'
    if isinstance(scope, pst.ScopeIn) and isinstance(scope.entity, pst.EntityUid):
        return f'{var} in {scope.entity.type.basename}::"{scope.entity.id}"'
    if isinstance(scope, pst.ScopeIs):
        return f"{var} is {scope.entity_type.basename}"
    if isinstance(scope, pst.ScopeIsIn) and isinstance(scope.entity, pst.EntityUid):
        entity = scope.entity
        return f'{var} is {scope.entity_type.basename} in {entity.type.basename}::"{entity.id}"'
    return ""


# -- where policies start --------------------------------------------------------------------------


def policy_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) offsets of each policy in ``text``: from its first character that is
    not blank or a comment (annotations included) to its ``;``."""
    spans: list[tuple[int, int]] = []
    start: int | None = None
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if ch == '"':
            if start is None:
                start = i
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            continue
        if not ch.isspace() and start is None:
            start = i
        if ch == ";" and start is not None:
            spans.append((start, i + 1))
            start = None
        i += 1
    if start is not None:
        spans.append((start, n))
    return spans


def line_at(text: str, offset: int) -> int:
    """The line (from 1) of ``offset`` in ``text``."""
    return text.count("\n", 0, offset) + 1


def _line_of_word(text: str, span: tuple[int, int], word: str) -> int:
    found = re.search(r"(?<![\w\"])" + re.escape(word) + r"(?![\w])", text[span[0] : span[1]])
    return line_at(text, span[0] + (found.start() if found else 0))


# -- policies --------------------------------------------------------------------------------------


def read_text(path: str, what: str) -> str:
    """The file's text; :class:`CedarError` naming ``what`` it is when it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CedarError(path, None, f"cannot read the {what}: {exc}") from None


def parse_policies(text: str, path: str) -> tuple[pst.PolicySet, list[PolicyInfo]]:
    """The policies of ``text`` (the engine's parse tree) and each policy's facts; raises
    :class:`CedarError` at the policy that does not parse."""
    spans = policy_spans(text)
    try:
        policy_set = cedarpy.PolicySet.from_str(text)
        tree = policy_set.to_pst()
    except ValueError as exc:
        raise _parse_error(text, path, spans, exc) from None
    if tree.templates:
        name = next(iter(tree.templates))
        raise CedarError(path, None, f"templates are not supported ({name}): write policies")
    infos: list[PolicyInfo] = []
    for index, (cedar_id, policy) in enumerate(_by_position(tree.static_policies)):
        line = line_at(text, spans[index][0]) if index < len(spans) else 0
        annotations = dict(policy.annotations)
        approval = APPROVAL in annotations
        if approval and annotations[APPROVAL] not in APPROVAL_VALUES:
            raise CedarError(
                path,
                line,
                f'@approval({annotations[APPROVAL]!r}): the only value is @approval("required")',
            )
        if approval and policy.effect != "permit":
            raise CedarError(path, line, "@approval marks a permit (a forbid needs no approval)")
        for key in annotations:
            close = difflib.get_close_matches(key, [APPROVAL], n=1, cutoff=0.75)
            if close and key != APPROVAL:
                raise CedarError(
                    path, line, f"unknown annotation @{key} (did you mean @{close[0]}?)"
                )
        infos.append(
            PolicyInfo(
                cedar_id=cedar_id,
                name=annotations.get("id") or cedar_id,
                line=line,
                effect=policy.effect,
                approval=approval,
                reads=frozenset(context_reads(policy.clauses)),
                has=frozenset(has_tests(policy.clauses)),
                action=policy.action,
                principal=policy.principal,
                resource=policy.resource,
            )
        )
    return tree, infos


def _by_position(policies: Mapping[str, Any]) -> list[tuple[str, Any]]:
    def position(item: tuple[str, Any]) -> tuple[int, str]:
        found = re.fullmatch(r"policy(\d+)", item[0])
        return (int(found.group(1)) if found else 1 << 30, item[0])

    return sorted(policies.items(), key=position)


def _parse_error(text: str, path: str, spans: list[tuple[int, int]], exc: ValueError) -> CedarError:
    for start, end in spans:
        try:
            cedarpy.PolicySet.from_str(text[start:end])
        except ValueError as own:
            token = re.search(r"`([^`]+)`|: (\w+)$", str(own))
            word = (token.group(1) or token.group(2)) if token else None
            line = _line_of_word(text, (start, end), word) if word else line_at(text, start)
            hint = ""
            if word is not None and re.fullmatch(r"\w+", word):
                close = difflib.get_close_matches(
                    word, ["principal", "action", "resource", "context", "permit", "forbid"], n=1
                )
                hint = f" (did you mean {close[0]!r}?)" if close and close[0] != word else ""
            return CedarError(path, line, f"not a valid policy: {own}{hint}")
    return CedarError(path, None, f"not valid Cedar: {exc}")


def context_reads(node: Any) -> set[tuple[str, ...]]:
    """The context attribute paths an expression reads (``()``: the context as a whole)."""
    found: set[tuple[str, ...]] = set()
    stack: list[Any] = [node]
    while stack:
        value = stack.pop()
        path = _context_path(value)
        if path is not None:
            found.add(path)
            continue
        if isinstance(value, pst.HasAttr):
            base = _context_path(value.base)
            if base is not None:
                found.add((*base, *value.attrs))
                continue
        stack.extend(_children(value))
    return found


def has_tests(node: Any) -> set[tuple[str, ...]]:
    """The attributes an expression's ``has`` tests name: ``(variable, *path, attribute)`` when
    the tested value is a variable or an attribute path from one (``context.arguments has x``
    is ``("context", "arguments", "x")``), ``("", attribute)`` for any other value."""
    found: set[tuple[str, ...]] = set()
    stack: list[Any] = [node]
    while stack:
        value = stack.pop()
        if isinstance(value, pst.HasAttr):
            found.add((*(_var_path(value.base) or ("",)), *value.attrs))
        stack.extend(_children(value))
    return found


def _var_path(value: Any) -> tuple[str, ...] | None:
    attrs: list[str] = []
    while isinstance(value, pst.GetAttr):
        attrs.append(value.attr)
        value = value.base
    if isinstance(value, pst.Var):
        return (value.name, *reversed(attrs))
    return None


def _context_path(value: Any) -> tuple[str, ...] | None:
    path = _var_path(value)
    return path[1:] if path is not None and path[0] == "context" else None


def _children(value: Any) -> list[Any]:
    """The parts of a parsed expression a walk goes on into."""
    if isinstance(value, Mapping):
        return list(value.values())
    if isinstance(value, tuple):
        return list(value)
    if hasattr(value, "__dataclass_fields__") and not isinstance(value, type):
        return [getattr(value, f) for f in value.__dataclass_fields__]
    return []


# -- validation against the schema -----------------------------------------------------------------


def validate(
    text: str,
    path: str,
    infos: Sequence[PolicyInfo],
    schema: cedarpy.Schema,
    known: Known,
) -> None:
    """Validate the policies against ``schema``; the first error as :class:`CedarError` with
    the line of the name it is about and the closest known name."""
    result = cedarpy.validate_policies(text, schema)
    spans = policy_spans(text)
    if result.validation_passed:
        _check_has(text, path, spans, infos, known)
        return
    by_id = {info.cedar_id: (index, info) for index, info in enumerate(infos)}
    error = result.errors[0]
    index, info = by_id.get(error.policy_id, (None, None))
    span = spans[index] if index is not None and index < len(spans) else (0, len(text))
    message = error.error.removeprefix(f"for policy `{error.policy_id}`, ")
    word, hint = known.explain(message)
    line = _line_of_word(text, span, word) if word else line_at(text, span[0])
    name = f"policy {info.name}: " if info is not None else ""
    raise CedarError(path, line, f"{name}{message}{hint}")


@dataclass(frozen=True, slots=True)
class Known:
    """The names the schema knows, for "did you mean"."""

    entity_types: tuple[str, ...]
    actions: tuple[str, ...]
    context: Mapping[str, tuple[str, ...]]  # action -> attribute paths ("arguments.repo_path")
    attributes: Mapping[str, tuple[str, ...]]  # entity type -> attribute names
    names: frozenset[str] = frozenset()  # every attribute name of every record in the schema

    def missing(self, test: tuple[str, ...], info: PolicyInfo) -> str | None:
        """Why a ``has`` test (see :func:`has_tests`) of the policy ``info`` is a typo: its
        attribute is one nothing it can test has, and a name that is there is close to it
        (named). ``None`` when something has it, or nothing close does (an attribute of a tool
        or an entity this deployment does not have: the test is false here, as written)."""
        var, attr = test[0], test[-1]
        if var == "context":
            parent = ".".join(test[1:-1])
            paths = {
                p
                for action, found in self.context.items()
                if info.applies_to_action(action, action_groups(action))
                for p in found
            }
            dotted = ".".join(test[1:])
            if not paths or dotted in paths:
                return None
            prefix = parent + "." if parent else ""
            siblings = {p[len(prefix) :] for p in paths if p.startswith(prefix)}
            where = f"the context of the actions it applies to has no {dotted!r}"
            close = _closest(attr, {s for s in siblings if "." not in s})
            meant = prefix + close if close else None
        else:
            if var in ("principal", "resource") and len(test) == 2:
                names = {n for found in self.attributes.values() for n in found}
                where = f"no entity type has an attribute {attr!r}"
            else:
                names, where = set(self.names), f"no record of the schema has {attr!r}"
            if attr in names:
                return None
            meant = _closest(attr, names)
        if meant is None:
            return None
        return f"`has {attr}`: {where} (did you mean {meant!r}?)"

    def explain(self, message: str) -> tuple[str | None, str]:
        """The name an error message is about, and a hint naming what was probably meant."""
        found = re.search(r"unrecognized entity type `([^`]+)`", message)
        if found:
            return found.group(1), _hint(found.group(1), self.entity_types)
        found = re.search(r"attribute `([^`]+)` in context for Action::\"([^\"]+)\"", message)
        if found:
            attr, action = found.groups()
            return attr.rsplit(".", 1)[-1], _hint(attr, self.context.get(action, ()))
        found = re.search(r"attribute `([^`]+)` on entity type `([^`]+)`", message)
        if found:
            attr, type_ = found.groups()
            names = self.attributes.get(type_) or ()
            every = sorted({name for names in self.attributes.values() for name in names})
            return attr, _hint(attr, names) or _hint(attr, every)
        found = re.search(r"unrecognized action `Action::\"([^\"]+)\"`", message)
        if found:
            return found.group(1), _hint(found.group(1), self.actions)
        found = re.search(r"`([^`]+)`", message)
        return (found.group(1).rsplit(".", 1)[-1] if found else None), ""


def _check_has(
    text: str,
    path: str,
    spans: Sequence[tuple[int, int]],
    infos: Sequence[PolicyInfo],
    known: Known,
) -> None:
    """Refuse a ``has`` test that is a typo (see :meth:`Known.missing`). Cedar's validator
    types a test of an attribute nothing has as false rather than an error, so a typo there
    (``context.arguments has repo_pth``) would load and make its policy never apply: a forbid
    that never forbids."""
    for index, info in enumerate(infos):
        for test in sorted(info.has):
            problem = known.missing(test, info)
            if problem is None:
                continue
            span = spans[index] if index < len(spans) else (0, len(text))
            line = _line_of_word(text, span, test[-1])
            raise CedarError(path, line, f"policy {info.name}: {problem}")


def _closest(word: str, names: Iterable[str]) -> str | None:
    """The known name ``word`` is most likely a typo of (one or two letters apart), if any."""
    close = difflib.get_close_matches(word, sorted(names), n=1, cutoff=0.8)
    return close[0] if close else None


def _hint(word: str, names: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, list(names), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def known_names(schema: Mapping[str, Any]) -> Known:
    """What a Cedar JSON schema names (the model's and an operator's)."""
    entity_types: list[str] = []
    attributes: dict[str, tuple[str, ...]] = {}
    actions: list[str] = []
    context: dict[str, tuple[str, ...]] = {}
    for namespace, body in schema.items():
        prefix = f"{namespace}::" if namespace else ""
        for name, entity in (body.get("entityTypes") or {}).items():
            entity_types.append(prefix + name)
            shape = (entity.get("shape") or {}).get("attributes") or {}
            attributes[prefix + name] = tuple(shape)
        for name, action in (body.get("actions") or {}).items():
            actions.append(name)
            record = ((action.get("appliesTo") or {}).get("context") or {}).get("attributes")
            context[name] = tuple(_paths(record or {}))
    names: set[str] = set()
    stack: list[Any] = [schema]
    while stack:
        value = stack.pop()
        if isinstance(value, Mapping):
            found = value.get("attributes")
            if isinstance(found, Mapping):
                names.update(str(name) for name in found)
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return Known(
        tuple(entity_types or ENTITY_TYPES), tuple(actions), context, attributes, frozenset(names)
    )


def _paths(attributes: Mapping[str, Any], prefix: str = "") -> Iterable[str]:
    for name, type_ in attributes.items():
        yield prefix + name
        if type_.get("type") == "Record":
            yield from _paths(type_.get("attributes") or {}, f"{prefix}{name}.")


# -- entities and schema files ---------------------------------------------------------------------


def parse_entities(
    text: str, path: str, known: Known, schema: cedarpy.Schema
) -> list[dict[str, Any]]:
    """The entities of a Cedar entities file (JSON), checked against the schema's names."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CedarError(path, exc.lineno, f"not valid JSON: {exc.msg}") from None
    if not isinstance(data, list):
        raise CedarError(path, 1, "an entities file is a JSON list of entities")
    for entity in data:
        uid = entity.get("uid") if isinstance(entity, dict) else None
        if not isinstance(uid, dict) or not isinstance(uid.get("type"), str):
            raise CedarError(path, None, f"an entity needs a uid with a type: {entity!r:.80}")
        for ref in [uid, *(entity.get("parents") or [])]:
            type_ = ref.get("type") if isinstance(ref, dict) else None
            if type_ not in known.entity_types and type_ != "Action":
                raise CedarError(
                    path,
                    _json_line(text, str(type_)),
                    f"unknown entity type {type_!r}{_hint(str(type_), known.entity_types)}",
                )
        names = known.attributes.get(uid["type"], ())
        for attr in entity.get("attrs") or {}:
            if attr not in names:
                raise CedarError(
                    path,
                    _json_line(text, attr),
                    f"{uid['type']} has no attribute {attr!r}{_hint(attr, names)}",
                )
    try:
        cedarpy.Entities.from_json_str(text, schema=schema)
    except ValueError as exc:
        raise CedarError(path, None, f"entities do not fit the schema: {exc}") from None
    return list(data)


def _json_line(text: str, word: str) -> int | None:
    found = text.find(json.dumps(word))
    return line_at(text, found) if found >= 0 else None


def parse_operator_schema(text: str, path: str) -> dict[str, Any]:
    """An operator's schema: Cedar's JSON schema format (merged into the model's)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CedarError(
            path, exc.lineno, f"a schema is given in Cedar's JSON schema format: {exc.msg}"
        ) from None
    if not isinstance(data, dict):
        raise CedarError(path, 1, "a schema is a JSON object of namespaces")
    return data


def action_groups(action_id: str) -> tuple[str, ...]:
    """The action groups of an action of the model."""
    return (CALL_TOOL,) if "/" in action_id else ()
