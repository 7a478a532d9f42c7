"""``otelhooks approvals``: list the call approvals waiting in the store, and answer them; the
process waiting (a gateway, an agent with a store approver) sees the answer within its poll.

::

    otelhooks approvals list                      # pending ones (--all: every state)
    otelhooks approvals approve ID [--as WHO]     # who: the OS user by default
    otelhooks approvals deny ID [--as WHO]

The store is ``--store FILE``, else the ``[store] file`` of ``--policy gateway.toml``, else the
default one (``$XDG_STATE_HOME/otelhooks/gateway.sqlite3``). Each answer records who gave it and
when; only a pending, unexpired approval can be answered, once.
"""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import json
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "approvals",
        help="list and answer the call approvals waiting in the store",
        description="List the call approvals waiting in the store (as gateways and agents with "
        "a store approver asked for them) and approve or deny them by id.",
    )
    parser.add_argument("--store", help="the store's file (default: the policy's, else ~/.local)")
    parser.add_argument("--policy", help="a gateway policy file whose [store] to use")
    actions = parser.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="the approvals waiting (or all of them)")
    listing.add_argument("--all", action="store_true", help="every approval, whatever its state")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    for name, verb in (("approve", "approve"), ("deny", "deny")):
        action = actions.add_parser(name, help=f"{verb} a pending approval")
        action.add_argument("id", help="the approval's id (as `list` shows it)")
        action.add_argument(
            "--as", dest="who", help="who answers, as the store records it (default: the OS user)"
        )


def run(args: argparse.Namespace) -> int:
    from ..builtin.store import SQLiteStore, StoreError, default_store_file

    try:
        store = SQLiteStore(_store_file(args) or default_store_file())
    except (StoreError, ValueError) as exc:
        print(f"otelhooks approvals: {exc}", file=sys.stderr)
        return 2
    try:
        if args.action == "list":
            return _list(store, args.all, args.json)
        who = args.who or getpass.getuser()
        if not who.strip():
            print("otelhooks approvals: --as names nobody", file=sys.stderr)
            return 2
        decided = store.decide(args.id, approve=args.action == "approve", by=who)
        if decided is None:
            found = store.get_approval(args.id)
            state = f"it is {found.state}" if found is not None else "there is no such approval"
            print(f"otelhooks approvals: cannot {args.action} {args.id}: {state}", file=sys.stderr)
            return 1
        print(f"{decided.state} {decided.id} ({decided.tool}) by {who} at {_when(decided)}")
        return 0
    finally:
        store.close()


def _store_file(args: argparse.Namespace) -> str | None:
    if args.store:
        return str(args.store)
    if args.policy:
        from ..integrations.mcp.policy import PolicyError, load_policy

        try:
            file = load_policy(args.policy).store.file
        except PolicyError as exc:
            raise ValueError(str(exc)) from None
        return str(file) if file is not None else None
    return None


def _list(store: Any, everything: bool, as_json: bool) -> int:
    approvals = store.approvals() if everything else store.approvals("pending")
    for approval in approvals:
        detail = approval.detail or {}
        if as_json:
            print(json.dumps(_row(approval), sort_keys=True))
            continue
        identity = detail.get("identity") or {}
        user = identity.get("user")
        shown = (
            "(held a secret; not shown)"
            if detail.get("secret")
            else json.dumps(detail.get("arguments"), sort_keys=True)
        )
        asker = f"agent {identity.get('agent')!r}, run {identity.get('run')}"
        if user:
            asker += f", user {user!r}"
        why = "; ".join(detail.get("reasons") or []) or "approval required"
        lines = [
            f"{approval.id}  {approval.state:<8} {approval.tool}  {shown}",
            f"    asked by {asker}; why: {why}",
            f"    digest {approval.digest}; expires {_time(approval.expires_at)}",
        ]
        if approval.decided_by:
            lines[-1] += f"; {approval.state} by {approval.decided_by} at {_when(approval)}"
        print("\n".join(lines))
    if not approvals:
        print("no approval waits" if not everything else "no approval in the store")
    return 0


def _row(approval: Any) -> dict[str, Any]:
    return {
        "id": approval.id,
        "state": approval.state,
        "tool": approval.tool,
        "digest": approval.digest,
        "requested_at": _time(approval.requested_at),
        "expires_at": _time(approval.expires_at),
        "decided_at": _time(approval.decided_at) if approval.decided_at else None,
        "decided_by": approval.decided_by,
        "detail": approval.detail,
    }


def _when(approval: Any) -> str:
    return _time(approval.decided_at) if approval.decided_at else "?"


def _time(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat(timespec="seconds")
