"""The Cedar model of a tool call, and the Cedar schema generated from it and the tools' schemas.

Entity types (no namespace):

* ``User`` (in ``Group``): the person a call is made for: the authenticated identity at the
  gateway (its subject; its groups are its parents), the ``user`` given to a run in-process.
  ``Agent``: the principal when there is no user (the agent's name; the gateway's name at the
  gateway). ``Client``: the MCP client (its ``client_id``), ``local`` in-process.
* ``Upstream``: where tools come from (the upstream's name at the gateway and for an
  :class:`~otelhooks.integrations.mcp.MCPServerTools`' tools in-process, ``local`` for Python
  tools). ``Tool`` (in ``Upstream``) is keyed ``"<upstream>/<its own name>"``, never on the
  name it is served under (a prefix or a rename does not change it), with the attributes
  ``name`` and ``upstream``. ``Resource`` (in ``Upstream``, keyed on its URI, attribute
  ``uri``) and ``Prompt`` (in ``Upstream``, keyed ``"<upstream>/<name>"``, attribute ``name``).

Actions: one per tool, ``Action::"<upstream>/<name>"``, in the group ``Action::"call_tool"``;
``Action::"read_resource"`` and ``Action::"get_prompt"``. Every request's context has ``agent``
(an ``Agent``), ``client`` (a ``Client``) and ``now`` (a ``datetime``, the time of the call);
a tool's action adds ``arguments``, a record whose type is generated from the tool's input
schema:

======================  ====================================================================
JSON Schema             Cedar
======================  ====================================================================
string (any format)     ``String``
integer                 ``Long`` (a value outside 64 bits: the call is refused)
boolean                 ``Bool``
number                  ``decimal``: a value with more than 4 decimal places, or outside
                        ``decimal``'s range, cannot be given to Cedar: the call is refused
                        with that reason (never rounded)
array of one type       ``Set`` of it (order and repeats do not count in Cedar)
object with properties  a record; properties not ``required`` are optional attributes
null, or a type with    the attribute is optional and a ``null`` value is left out (a policy
``null`` beside it      tests ``context.arguments has x``)
anything else           not in the context (``oneOf``/``anyOf``, mixed types, free-form
                        objects): a policy that reads it fails validation at load
======================  ====================================================================
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Final

CALL_TOOL: Final = "call_tool"
READ_RESOURCE: Final = "read_resource"
GET_PROMPT: Final = "get_prompt"
LOCAL: Final = "local"
"""The upstream of in-process Python tools, and the client of an in-process run."""

USER: Final = "User"
GROUP: Final = "Group"
AGENT: Final = "Agent"
CLIENT: Final = "Client"
UPSTREAM: Final = "Upstream"
TOOL: Final = "Tool"
RESOURCE: Final = "Resource"
PROMPT: Final = "Prompt"
ENTITY_TYPES: Final = (USER, GROUP, AGENT, CLIENT, UPSTREAM, TOOL, RESOURCE, PROMPT)

_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_DECIMAL_LIMIT: Final = Decimal("922337203685477.5807")


class Unrepresentable(ValueError):
    """An argument whose value Cedar cannot hold exactly (the call is refused with this)."""


@dataclass(frozen=True, slots=True)
class ToolKey:
    """A tool as the policies know it: its upstream and its own name there."""

    upstream: str
    name: str

    @property
    def id(self) -> str:
        """The id of its ``Tool`` entity and of its action: ``"<upstream>/<name>"``."""
        return f"{self.upstream}/{self.name}"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request is for: a ``User`` (with its groups) or, without one, an ``Agent``."""

    type: str
    id: str
    groups: tuple[str, ...] = ()

    def uid(self) -> dict[str, str]:
        """Its entity uid in Cedar's JSON."""
        return {"type": self.type, "id": self.id}


def uid(type_: str, id_: str) -> dict[str, str]:
    """A Cedar entity uid in JSON."""
    return {"type": type_, "id": id_}


# -- JSON Schema -> Cedar types --------------------------------------------------------------------


def cedar_type(schema: Any) -> tuple[dict[str, Any] | None, bool]:
    """The Cedar type of a JSON Schema (``None``: not representable), and whether ``null`` is
    one of its values (the attribute is then optional)."""
    if not isinstance(schema, Mapping):
        return None, False
    kind = schema.get("type")
    nullable = False
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        nullable = len(kinds) != len(kind)
        if len(kinds) != 1:
            return None, nullable
        kind = kinds[0]
    if kind is None and "enum" in schema:
        values = schema["enum"]
        if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
            kind = "string"
    if kind == "string":
        return {"type": "String"}, nullable
    if kind == "integer":
        return {"type": "Long"}, nullable
    if kind == "boolean":
        return {"type": "Boolean"}, nullable
    if kind == "number":
        return {"type": "Extension", "name": "decimal"}, nullable
    if kind == "array":
        element, element_nullable = cedar_type(schema.get("items"))
        if element is None or element_nullable:
            return None, nullable
        return {"type": "Set", "element": element}, nullable
    if kind == "object":
        return record_type(schema), nullable
    return None, nullable


def record_type(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Cedar record of an object schema (``None``: a free-form object)."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return None if schema.get("additionalProperties") not in (None, False) else _EMPTY
    required = set(schema.get("required") or ())
    attributes: dict[str, Any] = {}
    for name, sub in properties.items():
        found, nullable = cedar_type(sub)
        if found is None:
            continue
        attributes[name] = {**found, "required": name in required and not nullable}
    return {"type": "Record", "attributes": attributes}


_EMPTY: Final[dict[str, Any]] = {"type": "Record", "attributes": {}}


def arguments_type(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The type of ``context.arguments`` for a tool with this input schema."""
    return record_type(parameters) or _EMPTY


# -- values -> Cedar JSON -------------------------------------------------------------------------


def cedar_value(value: Any, type_: Mapping[str, Any], path: str) -> Any:
    """``value`` as Cedar JSON of ``type_``; raises :class:`Unrepresentable` naming ``path``."""
    kind = type_["type"]
    if kind == "String":
        if type(value) is not str and not isinstance(value, str):
            raise Unrepresentable(f"argument {path} is not a string")
        return value
    if kind == "Boolean":
        if not isinstance(value, bool):
            raise Unrepresentable(f"argument {path} is not true or false")
        return value
    if kind == "Long":
        if isinstance(value, bool) or not isinstance(value, int):
            raise Unrepresentable(f"argument {path} is not an integer")
        if not _LONG_MIN <= value <= _LONG_MAX:
            raise Unrepresentable(f"argument {path} = {value} does not fit Cedar's 64-bit Long")
        return value
    if kind == "Extension":
        return {"__extn": {"fn": "decimal", "arg": decimal_text(value, path)}}
    if kind == "Set":
        if not isinstance(value, list):
            raise Unrepresentable(f"argument {path} is not a list")
        element = type_["element"]
        return [cedar_value(item, element, f"{path}[{i}]") for i, item in enumerate(value)]
    if kind == "Record":
        if not isinstance(value, Mapping):
            raise Unrepresentable(f"argument {path} is not an object")
        return record_value(value, type_, path)
    raise Unrepresentable(f"argument {path} has a type Cedar is not given")


def record_value(value: Mapping[str, Any], type_: Mapping[str, Any], path: str) -> dict[str, Any]:
    """A record's value: its typed attributes (``null`` left out; the rest is not given)."""
    out: dict[str, Any] = {}
    get = value.get
    for name, attribute in type_["attributes"].items():
        item = get(name)
        if item is None:
            continue
        out[name] = cedar_value(item, attribute, f"{path}.{name}" if path else name)
    return out


def decimal_text(value: Any, path: str) -> str:
    """A JSON number as the text of Cedar's ``decimal`` (at most 4 decimal places), exactly."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Unrepresentable(f"argument {path} is not a number")
    try:
        number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    except InvalidOperation:
        raise Unrepresentable(f"argument {path} is not a finite number") from None
    if not number.is_finite():
        raise Unrepresentable(f"argument {path} is not a finite number")
    exponent = number.as_tuple().exponent
    assert isinstance(exponent, int)
    if exponent < -4 and number != number.quantize(Decimal("0.0001")):
        raise Unrepresentable(
            f"argument {path} = {value!r} has more than 4 decimal places: Cedar's decimal "
            "cannot hold it exactly"
        )
    if abs(number) > _DECIMAL_LIMIT:
        raise Unrepresentable(f"argument {path} = {value!r} is outside Cedar's decimal range")
    return f"{number.quantize(Decimal('0.0001')):f}"


def now_value(when: datetime.datetime | None = None) -> dict[str, Any]:
    """The time of a call as Cedar's ``datetime`` (UTC, milliseconds)."""
    moment = when or datetime.datetime.now(datetime.UTC)
    text = moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return {"__extn": {"fn": "datetime", "arg": text}}


# -- the schema ------------------------------------------------------------------------------------


def _common_context() -> dict[str, Any]:
    return {
        "agent": {"type": "Entity", "name": AGENT},
        "client": {"type": "Entity", "name": CLIENT},
        "now": {"type": "Extension", "name": "datetime"},
    }


_PRINCIPALS: Final = [USER, AGENT]


def model_schema(tools: Mapping[ToolKey, Mapping[str, Any]]) -> dict[str, Any]:
    """The Cedar schema (JSON) of the model, with an action per tool of ``tools`` (key -> its
    input schema)."""
    entity_types: dict[str, Any] = {
        GROUP: {},
        USER: {"memberOfTypes": [GROUP]},
        AGENT: {},
        CLIENT: {},
        UPSTREAM: {},
        TOOL: {
            "memberOfTypes": [UPSTREAM],
            "shape": {
                "type": "Record",
                "attributes": {"name": {"type": "String"}, "upstream": {"type": "String"}},
            },
        },
        RESOURCE: {
            "memberOfTypes": [UPSTREAM],
            "shape": {"type": "Record", "attributes": {"uri": {"type": "String"}}},
        },
        PROMPT: {
            "memberOfTypes": [UPSTREAM],
            "shape": {"type": "Record", "attributes": {"name": {"type": "String"}}},
        },
    }
    common = _common_context()
    actions: dict[str, Any] = {
        CALL_TOOL: {},
        READ_RESOURCE: {
            "appliesTo": {
                "principalTypes": _PRINCIPALS,
                "resourceTypes": [RESOURCE],
                "context": {"type": "Record", "attributes": common},
            }
        },
        GET_PROMPT: {
            "appliesTo": {
                "principalTypes": _PRINCIPALS,
                "resourceTypes": [PROMPT],
                "context": {"type": "Record", "attributes": common},
            }
        },
    }
    for key, parameters in sorted(tools.items(), key=lambda item: item[0].id):
        actions[key.id] = {
            "memberOf": [{"id": CALL_TOOL}],
            "appliesTo": {
                "principalTypes": _PRINCIPALS,
                "resourceTypes": [TOOL],
                "context": {
                    "type": "Record",
                    "attributes": {**common, "arguments": arguments_type(parameters)},
                },
            },
        }
    return {"": {"entityTypes": entity_types, "actions": actions}}


def merge_schema(generated: dict[str, Any], operator: Mapping[str, Any]) -> dict[str, Any]:
    """The generated schema with an operator's (Cedar JSON schema) merged in: its entity types
    and common types are added, and replace the model's of the same name (in the same
    namespace); actions are the model's alone (the entities that group them are too)."""
    merged: dict[str, Any] = json.loads(json.dumps(generated))
    for namespace, body in operator.items():
        if not isinstance(body, Mapping):
            raise ValueError(f"namespace {namespace!r} of the schema is not an object")
        target = merged.setdefault(namespace, {"entityTypes": {}, "actions": {}})
        if body.get("actions"):
            raise ValueError(
                "the actions come from the tools (an action per tool, read_resource, "
                "get_prompt): a schema given adds entity types and common types only"
            )
        for section in ("entityTypes", "commonTypes"):
            given = body.get(section) or {}
            if not isinstance(given, Mapping):
                raise ValueError(f"{section} of namespace {namespace!r} is not an object")
            target.setdefault(section, {}).update(given)
        unknown = set(body) - {"entityTypes", "actions", "commonTypes", "annotations"}
        if unknown:
            raise ValueError(f"unknown key {sorted(unknown)[0]!r} in namespace {namespace!r}")
    return merged


def model_entities(tools: Sequence[ToolKey], upstreams: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The entities the model brings: each tool's action (in ``call_tool``), its ``Tool`` entity
    (in its ``Upstream``) and the upstreams."""
    out: list[dict[str, Any]] = [
        {"uid": uid("Action", CALL_TOOL), "attrs": {}, "parents": []},
        {"uid": uid("Action", READ_RESOURCE), "attrs": {}, "parents": []},
        {"uid": uid("Action", GET_PROMPT), "attrs": {}, "parents": []},
    ]
    names = sorted({*upstreams, *(key.upstream for key in tools)})
    out.extend({"uid": uid(UPSTREAM, name), "attrs": {}, "parents": []} for name in names)
    for key in sorted(set(tools), key=lambda k: k.id):
        out.append(
            {"uid": uid("Action", key.id), "attrs": {}, "parents": [uid("Action", CALL_TOOL)]}
        )
        out.append(
            {
                "uid": uid(TOOL, key.id),
                "attrs": {"name": key.name, "upstream": key.upstream},
                "parents": [uid(UPSTREAM, key.upstream)],
            }
        )
    return out
