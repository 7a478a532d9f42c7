"""What a newcomer meets in the first hour: clear errors at registration, test helpers that say
what exists, a CLI that explains a missing extra, and a package that is cheap to import."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from otelhooks import (
    Hooks,
    ToolCall,
    ToolExecutor,
    ToolRegistry,
    UnmatchedToolPattern,
    UnmatchedToolPatternError,
    block,
)
from otelhooks.builtin import ToolDenyList
from otelhooks.cli import install_hint
from otelhooks.telemetry.testing import InMemoryTracing, in_memory_tracing


class Opaque:
    """A type pydantic has no JSON Schema for."""


def test_an_unsupported_parameter_type_names_the_tool_and_the_parameter() -> None:
    registry = ToolRegistry()

    def lookup(when: datetime, handle: Opaque) -> str:
        return ""

    with pytest.raises(TypeError, match=r"tool 'lookup': parameter 'handle' has type .*Opaque"):
        registry.register(lookup)


def test_a_lambda_needs_a_name_and_names_must_suit_providers() -> None:
    registry = ToolRegistry()
    with pytest.raises(ValueError, match="a lambda has no name: pass name="):
        registry.register(lambda: "x")
    for bad in ("has space", "dots.not.allowed", "x" * 65, ""):
        with pytest.raises(ValueError, match="invalid tool name"):
            registry.register(lambda: "x", name=bad)
    assert registry.register(lambda: "x", name="ok-name_2").name == "ok-name_2"


def test_a_hook_class_instead_of_an_instance_is_refused_at_add() -> None:
    class Audit:
        def before_tool_call(self, ctx: Any) -> None:
            return None

    with pytest.raises(TypeError, match=r"got the class Audit; pass an instance: hooks.add\(Audit"):
        Hooks().add(Audit)


def test_helper_failures_say_what_was_captured(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    with pytest.raises(AssertionError, match="no spans were captured at all: was the executor"):
        otelhooks_tracing.tool_span(call_id="c1")
    executor = ToolExecutor(registry, tracer_provider=otelhooks_tracing.provider)

    async def run() -> None:
        await executor.execute(ToolCall("c1", "echo", {"text": "hi"}))

    import asyncio

    asyncio.run(run())
    with pytest.raises(AssertionError, match=r"execute_tool echo \(call_id='c1'\)"):
        otelhooks_tracing.tool_span(call_id="c2")
    span = otelhooks_tracing.tool_span(call_id="c1")
    with pytest.raises(AssertionError, match=r"its children: \['before', 'run', 'after'\]"):
        otelhooks_tracing.child(span, "rum")
    with pytest.raises(
        AssertionError, match=r"near misses: \[.execute_tool echo \{gen_ai.tool.name='echo'\}"
    ):
        otelhooks_tracing.find_one("execute_tool echo", gen_ai__tool__name="ecko")


def test_a_tool_pattern_that_matches_nothing_is_an_error_naming_what_it_meant() -> None:
    registry = ToolRegistry()
    registry.register(lambda: "rm", name="dangerous")
    hooks = Hooks(registry=registry)
    with pytest.raises(
        UnmatchedToolPatternError,
        match=r"'dangerus' matches no registered tool \(did you mean 'dangerous'\?\)",
    ):
        hooks.add(before=lambda ctx: block("no"), tools="dangerus")
    with pytest.raises(UnmatchedToolPatternError, match="'shell\\*'"):
        hooks.add(ToolDenyList(["shell*"]))  # a policy's own tool list is checked too
    assert len(hooks) == 0  # nothing half-registered
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hooks.add(before=lambda ctx: block("no"), tools="danger*")  # matches: silent
        hooks.add(before=lambda ctx: block("no"), tools="deploy", tools_later=True)  # deferred
    lenient = Hooks(registry=registry, strict=False)  # the explicit opt-out: warnings
    with pytest.warns(UnmatchedToolPattern, match="dangerus"):
        lenient.add(before=lambda ctx: block("no"), tools="dangerus")


async def test_the_agent_checks_tool_patterns_when_it_starts() -> None:
    from otelhooks import AssistantMessage
    from otelhooks.core.loop import Agent
    from otelhooks.providers import ScriptedProvider

    registry = ToolRegistry()
    registry.register(lambda: "rm", name="dangerous")
    hooks = Hooks()  # built before the tools were known: no check at registration
    hooks.add(before=lambda ctx: block("no"), tools="dangerus")
    provider = ScriptedProvider([AssistantMessage(text="ok")])
    agent = Agent(provider, tools=registry, hooks=hooks)
    with pytest.raises(UnmatchedToolPatternError, match="dangerus"):
        await agent.run("go")
    assert provider.requests == [] and not agent.running  # nothing was sent
    hooks.strict = False
    with pytest.warns(UnmatchedToolPattern, match="dangerus"):
        await agent.run("again")


def run_python(code: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_cli_without_the_sdk_says_what_to_install() -> None:
    done = run_python(
        """
        import sys
        sys.modules["opentelemetry.sdk"] = None  # as if otelhooks[sdk] were not installed
        from otelhooks.cli import main
        sys.exit(main(["demo", "--case", "allowed"]))
        """
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "otelhooks demo: opentelemetry.sdk is not installed; "
        f"install it with: {install_hint('sdk')}"
    ]
    # from this clone, the hint is the editable install of it
    assert install_hint("sdk").endswith(f"install -e '{Path(__file__).parents[1]}[sdk]'")
    assert "Traceback" not in done.stderr


def test_importing_the_package_imports_nothing_heavy() -> None:
    done = run_python(
        """
        import sys
        import _otelhooks_pytest  # the pytest plugin every session loads: one module
        print(sorted(m for m in sys.modules if m.startswith(("otelhooks", "_otelhooks"))))
        import otelhooks, otelhooks.telemetry.pytest_plugin
        heavy = [m for m in ("pydantic", "jsonschema", "asyncio", "opentelemetry.sdk",
                             "structlog", "otelhooks.core.execute") if m in sys.modules]
        print(heavy)
        from otelhooks import ToolRegistry  # a name costs its module on first use
        print("otelhooks.core.tools" in sys.modules, "jsonschema" in sys.modules)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["['_otelhooks_pytest']", "[]", "True False"]


def test_in_memory_tracing_outside_pytest() -> None:
    tracing = in_memory_tracing()
    tracing.provider.get_tracer("t").start_span("x").end()
    assert [s.name for s in tracing.spans()] == ["x"]
