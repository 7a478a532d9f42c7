"""``otelhooks mcp token add``: make a bearer token for the gateway's token file. The token is
printed once, on stdout; the file keeps only its hash."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from typing import Any


def add_parser(mcp_sub: Any) -> None:
    token = mcp_sub.add_parser("token", help="bearer tokens for the gateway's token file")
    token_sub = token.add_subparsers(dest="token_command", required=True)
    add = token_sub.add_parser("add", help="make a token and add its hash to the file")
    add.add_argument("--file", required=True, help="the token file ([auth] tokens)")
    add.add_argument("--subject", required=True, help="who the token stands for")
    add.add_argument("--scope", action="append", default=[], help="a scope (repeatable)")
    add.add_argument("--group", action="append", default=[], help="a group (repeatable)")
    add.add_argument("--days", type=float, help="expire after this many days")


def run(args: argparse.Namespace) -> int:
    from ...integrations.mcp.auth import add_token

    expires = None
    if args.days is not None:
        if args.days <= 0:
            print("otelhooks mcp token add: --days must be more than 0", file=sys.stderr)
            return 2
        expires = dt.datetime.now(dt.UTC) + dt.timedelta(days=args.days)
    token = add_token(
        args.file, args.subject, scopes=args.scope, groups=args.group, expires=expires
    )
    print(token)
    print(f"added a token for {args.subject} to {args.file} (shown once)", file=sys.stderr)
    return 0
