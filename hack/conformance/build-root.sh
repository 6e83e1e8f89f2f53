#!/usr/bin/env bash
# Builds the Debian trixie root the conformance suite (test/conformance) runs
# Glance in: a debootstrap minbase plus the packages in packages.txt, into
# bin/conformance/trixie-<key>/, where <key> digests packages.txt and this
# script, so that changing either builds a new root. A second run with the
# same inputs does nothing. The suite computes the same key to find the root.
#
# The Debian mirror is the one this machine's apt uses, read from the apt
# sources at run time (CONFORMANCE_DEBIAN_MIRROR overrides it).
#
# Needs root and debootstrap (Debian package debootstrap). A cold build takes
# about a minute and a half; the root takes about 850 MB.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
suite=trixie
key=$(cat "$here/packages.txt" "$here/build-root.sh" | sha256sum | cut -c1-12)
out_parent="$root/bin/conformance"
out="$out_parent/$suite-$key"

if [ -d "$out" ]; then
  echo "conformance root: up to date in ${out#$root/}"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "conformance root: building ${out#$root/} needs root (debootstrap, chroot)" >&2
  exit 1
fi
if ! command -v debootstrap >/dev/null; then
  echo "conformance root: debootstrap is missing; install the Debian package: apt-get install debootstrap" >&2
  exit 1
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

mirror=${CONFORMANCE_DEBIAN_MIRROR:-$(host_mirror | head -n 1)}
if [ -z "$mirror" ]; then
  echo "conformance root: found no Debian mirror in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list; set CONFORMANCE_DEBIAN_MIRROR" >&2
  exit 1
fi

mkdir -p "$out_parent"
exec 9>"$out_parent/.lock"
flock 9
if [ -d "$out" ]; then
  echo "conformance root: up to date in ${out#$root/}"
  exit 0
fi

tmp="$out_parent/.$suite-$key.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
rm -rf "$out_parent"/.$suite-*.tmp.*
mapfile -t packages < <(grep -v '^[[:space:]]*\(#\|$\)' "$here/packages.txt")

echo "conformance root: debootstrap $suite (minbase) into ${out#$root/}"
start=$SECONDS
debootstrap --variant=minbase "$suite" "$tmp" "$mirror" >"$out_parent/.debootstrap.log" 2>&1 || {
  tail -n 30 "$out_parent/.debootstrap.log" >&2
  echo "conformance root: debootstrap failed; the log is $out_parent/.debootstrap.log" >&2
  exit 1
}
echo "conformance root: minbase in $((SECONDS - start))s; installing ${packages[*]}"

# No service may start inside the root.
printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
chmod 0755 "$tmp/usr/sbin/policy-rc.d"

start=$SECONDS
# A private mount namespace: /proc goes away with it, even on failure.
unshare --mount --propagation private -- sh -euc '
  root=$1
  shift
  mount -t proc proc "$root/proc"
  chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 \
    sh -euc "apt-get -q update && apt-get -q install -y --no-install-recommends \"\$@\" && apt-get clean && rm -rf /var/lib/apt/lists/*" apt "$@"
' sh "$tmp" "${packages[@]}" >"$out_parent/.packages.log" 2>&1 || {
  tail -n 30 "$out_parent/.packages.log" >&2
  echo "conformance root: installing the packages failed; the log is $out_parent/.packages.log" >&2
  exit 1
}
echo "conformance root: packages in $((SECONDS - start))s"

# The product image runs glance as uid/gid 42424 (render.GlanceUID); Debian
# allocates the glance user dynamically. Renumber it, and what it owns.
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

mv "$tmp" "$out"
trap - EXIT
# Roots of other inputs are stale.
for old in "$out_parent"/$suite-*; do
  [ "$old" = "$out" ] || rm -rf "$old"
done
echo "conformance root: built ${out#$root/} ($(du -sh "$out" | cut -f1))"
