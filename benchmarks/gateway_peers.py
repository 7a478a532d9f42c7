"""A peer of benchmark 15, run by the interpreter of a venv that has fastmcp (``run.py`` makes
it): fastmcp's ``create_proxy`` in front of the upstream command after ``--``, with a deny
middleware (``convert_time``), served over Streamable HTTP with a ``StaticTokenVerifier``
(``http PORT``; the token is ``bench-token``) or over stdio (``stdio``)."""

from __future__ import annotations

import sys
from typing import Any


def main() -> None:
    from fastmcp.exceptions import ToolError
    from fastmcp.server import create_proxy
    from fastmcp.server.auth.providers.jwt import StaticTokenVerifier
    from fastmcp.server.middleware import Middleware

    args = sys.argv[1:]
    command = args[args.index("--") + 1 :]

    class Deny(Middleware):
        async def on_call_tool(self, context: Any, call_next: Any) -> Any:
            if context.message.name == "convert_time":
                raise ToolError("convert_time is denied")
            return await call_next(context)

    config = {"mcpServers": {"time": {"command": command[0], "args": command[1:]}}}
    if args[0] == "http":
        verifier = StaticTokenVerifier(
            {"bench-token": {"client_id": "bench", "scopes": ["mcp"]}}, required_scopes=["mcp"]
        )
        proxy = create_proxy(config, auth=verifier)
        proxy.add_middleware(Deny())
        proxy.run(transport="http", host="127.0.0.1", port=int(args[1]), show_banner=False)
    else:
        proxy = create_proxy(config)
        proxy.add_middleware(Deny())
        proxy.run(transport="stdio", show_banner=False)


if __name__ == "__main__":
    main()
