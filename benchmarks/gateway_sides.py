"""The sides benchmark 15 runs against otelhooks' gateway, each a process of its own:

* ``floor PORT``: the floor of a gateway, a minimal Streamable HTTP pass-through written with the
  official ``mcp`` SDK alone: a low-level server whose ``tools/list`` and ``tools/call`` are the
  upstream's, through one ``mcp.Client`` over stdio (no policy, no auth, no spans, no audit);
* ``relay``: a bare asyncio line relay between this process's stdio and the upstream's (no
  parsing at all): the floor of a stdio proxy.

The upstream command follows ``--``.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any


async def floor(port: int, command: list[str]) -> None:
    import mcp.types as types
    import uvicorn
    from mcp import Client, StdioServerParameters
    from mcp.server.lowlevel import Server

    params = StdioServerParameters(command=command[0], args=command[1:])
    async with Client(params) as upstream:

        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return await upstream.list_tools()

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
            return await upstream.call_tool(params.name, params.arguments or {})

        server: Server[Any] = Server("floor", on_list_tools=list_tools, on_call_tool=call_tool)
        server.middleware.clear()  # no SDK span middleware either: the bare floor
        app = server.streamable_http_app(host="127.0.0.1")
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        await uvicorn.Server(config).serve()


async def relay(command: list[str]) -> None:
    loop = asyncio.get_running_loop()
    process = await asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=1 << 30
    )
    reader = asyncio.StreamReader(limit=1 << 30)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, sys.stdout
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    assert process.stdin is not None and process.stdout is not None

    async def up() -> None:
        while line := await reader.readline():
            process.stdin.write(line)  # type: ignore[union-attr]
        process.stdin.close()  # type: ignore[union-attr]

    async def down() -> None:
        while line := await process.stdout.readline():  # type: ignore[union-attr]
            writer.write(line)

    await asyncio.gather(up(), down())


def main() -> None:
    args = sys.argv[1:]
    command = args[args.index("--") + 1 :]
    if args[0] == "floor":
        asyncio.run(floor(int(args[1]), command))
    else:
        asyncio.run(relay(command))


if __name__ == "__main__":
    main()
