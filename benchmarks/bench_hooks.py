"""16. What the hook machinery adds with tracing off: a deny-list before-hook that allows the call
and an after-hook that returns the result unchanged, against the same hooks called by hand and
against Microsoft's Agent Governance Toolkit (``govern(fn, policy=..., audit=False)``).

The machinery is what the executor adds for the two hooks beyond calling them: their contexts,
the read-only argument views, the chain, the per-hook records. It is the executor's time with
the hooks less its time without them, less what the two hooks cost called by hand around the
same function. Both executors scrub nothing (``scrubber=NO_SCRUBBING``): neither the hooks by
hand nor the Toolkit redact; what the default scrubber adds to a call is its own row. The
otelhooks of :data:`benchmarks.baseline.CORE_BEFORE_ONE_PATH` runs side by side when the clone
has that commit; the Toolkit runs when the ``bench`` extra is installed.
"""

from __future__ import annotations

import warnings
from types import SimpleNamespace
from typing import Any

from opentelemetry.trace import NoOpTracerProvider

from benchmarks.baseline import CORE_BEFORE_ONE_PATH, core_at
from benchmarks.floors import echo
from benchmarks.harness import Report, Side, compare
from otelhooks import ToolCall
from otelhooks.builtin import ToolDenyList

NAME = "hooks"
NUMBER = "16"
TITLE = "The hook machinery with tracing off: two hooks, by hand, and the Agent Governance Toolkit"

DENIED = ["shell", "delete_*", "drop_table"]
AGT_POLICY = """
name: deny-list
rules:
  - name: deny-shell
    condition: "action.type == 'shell'"
    action: deny
  - name: deny-delete
    condition: "action.type == 'delete_file'"
    action: deny
  - name: deny-drop
    condition: "action.type == 'drop_table'"
    action: deny
default_action: allow
"""


def unchanged(ctx: Any) -> None:
    """The after-hook: keeps the result."""
    return None


def executor_side(package: Any, hooked: bool, scrubs: bool = False) -> Side:
    """An executor over ``echo`` with (or without) the two hooks, tracing off, scrubbing nothing
    (or, with ``scrubs``, with the default scrubber; a core without scrubbers ignores it)."""
    registry = package.ToolRegistry()
    registry.register(echo, name="echo")
    hooks = package.Hooks()
    if hooked:
        hooks.add(package.builtin.ToolDenyList(DENIED))
        hooks.add(after=unchanged, name="unchanged")
    options: dict[str, Any] = {"tracer_provider": NoOpTracerProvider()}
    if hasattr(package, "NO_SCRUBBING") and not scrubs:
        options["scrubber"] = package.NO_SCRUBBING
    executor = package.ToolExecutor(registry, hooks, **options)
    return executor.execute  # type: ignore[no-any-return]


def by_hand() -> Side:
    """The same two hooks called around the same function, with nothing else."""
    deny = ToolDenyList(DENIED)

    async def call(call: ToolCall) -> Any:
        ctx = SimpleNamespace(tool_call=call)
        decision = deny.before_tool_call(ctx)  # type: ignore[arg-type]
        if decision is not None:
            return decision.reason
        result = echo(**call.arguments)  # type: ignore[arg-type]
        unchanged(SimpleNamespace(result=result))
        return result

    return call


async def bare(call: ToolCall) -> Any:
    """The function alone."""
    return echo(**call.arguments)  # type: ignore[arg-type]


def toolkit() -> Side | None:
    """``govern(echo, policy=<the deny list>, audit=False)``, or ``None`` without the Toolkit."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from agentmesh.governance.govern import govern
    except ImportError:
        return None

    def action(action: str, text: str) -> str:
        return echo(text)

    governed = govern(action, policy=AGT_POLICY, audit=False, on_deny=lambda d: d.reason)

    async def call(call: ToolCall) -> Any:
        return governed(action=call.name, **call.arguments)

    return call


def run(report: Report, quick: bool) -> None:
    import otelhooks
    import otelhooks.builtin

    n, repeats = (300, 3) if quick else (1000, 21)
    sides: dict[str, Side] = {
        "otelhooks, two hooks": executor_side(otelhooks, True),
        "otelhooks, no hooks": executor_side(otelhooks, False),
        "otelhooks, two hooks, default scrubber": executor_side(otelhooks, True, scrubs=True),
        "the two hooks by hand": by_hand(),
        "bare call": bare,
    }
    before = None if quick else core_at(CORE_BEFORE_ONE_PATH)
    if before is not None:
        __import__(f"{before.__name__}.builtin")
        sides["before one path, two hooks"] = executor_side(before, True)
        sides["before one path, no hooks"] = executor_side(before, False)
    governed = toolkit()
    if governed is not None:
        sides["Agent Governance Toolkit govern(audit=False)"] = governed
    comparison = compare(sides, n, repeats)
    us = comparison.medians
    by_hand_cost = us["the two hooks by hand"] - us["bare call"]
    results: dict[str, Any] = {
        "us_per_call": us,
        "two hooks by hand over the bare call": by_hand_cost,
    }
    for name, value in us.items():
        report.row(name, f"{value:.2f} µs")
    for label, hooked, plain in (
        ("otelhooks", "otelhooks, two hooks", "otelhooks, no hooks"),
        ("before one path", "before one path, two hooks", "before one path, no hooks"),
    ):
        if hooked not in us:
            continue
        added = us[hooked] - us[plain]
        machinery = added - by_hand_cost
        results[f"{label}: added by the two hooks"] = added
        results[f"{label}: machinery"] = machinery
        report.row(f"{label}: the two hooks add", f"{added:.1f} µs")
        verdict = "✓" if machinery <= 10 else "missed"
        report.row(
            f"{label}: of which machinery", f"{machinery:.1f} µs", f"target ≤ 10 µs {verdict}"
        )
    scrubbing = us["otelhooks, two hooks, default scrubber"] - us["otelhooks, two hooks"]
    results["default scrubber adds"] = scrubbing
    report.row("the default scrubber adds (not machinery)", f"{scrubbing:.1f} µs", "report")
    if governed is None:
        report.row("Agent Governance Toolkit", "not installed", "pip install -e '.[bench]'")
    else:
        name = "Agent Governance Toolkit govern(audit=False)"
        results["toolkit over the bare call"] = us[name] - us["bare call"]
        report.row("Toolkit: its policy evaluation adds", f"{us[name] - us['bare call']:.1f} µs")
    report.results["hooks"] = results
