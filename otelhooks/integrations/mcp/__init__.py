"""MCP through the boundary (needs ``otelhooks[mcp]``): a server's tools as otelhooks tools
(:mod:`~otelhooks.integrations.mcp.client`), and ``otelhooks mcp proxy``
(:mod:`~otelhooks.integrations.mcp.proxy`) with its TOML policy
(:mod:`~otelhooks.integrations.mcp.policy`). The names below are imported on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_names

if TYPE_CHECKING:
    from .client import *
    from .policy import *
    from .proxy import *

__getattr__, __dir__ = lazy_names(
    __name__,
    globals(),
    {
        "client": "CONNECTION_ERROR MCPServerTools MCPTool MCPToolError mcp_tools to_tool_output",
        "policy": "PolicyError ProxyPolicy UpstreamConfig load_policy parse_policy",
        "proxy": "MCPProxy ProxyStartError",
    },
)

__all__ = [
    "CONNECTION_ERROR",
    "MCPProxy",
    "MCPServerTools",
    "MCPTool",
    "MCPToolError",
    "PolicyError",
    "ProxyPolicy",
    "ProxyStartError",
    "UpstreamConfig",
    "load_policy",
    "mcp_tools",
    "parse_policy",
    "to_tool_output",
]
