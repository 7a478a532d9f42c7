#!/usr/bin/env bash
# The whole test suite on a fresh machine: creates .venv, installs the package with its dev
# extras (the MCP servers from PyPI the tests drive and the documentation tools included) with
# uv, then, side by side, builds (or reuses) the pinned Jaeger binary, the pinned npm MCP servers,
# the trace viewer (Arize Phoenix, in an environment of its own), a headless browser, the secret
# samples of gitleaks' rules (built once from the Go module proxy), the held-out secret corpus
# (Trivy's rules from the Go module proxy, secretlint's from npm) and the fleet's engines (Kafka
# and Cassandra jars from Maven Central, the gateway collector from the Go module proxy), then
# runs ruff, mypy and the strict documentation build (any warning fails it) side by side, and
# pytest on both cores: the unit, fault-injection and MCP tests, every documentation code sample
# and a smoke run of the benchmarks, then the end-to-end tests against Jaeger, the fleet and the
# trace viewer.
#
# Everything built is cached outside the clone, keyed on its pin (scripts/lib/cache.sh), so a
# second clone on the same machine reuses it. Each phase prints its time; the run ends with a
# table of them, and pytest checks each suite against its budget (tests/budgets.toml).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k loop` (one pytest run then, not
# two). OTELHOOKS_PYTEST_WORKERS sets the pytest workers (default 2; 0 runs in one process).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD"
source scripts/lib/cache.sh

UV_VERSION="0.13.9"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export OTELHOOKS_TIMINGS="$work/timings"
: >"$OTELHOOKS_TIMINGS"
run_started=$SECONDS

# phase NAME COMMAND...: run COMMAND, print and record how long it took.
phase() {
  local name="$1" started=$SECONDS rc=0
  shift
  "$@" || rc=$?
  echo "$name $((SECONDS - started))" >>"$OTELHOOKS_TIMINGS"
  echo "test.sh: $name took $((SECONDS - started)) s$([ $rc = 0 ] || echo " and failed (exit $rc)")" >&2
  return $rc
}

# -- installs ------------------------------------------------------------------------------------

python_env() {
  local python="${PYTHON:-python3}"
  [ -x .venv/bin/python ] || "$python" -m venv .venv
  [ "$(.venv/bin/uv --version 2>/dev/null)" = "uv $UV_VERSION" ] \
    || .venv/bin/python -m pip install -q --disable-pip-version-check "uv==$UV_VERSION"
  .venv/bin/uv pip install -q --python .venv/bin/python -e '.[dev]'
}
phase "install: Python packages" python_env
export OTELHOOKS_UV="$root/.venv/bin/uv"

# Each install script prints what it installed (one path per line); they run side by side.
installs=(jaeger mcp-servers phoenix browser fleet secret-corpus secret-heldout)
for name in "${installs[@]}"; do
  (
    started=$SECONDS rc=0
    PYTHON="$root/.venv/bin/python" bash "scripts/install-$name.sh" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
    echo "install: $name $((SECONDS - started))" >>"$OTELHOOKS_TIMINGS"
    # An install script is silent on stderr when it reuses the cache, and says what it builds.
    [ ! -s "$work/$name.err" ] || echo "built: $name" >>"$OTELHOOKS_TIMINGS"
    echo "$rc" >"$work/$name.rc"
  ) &
done
installs_started=$SECONDS
wait
echo "installs (side by side) $((SECONDS - installs_started))" >>"$OTELHOOKS_TIMINGS"

installed() { # NAME: true when its script succeeded; its output is then in $work/NAME.out
  cat "$work/$1.err" >&2
  [ "$(cat "$work/$1.rc")" = 0 ]
}
line() { sed -n "$2p" "$work/$1.out"; }

if installed jaeger; then
  export OTELHOOKS_JAEGER_BIN="$(line jaeger 1)"
else
  echo "scripts/test.sh: no Jaeger binary; the Jaeger tests will skip (or fail with OTELHOOKS_REQUIRE_JAEGER=1)" >&2
fi
if installed mcp-servers; then
  export OTELHOOKS_MCP_SERVERS_BIN="$(line mcp-servers 1)"
else
  echo "scripts/test.sh: no npm MCP servers; the tests that drive them will skip (or fail with OTELHOOKS_REQUIRE_NPM_SERVERS=1)" >&2
fi
if installed phoenix; then
  export OTELHOOKS_PHOENIX="$(line phoenix 1)"
else
  echo "scripts/test.sh: no Arize Phoenix; the trace-viewer tests will skip (or fail with OTELHOOKS_REQUIRE_UI=1)" >&2
fi
if installed browser; then
  export OTELHOOKS_CHROMIUM="$(line browser 1)" OTELHOOKS_BROWSER_NODE_PATH="$(line browser 2)"
else
  echo "scripts/test.sh: no headless browser; the tests that look at the trace viewer will skip (or fail with OTELHOOKS_REQUIRE_UI=1)" >&2
fi
if installed fleet; then
  export OTELHOOKS_KAFKA_LIB="$(line fleet 1)" OTELHOOKS_CASSANDRA_LIB="$(line fleet 2)" \
    OTELHOOKS_GATEWAY_BIN="$(line fleet 3)"
else
  echo "scripts/test.sh: no fleet engines (Java 17 + Maven for Kafka and Cassandra, Go for the gateway); the fleet tests will skip (or fail with OTELHOOKS_REQUIRE_FLEET=1)" >&2
fi
if installed secret-corpus; then
  export OTELHOOKS_SECRET_CORPUS="$(line secret-corpus 1)"
else
  echo "scripts/test.sh: no secret corpus; the recall tests will skip (or fail with OTELHOOKS_REQUIRE_SECRET_CORPUS=1)" >&2
fi
if installed secret-heldout; then
  export OTELHOOKS_SECRET_HELDOUT="$(line secret-heldout 1)"
else
  echo "scripts/test.sh: no held-out secret corpus (Go, Node and npm build it); the held-out recall tests will skip (or fail with OTELHOOKS_REQUIRE_SECRET_CORPUS=1)" >&2
fi

# -- lint, types, docs (side by side) ------------------------------------------------------------

# (set -e does not apply inside a function called from phase's `||`: each step is chained.)
lint() {
  .venv/bin/ruff check otelhooks _otelhooks_pytest.py tests examples benchmarks scripts \
    && .venv/bin/ruff format --check otelhooks _otelhooks_pytest.py tests examples benchmarks scripts
}
# mypy's cache is kept with the builds: a fresh clone checks only what changed.
types() { .venv/bin/mypy --cache-dir "$otelhooks_cache/mypy"; }
docs() { .venv/bin/python scripts/check_docs.py; }

phase lint lint >"$work/lint.log" 2>&1 &
lint_pid=$!
phase types types >"$work/types.log" 2>&1 &
types_pid=$!
phase docs docs >"$work/docs.log" 2>&1 &
docs_pid=$!
failed=()
wait $lint_pid || failed+=(lint)
wait $types_pid || failed+=(types)
wait $docs_pid || failed+=(docs)
cat "$work/lint.log" "$work/types.log" "$work/docs.log" >&2
if [ ${#failed[@]} -gt 0 ]; then
  echo "scripts/test.sh: ${failed[*]} failed" >&2
  exit 1
fi

# -- pytest ----------------------------------------------------------------------------------------

workers="${OTELHOOKS_PYTEST_WORKERS:-2}"
xdist=()
[ "$workers" = 0 ] || xdist=(-n "$workers" --dist loadfile)
# --tb=native: Python 3.11's ast.parse can fail with "AST constructor recursion depth mismatch"
# while pytest formats a failure its own way, and that ends the worker and the whole run; the
# standard library's tracebacks never parse the source.
pytest_run() { .venv/bin/python -m pytest -q -p no:cacheprovider --tb=native "${xdist[@]}" "$@"; }
end_to_end="jaeger or fleet or ui"

summary() {
  echo "test.sh: phase times (s), total $((SECONDS - run_started)) s:" >&2
  sed 's/^/  /' "$OTELHOOKS_TIMINGS" >&2
}
trap 'summary; rm -rf "$work"' EXIT

if [ $# -gt 0 ]; then
  phase "pytest" pytest_run "$@"
else
  status=0  # both runs go ahead; either failing fails the command
  phase "pytest: unit" pytest_run -m "not ($end_to_end)" || status=1
  phase "pytest: end-to-end" pytest_run -m "$end_to_end" || status=1
  exit $status
fi
