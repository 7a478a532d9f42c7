from __future__ import annotations

import pytest

from otelhooks import Hooks, ToolExecutor, ToolRegistry
from otelhooks.testing import InMemoryTracing


@pytest.fixture
def registry() -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    return reg


@pytest.fixture
def hooks() -> Hooks:
    return Hooks()


@pytest.fixture
def executor(
    registry: ToolRegistry, hooks: Hooks, otelhooks_tracing: InMemoryTracing
) -> ToolExecutor:
    return ToolExecutor(registry, hooks, tracer_provider=otelhooks_tracing.provider)
