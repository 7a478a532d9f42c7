"""A quicker ``__init__`` for the frozen, slotted dataclasses the runtime makes on every call.

A frozen dataclass's generated ``__init__`` sets each field through ``object.__setattr__`` (the
class forbids its own ``__setattr__``); :func:`quick_init` replaces it with one that sets each
slot through its descriptor, which costs about half as much and changes nothing else: the same
parameters, defaults and keywords (so ``dataclasses.replace`` works), the same fields, equality,
hash, ``repr`` and immutability. Classes with ``__post_init__``, default factories or
init-only fields are refused (their ``__init__`` does more than set slots).
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

_C = TypeVar("_C", bound=type)


def quick_init(cls: _C) -> _C:
    """Give the frozen, slotted dataclass ``cls`` an ``__init__`` that sets its slots directly."""
    params = getattr(cls, "__dataclass_params__", None)
    slots = cls.__dict__.get("__slots__")
    if params is None or not params.frozen or slots is None:
        raise TypeError(f"{cls.__name__}: quick_init is for frozen, slotted dataclasses")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: quick_init cannot run __post_init__")
    fields = dataclasses.fields(cls)
    if len(fields) != len(slots) or any(not f.init for f in fields):
        raise TypeError(f"{cls.__name__}: quick_init needs every slot to be an init field")
    names: dict[str, Any] = {}
    signature: list[str] = []
    body: list[str] = []
    for index, field in enumerate(fields):
        if field.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{field.name}: quick_init takes no default factory")
        names[f"_set{index}"] = getattr(cls, field.name).__set__
        if field.default is dataclasses.MISSING:
            signature.append(field.name)
        else:
            names[f"_default{index}"] = field.default
            signature.append(f"{field.name}=_default{index}")
        body.append(f"    _set{index}(self, {field.name})")
    source = f"def __init__(self, {', '.join(signature)}):\n" + "\n".join(body or ["    pass"])
    exec(source, names)  # the way dataclasses makes its own __init__
    init = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    generated = cls.__dict__["__init__"]  # the dataclass's own, for its annotations
    init.__annotations__ = {**generated.__annotations__}
    cls.__init__ = init  # type: ignore[misc]
    return cls
