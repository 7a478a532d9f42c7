# Sourced by the install scripts: where the pinned builds are kept, and a lock around a build.
#
# The cache lives outside the clone, so that every clone on a machine (CI's fresh clones
# included) reuses what an earlier one built: $OTELHOOKS_CACHE, else
# $XDG_CACHE_HOME/otelhooks, else ~/.cache/otelhooks. Every entry is a folder named after its
# pin (a version and a hash of the lock file, go.sum or pom it was built from), so a changed pin
# builds a new entry and never reuses an old one. Two clones building the same entry at once wait
# for each other (flock) instead of writing into one folder together.

otelhooks_cache="${OTELHOOKS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/otelhooks}"

# cache_lock DIR: hold an exclusive lock on DIR.lock until the calling script exits.
cache_lock() {
  mkdir -p "$(dirname "$1")"
  exec {_cache_lock_fd}>"$1.lock"
  flock "$_cache_lock_fd"
}
