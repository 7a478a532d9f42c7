"""``otelhooks mcp audit verify FILE``: check an audit log's chain and its head; exit 1 naming the
lines that do not fit or are missing, 3 when lines after the head are intact but not yet sealed."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

DESCRIPTION = """\
Check an audit log of the gateway: every line's keyed hash, each line's link to the one
before, and the end of the log against its head (FILE.head). Exits 1 and names the lines
when one was changed, removed, added or reordered, when lines are missing at the end (or
the file was emptied), when the head is missing, stale or forged, or when the log records
a gap; 2 when the log or its secret cannot be read; 3 when the chain holds but its
last lines are not yet named by the head (written after it: by a gateway that is still
running, or one that was killed or crashed before it rewrote its head; its next start
checks them and seals them). Torn writes a restart recorded (a crash while a line was
written) are named, and are not a fault.

The secret is the one the log was written with: --key-env names the environment variable
that held it ([audit] key_env), --key-file its file ([audit] key_file); by default
FILE.key, which the gateway made beside the log.
"""


def add_parser(mcp_sub: Any) -> None:
    audit = mcp_sub.add_parser("audit", help="the gateway's audit log")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True)
    verify = audit_sub.add_parser(
        "verify",
        help="check the audit log's chain of hashes and its head",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verify.add_argument("file", help="the audit log (JSON lines)")
    key = verify.add_mutually_exclusive_group()
    key.add_argument("--key-env", help="the environment variable holding the log's secret")
    key.add_argument("--key-file", help="the file holding the log's secret (default: FILE.key)")
    verify.add_argument(
        "--no-head", action="store_true", help="check the chain only (a copy without its head)"
    )


def run(args: argparse.Namespace) -> int:
    from ...builtin.audit import AuditLogError, verify_audit_log

    secret = None
    if args.key_env:
        value = os.environ.get(args.key_env)
        if not value:
            print(f"otelhooks mcp audit verify: {args.key_env} is not set", file=sys.stderr)
            return 2
        secret = value.encode()
    try:
        check = verify_audit_log(
            args.file, secret=secret, key_file=args.key_file, head=not args.no_head
        )
    except (OSError, AuditLogError) as exc:
        print(f"otelhooks mcp audit verify: {exc}", file=sys.stderr)
        return 2
    for line, torn in check.torn:
        print(f"{args.file}:{line}: {torn}")
    if check.ok and check.unsealed is not None:
        first, last = check.unsealed
        print(f"{args.file}: {check.lines} lines, the chain holds; lines {first}-{last} follow "
              "the line its head names and are not sealed yet (a gateway still writing, or "
              "killed before it rewrote the head: its next start seals them)",
              file=sys.stderr)  # fmt: skip
        return 3
    if check.ok:
        head = "" if args.no_head else ", and its head matches"
        print(f"{args.file}: {check.lines} lines, the chain holds{head}")
        return 0
    for line, problem in check.problems[:20]:
        print(f"{args.file}:{line}: {problem}" if line else f"{args.file}: {problem}",
              file=sys.stderr)  # fmt: skip
    for line, gap in check.gaps:
        print(f"{args.file}:{line}: {gap}", file=sys.stderr)
    if check.problems:
        print(f"{args.file}: the log is not intact ({len(check.problems)} problems)",
              file=sys.stderr)  # fmt: skip
    else:
        print(f"{args.file}: the chain holds, and records {len(check.gaps)} gap(s)",
              file=sys.stderr)  # fmt: skip
    return 1
