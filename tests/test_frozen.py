"""quick_init: the same frozen dataclass, made cheaper; nothing it does not keep."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otelhooks import ToolResult
from otelhooks.core.frozen import quick_init
from otelhooks.core.hooks import AfterToolCallContext, BeforeToolCallContext


@dataclass(frozen=True, slots=True)
class Plain:
    a: Any
    b: Any = None
    c: bool = False


@quick_init
@dataclass(frozen=True, slots=True)
class Quick:
    a: Any
    b: Any = None
    c: bool = False


values = st.one_of(st.none(), st.integers(), st.text(max_size=5), st.booleans())


@given(values, values, st.booleans())
def test_a_quick_instance_is_what_the_dataclass_makes(a: Any, b: Any, c: bool) -> None:
    plain, quick = Plain(a, b, c), Quick(a, b, c)
    assert dataclasses.astuple(quick) == dataclasses.astuple(plain)
    assert repr(quick) == repr(plain).replace("Plain", "Quick")
    assert quick == Quick(a=a, b=b, c=c) and hash(quick) == hash(Quick(a, b=b, c=c))
    assert Quick(a) == Quick(a, None, False)  # the defaults
    assert dataclasses.replace(quick, b="x") == Quick(a, "x", c)


def test_a_quick_instance_stays_frozen_and_its_call_is_checked() -> None:
    quick = Quick(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        quick.a = 2  # type: ignore[misc]
    for made in (quick, Plain(1)):  # no new attribute either, refused as the dataclass does
        with pytest.raises((AttributeError, TypeError)):
            made.d = 1  # type: ignore[union-attr]
    with pytest.raises(TypeError):
        Quick()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Quick(1, 2, 3, 4)  # type: ignore[call-arg, arg-type]
    with pytest.raises(TypeError):
        Quick(1, a=2)  # type: ignore[misc]
    with pytest.raises(TypeError):
        Quick(1, e=2)  # type: ignore[call-arg]


def test_quick_init_refuses_what_its_init_would_not_do() -> None:
    @dataclass(frozen=True, slots=True)
    class Later:
        a: int

        def __post_init__(self) -> None:
            raise AssertionError

    @dataclass(frozen=True, slots=True)
    class Factory:
        a: list[int] = field(default_factory=list)

    @dataclass(slots=True)
    class Mutable:
        a: int

    @dataclass(frozen=True)
    class Unslotted:
        a: int

    @dataclass(frozen=True, slots=True)
    class NotInit:
        a: int
        b: int = field(init=False, default=0)

    @dataclass(frozen=True, slots=True)
    class Derived(Plain):
        d: int = 0

    for cls in (Later, Factory, Mutable, Unslotted, NotInit, Derived, int):
        with pytest.raises(TypeError):
            quick_init(cls)


def test_the_runtimes_values_keep_their_signatures() -> None:
    result = ToolResult("c1", "echo", "hi", is_error=True)
    assert (result.details, result.is_error, result.terminate, result.role) == (
        None,
        True,
        False,
        "toolResult",
    )
    assert dataclasses.replace(result, content="x").content == "x"
    for cls in (ToolResult, BeforeToolCallContext, AfterToolCallContext):
        parameters = list(cls.__init__.__annotations__)
        assert parameters[:-1] == [f.name for f in dataclasses.fields(cls)]


class Sub(Quick):
    """A subclass that inherits the quick ``__init__`` (and so does not share its layout's
    class)."""

    __slots__ = ("extra",)


def test_an_instance_is_of_its_own_class_once_made_a_subclass_too() -> None:
    quick = Quick(1, "b", True)
    assert type(quick) is Quick and (quick.a, quick.b, quick.c) == (1, "b", True)
    sub = Sub(2)
    assert type(sub) is Sub and (sub.a, sub.b, sub.c) == (2, None, False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        sub.a = 3  # type: ignore[misc]


def test_a_quick_instance_copies_and_pickles_as_the_dataclass_does() -> None:
    result = ToolResult("c1", "echo", "hi", {"k": [1]}, True, True)
    for made in (copy.copy(result), copy.deepcopy(result), pickle.loads(pickle.dumps(result))):
        assert type(made) is ToolResult and made == result
    assert hash(ToolResult("c1", "echo", "hi")) == hash(ToolResult("c1", "echo", "hi"))
