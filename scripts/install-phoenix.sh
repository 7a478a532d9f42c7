#!/usr/bin/env bash
# The trace viewer the UI tests start: arize-phoenix at the version otelhooks ui pins
# (otelhooks/cli/ui.py, PHOENIX_VERSION), in a virtual environment of its own under
# .cache/phoenix/<version>/ (git-ignored; Phoenix needs anthropic<2, which the dev environment's
# anthropic extra cannot share). Built once, reused while the pin is the same. Prints the phoenix
# program.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version="$(sed -n 's/^PHOENIX_VERSION = "\(.*\)"$/\1/p' "$root/otelhooks/cli/ui.py")"
[ -n "$version" ] || { echo "install-phoenix: no PHOENIX_VERSION in otelhooks/cli/ui.py" >&2; exit 1; }
dest="${OTELHOOKS_PHOENIX_CACHE:-$root/.cache/phoenix}/$version"
program="$dest/venv/bin/phoenix"

if ! { [ -x "$program" ] && [ -f "$dest/DONE" ]; }; then
  echo "install-phoenix: installing arize-phoenix $version into $dest (about 850 MB, once)" >&2
  rm -rf "$dest"
  mkdir -p "$dest"
  "${PYTHON:-python3}" -m venv "$dest/venv"
  "$dest/venv/bin/python" -m pip install -q --upgrade pip >&2
  "$dest/venv/bin/python" -m pip install -q "arize-phoenix==$version" >&2
  touch "$dest/DONE"
fi
echo "$program"
