"""12. MCP: the proxy and the client adapter per tools/call on mcp-server-time."""

from __future__ import annotations

from benchmarks.harness import Report, child_json

NAME = "mcp"
NUMBER = "12"
TITLE = "MCP: the proxy and the client adapter per tools/call on mcp-server-time"


def run(report: Report, quick: bool) -> None:
    try:
        results = child_json(
            ["benchmarks.mcp_child", *(["--quick"] if quick else [])], timeout=1800
        )
    except RuntimeError as exc:
        report.row("mcp benchmark", "failed", str(exc).strip().splitlines()[-1][:80])
        report.results["mcp"] = {"error": str(exc)}
        return
    proxy, adapter = results["proxy"], results["adapter"]
    report.row("official client -> mcp-server-time (direct)", f"{proxy['direct_us']:.0f} µs/call")
    report.row(
        "official client -> otelhooks mcp proxy -> server", f"{proxy['proxy_us']:.0f} µs/call"
    )
    ratio = proxy["proxy_over_direct"]
    verdict = "✓" if ratio <= 1.20 else "missed"
    report.row("proxy / direct", f"{ratio:.2f}×", f"target ≤ 1.2× {verdict}")
    gateway = results["gateway"]
    report.row(
        "client -> gateway (HTTP, token, audit) -> server", f"{gateway['gateway_us']:.0f} µs/call"
    )
    report.row(
        "client -> proxy (HTTP, no auth) -> server", f"{gateway['http_proxy_us']:.0f} µs/call"
    )
    report.row(
        "gateway: added per call over direct",
        f"{gateway['gateway_added_us']:.0f} µs",
        f"{gateway['gateway_over_direct']:.2f}× direct; "
        f"{gateway['gateway_over_http_proxy']:.2f}× the HTTP proxy without auth and audit",
    )
    report.row("mcp.Client.call_tool", f"{adapter['client_us']:.0f} µs/call")
    report.row(
        "MCPServerTools tool, tracing off (added)",
        f"{adapter['adapter_added_us']:.0f} µs/call",
        f"{adapter['adapter_over_client']:.2f}× the client",
    )
    report.row(
        "... with spans and redaction (added)",
        f"{adapter['boundary_added_us']:.0f} µs/call",
        f"{adapter['boundary_over_client']:.2f}× the client",
    )
    report.results["mcp"] = results
