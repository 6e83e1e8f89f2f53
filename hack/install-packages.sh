#!/usr/bin/env bash
# Installs the Debian packages the suites need, those missing only, so that
# `make test` (and `make run NODE=real`) work on a fresh Debian machine:
#   git, ca-certificates  the builds read the commit; make images copies
#                         the CA bundle of ca-certificates
#   debootstrap           the Debian roots of hack/debianroots/
#   mariadb-server        the conformance suite's throwaway MariaDB
#   iproute2              the install suite reaches the webhook through a
#                         network namespace
#   containerd, runc, containernetworking-plugins, nftables, iptables,
#   conntrack             the real node: its container runtime, the bridge
#                         CNI plugins, and kube-proxy and the kubelet on
#                         nftables and iptables-nft
set -euo pipefail

packages=(git ca-certificates debootstrap mariadb-server iproute2 containerd runc containernetworking-plugins nftables iptables conntrack)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing Debian packages: ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
