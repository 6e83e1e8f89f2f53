#!/usr/bin/env bash
# The machine's cache of heavy derived artifacts (control-plane and node
# binaries, Debian roots), shared by every clone as Go's build cache is.
# Each entry is named by the digest of its inputs, so a clone reuses what
# another built from the same inputs, and a changed input builds a new entry
# beside the old.
#
# Sourced by the build scripts, it defines:
#   artifact_cache           the cache directory: $GLANCE_OPERATOR_CACHE, else
#                            ${XDG_CACHE_HOME:-$HOME/.cache}/glance-operator
#                            (test/controlplane.ArtifactCache agrees)
#   artifact_cache_trim KEEP GLOB
#                            marks the entry KEEP used, and removes the
#                            entries beside it that match GLOB (the same
#                            artifact from other inputs) and no build has
#                            used for a week
# Run, it prints the directory (`hack/artifact-cache.sh dir`).

artifact_cache=${GLANCE_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/glance-operator}

# Entries are touched when used: another clone at another revision may still
# want an entry this one no longer builds, so only disuse removes it.
artifact_cache_trim() {
  local keep=$1 glob=$2 dir old
  dir=$(dirname "$keep")
  touch -h "$keep"
  # shellcheck disable=SC2086 # the glob
  for old in "$dir"/$glob; do
    [ -e "$old" ] || continue
    [ "$old" = "$keep" ] && continue
    if [ -n "$(find "$old" -maxdepth 0 -mtime +7 2>/dev/null)" ]; then
      # Renamed first: a walk never meets an entry half removed.
      mv "$old" "$dir/.trash.$$.${old##*/}" && rm -rf "$dir/.trash.$$.${old##*/}"
    fi
  done
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
    dir) echo "$artifact_cache" ;;
    *) echo "usage: $0 dir" >&2; exit 2 ;;
  esac
fi
