"""``otelhooks mcp approve``: review the tool definitions that changed since they were pinned, and
pin the new ones (what the proxy then lists and calls again).

::

    otelhooks mcp approve --policy gateway.toml              # show what changed, approve nothing
    otelhooks mcp approve --policy gateway.toml fs_write_file  # approve these tools
    otelhooks mcp approve --policy gateway.toml --all         # approve every change
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import json
import sys
from typing import Any


def add_parser(mcp_sub: Any) -> None:
    approve = mcp_sub.add_parser(
        "approve",
        help="review tool definitions that changed since they were pinned, and approve them",
        description="Start the upstreams, compare their tool definitions with the pins, show "
        "each change, and pin the new definitions of the tools named (or --all).",
    )
    approve.add_argument("--policy", help="the proxy's policy file (its upstreams and pins)")
    approve.add_argument("--all", action="store_true", help="approve every changed tool")
    approve.add_argument("tools", nargs="*", help="the (registered) names of tools to approve")
    approve.add_argument("upstream_command", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    from ...integrations.mcp.policy import PolicyError, ProxyPolicy, load_policy

    try:
        policy = load_policy(args.policy) if args.policy else ProxyPolicy()
    except PolicyError as exc:
        print(f"otelhooks mcp approve: {exc}", file=sys.stderr)
        return 2
    if not policy.upstreams:
        print("otelhooks mcp approve: the policy names no [[upstream]]", file=sys.stderr)
        return 2
    if not policy.pinning.enabled:
        print("otelhooks mcp approve: pinning is off in this policy", file=sys.stderr)
        return 2
    return asyncio.run(_approve(policy, set(args.tools), args.all))


async def _approve(policy: Any, chosen: set[str], everything: bool) -> int:
    from ...core import Hooks, ToolCallRecorder
    from ...integrations.mcp.pinning import Pinning, PinStore, default_pin_file, upstream_key
    from ...integrations.mcp.upstreams import Callbacks, HostProfile, UpstreamSet
    from ...telemetry.content import Capture
    from ...telemetry.instruments import Instruments

    store = PinStore(policy.pinning.file or default_pin_file())
    review = Pinning(store, approved=policy.pinning.approve, new_tools="block")

    async def nothing(*_: Any) -> None:
        return None

    audit_key = policy.audit.key_env if policy.audit is not None else None
    uset = UpstreamSet(
        policy.upstreams,
        HostProfile(),
        hooks=Hooks(),
        recorder=ToolCallRecorder(
            None, capture=Capture.NO_CONTENT, max_content_length=0, instruments=Instruments()
        ),
        callbacks=Callbacks(nothing, nothing, nothing, nothing),
        tool_timeout=60,
        environment=lambda config: config.environment(audit_key),
    )
    try:
        await uset.start()
    except RuntimeError as exc:
        print(f"otelhooks mcp approve: {exc}", file=sys.stderr)
        return 1
    try:
        pending: list[tuple[str, Any, Any]] = []  # (key, listing, change or None for new)
        for config in policy.upstreams:
            key = upstream_key(config.name, config.url or " ".join(config.command))
            server = uset.servers[config.name]
            changes = {
                c.tool: c
                for c in review.review(key, [(e.name, e.listing) for e in server.listings])
            }
            for entry in server.listings:
                if entry.name in changes or review.refused(entry.name):
                    pending.append((key, entry, changes.get(entry.name)))
        if not pending:
            print("every tool definition matches its pin")
            return 0
        unknown = chosen - {entry.name for _, entry, _ in pending}
        for _key, entry, change in pending:
            print(_describe(entry.name, change))
        for key, entry, _ in pending:
            if everything or entry.name in chosen:
                digest = store.pin(key, entry.listing)
                print(f"approved {entry.name}: pinned {digest}")
        if unknown:
            print(f"no change to approve for: {', '.join(sorted(unknown))}", file=sys.stderr)
            return 1
        return 0
    finally:
        await uset.close()


def _describe(tool: str, change: Any) -> str:
    if change is None:
        return f"{tool}: new, not pinned yet"
    before = json.dumps(change.before, indent=2, sort_keys=True).splitlines()
    after = json.dumps(change.after, indent=2, sort_keys=True).splitlines()
    diff = difflib.unified_diff(before, after, "pinned", "now", lineterm="", n=1)
    return f"{tool}: changed ({change.pinned} -> {change.now})\n" + "\n".join(diff)
