#!/usr/bin/env bash
# Builds the named Debian roots the test suites run programs from and make
# images of: for each NAME, a debootstrap minbase of the suite that
# hack/debianroots/NAME.packages names on its "# suite: SUITE" line, plus the
# packages that file lists (one a line; "#" starts a comment), into the
# machine's artifact cache (hack/artifact-cache.sh) as debianroots/NAME-<key>/,
# where <key> digests NAME.packages and this script, so that changing either
# builds a new root. A second run with the same inputs, from this clone or
# another, does nothing. test/debianroot computes the same key to find the
# root.
#
#   hack/debianroots/build.sh NAME...
#   hack/debianroots/build.sh keys NAME...   print each root's cache entry, build nothing
#
# The Debian mirror is the one this machine's apt uses, read from the apt
# sources at run time (DEBIAN_MIRROR, or the older CONFORMANCE_DEBIAN_MIRROR,
# overrides it).
#
# Needs root and debootstrap (Debian package debootstrap). A cold build of a
# Glance root takes about a minute and a half and 850 MB.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=hack/artifact-cache.sh
. "$root/hack/artifact-cache.sh"
out_parent="$artifact_cache/debianroots"
# A root's directory is NAME-<12 hex digits>: the pattern keeps a name's
# roots apart from another's (glance-<key> from glance-sid-<key>).
hex12='[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'

# names: the roots hack/debianroots defines.
names() {
  (cd "$here" && ls -- *.packages) | sed 's/\.packages$//' | paste -sd ' '
}

if [ $# -eq 0 ]; then
  echo "usage: $0 NAME... (the roots: $(names))" >&2
  exit 2
fi

# The first URI of an enabled "deb" source for the host's own suite: in
# deb822 files (/etc/apt/sources.list.d/*.sources), else in one-line lists.
host_mirror() {
  local codename
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v want="$codename" '
      function flush() {
        if (types ~ /(^| )deb( |$)/ && enabled != "no" && (want == "" || (" " suites " ") ~ (" " want " ")) && uri != "") { print uri; found = 1; exit }
        types = ""; suites = ""; uri = ""; enabled = ""
      }
      /^[ \t]*$/ { flush(); next }
      /^[ \t]*#/ { next }
      tolower($1) == "types:" { $1 = ""; types = $0 }
      tolower($1) == "suites:" { $1 = ""; suites = $0 }
      tolower($1) == "uris:" { uri = $2 }
      tolower($1) == "enabled:" { enabled = tolower($2) }
      END { if (!found) flush() }
    ' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    # deb [options] URI SUITE COMPONENTS...
    awk -v want="$codename" '
      $1 == "deb" {
        i = 2
        if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
        if (want == "" || $(i + 1) == want) { print $i; exit }
      }
    ' "$f"
  done
}

# build NAME: builds debianroots/NAME-<key> in the cache unless it exists.
build() {
  local name=$1
  local def="$here/$name.packages"
  local log="debian root $name"
  if [[ ! $name =~ ^[a-z0-9][a-z0-9-]*$ ]] || [ ! -f "$def" ]; then
    echo "$log: no such root (hack/debianroots/$name.packages); the roots: $(names)" >&2
    return 1
  fi
  local suite
  suite=$(sed -n 's/^#[[:space:]]*suite:[[:space:]]*\([^[:space:]]*\).*/\1/p' "$def" | head -n 1)
  if [ -z "$suite" ]; then
    echo "$log: hack/debianroots/$name.packages has no \"# suite: SUITE\" line" >&2
    return 1
  fi
  local key out
  key=$(cat "$def" "$here/build.sh" | sha256sum | cut -c1-12)
  out="$out_parent/$name-$key"
  if $keys_only; then
    echo "$name debianroots/$name-$key"
    return 0
  fi

  if [ -d "$out" ]; then
    touch -h "$out" 2>/dev/null || true
    echo "$log: up to date in $out"
    return 0
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "$log: building $out needs root (debootstrap, chroot)" >&2
    return 1
  fi
  if ! command -v debootstrap >/dev/null; then
    echo "$log: debootstrap is missing; install the Debian package: apt-get install debootstrap" >&2
    return 1
  fi
  local mirror=${DEBIAN_MIRROR:-${CONFORMANCE_DEBIAN_MIRROR:-$(host_mirror | head -n 1)}}
  if [ -z "$mirror" ]; then
    echo "$log: found no Debian mirror in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list; set DEBIAN_MIRROR" >&2
    return 1
  fi

  mkdir -p "$out_parent"
  # One build of a name at a time; roots of other names build alongside.
  exec 9>"$out_parent/.$name.lock"
  flock 9
  if [ -d "$out" ]; then
    echo "$log: up to date in $out"
    exec 9>&-
    return 0
  fi

  local tmp="$out_parent/.$name-$key.tmp.$$"
  # shellcheck disable=SC2064 # tmp is fixed now
  trap "rm -rf '$tmp'" EXIT
  # Left behind by a killed build of this name (the lock is ours).
  # shellcheck disable=SC2086 # the glob
  rm -rf "$out_parent"/."$name"-$hex12.tmp.* "$out_parent"/."$name"-$hex12.stale.*
  local packages
  mapfile -t packages < <(sed 's/#.*//' "$def" | tr -s '[:space:]' '\n' | grep -v '^$')
  if [ ${#packages[@]} -eq 0 ]; then
    echo "$log: hack/debianroots/$name.packages lists no package" >&2
    return 1
  fi

  local debootstrap_log="$out_parent/.$name.debootstrap.log" packages_log="$out_parent/.$name.packages.log"
  echo "$log: debootstrap $suite (minbase) into $out"
  local start=$SECONDS
  debootstrap --variant=minbase "$suite" "$tmp" "$mirror" >"$debootstrap_log" 2>&1 || {
    tail -n 30 "$debootstrap_log" >&2
    echo "$log: debootstrap failed; the log is $debootstrap_log" >&2
    return 1
  }
  echo "$log: minbase in $((SECONDS - start))s; installing ${packages[*]}"

  # No service may start inside the root.
  printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
  chmod 0755 "$tmp/usr/sbin/policy-rc.d"

  start=$SECONDS
  # A private mount namespace: /proc goes away with it, even on failure.
  # Mirrors may serve a snapshot of the archive: sid's Release file expires
  # a week after its date (Valid-Until), stable's never, so apt takes a
  # snapshot's expired one.
  unshare --mount --propagation private -- sh -euc '
    root=$1
    shift
    mount -t proc proc "$root/proc"
    chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 \
      sh -euc "apt-get -q -o Acquire::Check-Valid-Until=false update && apt-get -q install -y --no-install-recommends \"\$@\" && apt-get clean && rm -rf /var/lib/apt/lists/*" apt "$@"
  ' sh "$tmp" "${packages[@]}" >"$packages_log" 2>&1 || {
    tail -n 30 "$packages_log" >&2
    echo "$log: installing the packages failed; the log is $packages_log" >&2
    return 1
  }
  echo "$log: packages in $((SECONDS - start))s"

  # The product image runs glance as uid/gid 42424 (render.GlanceUID);
  # Debian allocates the glance user dynamically. Renumber it, and what it
  # owns, in the roots that have one.
  if grep -q '^glance:' "$tmp/etc/passwd"; then
    unshare --mount --propagation private -- sh -euc '
      mount -t proc proc "$1/proc"
      chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin sh -euc "
        uid=\$(id -u glance); gid=\$(id -g glance)
        groupmod -g 42424 glance
        usermod -u 42424 -g 42424 glance
        find / -xdev -user \$uid -exec chown -h 42424 {} +
        find / -xdev -group \$gid -exec chgrp -h 42424 {} +
      "
    ' sh "$tmp"
    echo "$log: the glance user renumbered to 42424"
  fi

  mv "$tmp" "$out"
  trap - EXIT
  # Roots of this name from other inputs go when no build has used them
  # for a week: another clone may be at another revision.
  artifact_cache_trim "$out" "$name-$hex12"
  exec 9>&-
  echo "$log: built $out ($(du -sh "$out" | cut -f1))"
}

keys_only=false
if [ "$1" = keys ]; then keys_only=true; shift; fi
for name in "$@"; do
  build "$name"
done
$keys_only && exit 0
# Roots of earlier layouts, in the clone, are stale.
rm -rf "$root/bin/conformance" "$root/bin/debianroots"
