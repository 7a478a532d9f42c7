"""A tool validates its arguments with its signature's model without making a model instance
(:func:`otelhooks.core.tools.fields_validator`): over random signatures and random arguments,
the field values and the error texts are exactly those of validating through the model."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Annotated, Any, Literal

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otelhooks import ToolContext
from otelhooks.core.tools import InvalidArguments, Tool, fields_validator, make_tool


class Point(pydantic.BaseModel):
    x: int
    y: int = 0


class Checked(pydantic.BaseModel):
    name: str

    @pydantic.field_validator("name")
    @classmethod
    def _upper(cls, value: str) -> str:
        if value == "bad":
            raise ValueError("bad name")
        return value.upper()


def text_tool(text: str) -> str:
    return text


def numbers(n: int, x: float = 1.5, flag: bool = False) -> str:
    return ""


def collections(items: list[int], mapping: dict[str, int] | None = None) -> str:
    return ""


def choices(choice: Literal["x", "y"], note: str | None = None) -> str:
    return ""


def nested(point: Point, checked: Checked | None = None) -> str:
    return ""


def bounded(
    count: Annotated[int, pydantic.Field(ge=0, le=10)],
    tags: list[str] = [],  # noqa: B006 (a mutable default: each call gets its own copy)
    pair: tuple[int, str] = (1, "a"),
) -> str:
    return ""


def with_context(text: str, ctx: ToolContext, timeout: float | None = None) -> str:
    return text


HANDLERS: list[Callable[..., Any]] = [
    text_tool,
    numbers,
    collections,
    choices,
    nested,
    bounded,
    with_context,
]
TOOLS = [make_tool(fn) for fn in HANDLERS]
NAMES = sorted({name for tool in TOOLS for name in tool.parameters.get("properties", {})})

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-20, 20)
    | st.floats(allow_nan=False, width=32)
    | st.sampled_from(["x", "y", "a", "bad", "3", "1.5", "true", ""])
    | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["x", "y", "name", "z"]), inner, max_size=3)
    ),
    max_leaves=6,
)
arguments = st.dictionaries(st.sampled_from([*NAMES, "extra"]), json_values, max_size=5)


def _by_model(tool: Tool, args: Mapping[str, Any]) -> tuple[str, Any]:
    """The reference: validated through the model, an instance made, its ``__dict__`` read."""
    assert tool._model is not None
    try:
        return "ok", tool._model.model_validate(args).__dict__
    except pydantic.ValidationError as exc:
        parts = [
            f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
            for err in exc.errors(include_url=False, include_input=False)
        ]
        return "error", "; ".join(parts)


def _by_tool(tool: Tool, args: Mapping[str, Any]) -> tuple[str, Any]:
    try:
        return "ok", tool.validate(args)
    except InvalidArguments as exc:
        return "error", str(exc)


@pytest.mark.parametrize("tool", TOOLS, ids=[t.name for t in TOOLS])
def test_each_signature_model_is_validated_without_an_instance(tool: Tool) -> None:
    assert tool._model is not None
    schema: Any = tool._model.__pydantic_core_schema__
    assert schema["type"] == "model" and schema["schema"]["type"] == "model-fields"


@settings(max_examples=400, deadline=None)
@given(tool=st.sampled_from(TOOLS), args=arguments, proxy=st.booleans())
def test_fields_validation_gives_what_the_model_gives(
    tool: Tool, args: dict[str, Any], proxy: bool
) -> None:
    given_args: Mapping[str, Any] = MappingProxyType(args) if proxy else args
    expected = _by_model(tool, given_args)
    got = _by_tool(tool, given_args)
    assert got == expected
    if got[0] == "ok":  # a fresh dict each time, never shared with a default or another call
        again = _by_tool(tool, given_args)[1]
        assert again == got[1] and again is not got[1]


def test_a_default_is_not_shared_between_calls() -> None:
    tool = make_tool(bounded)
    first = tool.validate({"count": 1})
    first["tags"].append("changed")
    assert tool.validate({"count": 1})["tags"] == []


def test_a_model_of_another_shape_is_validated_through_the_model() -> None:
    class Root(pydantic.RootModel[list[int]]):
        pass

    class Strict(pydantic.BaseModel):
        n: int

        @pydantic.model_validator(mode="after")
        def _positive(self) -> Strict:
            if self.n < 0:
                raise ValueError("negative")
            return self

    assert fields_validator(Root)([1, "2"]) == {"root": [1, 2]}
    assert fields_validator(Strict)({"n": "3"}) == {"n": 3}
    with pytest.raises(pydantic.ValidationError, match="negative"):
        fields_validator(Strict)({"n": -1})
