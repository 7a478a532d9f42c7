"""``otelhooks mcp approve``: review the tool definitions that changed since they were pinned (as
running gateways and ``--check`` reported them to the store), and pin the new ones; a running
gateway honours an approval within a second.

::

    otelhooks mcp approve --policy gateway.toml              # show what changed, approve nothing
    otelhooks mcp approve --policy gateway.toml fs_write_file  # approve these tools
    otelhooks mcp approve --policy gateway.toml --all         # approve every change
    otelhooks mcp approve --policy gateway.toml --refresh     # start the upstreams and look first
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import getpass
import json
import sys
from typing import Any


def add_parser(mcp_sub: Any) -> None:
    approve = mcp_sub.add_parser(
        "approve",
        help="review tool definitions that changed since they were pinned, and approve them",
        description="Show each tool definition that differs from its pin (as gateways and "
        "--check reported them to the store), and pin the new definitions of the tools named "
        "(TOOL, or TOOL=DIGEST when several changes of one tool wait) or --all.",
    )
    approve.add_argument("--policy", help="the proxy's policy file (its upstreams and store)")
    approve.add_argument("--all", action="store_true", help="approve every changed tool")
    approve.add_argument(
        "--refresh",
        action="store_true",
        help="start the upstreams and compare their definitions with the pins first",
    )
    approve.add_argument(
        "--as", dest="who", help="who approves, as the store records it (default: the OS user)"
    )
    approve.add_argument("tools", nargs="*", help="the (registered) names of tools to approve")


def run(args: argparse.Namespace) -> int:
    from ...builtin.store import StoreError
    from ...integrations.mcp.pinning import open_pins, upstream_key
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
    try:
        pins = open_pins(policy.store.file)
    except StoreError as exc:
        print(f"otelhooks mcp approve: {exc}", file=sys.stderr)
        return 2
    try:
        if args.refresh:
            code = asyncio.run(_refresh(policy, pins))
            if code:
                return code
        keys = [upstream_key(c.name, c.url or " ".join(c.command)) for c in policy.upstreams]
        return _approve(pins, keys, args.tools, args.all, args.who or getpass.getuser())
    finally:
        pins.close()


def _approve(pins: Any, upstreams: list[str], chosen: list[str], everything: bool, who: str) -> int:
    from ...builtin.store import Definition

    store = pins.store
    pending = store.pending_changes(upstreams)
    if not pending:
        print("every tool definition matches its pin")
        return 0 if not chosen else 1
    for change in pending:
        print(_describe(change, store.get_pin(change.upstream, change.tool)))
    wanted: dict[str, str | None] = {}
    for item in chosen:
        name, _, digest = item.partition("=")
        wanted[name] = digest or None
    unknown = set(wanted) - {c.registered for c in pending}
    approved: set[str] = set()
    for change in pending:
        if not everything and change.registered not in wanted:
            continue
        named = wanted.get(change.registered)
        several = [c for c in pending if c.registered == change.registered]
        if named is None and len(several) > 1 and not everything:
            print(
                f"{change.registered}: {len(several)} different changes wait; name one as "
                f"{change.registered}=DIGEST",
                file=sys.stderr,
            )
            return 1
        if named is not None and not change.digest.removeprefix("sha256:").startswith(
            named.removeprefix("sha256:")
        ):
            continue
        if change.registered in approved:
            continue
        seen = Definition(change.upstream, change.tool, change.digest, change.definition)
        pin = store.approve_pin(seen, by=who)
        approved.add(change.registered)
        print(f"approved {change.registered}: pinned {pin.digest} (by {who})")
    if unknown:
        print(f"no change to approve for: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 1
    return 0


async def _refresh(policy: Any, pins: Any) -> int:
    """Start the upstreams once and review their listings (the changes go to the store)."""
    from ...core import Hooks, ToolCallRecorder
    from ...integrations.mcp.pinning import Pinning, upstream_key
    from ...integrations.mcp.upstreams import Callbacks, HostProfile, UpstreamSet
    from ...telemetry.content import Capture
    from ...telemetry.instruments import Instruments

    review = Pinning(pins, approved=policy.pinning.approve, new_tools=policy.pinning.new_tools)

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
        for config in policy.upstreams:
            key = upstream_key(config.name, config.url or " ".join(config.command))
            server = uset.servers[config.name]
            review.review(key, [(e.name, e.listing) for e in server.listings], owner=uset.key)
        return 0
    finally:
        await uset.close()


def _describe(change: Any, pin: Any) -> str:
    if change.pinned is None or pin is None:
        shown = json.dumps(change.definition, indent=2, sort_keys=True)
        return f"{change.registered}: new, not pinned yet ({change.digest})\n{shown}"
    before = json.dumps(pin.definition, indent=2, sort_keys=True).splitlines()
    after = json.dumps(change.definition, indent=2, sort_keys=True).splitlines()
    diff = difflib.unified_diff(before, after, "pinned", "now", lineterm="", n=1)
    return f"{change.registered}: changed ({pin.digest} -> {change.digest})\n" + "\n".join(diff)
