#!/usr/bin/env bash
# Builds the local control-plane binaries (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, kwok, and cert-manager's
# controller + cainjector as one binary) from the Go module proxy into
# bin/k8s/<version>/ and writes the kwok stages next to them; and, for the
# real node, kubelet, kube-proxy and CoreDNS.
#
# A stamp records what was built from which inputs; a second run with the same
# inputs does nothing.
#
#   hack/build-control-plane.sh               all seven binaries (e2e, make run)
#   hack/build-control-plane.sh envtest       etcd + kube-apiserver + kubectl only
#   hack/build-control-plane.sh cert-manager  cert-manager only (hack/tools/cert-manager)
#   hack/build-control-plane.sh node          kubelet, kube-proxy and coredns (the real node)
#   hack/build-control-plane.sh oldest        kube-apiserver of the oldest minor the chart claims
#                                             (hack/tools/kubernetes-oldest), for test/compat
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
k8s_version=v1.37.2
kwok_version=v0.8.0
# The oldest Kubernetes the chart claims (Chart.yaml's kubeVersion): its
# kube-apiserver comes from a tools module of its own, into a directory of
# its own; test/compat runs it on the etcd built above.
k8s_tools="$root/hack/tools/kubernetes"
if [ "${1:-}" = oldest ]; then k8s_version=v1.31.14 k8s_tools+=-oldest; fi
out="$root/bin/k8s/$k8s_version"
set_name=${1:-all}

case "$set_name" in
  envtest) wanted=(etcd kube-apiserver kubectl) ;;
  all) wanted=(etcd kube-apiserver kubectl kube-controller-manager kube-scheduler kwok cert-manager) ;;
  cert-manager) wanted=(cert-manager) ;;
  node) wanted=(kubelet kube-proxy coredns) ;;
  oldest) wanted=(kube-apiserver) ;;
  *) echo "usage: $0 [all|envtest|cert-manager|node|oldest]" >&2; exit 2 ;;
esac

major=${k8s_version#v}; major=${major%%.*}
minor=${k8s_version#v*.}; minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

# The stamp covers the versions, the link flags and both tools modules:
# changing any of them rebuilds.
inputs_digest=$( { echo "$k8s_version $kwok_version $ldflags"; cat "$k8s_tools"/go.{mod,sum} "$root"/hack/tools/etcd/go.{mod,sum}; } | sha256sum | cut -c1-16)
# cert-manager has its own tools module (its Kubernetes versions follow
# cert-manager) and its own stamp, over that module: go.mod, go.sum and the
# wiring in its *.go files.
cm_dir="$root/hack/tools/cert-manager"
cm_ldflags="-s -w"
cm_digest=$( { echo "cert-manager static $cm_ldflags"; cat "$cm_dir"/go.mod "$cm_dir"/go.sum "$cm_dir"/*.go; } | sha256sum | cut -c1-16)

# CoreDNS, likewise: its module and the plugin list in its main.go.
dns_dir="$root/hack/tools/coredns"
dns_digest=$( { echo "coredns -s -w"; cat "$dns_dir"/go.mod "$dns_dir"/go.sum "$dns_dir"/*.go; } | sha256sum | cut -c1-16)

digest() { # name -> the digest of the inputs it is built from
  case "$1" in
    cert-manager) echo "$cm_digest" ;;
    coredns) echo "$dns_digest" ;;
    *) echo "$inputs_digest" ;;
  esac
}
built() { # name -> 0 when the binary exists and was built from these inputs
  [ -x "$out/$1" ] && [ "$(cat "$out/.stamp-$1" 2>/dev/null)" = "$(digest "$1")" ]
}
stamp() { digest "$1" > "$out/.stamp-$1"; }

missing=()
for b in "${wanted[@]}"; do built "$b" || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ] && [ -f "$out/kwok-stages.yaml" -o "$set_name" != all ]; then
  echo "control plane $k8s_version: up to date in ${out#$root/}"
  exit 0
fi
mkdir -p "$out"
echo "control plane $k8s_version: building ${missing[*]:-stages} into ${out#$root/} (a cold build takes several minutes)"

k8s_pkgs=()
for b in "${missing[@]}"; do
  case "$b" in
    kube-apiserver|kube-controller-manager|kube-scheduler|kubectl|kubelet|kube-proxy) k8s_pkgs+=("k8s.io/kubernetes/cmd/$b") ;;
  esac
done
if [ ${#k8s_pkgs[@]} -gt 0 ]; then
  (cd "$k8s_tools" && go build -trimpath -ldflags "$ldflags" -o "$out/" "${k8s_pkgs[@]}")
  for p in "${k8s_pkgs[@]}"; do stamp "${p##*/}"; done
fi

for b in "${missing[@]}"; do
  case "$b" in
    etcd)
      (cd "$root/hack/tools/etcd" && go build -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3)
      stamp etcd ;;
    kwok)
      GOBIN="$out" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$kwok_version"
      stamp kwok ;;
    cert-manager)
      # Static: on the real node it runs as a pod from an image with no libc.
      (cd "$cm_dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$cm_ldflags" -o "$out/cert-manager" .)
      stamp cert-manager ;;
    coredns)
      # Static: it runs as a pod from an image with no libc.
      (cd "$dns_dir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/coredns" .)
      stamp coredns ;;
  esac
done

if [ "$set_name" = all ]; then
  # Standalone kwok has no default stages: concatenate the ones the e2e suite
  # relies on from the kwok module, preferring the fast variants.
  kwok_dir=$(go mod download -json "sigs.k8s.io/kwok@$kwok_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  stage_dir="$kwok_dir/kustomize/stage"
  tmp=$(mktemp)
  for s in node-initialize node-heartbeat-with-lease pod-ready pod-complete pod-delete pod-container-running-failed; do
    f=$(ls "$stage_dir"/*/fast/"$s".yaml 2>/dev/null | head -1 || true)
    [ -n "$f" ] || f=$(ls "$stage_dir"/*/*/"$s".yaml 2>/dev/null | head -1 || true)
    [ -n "$f" ] || { echo "kwok stage $s not found under kustomize/stage" >&2; exit 1; }
    printf -- '---\n' >> "$tmp"; grep -v '^---$' "$f" >> "$tmp"
  done
  mv "$tmp" "$out/kwok-stages.yaml"
fi

case "$set_name" in
  all|envtest|oldest) "$out/kube-apiserver" --version ;;
  node) "$out/kubelet" --version ;;
esac
if [[ " ${wanted[*]} " == *" cert-manager "* ]]; then echo "cert-manager $("$out/cert-manager" --version)"; fi
echo "control plane $k8s_version: ready in ${out#$root/}"
