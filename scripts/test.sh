#!/usr/bin/env bash
# The whole test suite on a fresh machine: creates .venv, installs the package with its dev
# extras (the MCP servers from PyPI the tests drive and the documentation tools included), builds
# (or reuses) the pinned Jaeger binary, installs (or reuses) the pinned npm MCP servers, the
# trace viewer (Arize Phoenix, in an environment of its own), a headless browser, the secret
# samples of gitleaks' rules (built once from the Go module proxy) and the fleet's engines (Kafka
# and Cassandra jars from Maven Central, the gateway collector from the Go module proxy), then runs
# ruff, mypy, the strict documentation build and pytest (unit, fault-injection and end-to-end
# tests, every documentation code sample, and a smoke run of the benchmarks).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k loop`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[dev]'

if jaeger="$(bash scripts/install-jaeger.sh)"; then
  export OTELHOOKS_JAEGER_BIN="$jaeger"
else
  echo "scripts/test.sh: no Jaeger binary; the Jaeger tests will skip (or fail with OTELHOOKS_REQUIRE_JAEGER=1)" >&2
fi

if servers="$(bash scripts/install-mcp-servers.sh)"; then
  export OTELHOOKS_MCP_SERVERS_BIN="$servers"
else
  echo "scripts/test.sh: no npm MCP servers; the tests that drive them will skip (or fail with OTELHOOKS_REQUIRE_NPM_SERVERS=1)" >&2
fi

if phoenix="$(bash scripts/install-phoenix.sh)"; then
  export OTELHOOKS_PHOENIX="$phoenix"
else
  echo "scripts/test.sh: no Arize Phoenix; the trace-viewer tests will skip (or fail with OTELHOOKS_REQUIRE_UI=1)" >&2
fi

if browser="$(bash scripts/install-browser.sh)"; then
  export OTELHOOKS_CHROMIUM="$(sed -n 1p <<<"$browser")" OTELHOOKS_BROWSER_NODE_PATH="$(sed -n 2p <<<"$browser")"
else
  echo "scripts/test.sh: no headless browser; the tests that look at the trace viewer will skip (or fail with OTELHOOKS_REQUIRE_UI=1)" >&2
fi

if fleet="$(bash scripts/install-fleet.sh)"; then
  export OTELHOOKS_KAFKA_LIB="$(sed -n 1p <<<"$fleet")" OTELHOOKS_CASSANDRA_LIB="$(sed -n 2p <<<"$fleet")" \
    OTELHOOKS_GATEWAY_BIN="$(sed -n 3p <<<"$fleet")"
else
  echo "scripts/test.sh: no fleet engines (Java 17 + Maven for Kafka and Cassandra, Go for the gateway); the fleet tests will skip (or fail with OTELHOOKS_REQUIRE_FLEET=1)" >&2
fi

if corpus="$(PYTHON="$PWD/.venv/bin/python" bash scripts/install-secret-corpus.sh)"; then
  export OTELHOOKS_SECRET_CORPUS="$corpus"
else
  echo "scripts/test.sh: no secret corpus; the recall tests will skip (or fail with OTELHOOKS_REQUIRE_SECRET_CORPUS=1)" >&2
fi

.venv/bin/ruff check otelhooks _otelhooks_pytest.py tests examples benchmarks
.venv/bin/ruff format --check otelhooks _otelhooks_pytest.py tests examples benchmarks
.venv/bin/mypy
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir "$(mktemp -d)"
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
