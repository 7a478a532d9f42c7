#!/usr/bin/env bash
# Runs the pinned Jaeger (built or reused by install-jaeger.sh) with a config of
# collector-config/ (default: jaeger-badger.yaml, traces kept on disk):
#
#   bash scripts/run-jaeger.sh                                   # OTLP on 4317/4318, API on 16686
#   OTLP_GRPC_PORT=14317 OTLP_HTTP_PORT=14318 JAEGER_QUERY_PORT=16687 \
#     bash scripts/run-jaeger.sh collector-config/jaeger.yaml    # every port moved
#
# Jaeger's query service traces its own requests through an OTLP exporter that only the standard
# OTEL_* variables configure: left alone, it sends them to localhost:4317 whatever ports the
# config uses, and waits up to 10 s for them when stopped. Here that self-tracing is off and
# aimed at Jaeger's own receiver (JAEGER_SELF_TRACING=1 keeps it on, into Jaeger itself).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
config="${1:-$root/collector-config/jaeger-badger.yaml}"
[ $# -gt 0 ] && shift
jaeger="$(bash "$root/scripts/install-jaeger.sh")"
if [ "${JAEGER_SELF_TRACING:-}" != "1" ]; then
  export OTEL_TRACES_SAMPLER=always_off
fi
export OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://127.0.0.1:${OTLP_GRPC_PORT:-4317}"
exec "$jaeger" --config "$config" "$@"
