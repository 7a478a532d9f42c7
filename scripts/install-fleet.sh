#!/usr/bin/env bash
# Installs the engines of the fleet pipeline (docs/scaling-out.md) into the machine's otelhooks
# cache (scripts/lib/cache.sh) and
# prints three lines: the Kafka class-path directory, the Cassandra class-path directory and the
# gateway collector binary. Each part is keyed on its pin and reused once built:
#   Kafka 4.3.2 (KRaft) and Cassandra 5.0.9: jars from Maven Central, tools/kafka/pom.xml and
#     tools/cassandra/pom.xml, fetched with `mvn dependency:copy-dependencies` (Java 17 + Maven);
#   the gateway: an OpenTelemetry Collector v0.139.0 (the version the Jaeger pin uses) with the
#     Kafka exporter and file_storage, built from the generated module in tools/gateway/ (the
#     Collector Builder's output for tools/gateway/manifest.yaml, go.sum committed).
# The ingesters and the query service are the pinned Jaeger binary (scripts/install-jaeger.sh).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/lib/cache.sh"
cache="${OTELHOOKS_FLEET_CACHE:-$otelhooks_cache}"

need() {
  command -v "$1" >/dev/null 2>&1 || { echo "install-fleet: '$1' is needed ($2)" >&2; exit 1; }
}

jars() { # name version pom -> prints the lib directory
  local name="$1" version="$2" pom="$3"
  local key dest want
  key="$(sha256sum "$pom" | cut -c1-16)"
  dest="$cache/$name/$version-$key"
  want="$name $version pom=$key"
  if [ -d "$dest/lib" ] && [ "$(cat "$dest/VERSION" 2>/dev/null)" = "$want" ]; then
    echo "$dest/lib"
    return
  fi
  cache_lock "$dest"
  if [ -d "$dest/lib" ] && [ "$(cat "$dest/VERSION" 2>/dev/null)" = "$want" ]; then
    echo "$dest/lib"
    return
  fi
  need java "Java 17 runs $name"
  need mvn "Maven fetches the $name jars from Maven Central"
  echo "install-fleet: fetching $name $version from Maven Central" >&2
  rm -rf "$dest" && mkdir -p "$dest"
  mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies -DoutputDirectory="$dest/lib.tmp" >&2
  mv "$dest/lib.tmp" "$dest/lib"
  echo "$want" > "$dest/VERSION"
  echo "$dest/lib"
}

gateway() {
  local version="v0.139.0" key dest want bin
  key="$(cat "$root/tools/gateway/go.mod" "$root/tools/gateway/go.sum" "$root/tools/gateway/components.go" | sha256sum | cut -c1-16)"
  dest="$cache/fleet-gateway/$version-$key"
  bin="$dest/otelcol-otelhooks-gateway"
  want="$version key=$key"
  if [ -x "$bin" ] && [ "$(cat "$dest/VERSION" 2>/dev/null)" = "$want" ]; then
    echo "$bin"
    return
  fi
  cache_lock "$dest"
  if [ -x "$bin" ] && [ "$(cat "$dest/VERSION" 2>/dev/null)" = "$want" ]; then
    echo "$bin"
    return
  fi
  need go "the Go toolchain builds the gateway collector"
  echo "install-fleet: building the gateway collector $version; this takes a few minutes the first time" >&2
  mkdir -p "$dest"
  # The checksum database does not answer for every module here: the committed go.sum is the check.
  (cd "$root/tools/gateway" && GOSUMDB=off GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$bin.tmp" .) >&2
  mv "$bin.tmp" "$bin"
  echo "$want" > "$dest/VERSION"
  echo "$bin"
}

jars kafka 4.3.2 "$root/tools/kafka/pom.xml"
jars cassandra 5.0.9 "$root/tools/cassandra/pom.xml"
gateway
