"""17. A Cedar decision per call: 100 policies over 1,000 distinct argument sets drawn Zipf-like,
through otelhooks' Cedar hook (its decision cache keyed on what the policies read), the same
hook with the cache off, the direct ``cedarpy.is_authorized`` call (pre-parsed ``PolicySet`` and
``Entities``, the request built by hand), a plain Python deny-list hook and Microsoft's Agent
Governance Toolkit's ``govern(..., audit=False)`` over a 100-rule policy.

Every side decides the same sequence of calls (those without a cache, whose cost does not depend
on what came before, its first 3,000); each round starts the cached side with an empty cache
(its first sight of each argument set is a miss), and the sides take turns. The hit rate is
reported beside the cost, and the uncached cost apart; after each round the cached side runs the
sequence again (every call a hit), which splits its cost into a hit's and a miss's. Each side is
timed both elapsed and in the process's CPU time: on a loaded machine the elapsed time is mostly
waiting for a core, the CPU time what the calls cost (the target is read on it).
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchmarks.harness import ROOT, Report

NAME = "cedar"
NUMBER = "17"
TITLE = "A Cedar decision: 100 policies, 1,000 argument sets drawn Zipf-like"

TOOLS = [f"tool_{i}" for i in range(10)]
SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "limit": {"type": "integer"},
        "recursive": {"type": "boolean"},
    },
    "required": ["path"],
}
GROUPS = [f"team_{i}" for i in range(10)]
CACHED = "otelhooks Cedar hook (cache)"
DENY_LIST = "Python deny-list hook"
CALLGRIND = ("valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null")


def policies() -> str:
    """100 policies: role-based permits, attribute-based permits and forbids, approvals."""
    out: list[str] = []
    for i in range(100):
        tool = TOOLS[i % len(TOOLS)]
        group = GROUPS[(i // len(TOOLS)) % len(GROUPS)]
        kind = i % 4
        if kind == 0:
            out.append(
                f'@id("p{i}") permit(principal in Group::"{group}", '
                f'action == Action::"bench/{tool}", resource);'
            )
        elif kind == 1:
            out.append(
                f'@id("p{i}") permit(principal, action == Action::"bench/{tool}", resource) '
                f'when {{ context.arguments.path like "/data/{i}/*" }};'
            )
        elif kind == 2:
            out.append(
                f'@id("p{i}") forbid(principal, action == Action::"bench/{tool}", resource) '
                f"when {{ context.arguments has limit && context.arguments.limit > {1000 + i} }};"
            )
        else:
            out.append(
                f'@id("p{i}") @approval("required") permit(principal in Group::"{group}", '
                f'action == Action::"bench/{tool}", resource) '
                f"when {{ context.arguments has recursive && context.arguments.recursive }};"
            )
    return "\n".join(out) + "\n"


def argument_sets(count: int, seed: int = 7) -> list[tuple[str, str, dict[str, Any]]]:
    """``count`` distinct calls: (user, tool, arguments)."""
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[tuple[str, str, dict[str, Any]]] = []
    while len(out) < count:
        user, tool = f"user_{rng.randrange(20)}", rng.choice(TOOLS)
        arguments: dict[str, Any] = {"path": f"/data/{rng.randrange(100)}/{rng.randrange(50)}"}
        if rng.random() < 0.5:
            arguments["limit"] = rng.randrange(1200)
        if rng.random() < 0.3:
            arguments["recursive"] = rng.random() < 0.5
        key = repr((user, tool, sorted(arguments.items())))
        if key not in seen:
            seen.add(key)
            out.append((user, tool, arguments))
    return out


def zipf_sequence(distinct: int, n: int, s: float = 1.1, seed: int = 11) -> list[int]:
    """``n`` draws over ``distinct`` items, the k-th drawn with weight 1/k^s."""
    rng = random.Random(seed)
    weights = [1 / (k**s) for k in range(1, distinct + 1)]
    return rng.choices(range(distinct), weights=weights, k=n)


def _groups(user: str) -> tuple[str, ...]:
    return (GROUPS[int(user.split("_")[1]) % len(GROUPS)],)


def sides(
    workdir: Path, calls: list[tuple[str, str, dict[str, Any]]], *, peers: bool = True
) -> dict[str, Any]:
    """What each side needs: a factory of a fresh decision function over one call (``peers``:
    with the Agent Governance Toolkit's, when it is installed)."""
    import cedarpy

    from otelhooks import AgentContext, ToolCall, ToolSpec
    from otelhooks.builtin import ToolDenyList
    from otelhooks.builtin.cedar import CedarPolicy
    from otelhooks.builtin.cedar_engine import CedarEngine, Requester
    from otelhooks.builtin.cedar_model import USER, Principal, ToolKey
    from otelhooks.core import BeforeToolCallContext
    from otelhooks.core.cancel import CancelSignal

    path = workdir / "bench.cedar"
    path.write_text(policies())
    specs = {tool: ToolSpec(tool, tool, SCHEMA) for tool in TOOLS}
    contexts = [
        BeforeToolCallContext(
            tool_call=ToolCall(f"c{i}", tool, arguments),
            args=arguments,
            tool=specs[tool],
            assistant_message=None,
            context=AgentContext(agent_name="bench"),
            signal=CancelSignal(),
        )
        for i, (user, tool, arguments) in enumerate(calls)
    ]
    users = {
        user: Requester(Principal(USER, user, _groups(user)), "bench", "c") for user, *_ in calls
    }

    def hook(cache_size: int) -> Callable[[int], Any]:
        engine = CedarEngine(path, reload_interval=3600, cache_size=cache_size)
        policy = CedarPolicy(
            engine=engine,
            key_of=lambda name: ToolKey("bench", name),
            requester_of=lambda ctx: users[ctx.tool_call.id],
        )
        problems = policy.check_tools(list(specs.values()))
        assert not problems, problems
        by_index = [
            BeforeToolCallContext(
                tool_call=ToolCall(calls[i][0], c.tool_call.name, c.args),
                args=c.args,
                tool=c.tool,
                assistant_message=None,
                context=c.context,
                signal=c.signal,
            )
            for i, c in enumerate(contexts)
        ]

        def decide(i: int) -> Any:
            return policy.before_tool_call(by_index[i])

        decide.engine = engine  # type: ignore[attr-defined]
        return decide

    def direct() -> Callable[[int], Any]:
        engine = CedarEngine(path, reload_interval=3600)
        engine.bind_tools({ToolKey("bench", tool): SCHEMA for tool in TOOLS})
        state = engine._state
        policy_set = cedarpy.PolicySet.from_str(policies())
        entity_sets = {
            user: state.entities_for(requester.principal) for user, requester in users.items()
        }

        def decide(i: int) -> Any:
            user, tool, arguments = calls[i]
            request = {
                "principal": {"type": "User", "id": user},
                "action": {"type": "Action", "id": f"bench/{tool}"},
                "resource": {"type": "Tool", "id": f"bench/{tool}"},
                "context": {
                    "arguments": arguments,
                    "agent": {"type": "Agent", "id": "bench"},
                    "client": {"type": "Client", "id": "c"},
                    "now": {"__extn": {"fn": "datetime", "arg": "2026-01-01T00:00:00Z"}},
                },
            }
            return cedarpy.is_authorized(request, policy_set, entity_sets[user]).allowed

        return decide

    def deny_list() -> Callable[[int], Any]:
        deny = ToolDenyList(["tool_9", "delete_*", "drop_table"])

        def decide(i: int) -> Any:
            return deny.before_tool_call(SimpleNamespace(tool_call=contexts[i].tool_call))  # type: ignore[arg-type]

        return decide

    out: dict[str, Any] = {
        CACHED: lambda: hook(8192),
        "otelhooks Cedar hook (no cache)": lambda: hook(0),
        "cedarpy.is_authorized, direct": direct,
        DENY_LIST: deny_list,
    }
    governed = toolkit(calls) if peers else None
    if governed is not None:
        out["Agent Governance Toolkit govern(audit=False)"] = governed
    return out


def toolkit(calls: list[tuple[str, str, dict[str, Any]]]) -> Callable[[], Any] | None:
    """``govern`` over a 100-rule policy (a rule per tool and path prefix), or ``None``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from agentmesh.governance.govern import govern
    except ImportError:
        return None
    rules = "\n".join(
        f"  - name: r{i}\n    condition: \"action.type == '{TOOLS[i % len(TOOLS)]}' and "
        f"action.path == '/data/{i}/0'\"\n    action: deny"
        for i in range(100)
    )
    policy = f"name: bench\nrules:\n{rules}\ndefault_action: allow\n"

    def make() -> Callable[[int], Any]:
        def action(action: str, **arguments: Any) -> str:
            return action

        governed = govern(action, policy=policy, audit=False, on_deny=lambda d: d.reason)

        def decide(i: int) -> Any:
            _, tool, arguments = calls[i]
            return governed(action=tool, **arguments)

        return decide

    return make


def run(report: Report, quick: bool) -> None:
    distinct, n, rounds = (100, 1000, 1) if quick else (1000, 20000, 5)
    calls = argument_sets(distinct)
    sequence = zipf_sequence(distinct, n)
    with tempfile.TemporaryDirectory() as tmp:
        makers = sides(Path(tmp), calls)
        wall: dict[str, list[float]] = {name: [] for name in makers}
        cpu: dict[str, list[float]] = {name: [] for name in makers}
        warm: list[float] = []
        stats: dict[str, int] = {}
        for round_ in range(rounds):
            order = list(makers.items())
            if round_ % 2:
                order.reverse()
            for name, make in order:
                decide = make()  # fresh: an empty cache
                cached = name == CACHED
                seconds = _timed(decide, sequence if cached else sequence[:3000])
                wall[name].append(seconds[0])
                cpu[name].append(seconds[1])
                if cached:
                    stats = decide.engine.stats()  # type: ignore[attr-defined]
                    warm.append(_timed(decide, sequence)[1])  # the same calls: every one a hit
    load = os.getloadavg()
    us = {name: statistics.median(values) for name, values in wall.items()}
    cpu_us = {name: statistics.median(values) for name, values in cpu.items()}
    hits, misses = stats.get("hits", 0), stats.get("misses", 0)
    hit_rate = hits / max(1, hits + misses)
    hit_us = statistics.median(warm)
    # what the misses add to the cold run, per miss
    miss_us = (cpu_us[CACHED] * n - hit_us * hits) / max(1, misses)
    for name in makers:
        report.row(name, f"{us[name]:.1f} µs", f"CPU {cpu_us[name]:.1f} µs")
    report.row("decision cache hit rate (Zipf s=1.1)", f"{hit_rate:.1%}", f"{misses} misses")
    report.row("a hit; a miss (CPU)", f"{hit_us:.1f} µs", f"a miss {miss_us:.0f} µs")
    deny = cpu_us[DENY_LIST]
    report.row(
        "with the cache / the deny-list hook (CPU)", f"{cpu_us[CACHED] / deny:.1f}×", "report"
    )
    report.row("load average while measured", f"{load[0]:.1f}", "")
    cached_us = cpu_us[CACHED]
    verdict = "✓" if cached_us <= 50 else "missed"
    report.row(
        "a Cedar decision per call, with the cache (CPU)",
        f"{cached_us:.1f} µs",
        f"target ≤ 50 µs {verdict}",
    )
    report.results["cedar"] = {
        "us_per_call": us,
        "cpu_us_per_call": cpu_us,
        "distinct_argument_sets": distinct,
        "calls": n,
        "hit_rate": hit_rate,
        "policies": 100,
        "cached_us": cached_us,
        "cached_wall_us": us[CACHED],
        "hit_us": hit_us,
        "miss_us": miss_us,
        "uncached_us": cpu_us["otelhooks Cedar hook (no cache)"],
        "direct_us": cpu_us["cedarpy.is_authorized, direct"],
        "ratio_to_deny_list": cached_us / deny,
        "load_average": load[0],
    }
    if quick:
        report.row("instructions (callgrind)", "skipped", "not in --quick")
    else:
        instructions(report)


def instructions(report: Report) -> None:
    """Instructions per call of the cached hook, the hook without its cache and the deny-list
    hook (valgrind's callgrind: N calls of the sequence minus none, over N), and their ratio."""
    if shutil.which("valgrind") is None:
        report.row("instructions (callgrind)", "no valgrind", "apt-get install valgrind")
        return
    counts: dict[str, float] = {}
    for side, n in (("cache", 20000), ("no-cache", 300), ("deny-list", 3000)):
        procs = [
            subprocess.Popen(
                [*CALLGRIND, sys.executable, "-m", "benchmarks.cedar_child", side, str(calls)],
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for calls in (0, n)  # one per core
        ]
        totals = []
        for proc in procs:
            _, err = proc.communicate(timeout=3600)
            found = [line for line in err.splitlines() if "Collected :" in line]
            if proc.returncode != 0 or not found:
                report.row("instructions (callgrind)", "failed", err[-200:])
                return
            totals.append(int(found[-1].rsplit(":", 1)[1]))
        counts[side] = (totals[1] - totals[0]) / n
        report.row(f"{side}: instructions per call (callgrind)", f"{counts[side]:,.0f}")
    ratio = counts["cache"] / counts["deny-list"]
    report.row("instructions: with the cache / the deny-list hook", f"{ratio:.1f}×", "report")
    report.results["cedar"]["instructions_per_call"] = counts
    report.results["cedar"]["instructions_ratio_to_deny_list"] = ratio


def _timed(decide: Callable[[int], Any], calls: list[int]) -> tuple[float, float]:
    """Microseconds per call of ``decide`` over ``calls``: elapsed, and the process's CPU time
    (what the calls cost, without the waits for a core on a loaded machine)."""
    start, start_cpu = time.perf_counter(), time.process_time()
    for i in calls:
        decide(i)
    elapsed, used = time.perf_counter() - start, time.process_time() - start_cpu
    return elapsed / len(calls) * 1e6, used / len(calls) * 1e6
