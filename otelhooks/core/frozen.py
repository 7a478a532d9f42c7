"""A quicker ``__init__`` for the frozen, slotted dataclasses the runtime makes on every call.

A frozen dataclass's generated ``__init__`` sets each field through ``object.__setattr__`` (the
class forbids its own ``__setattr__``), one call through C per field. :func:`quick_init`
replaces it with one that makes the new instance, for the time it takes to fill it, an instance
of a writable twin of the class (the same slots on the same base, so CPython lets
``__class__`` change between them), sets every slot as plain attribute stores and gives the
instance its class back: about two thirds of the cost, and nothing else changes: the same
parameters, defaults and keywords (so ``dataclasses.replace`` works), the same fields,
equality, hash, ``repr``, pickling and immutability. An instance of a subclass (whose layout
the twin does not share) has its slots set through their descriptors instead. Classes with
``__post_init__``, default factories, init-only fields or a base of their own are refused
(their ``__init__`` does more than set slots, or their layout is not the twin's), and so are
fields named as a name the quick ``__init__`` uses itself; keyword-only fields stay keyword-only.
The quick ``__init__`` is checked to have the signature of the dataclass's own (the same
parameters, kinds and defaults), or the class is refused.
"""

from __future__ import annotations

import dataclasses
import inspect
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
    if cls.__bases__ != (object,):
        raise TypeError(f"{cls.__name__}: quick_init needs a class whose only base is object")
    twin = type(f"_Writable{cls.__name__}", (), {"__slots__": tuple(slots)})
    names: dict[str, Any] = {"_cls": cls, "_twin": twin, "_become": object.__setattr__}
    signature: list[str] = []
    keywords: list[str] = []  # keyword-only fields come last, as the dataclass puts them
    quick: list[str] = []
    slow: list[str] = []
    for index, field in enumerate(fields):
        if field.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{field.name}: quick_init takes no default factory")
        names[f"_set{index}"] = getattr(cls, field.name).__set__
        parameters = keywords if field.kw_only else signature
        if field.default is dataclasses.MISSING:
            parameters.append(field.name)
        else:
            names[f"_default{index}"] = field.default
            parameters.append(f"{field.name}=_default{index}")
        quick.append(f"        self.{field.name} = {field.name}")
        slow.append(f"        _set{index}(self, {field.name})")
    taken = {"self", "type", *names}.intersection(f.name for f in fields)
    if taken:  # a parameter of that name would hide a name the body uses
        raise TypeError(f"{cls.__name__}: quick_init needs other names than {sorted(taken)}")
    if keywords:
        signature += ["*", *keywords]
    source = "\n".join(
        [
            f"def __init__(self, {', '.join(signature)}):",
            "    if type(self) is _cls:",
            "        _become(self, '__class__', _twin)",
            *quick,
            "        self.__class__ = _cls",
            "    else:",
            *(slow or ["        pass"]),
        ]
    )
    exec(source, names)  # the way dataclasses makes its own __init__
    init = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    generated = cls.__dict__["__init__"]  # the dataclass's own, for its annotations
    init.__annotations__ = {**generated.__annotations__}
    if _parameters(init) != _parameters(generated):  # an init-only field, say
        raise TypeError(f"{cls.__name__}: quick_init cannot keep the parameters of __init__")
    cls.__init__ = init  # type: ignore[misc]
    return cls


def _parameters(function: Any) -> list[tuple[str, Any, int]]:
    """``function``'s parameters: each one's name, kind and default (the very object)."""
    parameters = inspect.signature(function).parameters.values()
    return [(p.name, p.kind, id(p.default)) for p in parameters]
