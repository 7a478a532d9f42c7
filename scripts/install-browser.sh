#!/usr/bin/env bash
# The headless browser the UI tests drive: Debian's Chromium (apt-get, when it is missing and this
# runs as root) and playwright-core (pinned in tools/browser/package-lock.json) in the machine's
# otelhooks cache (scripts/lib/cache.sh: browser/lock-<hash>/). Prints the Chromium executable
# and the node_modules folder, one per line.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/lib/cache.sh"
want="$(sha256sum "$root/tools/browser/package-lock.json" | cut -c1-16)"
dest="${OTELHOOKS_BROWSER_CACHE:-$otelhooks_cache/browser}/lock-$want"
stamp="$dest/LOCK"

chromium="$(command -v chromium || true)"
if [ -z "$chromium" ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "install-browser: installing Debian's chromium" >&2
    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium) >&2 \
      || (DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium) >&2
    chromium="$(command -v chromium)"
  else
    echo "install-browser: no chromium; install Debian's package: sudo apt-get install chromium" >&2
    exit 1
  fi
fi
if ! { [ -d "$dest/node_modules/playwright-core" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; }; then
  command -v npm >/dev/null 2>&1 || { echo "install-browser: npm is needed" >&2; exit 1; }
  cache_lock "$dest"
  mkdir -p "$dest"
  cp "$root/tools/browser/package.json" "$root/tools/browser/package-lock.json" "$dest/"
  (cd "$dest" && npm ci --no-audit --no-fund --loglevel=error) >&2
  echo "$want" > "$stamp"
fi
echo "$chromium"
echo "$dest/node_modules"
