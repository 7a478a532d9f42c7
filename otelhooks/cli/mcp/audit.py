"""``otelhooks mcp audit verify FILE``: check an audit log's chain (every line's hash and its
link to the one before); exit 1 naming the first lines that do not fit."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def add_parser(mcp_sub: Any) -> None:
    audit = mcp_sub.add_parser("audit", help="the gateway's audit log")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True)
    verify = audit_sub.add_parser(
        "verify", help="check the audit log's chain of hashes", description=__doc__
    )
    verify.add_argument("file", help="the audit log (JSON lines)")
    verify.add_argument(
        "--key-env", help="the environment variable holding the log's HMAC key, if it has one"
    )


def run(args: argparse.Namespace) -> int:
    from ...builtin.audit import verify_audit_log

    key = None
    if args.key_env:
        value = os.environ.get(args.key_env)
        if not value:
            print(f"otelhooks mcp audit verify: {args.key_env} is not set", file=sys.stderr)
            return 2
        key = value.encode()
    try:
        check = verify_audit_log(args.file, key=key)
    except OSError as exc:
        print(f"otelhooks mcp audit verify: {exc}", file=sys.stderr)
        return 2
    if check.ok:
        print(f"{args.file}: {check.lines} lines, the chain holds")
        return 0
    for line, problem in check.problems[:20]:
        print(f"{args.file}:{line}: {problem}", file=sys.stderr)
    print(f"{args.file}: the chain is broken ({len(check.problems)} problems)", file=sys.stderr)
    return 1
