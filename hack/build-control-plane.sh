#!/usr/bin/env bash
# Builds the local control-plane binaries (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, kwok, and cert-manager's
# controller + cainjector as one binary) from the Go module proxy, with the
# kwok stages; and, for the real node, kubelet, kube-proxy, CoreDNS and
# kube-network-policies (its NetworkPolicy enforcer) and SeaweedFS (the S3
# server of its scenes).
#
# Each binary is built once per machine into the artifact cache
# (hack/artifact-cache.sh), as k8s/<version>/NAME-<digest of its inputs>, and linked
# from bin/k8s/<version>/NAME: a second run, or another clone, with the same
# inputs builds nothing; a changed input rebuilds only the binaries built
# from it. The inputs of each:
#   etcd, the Kubernetes binaries, kwok and its stages
#                  the Kubernetes and kwok versions, the link flags, and the
#                  tools modules hack/tools/kubernetes (for `oldest`,
#                  hack/tools/kubernetes-oldest) and hack/tools/etcd
#   cert-manager   hack/tools/cert-manager (go.mod, go.sum, *.go)
#   coredns        hack/tools/coredns (go.mod, go.sum, *.go)
#   kube-network-policies
#                  hack/tools/kube-network-policies (go.mod, go.sum)
#   seaweedfs      hack/tools/seaweedfs (go.mod, go.sum)
#
#   hack/build-control-plane.sh               all seven binaries (e2e, make run)
#   hack/build-control-plane.sh envtest       etcd + kube-apiserver + kubectl only
#   hack/build-control-plane.sh cert-manager  cert-manager only (hack/tools/cert-manager)
#   hack/build-control-plane.sh node          kubelet, kube-proxy, coredns, kube-network-policies
#                                             and seaweedfs (the real node)
#   hack/build-control-plane.sh keys [SET]    print each binary's cache entry, build nothing
#   hack/build-control-plane.sh oldest        kube-apiserver of the oldest minor the chart claims
#                                             (hack/tools/kubernetes-oldest), for test/compat
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/artifact-cache.sh
. "$root/hack/artifact-cache.sh"
k8s_version=v1.37.2
kwok_version=v0.8.0
k8s_tools="$root/hack/tools/kubernetes"
set_name=${1:-all}
keys_only=false
if [ "$set_name" = keys ]; then keys_only=true; set_name=${2:-all}; fi
# The oldest Kubernetes the chart claims (Chart.yaml's kubeVersion): its
# kube-apiserver comes from a tools module of its own, into directories of
# its own; test/compat runs it on the etcd of the set `all`.
if [ "$set_name" = oldest ]; then k8s_version=v1.31.14 k8s_tools+=-oldest; fi
out="$root/bin/k8s/$k8s_version"
store="$artifact_cache/k8s/$k8s_version"

case "$set_name" in
  envtest) wanted=(etcd kube-apiserver kubectl) ;;
  all) wanted=(etcd kube-apiserver kubectl kube-controller-manager kube-scheduler kwok kwok-stages.yaml cert-manager) ;;
  cert-manager) wanted=(cert-manager) ;;
  node) wanted=(kubelet kube-proxy coredns kube-network-policies seaweedfs) ;;
  oldest) wanted=(kube-apiserver) ;;
  *) echo "usage: $0 [keys] [all|envtest|cert-manager|node|oldest]" >&2; exit 2 ;;
esac

major=${k8s_version#v}; major=${major%%.*}
minor=${k8s_version#v*.}; minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

inputs_digest=$( { echo "$k8s_version $kwok_version $ldflags"; cat "$k8s_tools"/go.{mod,sum} "$root"/hack/tools/etcd/go.{mod,sum}; } | sha256sum | cut -c1-16)
# cert-manager has its own tools module (its Kubernetes versions follow
# cert-manager), and its *.go files hold the wiring.
cm_dir="$root/hack/tools/cert-manager"
cm_ldflags="-s -w"
cm_digest=$( { echo "cert-manager static $cm_ldflags"; cat "$cm_dir"/go.mod "$cm_dir"/go.sum "$cm_dir"/*.go; } | sha256sum | cut -c1-16)
# CoreDNS, likewise: its module and the plugin list in its main.go.
dns_dir="$root/hack/tools/coredns"
dns_digest=$( { echo "coredns -s -w"; cat "$dns_dir"/go.mod "$dns_dir"/go.sum "$dns_dir"/*.go; } | sha256sum | cut -c1-16)
# kube-network-policies: its module alone (its main package is the tool).
knp_dir="$root/hack/tools/kube-network-policies"
knp_digest=$( { echo "kube-network-policies static -s -w"; cat "$knp_dir"/go.mod "$knp_dir"/go.sum; } | sha256sum | cut -c1-16)
# SeaweedFS's weed command, a tool of its own module. A cold build takes
# about ten minutes on two cores.
weed_dir="$root/hack/tools/seaweedfs"
weed_digest=$( { echo "seaweedfs static -s -w"; cat "$weed_dir"/go.mod "$weed_dir"/go.sum; } | sha256sum | cut -c1-16)

digest() { # name -> the digest of the inputs it is built from
  case "$1" in
    cert-manager) echo "$cm_digest" ;;
    coredns) echo "$dns_digest" ;;
    kube-network-policies) echo "$knp_digest" ;;
    seaweedfs) echo "$weed_digest" ;;
    *) echo "$inputs_digest" ;;
  esac
}
entry() { echo "$store/$1-$(digest "$1")"; }
hex16='[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'

if $keys_only; then
  for b in "${wanted[@]}"; do echo "$b ${store#"$artifact_cache"/}/${b}-$(digest "$b")"; done
  exit 0
fi

# A binary an earlier build wrote into bin/ with a stamp of these inputs
# moves into the cache rather than being built again.
for b in "${wanted[@]}"; do
  if [ ! -e "$(entry "$b")" ] && [ -f "$out/$b" ] && [ ! -L "$out/$b" ] && [ "$(cat "$out/.stamp-$b" 2>/dev/null)" = "$(digest "$b")" ]; then
    mkdir -p "$store" && mv "$out/$b" "$(entry "$b")"
  fi
done

missing=()
for b in "${wanted[@]}"; do [ -s "$(entry "$b")" ] || missing+=("$b"); done

if [ ${#missing[@]} -gt 0 ]; then
  echo "control plane $k8s_version: building ${missing[*]} into $store (a cold build takes several minutes)"
  mkdir -p "$store"
  # Built beside the cache and renamed into it: another clone building the
  # same entry at the same time never sees half a binary.
  tmp=$(mktemp -d "$store/.build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT

  k8s_pkgs=()
  for b in "${missing[@]}"; do
    case "$b" in
      kube-apiserver|kube-controller-manager|kube-scheduler|kubectl|kubelet|kube-proxy) k8s_pkgs+=("k8s.io/kubernetes/cmd/$b") ;;
    esac
  done
  if [ ${#k8s_pkgs[@]} -gt 0 ]; then
    (cd "$k8s_tools" && go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${k8s_pkgs[@]}")
  fi

  for b in "${missing[@]}"; do
    case "$b" in
      etcd)
        (cd "$root/hack/tools/etcd" && go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3) ;;
      kwok)
        GOBIN="$tmp" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$kwok_version" ;;
      kwok-stages.yaml)
        # Standalone kwok has no default stages: concatenate the ones the e2e
        # suite relies on from the kwok module, preferring the fast variants.
        kwok_dir=$(go mod download -json "sigs.k8s.io/kwok@$kwok_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
        stage_dir="$kwok_dir/kustomize/stage"
        for s in node-initialize node-heartbeat-with-lease pod-ready pod-complete pod-delete pod-container-running-failed; do
          f=$(ls "$stage_dir"/*/fast/"$s".yaml 2>/dev/null | head -1 || true)
          [ -n "$f" ] || f=$(ls "$stage_dir"/*/*/"$s".yaml 2>/dev/null | head -1 || true)
          [ -n "$f" ] || { echo "kwok stage $s not found under kustomize/stage" >&2; exit 1; }
          printf -- '---\n' >> "$tmp/kwok-stages.yaml"; grep -v '^---$' "$f" >> "$tmp/kwok-stages.yaml"
        done ;;
      cert-manager)
        # Static: on the real node it runs as a pod from an image with no libc.
        (cd "$cm_dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$cm_ldflags" -o "$tmp/cert-manager" .) ;;
      coredns)
        # Static: it runs as a pod from an image with no libc.
        (cd "$dns_dir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/coredns" .) ;;
      kube-network-policies)
        # Static: it runs as a pod from an image with no libc.
        (cd "$knp_dir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/kube-network-policies" sigs.k8s.io/kube-network-policies/cmd) ;;
      seaweedfs)
        # Static: it runs as a pod from an image with no libc.
        (cd "$weed_dir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/seaweedfs" github.com/seaweedfs/seaweedfs/weed) ;;
    esac
  done
  for b in "${missing[@]}"; do mv -f "$tmp/$b" "$(entry "$b")"; done
fi

# bin/k8s/<version> links each binary to its entry: the suites, make run and
# the README's commands find them there.
mkdir -p "$out"
for b in "${wanted[@]}"; do
  rm -f "$out/.stamp-$b" # left by builds that wrote the binaries here
  ln -sfn "$(entry "$b")" "$out/$b"
  artifact_cache_trim "$(entry "$b")" "$b-$hex16"
done

case "$set_name" in
  all|envtest|oldest) "$out/kube-apiserver" --version ;;
  node) "$out/kubelet" --version ;;
esac
if [[ " ${wanted[*]} " == *" cert-manager "* ]]; then echo "cert-manager $("$out/cert-manager" --version)"; fi
echo "control plane $k8s_version: ready in ${out#"$root"/}, from $store"
