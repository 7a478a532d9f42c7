#!/usr/bin/env bash
# The secret samples nobody here wrote, for the redaction tests and benchmark 13: every rule of
# gitleaks (pinned in tools/secret-corpus/go.mod) with the true positives and false positives
# gitleaks validates it against. Its config generator is built from the Go module proxy with a
# patch that records the samples (tools/secret-corpus/overlay.py) and run once; the
# result, one JSON line per rule, is cached in the machine's otelhooks cache
# (scripts/lib/cache.sh: secret-corpus/), keyed on the pin and the overlay. Prints the file.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="$root/tools/secret-corpus"
version="$(awk '$1 == "require" && $2 ~ /gitleaks/ {print $3}' "$tools/go.mod")"
source "$root/scripts/lib/cache.sh"
key="$(cat "$tools/go.mod" "$tools/go.sum" "$tools/overlay.py" | sha256sum | cut -c1-16)"
dest="${OTELHOOKS_SECRET_CORPUS_CACHE:-$otelhooks_cache/secret-corpus}/gitleaks-$version-$key"
samples="$dest/samples.jsonl"

if [ -s "$samples" ] && [ -f "$dest/DONE" ]; then
  echo "$samples"
  exit 0
fi
cache_lock "$dest"
if [ -s "$samples" ] && [ -f "$dest/DONE" ]; then
  echo "$samples"
  exit 0
fi
command -v go >/dev/null 2>&1 || { echo "install-secret-corpus: the Go toolchain is needed" >&2; exit 1; }
echo "install-secret-corpus: building gitleaks $version's rule samples (once)" >&2
rm -rf "$dest"
mkdir -p "$dest"
(
  export GOFLAGS=-mod=mod
  cd "$tools"
  go mod download github.com/zricethezav/gitleaks/v8 github.com/lucasjones/reggen
  mkdir -p "$dest/build"
  cp -r "$(go list -m -f '{{.Dir}}' github.com/zricethezav/gitleaks/v8)" "$dest/build/gitleaks"
  cp -r "$(go list -m -f '{{.Dir}}' github.com/lucasjones/reggen)" "$dest/build/reggen"
  chmod -R u+w "$dest/build"
  "${PYTHON:-python3}" overlay.py "$dest/build/gitleaks" "$dest/build/reggen"
  [ -f "$dest/build/reggen/go.mod" ] || echo "module github.com/lucasjones/reggen" > "$dest/build/reggen/go.mod"
  cp go.mod go.sum tools.go "$dest/build/"
  cd "$dest/build"
  go mod edit -replace github.com/zricethezav/gitleaks/v8=./gitleaks \
    -replace github.com/lucasjones/reggen=./reggen
  go build -trimpath -o "$dest/generate" github.com/zricethezav/gitleaks/v8/cmd/generate/config
  cd gitleaks/cmd/generate/config
  SAMPLES_OUT="$samples.tmp" "$dest/generate" "$dest/gitleaks.toml"
) >&2
mv "$samples.tmp" "$samples"
touch "$dest/DONE"
echo "$samples"
