"""The registry: tools from functions, schemas, validation."""

from __future__ import annotations

from typing import Annotated, Literal

import pydantic
import pytest

from otelhooks import InvalidArguments, ToolContext, ToolNotFound, ToolRegistry, make_tool
from otelhooks.core.messages import ToolCall


def test_schema_name_and_description_come_from_the_signature() -> None:
    reg = ToolRegistry()

    @reg.tool
    def search(
        query: Annotated[str, pydantic.Field(description="what to look for")],
        limit: int = 10,
        mode: Literal["fast", "deep"] = "fast",
    ) -> list[str]:
        """Search the documents.

        Longer text that is not part of the description.
        """
        return []

    (spec,) = reg.specs()
    assert spec.name == "search"
    assert spec.description == "Search the documents."
    params = spec.parameters
    assert params["required"] == ["query"]
    assert params["properties"]["query"] == {"type": "string", "description": "what to look for"}
    assert params["properties"]["limit"] == {"type": "integer", "default": 10}
    assert params["properties"]["mode"]["enum"] == ["fast", "deep"]


def test_tool_context_parameter_is_injected_not_exposed() -> None:
    def work(path: str, ctx: ToolContext) -> str:
        return path

    tool = make_tool(work)
    assert list(tool.parameters["properties"]) == ["path"]
    assert tool.context_param == "ctx"


def test_explicit_overrides_and_provider_form() -> None:
    reg = ToolRegistry()
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 1}},
        "required": ["n"],
    }
    reg.register(lambda n: n * 2, name="double", description="Double n.", parameters=schema)
    spec = reg.specs()[0].to_dict()
    assert spec == {"name": "double", "description": "Double n.", "parameters": schema}
    tool = reg.get("double")
    assert tool is not None
    assert tool.validate({"n": 3}) == {"n": 3}
    with pytest.raises(InvalidArguments, match="n: 0 is less than the minimum of 1"):
        tool.validate({"n": 0})
    with pytest.raises(InvalidArguments, match="'n' is a required property"):
        tool.validate({})


def test_invalid_explicit_schema_is_rejected_at_registration() -> None:
    with pytest.raises(ValueError, match="tool 'bad': invalid parameters schema"):
        make_tool(lambda: None, name="bad", parameters={"type": "no-such-type"})


def test_validation_messages_say_what_is_wrong() -> None:
    def add(a: int, b: int = 0) -> int:
        return a + b

    tool = make_tool(add)
    assert tool.validate({"a": 1}) == {"a": 1, "b": 0}
    assert tool.validate('{"a": 2, "b": 3}') == {"a": 2, "b": 3}
    with pytest.raises(InvalidArguments, match="a: Field required"):
        tool.validate({})
    with pytest.raises(InvalidArguments, match="a: Input should be a valid integer"):
        tool.validate({"a": "x"})
    with pytest.raises(InvalidArguments, match="c: Extra inputs are not permitted"):
        tool.validate({"a": 1, "c": 2})
    with pytest.raises(InvalidArguments, match="not valid JSON"):
        tool.validate("{nope")
    with pytest.raises(InvalidArguments, match="must be a JSON object, got list"):
        tool.validate("[1, 2]")


def test_decorator_keeps_the_function_and_explicit_options() -> None:
    reg = ToolRegistry()

    @reg.tool(name="shout", timeout=1.5)
    async def loud(text: str) -> str:
        return text.upper()

    assert loud.__name__ == "loud"
    tool = reg.get("shout")
    assert tool is not None and tool.is_async and tool.timeout == 1.5
    assert "shout" in reg and len(reg) == 1


def test_resolve_unknown_tool_lists_the_known_ones() -> None:
    reg = ToolRegistry()
    reg.register(lambda: 1, name="one")
    with pytest.raises(ToolNotFound, match="unknown tool 'two'; available tools: one"):
        reg.resolve(ToolCall("c", "two"))
