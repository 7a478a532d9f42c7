from __future__ import annotations

from collections.abc import Iterator

import pytest

from otelhooks import Hooks, ToolExecutor, ToolRegistry
from otelhooks.telemetry.testing import InMemoryTracing

from .jaeger_support import CONFIG_DIR, Collector, require_jaeger, run_collector
from .suite_budgets import (  # the suites' time budgets, checked when the run ends
    pytest_configure,
    pytest_runtest_logreport,
    pytest_sessionfinish,
)

__all__ = ["pytest_configure", "pytest_runtest_logreport", "pytest_sessionfinish"]


@pytest.fixture(scope="session", autouse=True)
def private_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The state and data folders (the gateway's store, the fleet's state, the viewer's traces)
    of this test process and what it starts are its own, never the user's: tests that pin,
    approve or damage a store cannot reach another run's or a developer's."""
    base = tmp_path_factory.mktemp("xdg")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(base / "state"))
        patch.setenv("XDG_DATA_HOME", str(base / "data"))
        yield


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


@pytest.fixture(scope="module")
def jaeger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    """A real Jaeger (the pinned binary, in-memory storage) on free ports, for one test module."""
    binary = require_jaeger()
    with run_collector(binary, CONFIG_DIR / "jaeger.yaml", tmp_path_factory.mktemp("jaeger")) as c:
        yield c
