"""``otelhooks mcp``: the MCP proxy and gateway, one module per subcommand.

``proxy`` serves upstream servers through the hook boundary; ``approve`` reviews and approves
changed tool definitions; ``audit verify`` checks an audit log's chain; ``token add`` makes a
bearer token for the gateway's token file.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

SUBCOMMANDS = ("proxy", "approve", "audit", "token")


def add_parser(sub: Any) -> None:
    mcp = sub.add_parser("mcp", help="MCP: put hooks, redaction and traces in front of servers")
    mcp_sub = mcp.add_subparsers(dest="mcp_command", required=True)
    for name in SUBCOMMANDS:
        importlib.import_module(f".{name}", __name__).add_parser(mcp_sub)


def run(args: argparse.Namespace) -> int:
    return int(importlib.import_module(f".{args.mcp_command}", __name__).run(args))
