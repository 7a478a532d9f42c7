#!/usr/bin/env bash
# Installs the MCP servers from npm that the tests drive (@modelcontextprotocol/server-everything
# and server-filesystem, pinned in tools/mcp-servers/package-lock.json) into the machine's
# otelhooks cache (scripts/lib/cache.sh: mcp-servers/lock-<hash>/) and prints the folder of their
# programs. A cached install of the same lock is reused.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/lib/cache.sh"
want="$(sha256sum "$root/tools/mcp-servers/package-lock.json" | cut -c1-16)"
dest="${OTELHOOKS_MCP_SERVERS_CACHE:-$otelhooks_cache/mcp-servers}/lock-$want"
stamp="$dest/LOCK"

done_already() {
  [ -x "$dest/node_modules/.bin/mcp-server-everything" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]
}
if done_already; then
  echo "$dest/node_modules/.bin"
  exit 0
fi
cache_lock "$dest"
if done_already; then
  echo "$dest/node_modules/.bin"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "install-mcp-servers: npm is needed to install the npm MCP servers (no 'npm' on PATH)" >&2
  exit 1
fi
mkdir -p "$dest"
cp "$root/tools/mcp-servers/package.json" "$root/tools/mcp-servers/package-lock.json" "$dest/"
echo "install-mcp-servers: installing the pinned npm MCP servers" >&2
(cd "$dest" && npm ci --no-audit --no-fund --loglevel=error) >&2
echo "$want" > "$stamp"
echo "$dest/node_modules/.bin"
