#!/usr/bin/env bash
# Builds the pinned Jaeger v2 binary from the Go module proxy into the machine's otelhooks cache
# (scripts/lib/cache.sh: jaeger/<version>-<go.sum hash>/) and prints its path. A cached binary of
# the same pin is reused, so only the first run on a machine pays for the build (about 5 minutes
# on 2 cores).
#
# Pin: Jaeger v2.12.0, published on the Go module proxy as github.com/jaegertracing/jaeger v1.75.0
# (Jaeger's v2 tags are not Go module versions; the proxy here serves release versions only).
# tools/jaeger/ is a small Go module that requires that version and mirrors its replace directive,
# because `go install pkg@version` refuses a module whose go.mod has one.
set -euo pipefail

JAEGER_VERSION="v2.12.0"
JAEGER_MODULE_VERSION="v1.75.0"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/lib/cache.sh"
key="$(cat "$root/tools/jaeger/go.mod" "$root/tools/jaeger/go.sum" | sha256sum | cut -c1-16)"
dest="${OTELHOOKS_JAEGER_CACHE:-$otelhooks_cache/jaeger}/$JAEGER_VERSION-$key"
bin="$dest/jaeger"
stamp="$dest/VERSION"
want="$JAEGER_VERSION module=$JAEGER_MODULE_VERSION key=$key"

done_already() { [ -x "$bin" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; }
if done_already; then
  echo "$bin"
  exit 0
fi
cache_lock "$dest"
if done_already; then  # another clone built it while this one waited
  echo "$bin"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "install-jaeger: the Go toolchain is needed to build Jaeger (no 'go' on PATH)" >&2
  exit 1
fi
mkdir -p "$dest"
echo "install-jaeger: building Jaeger $JAEGER_VERSION (module $JAEGER_MODULE_VERSION); this takes a few minutes the first time" >&2
(
  cd "$root/tools/jaeger"
  GOFLAGS=-mod=mod go build -trimpath \
    -ldflags "-s -w -X github.com/jaegertracing/jaeger/internal/version.latestVersion=$JAEGER_VERSION" \
    -o "$bin.tmp" github.com/jaegertracing/jaeger/cmd/jaeger
) >&2
mv "$bin.tmp" "$bin"
echo "$want" > "$stamp"
echo "$bin"
