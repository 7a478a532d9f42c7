#!/usr/bin/env bash
# The trace viewer the UI tests start: arize-phoenix at the version otelhooks ui pins
# (otelhooks/cli/ui.py, PHOENIX_VERSION), in a virtual environment of its own in the machine's
# otelhooks cache (scripts/lib/cache.sh: phoenix/<version>/; Phoenix needs anthropic<2, which the dev environment's
# anthropic extra cannot share). Built once, reused while the pin is the same. Prints the phoenix
# program.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version="$(sed -n 's/^PHOENIX_VERSION = "\(.*\)"$/\1/p' "$root/otelhooks/cli/ui.py")"
[ -n "$version" ] || { echo "install-phoenix: no PHOENIX_VERSION in otelhooks/cli/ui.py" >&2; exit 1; }
source "$root/scripts/lib/cache.sh"
dest="${OTELHOOKS_PHOENIX_CACHE:-$otelhooks_cache/phoenix}/$version"
program="$dest/venv/bin/phoenix"

if ! { [ -x "$program" ] && [ -f "$dest/DONE" ]; }; then
  cache_lock "$dest"
fi
if ! { [ -x "$program" ] && [ -f "$dest/DONE" ]; }; then
  echo "install-phoenix: installing arize-phoenix $version into $dest (about 850 MB, once)" >&2
  rm -rf "$dest"
  mkdir -p "$dest"
  "${PYTHON:-python3}" -m venv "$dest/venv"
  if [ -n "${OTELHOOKS_UV:-}" ]; then  # the test command's uv: parallel downloads
    "$OTELHOOKS_UV" pip install -q --python "$dest/venv/bin/python" "arize-phoenix==$version" >&2
  else
    "$dest/venv/bin/python" -m pip install -q --upgrade pip >&2
    "$dest/venv/bin/python" -m pip install -q "arize-phoenix==$version" >&2
  fi
  touch "$dest/DONE"
fi
echo "$program"
