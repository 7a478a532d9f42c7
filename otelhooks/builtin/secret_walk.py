"""Walking a value as the model, a span and a log line will see it, redacting what the
detectors find in it (:meth:`otelhooks.builtin.redaction.Redactor.redact`).

* a string is read as text, or, when it holds JSON of an object or an array (up to 16 KB; the
  JSON of a list of strings at any size), walked as that structure (and written back as JSON
  when something in it changed);
* a mapping's values are judged whole by the detectors that judge values (a credential's name,
  a Kubernetes Secret), else walked, then judged by those that judge what nothing was found in
  (evidence in the mapping); its keys are read like values (a secret used as a key);
* a list or tuple: each item walked, and its plain strings also read together, joined by line
  breaks: a private key or a YAML ``password: |`` block returned as ``splitlines()`` is one
  secret, not many clean lines;
* sets, bytes, bytearrays and memoryviews (as UTF-8 text), dataclasses and pydantic models (by
  their fields, copied as the same type when it can be made, else as a dict), and any other
  object by its text as ``str()`` gives it (replaced by the redacted text when it holds a
  secret);
* deeper than 64 levels a value is replaced whole: never passed on unread.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any, Final, NamedTuple, Protocol

from .secret_detectors import (
    Field,
    Finding,
    MappingView,
    Pipeline,
    Walker,
    merge,
    redacted,
    replace_findings,
)

MIN_SECRET_LEN: Final = 8
MAX_DEPTH: Final = 64
MAX_JSON_WALK: Final = 16_384  # JSON text up to this size is walked as structure
_INERT: Final = frozenset({bool, int, float})
_JSON_START: Final = ("{", "[")
_UNSET: Final = object()

# What a key name needs (Redactor.key_plan), as flags.
CREDENTIAL: Final = 1  # a credential's name: its value is judged for it
IDENTIFIER: Final = 2  # its value is an identifier the model chose
KEY_TEXT: Final = 4  # the key itself may be a secret


class Redacting(Walker, Protocol):
    """What a walk asks of the redactor (:class:`otelhooks.builtin.redaction.Redactor`)."""

    @property
    def pipeline(self) -> Pipeline:
        """The detectors."""
        ...

    @property
    def callback(self) -> Any:
        """The redactor's callback, or ``None``."""
        ...

    def redact_text(self, text: str, path: str = "") -> tuple[str, list[str]]:
        """A text with its secrets replaced, and their kinds."""
        ...

    def find(self, text: str) -> list[Finding]:
        """What the detectors find in a text (a large one read in pieces)."""
        ...

    def redact_identifier(self, text: str, path: str = "") -> tuple[str, list[str]]:
        """An identifier the model chose with its secrets replaced, and their kinds."""
        ...

    def key_plan(self, key: str) -> int:
        """What a key name needs (:data:`CREDENTIAL`, :data:`IDENTIFIER`, :data:`KEY_TEXT`)."""
        ...

    def is_identifier_key(self, key: Any) -> bool:
        """Whether the value under ``key`` is an identifier the model chose."""
        ...


class At(NamedTuple):
    """Where a value is: its path, how deep, and the mapping it is in with its key there (a
    container inside a mapping takes what the mapping says about its items along)."""

    path: str
    depth: int = 0
    where: MappingView | None = None
    key: Any = None

    def item(self, path: str) -> At:
        """An item of the value here, at ``path``, one level deeper."""
        return At(path, self.depth + 1, self.where, self.key)


class Walk:
    """One walk of a value: the redactor it asks, and the paths redacted so far."""

    __slots__ = ("paths", "redactor")

    def __init__(self, redactor: Redacting) -> None:
        self.redactor = redactor
        self.paths: list[str] = []

    def value(self, value: Any, at: At) -> Any:
        """``value`` redacted (the same object when nothing in it changed)."""
        if isinstance(value, str):
            return self.text(value, at)
        if value is None or type(value) in _INERT:
            return value
        if at.depth > MAX_DEPTH:
            self.paths.append(at.path or "$")  # too deep to inspect: never pass it on unread
            return redacted("too_deep")
        if type(value) is dict or isinstance(value, Mapping):
            return self.mapping(value, at)
        if isinstance(value, (list, tuple)):
            return self.sequence(value, at)
        if isinstance(value, (set, frozenset)):
            items = [self.value(i, at.item(f"{at.path}[]")) for i in value]
            changed = any(new is not old for new, old in zip(items, value, strict=True))
            return type(value)(items) if changed else value
        if isinstance(value, (bytes, bytearray, memoryview)):
            try:
                text = bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                return value
            new_text = self.text(text, at)
            return new_text if new_text is not text else value
        return self.object(value, at)

    def text(self, value: str, at: At) -> str:
        """A string: JSON of an object or array walked as structure, any other text scanned."""
        redactor = self.redactor
        if (
            value[:1] in _JSON_START
            and (len(value) <= MAX_JSON_WALK or _lines_json(value))
            and at.depth <= MAX_DEPTH
            and not redactor.cache.is_known(value)
        ):
            try:
                decoded = json.loads(value)
            except ValueError:
                decoded = None
            if len(value) > MAX_JSON_WALK and not (
                _all_strings(decoded) or self.lines_hold_secret(decoded, at.depth)
            ):
                decoded = None  # a large document is read as text
            if isinstance(decoded, (dict, list)):
                before = len(self.paths)
                new = self.value(decoded, At(at.path, at.depth + 1, at.where, at.key))
                if len(self.paths) > before:
                    return json.dumps(new, ensure_ascii=False)
                redactor.cache.remember(value)
                return value
        text, kinds = redactor.redact_text(value, at.path)
        if kinds:
            self.paths.append(at.path or "$")
        return text

    def lines_hold_secret(self, value: Any, depth: int) -> bool:
        """Whether a list of two or more strings in ``value`` (decoded JSON) holds a secret read
        as one text, its strings joined by line breaks: a large document holding a file as a
        list of lines is then walked as structure, so that the list is read as it is in a
        small one (as text, a private key's lines are separate strings)."""
        if depth > MAX_DEPTH:
            return False
        if type(value) is dict:
            items: Any = value.values()
        elif type(value) is list:
            if len(value) > 1 and _all_strings(value):
                return bool(self.redactor.find("\n".join(value)))
            items = value
        else:
            return False
        return any(
            self.lines_hold_secret(item, depth + 1) for item in items if type(item) in (dict, list)
        )

    def object(self, value: Any, at: At) -> Any:
        """A dataclass or a pydantic model by its fields; another object by its text."""
        fields = _fields_of(value)
        if fields is None:
            text = str(value)
            new_text = self.text(text, at)
            return new_text if new_text is not text else value
        new = self.mapping(fields, at)
        if new is fields:
            return value
        return _copy_with(value, {k: v for k, v in new.items() if v is not fields.get(k)}, new)

    def sequence(self, value: list[Any] | tuple[Any, ...], at: At) -> Any:
        """A list or tuple: each item walked; its plain strings read joined by line breaks."""
        items = list(value)
        lines: list[int] = []
        changed = False
        for i, item in enumerate(items):
            if type(item) is str and item[:1] not in _JSON_START:
                lines.append(i)
                continue
            new = self.value(item, at.item(f"{at.path}[{i}]"))
            if new is item and _is_pair(item):  # a (name, value) pair: a mapping's item
                value_at = at.item(f"{at.path}[{i}][1]")
                judged = self.named(item[0], item[1], value_at)
                if judged is not item[1]:
                    new = type(item)((item[0], judged))
            if new is not item:
                items[i], changed = new, True
        if lines and self.lines(items, lines, at):
            changed = True
        if len(items) > 1 and self.columns(value, items, at):
            changed = True
        if not changed:
            return value
        if isinstance(value, tuple):
            return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
        return items

    def lines(self, items: list[Any], lines: list[int], at: At) -> bool:
        """The strings ``items[i]`` for ``i`` in ``lines``, read as one text joined by line
        breaks, with what is found put back in place; then each string also read on its own
        when it holds escapes or the redactor has a callback (which sees every string); whether
        any changed."""
        texts = [items[i] for i in lines]
        if len(texts) == 1:
            items[lines[0]] = self.text(texts[0], at.item(f"{at.path}[{lines[0]}]"))
            return items[lines[0]] is not texts[0]
        joined = "\n".join(texts)
        findings = self.redactor.find(joined)
        for i, text, local in zip(lines, texts, _per_line(texts, findings), strict=True):
            if local:
                items[i] = replace_findings(text, merge(text, local))[0]
                self.paths.append(f"{at.path}[{i}]")
        if "\\" in joined or "%" in joined or self.redactor.callback is not None:
            for i in lines:  # encoded secrets decoded line by line; the callback on each
                items[i] = self.text(items[i], at.item(f"{at.path}[{i}]"))
        return any(items[i] is not text for i, text in zip(lines, texts, strict=True))

    def columns(self, value: list[Any] | tuple[Any, ...], items: list[Any], at: At) -> bool:
        """The strings at one key of the dicts of ``value`` (or one place of its lists and
        tuples), read as one text joined by line breaks, with what is found put in place in
        ``items`` (``value``'s items as walked one by one), each such string then read again on
        its own: a private key returned as one record per line (``[{"line": 1, "text":
        "-----BEGIN ..."}, ...]``, ``list(enumerate(lines))``) is one secret, as in a list of
        lines; whether any changed."""
        cells: dict[tuple[bool, Any], list[int]] = {}
        for i, item in enumerate(value):
            kind = type(item)
            if kind is dict:
                pairs: Any = item.items()
            elif kind is list or kind is tuple:
                pairs = enumerate(item)
            else:
                continue
            for key, cell in pairs:
                if type(cell) is str and cell[:1] not in _JSON_START:
                    cells.setdefault((kind is dict, key), []).append(i)
        changed = False
        for (keyed, key), rows in cells.items():
            texts = [value[i][key] for i in rows]
            joined = "\n".join(texts)
            if len(rows) < 2 or len(joined) < MIN_SECRET_LEN:
                continue
            findings = self.redactor.find(joined)
            for i, text, local in zip(rows, texts, _per_line(texts, findings), strict=True):
                if not local:
                    continue
                item = items[i]
                if type(item) is not type(value[i]):
                    continue  # replaced whole by its walk
                path = f"{at.path}[{i}].{key}" if keyed else f"{at.path}[{i}][{key}]"
                new = replace_findings(text, merge(text, local))[0]
                before = len(self.paths)
                new = self.text(new, at.item(path))
                del self.paths[before:]
                if keyed:
                    items[i] = {**item, key: new}
                else:
                    items[i] = type(item)(new if j == key else c for j, c in enumerate(item))
                if path not in self.paths:
                    self.paths.append(path)
                changed = True
        return changed

    def mapping(self, value: Mapping[Any, Any], at: At) -> Any:
        """A mapping's items: each value judged, walked or judged again; each key read."""
        redactor = self.redactor
        pipeline = redactor.pipeline
        out: dict[Any, Any] | None = None
        where: MappingView | None = None
        plain = redactor.callback is None
        for judge in pipeline.every_value_judges:
            if judge.judges_every_value(at.where, at.key):
                plain = False
                break
        known = redactor.cache.known
        plans = redactor.cache.key_plans
        key_plan = redactor.key_plan
        path = at.path
        for key, item in value.items():
            plan = -1
            if plain and type(key) is str:  # the common case, decided without the item's path
                plan = plans.get(key, -1)
                if plan < 0:
                    plan = key_plan(key)
                if not plan & (CREDENTIAL | KEY_TEXT):
                    kind = type(item)
                    if item is None or kind in _INERT:
                        continue
                    if kind is str and (
                        len(item) < MIN_SECRET_LEN
                        or (not plan & IDENTIFIER and known.get(id(item)) is item)
                    ):
                        continue
            elif plain and (item is None or type(item) in _INERT):
                continue
            if where is None:
                where = MappingView(value, at.where, at.key, redactor)
            sub_path = f"{path}.{key}" if path else str(key)
            field = Field(key, item, sub_path, where)
            new: Any = _UNSET
            for judge in pipeline.value_judges:
                judged = judge.judge_value(field)
                if judged is not None:
                    new = redacted(judged)
                    self.paths.append(sub_path)
                    break
            if new is _UNSET:
                new = self._item(field, At(sub_path, at.depth + 1, where, key))
            new_key = key
            if type(key) is str and (plan if plan >= 0 else key_plan(key)) & KEY_TEXT:
                new_key = self._key(field, path, value, out)
            if new is not item or new_key is not key:
                if out is None:
                    out = dict(value)
                if new_key is not key:
                    del out[key]
                out[new_key] = new
        record = _record(value) if len(value) <= _RECORD_MAX else None
        if record is not None and (out is None or out.get(record[1]) is value[record[1]]):
            name_key, value_key = record
            item = value[value_key]
            sub_path = f"{path}.{value_key}" if path else str(value_key)
            new = self.named(value[name_key], item, At(sub_path, at.depth, at.where, at.key))
            if new is not item:
                out = dict(value) if out is None else out
                out[value_key] = new
        return out if out is not None else value

    def named(self, name: str, item: str, at: At) -> str:
        """``item`` judged as the value under the key ``name``: a record or a pair that names
        its own value (``{"name": "DB_PASSWORD", "value": ...}``, ``("password", ...)``) is
        read as the mapping ``{name: item}`` it stands for."""
        before = len(self.paths)
        one = {name: item}
        new = self.mapping(one, At(at.path, at.depth + 1, at.where, at.key))
        if new is one:
            return item
        del self.paths[before:]
        self.paths.append(at.path or "$")
        return next(iter(new.values()))  # type: ignore[no-any-return]

    def _item(self, field: Field, at: At) -> Any:
        """A mapping's value no detector judged whole: walked (an identifier the model chose
        by its own rules), then judged if nothing was found in a text."""
        redactor, item = self.redactor, field.value
        if type(item) is str and redactor.is_identifier_key(field.key):
            new, kinds = redactor.redact_identifier(item, at.path)
            if kinds:
                self.paths.append(at.path)
            return new
        before = len(self.paths)
        new = self.value(item, at)
        if len(self.paths) == before and type(item) is str:
            kind = self._unfound(field, item)
            if kind is not None:
                self.paths.append(at.path)
                return redacted(kind)
        return new

    def _key(
        self, field: Field, path: str, value: Mapping[Any, Any], out: dict[Any, Any] | None
    ) -> Any:
        """A key that may hold a secret (:data:`KEY_TEXT`), redacted like a value when it does
        (renamed apart from the other keys)."""
        key = field.key
        new_key, kinds = self.redactor.redact_text(key, field.path)
        if not kinds:
            kind = self._unfound(field, key)
            if kind is None:
                return key
            new_key = redacted(kind)
        self.paths.append(f"{path}.<key>" if path else "<key>")
        while new_key in value or (out is not None and new_key in out):
            new_key += "'"
        return new_key

    def _unfound(self, field: Field, text: str) -> str | None:
        if len(text) < MIN_SECRET_LEN:
            return None
        for judge in self.redactor.pipeline.unfound_judges:
            kind = judge.judge_unfound(field, text)
            if kind is not None:
                return kind
        return None


def _per_line(texts: list[str], findings: list[Finding]) -> list[list[Finding]]:
    """``findings`` in the texts joined by line breaks, as findings in each text."""
    out: list[list[Finding]] = []
    offset = 0
    for text in texts:
        end = offset + len(text)
        out.append(
            [
                Finding(a - offset, b - offset, f.kind, f.detector, f.priority)
                for f in findings
                if (a := max(f.start, offset)) < (b := min(f.end, end))
            ]
        )
        offset = end + 1
    return out


def _lines_json(text: str) -> bool:
    """Whether a text longer than :data:`MAX_JSON_WALK` may be the JSON of a list of lines
    (``json.dumps(text.splitlines())``) or of an object holding one (``{"lines": [...]}``), to
    be walked as one: a private key or a password block in it is read over its lines, as in the
    list itself (an object only when such a list holds a secret: see
    :meth:`Walk.lines_hold_secret`)."""
    if text[:1] == "[":
        return text[1:64].lstrip()[:1] == '"'
    at = text.find("[")  # a list that starts with a string (found a character at a time: fast)
    while at >= 0:
        if text[at + 1 : at + 64].lstrip()[:1] == '"':
            return True
        at = text.find("[", at + 1)
    return False


def _all_strings(value: Any) -> bool:
    return type(value) is list and all(type(item) is str for item in value)


_RECORD_MAX: Final = 4  # a record that names its value has few other fields
_NAME_KEYS: Final = ("name", "Name", "key", "Key")
_VALUE_KEYS: Final = ("value", "Value")


def _record(value: Mapping[Any, Any]) -> tuple[str, str] | None:
    """The keys of a record that names its own value (Kubernetes' env and HAR's headers
    ``{"name": ..., "value": ...}``, AWS tags ``{"Key": ..., "Value": ...}``): the name's key
    and the value's, when the name and the value are strings; else ``None``."""
    for name_key in _NAME_KEYS:
        if type(value.get(name_key)) is str:
            for value_key in _VALUE_KEYS:
                if type(value.get(value_key)) is str:
                    return name_key, value_key
    return None


def _is_pair(item: Any) -> bool:
    """Whether ``item`` is a list or tuple of two strings (``dict.items()`` as a list)."""
    return type(item) in (list, tuple) and len(item) == 2 and all(type(i) is str for i in item)


def _fields_of(value: Any) -> dict[str, Any] | None:
    """The fields of a dataclass or a pydantic model; ``None`` for anything else."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    model_fields = getattr(type(value), "model_fields", None)
    if isinstance(model_fields, dict) and hasattr(value, "model_copy"):
        return {name: getattr(value, name) for name in model_fields}
    return None


def _copy_with(value: Any, changed: dict[str, Any], redacted_fields: dict[str, Any]) -> Any:
    """``value`` with ``changed`` fields, as the same type when it can be made, else the
    redacted fields as a dict (a secret never stays because a copy could not be made)."""
    try:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return dataclasses.replace(value, **changed)
        model_copy = getattr(value, "model_copy", None)
        if model_copy is not None:
            return model_copy(update=changed)
    except (TypeError, ValueError):
        pass
    return redacted_fields
