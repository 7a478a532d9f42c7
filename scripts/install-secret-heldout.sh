#!/usr/bin/env bash
# The held-out secret corpus: secrets and harmless text from sources the redactor was never tuned
# on, for tests/test_secret_heldout.py and benchmark 13 (benchmarks/heldout.py reads it).
#
# * Trivy's secret scanner (the Go module github.com/aquasecurity/trivy, pinned in
#   tools/secret-heldout/go.mod): its built-in rules, compiled from the module proxy (a copy of
#   pkg/fanal/secret, tools/secret-heldout/overlay.py), run over Trivy's own test data; every
#   finding is a sample, the files it finds nothing in are scanner false-positive fixtures.
# * secretlint's recommended rules (@secretlint/* from npm, pinned in
#   tools/secret-heldout/package-lock.json): the packages ship no samples, so samples are
#   generated from the rules' own expressions and kept when the rule reports them
#   (tools/secret-heldout/secretlint.mjs). They are marked "generated".
# * TruffleHog's detector tests (the Go module github.com/trufflesecurity/trufflehog/v3, pinned
#   with its module hash in tools/secret-heldout/trufflehog/PIN): the pkg/detectors/*/*_test.go
#   files are parsed, not run (tools/secret-heldout/trufflehog/main.go), and every string a test
#   says its detector must find is recorded with the test's input, or why it was left out.
# * Harmless text from pinned artifacts: the Trivy module's go.sum, documentation and JSON scan
#   reports, an npm lock file from its test data and this build's own lock file. Every artifact
#   is listed with its SHA-256 in manifest.json; Trivy's scanner is run over them too, so that
#   a line Trivy calls a secret is never counted as harmless.
#
# Built once into the machine's otelhooks cache (scripts/lib/cache.sh: secret-heldout/), keyed on
# the pins and the build's own files; nothing fetched is committed. Prints the corpus folder.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="$root/tools/secret-heldout"
source "$root/scripts/lib/cache.sh"
trivy_version="$(awk '$1 == "github.com/aquasecurity/trivy" {print $2}' "$tools/go.mod")"
read -r trufflehog_module trufflehog_version trufflehog_sum < <(grep -v '^#' "$tools/trufflehog/PIN")
key="$(cd "$tools" && cat go.mod go.sum overlay.py trivy.go package.json package-lock.json secretlint.mjs trufflehog/PIN trufflehog/go.mod trufflehog/main.go | sha256sum | cut -c1-16)"
dest="${OTELHOOKS_SECRET_HELDOUT_CACHE:-$otelhooks_cache/secret-heldout}/trivy-$trivy_version-$key"

if [ -f "$dest/DONE" ]; then
  echo "$dest"
  exit 0
fi
cache_lock "$dest"
if [ -f "$dest/DONE" ]; then
  echo "$dest"
  exit 0
fi
for tool in go npm node; do
  command -v "$tool" >/dev/null 2>&1 || { echo "install-secret-heldout: '$tool' is needed (Go for Trivy's rules, Node and npm for secretlint's)" >&2; exit 1; }
done
python="${PYTHON:-python3}"
echo "install-secret-heldout: building the held-out secret corpus (Trivy $trivy_version, secretlint, TruffleHog $trufflehog_version; once)" >&2
rm -rf "$dest"
mkdir -p "$dest/build" "$dest/artifacts"
(
  set -euo pipefail
  # Trivy: the scanner's sources from the pinned module, built with the committed go.sum
  cd "$dest/build"
  cp "$tools/go.mod" "$tools/go.sum" "$tools/trivy.go" .
  go mod download github.com/aquasecurity/trivy
  module="$(go list -m -f '{{.Dir}}' github.com/aquasecurity/trivy)"
  "$python" "$tools/overlay.py" "$module" trivysecret
  go build -trimpath -o "$dest/trivy-samples" .
  "$dest/trivy-samples" rules >"$dest/trivy-rules.jsonl"
  testdata="$module/pkg/fanal/secret/testdata"
  mkdir -p "$dest/artifacts/trivy-testdata"
  find "$testdata" -maxdepth 1 -type f \( -name '*.txt' -o -name '*.json' -o -name '*.js' -o -name '*.xml' -o -name '*.md' -o -name '*.yaml' \) \
    -exec cp {} "$dest/artifacts/trivy-testdata/" \;
  mkdir -p "$dest/artifacts/trivy-go-sum" "$dest/artifacts/trivy-docs" "$dest/artifacts/trivy-reports" "$dest/artifacts/npm-locks"
  cp "$module/go.sum" "$dest/artifacts/trivy-go-sum/go.sum"
  (cd "$module/docs" && find . -name '*.md' -type f | sort | while read -r file; do
    mkdir -p "$dest/artifacts/trivy-docs/$(dirname "$file")"
    cp "$file" "$dest/artifacts/trivy-docs/$file"
  done)
  find "$module/integration/testdata" -maxdepth 1 -name '*.json.golden' -type f -exec cp {} "$dest/artifacts/trivy-reports/" \;
  cp "$module/pkg/dependency/parser/nodejs/npm/testdata/package-lock_v2.json" "$dest/artifacts/npm-locks/trivy-testdata-package-lock.json"
  cp "$tools/package-lock.json" "$dest/artifacts/npm-locks/secret-heldout-package-lock.json"
  chmod -R u+w "$dest/artifacts"
  find "$dest/artifacts" -type f | sort | xargs "$dest/trivy-samples" scan >"$dest/trivy-findings.jsonl"

  # TruffleHog: the pinned module (its hash checked against the pin), its detector tests parsed
  mkdir -p "$dest/build-trufflehog"
  cp "$tools/trufflehog/go.mod" "$tools/trufflehog/main.go" "$dest/build-trufflehog/"
  cd "$dest/build-trufflehog"
  go build -trimpath -o "$dest/trufflehog-samples" .
  download="$(cd "$dest" && GOFLAGS=-mod=mod go mod download -json "$trufflehog_module@$trufflehog_version")"
  sum="$(printf '%s' "$download" | "$python" -c 'import json, sys; print(json.load(sys.stdin)["Sum"])')"
  if [ "$sum" != "$trufflehog_sum" ]; then
    echo "install-secret-heldout: $trufflehog_module@$trufflehog_version has hash $sum, pinned $trufflehog_sum" >&2
    exit 1
  fi
  trufflehog="$(printf '%s' "$download" | "$python" -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')"
  "$dest/trufflehog-samples" "$trufflehog/pkg/detectors" >"$dest/trufflehog-tests.jsonl"

  # secretlint: the pinned packages, and samples generated from its rules
  mkdir -p "$dest/node"
  cp "$tools/package.json" "$tools/package-lock.json" "$tools/secretlint.mjs" "$dest/node/"
  cd "$dest/node"
  npm ci --no-audit --no-fund --loglevel=error
  node secretlint.mjs >"$dest/secretlint-samples.jsonl"

  # the manifest: every artifact and where it came from, with its hash
  cd "$dest"
  "$python" - "$trivy_version" "$trufflehog_version" "$trufflehog_sum" <<'EOF'
import hashlib
import json
import sys
from pathlib import Path

version, trufflehog, trufflehog_sum = sys.argv[1:4]
origins = {
    "trivy-testdata": f"github.com/aquasecurity/trivy@{version}: pkg/fanal/secret/testdata",
    "trivy-go-sum": f"github.com/aquasecurity/trivy@{version}: go.sum",
    "trivy-docs": f"github.com/aquasecurity/trivy@{version}: docs",
    "trivy-reports": f"github.com/aquasecurity/trivy@{version}: integration/testdata/*.json.golden",
    "npm-locks": "npm lock files (Trivy's test data; this build's own)",
}
files = []
for path in sorted(Path("artifacts").rglob("*")):
    if path.is_file():
        group = path.relative_to("artifacts").parts[0]
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        files.append({"path": str(path), "origin": origins[group], "sha256": digest})
for name in ("trivy-rules.jsonl", "trivy-findings.jsonl", "secretlint-samples.jsonl", "trufflehog-tests.jsonl"):
    files.append({"path": name, "origin": "built", "sha256": hashlib.sha256(Path(name).read_bytes()).hexdigest()})
manifest = {"trivy": version, "trufflehog": f"{trufflehog} ({trufflehog_sum})", "secretlint": json.loads(Path("node/package-lock.json").read_text())["packages"]["node_modules/@secretlint/core"]["version"], "files": files}
Path("manifest.json").write_text(json.dumps(manifest, indent=1))
EOF
) >&2
rm -rf "$dest/build" "$dest/build-trufflehog"
touch "$dest/DONE"
echo "$dest"
