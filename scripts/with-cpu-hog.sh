#!/usr/bin/env bash
# Runs a command while every core is kept busy by a CPU hog (one endless busy loop per core, at
# normal priority), to show that the tests hold on a loaded machine:
#
#   bash scripts/with-cpu-hog.sh bash .ci/run
#
# The hogs stop when the command ends (or this script is interrupted); the command's exit code
# is this script's.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: with-cpu-hog.sh COMMAND [ARG...]" >&2; exit 2; }
hogs=()
stop() { [ ${#hogs[@]} -eq 0 ] || kill "${hogs[@]}" 2>/dev/null || true; }
trap stop EXIT INT TERM
for _ in $(seq "${OTELHOOKS_HOGS:-$(nproc)}"); do
  sha256sum /dev/zero >/dev/null &
  hogs+=($!)
done
echo "with-cpu-hog.sh: ${#hogs[@]} busy loops beside: $*" >&2
"$@"
