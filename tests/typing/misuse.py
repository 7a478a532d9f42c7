"""Calls that must NOT type-check: tests/test_typing.py expects mypy to report each line."""

from __future__ import annotations

from otelhooks import ToolRegistry

tools = ToolRegistry()


@tools.tool
def add(a: int, b: int) -> int:
    return a + b


wrong: str = add(1, 2)  # E: the decorated function still returns int
add("one", 2)  # E: and still takes ints
