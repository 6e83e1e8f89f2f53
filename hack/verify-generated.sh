#!/usr/bin/env bash
# Fails when a generated file (deepcopy, CRDs, RBAC, webhook configurations, the
# chart's Artifact Hub annotations, values schema and values table) differs from what
# `make generate manifests` produces now. It regenerates in place, so after a
# failure the tree holds the fresh files: review and commit them.
set -euo pipefail
cd "$(dirname "$0")/.."

generated=(api/v1alpha1/zz_generated.deepcopy.go charts/glance-operator/files charts/glance-operator/Chart.yaml
  charts/glance-operator/values.schema.json charts/glance-operator/README.md test/crds/prometheus-operator)
snapshot() { find "${generated[@]}" -type f -print0 | sort -z | xargs -0 sha256sum; }

before=$(snapshot)
make --no-print-directory generate manifests >/dev/null
after=$(snapshot)
if [ "$before" != "$after" ]; then
  echo "generated files are stale; run 'make generate manifests' and commit the result:" >&2
  diff <(echo "$before") <(echo "$after") >&2 || true
  exit 1
fi
echo "generated files are up to date"
