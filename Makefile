# glance-operator — see README.md. `make help` lists the targets.

SHELL := /usr/bin/env bash
GO ?= go
K8S_VERSION := v1.37.2
CONTROL_PLANE_BIN := $(CURDIR)/bin/k8s/$(K8S_VERSION)
RUN_DIR := $(CURDIR)/.run
TEST_TIMEOUT ?= 45m
# NODE=real runs a real node (kubelet, containerd, kube-proxy, CoreDNS; root)
# instead of kwok's fake ones, for make run and make cluster.
NODE ?= kwok
BENCHTIME ?= 2s
WEBHOOK_MEMORY_LOAD ?= 60s
FUZZTIME_TEST ?= 15s
FUZZTIME ?= 5m

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-20s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

##@ Main commands

.PHONY: run
run: $(if $(filter real,$(NODE)),packages) control-plane localcluster $(if $(filter real,$(NODE)),realnode-roots) ## Start a local cluster with the CRDs and the sample Glance; Ctrl-C stops it. NODE=real: a real node, the chart installed with helm, a sample Glance serving uploads.
ifeq ($(NODE),real)
	exec bin/localcluster -mode=cluster -node=real -dir=$(RUN_DIR)/cluster
else
	exec bin/localcluster -mode=cluster -dir=$(RUN_DIR)/cluster \
		-apply test/samples/dependencies.yaml -apply test/samples/glance.yaml
endif

# The real-node suites run last and alone: a kubelet, containerd and real
# pods on 2 cores share the machine with no other suite.
REALNODE_PKGS := ./test/realnode/...

.PHONY: test
test: test-prerequisites ## Run every suite: real control plane, real Glance.
	$(GO) test -timeout $(TEST_TIMEOUT) -count=1 $$($(GO) list ./... | grep -v '/test/realnode\(/\|$$\)')
	$(MAKE) --no-print-directory test-monitoring
	$(MAKE) --no-print-directory test-release
	$(GO) test -tags chaos -timeout $(TEST_TIMEOUT) -count=1 -run '^TestChaos' ./test/e2e/
	$(GO) test -run='^$$' -fuzz=FuzzINI -fuzztime=$(FUZZTIME_TEST) ./pkg/render/
	$(GO) test -run='^$$' -fuzz=FuzzAdmissionReview -fuzztime=$(FUZZTIME_TEST) ./pkg/admission/webhook/
	$(GO) test -timeout $(TEST_TIMEOUT) -count=1 -p 1 $(REALNODE_PKGS)

# What the suites need, built before any of them runs. The Debian roots and
# the module downloads wait on the network and the disk while the control
# plane compiles; the checks come after, as verify-generated rewrites the
# files vet reads.
.PHONY: test-prerequisites
test-prerequisites: packages
	$(MAKE) --no-print-directory -j3 --output-sync=target control-plane control-plane-oldest realnode-roots mod-download
	$(MAKE) --no-print-directory verify-generated vet

# The Debian packages the suites and the real node need, those missing
# only (apt-get; root or sudo).
.PHONY: packages
packages: ## Install the Debian packages make test and make run NODE=real need (those missing only).
	hack/install-packages.sh

.PHONY: mod-download
mod-download:
	$(GO) mod download
	cd test/monitoring && $(GO) mod download
	cd test/release && $(GO) mod download
	cd hack/tools/chart-docs && $(GO) mod download

# The packages whose tests need a control plane (etcd, kube-apiserver, kwok),
# a Debian root, or root to make a test host, and the tests that need one in
# packages that also hold unit tests: test-unit runs all the others.
CONTROL_PLANE_DIRS := pkg/operator hack/localcluster test/integration/% test/compat test/e2e test/install test/conformance test/debianroot test/testhost test/realnode test/realnode/%
CONTROL_PLANE_TESTS := ^(TestIntegration.*|TestServerJudgesReviewsOverTLS|TestCertificateRotationFailsNoReview|TestShutdownDrainsInFlightReviews|TestBackendLookupsUnderLoad|TestTwoClustersSideBySide|TestCertManager|TestBenchScaleSmoke)$$
UNIT_DIRS = $(filter-out $(CONTROL_PLANE_DIRS),$(patsubst $(CURDIR)/%,%,$(shell $(GO) list -f '{{.Dir}}' ./...)))

.PHONY: test-unit
test-unit: ## Run the tests that need no control plane, in under a minute.
	$(GO) test -count=1 -skip='$(CONTROL_PLANE_TESTS)' $(addprefix ./,$(UNIT_DIRS))
	$(MAKE) --no-print-directory test-monitoring

# The alert rules and the metric contract live in a module of their own:
# Prometheus's rule engine stays out of the product's dependencies.
.PHONY: test-monitoring
test-monitoring: ## Evaluate every alert with Prometheus's rule engine, and check each metric the alerts and the dashboard query is registered.
	cd test/monitoring && $(GO) test -count=1 ./...

# The release's verification with cosign's module, which stays out of the
# product's dependencies.
.PHONY: test-release
test-release: ## Release to a loopback registry and verify the signatures and SLSA provenance with cosign's verification, tampering too (docs/release.md).
	cd test/release && $(GO) test -timeout $(TEST_TIMEOUT) -count=1 ./...

##@ Development

.PHONY: generate
generate: ## Generate the deepcopy functions.
	$(GO) tool controller-gen object:headerFile="" paths=./api/...

CHART_FILES := charts/glance-operator/files
MONITORING_API := github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1

.PHONY: manifests
manifests: ## Generate the chart's CRDs, RBAC roles, webhook configurations, Grafana dashboard, Artifact Hub annotations, values schema and values table, and the test CRDs of prometheus-operator.
	$(GO) tool controller-gen crd paths=./api/... output:crd:artifacts:config=$(CHART_FILES)/crds
	$(GO) tool controller-gen rbac:roleName=glance-operator-manager paths="{./pkg/controller/...,./pkg/operator/...}" \
		output:rbac:artifacts:config=$(CHART_FILES)/rbac/manager
	$(GO) tool controller-gen rbac:roleName=glance-webhook paths=./pkg/admission/webhook/... \
		output:rbac:artifacts:config=$(CHART_FILES)/rbac/webhook
	$(GO) run ./hack/webhook-manifests -out $(CHART_FILES)/webhook-configurations.yaml
	$(GO) run ./hack/dashboard -out $(CHART_FILES)/grafana-dashboard.json
	$(GO) run ./hack/chart-annotations -chart charts/glance-operator -samples test/samples/glance.yaml
	$(MAKE) --no-print-directory chart-docs
	@# Only ServiceMonitor and PrometheusRule are used; the package holds seven kinds.
	tmp=$$(mktemp -d) && $(GO) tool controller-gen crd:maxDescLen=0 paths=$(MONITORING_API) output:crd:artifacts:config=$$tmp && \
		mkdir -p test/crds/prometheus-operator && \
		cp $$tmp/monitoring.coreos.com_servicemonitors.yaml $$tmp/monitoring.coreos.com_prometheusrules.yaml test/crds/prometheus-operator/ && \
		rm -rf $$tmp

CHART_DOCS := $(GO) tool -modfile=$(CURDIR)/hack/tools/chart-docs/go.mod

.PHONY: chart-docs
chart-docs: ## Generate the chart's values.schema.json and its README's values table from the annotated values.yaml.
	@# Objects are closed unless values.yaml's @schema annotation opens them;
	@# the shared rules in schemas/ are bundled into $$defs.
	@cd charts/glance-operator && out=$$($(CHART_DOCS) helm-values-schema-json --values values.yaml --output values.schema.json \
		--indent 2 --no-additional-properties --no-default-global --use-helm-docs \
		--bundle --bundle-without-id --bundle-root . --schema-root.title "glance-operator chart values" 2>&1) || { echo "$$out" >&2; exit 1; }
	$(CHART_DOCS) helm-docs --chart-search-root charts/glance-operator --sort-values-order file --log-level warning

.PHONY: verify-generated
verify-generated: ## Fail when generated files are stale.
	hack/verify-generated.sh

.PHONY: vet
vet: ## Run go vet and check formatting.
	$(GO) vet ./...
	$(GO) vet -tags chaos ./test/e2e/
	cd test/monitoring && $(GO) vet ./...
	cd test/release && $(GO) vet ./...
	@unformatted=$$(gofmt -l api cmd pkg test hack 2>/dev/null); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi

.PHONY: bench
bench: control-plane ## Run the Go benchmarks (admission handler latency, TLS server load, the backend sibling lookup against a real API server, webhook memory under the largest reviews for WEBHOOK_MEMORY_LOAD).
	WEBHOOK_MEMORY_LOAD=$(WEBHOOK_MEMORY_LOAD) $(GO) test -run='^$$' -bench=. -benchmem -benchtime=$(BENCHTIME) ./...

# The counts of Glances bench-scale measures, each on a fresh cluster.
N ?= 1,100,1000

.PHONY: bench-scale
bench-scale: control-plane ## Measure the operator at N Glances (default 1,100,1000) on the local cluster; report in .run/bench-scale/.
	$(GO) run ./hack/benchscale -n=$(N) -out=$(RUN_DIR)/bench-scale

.PHONY: chaos
chaos: control-plane ## Run the chaos suite's long mode: 50 manager kills over three Glances' install and upgrade, API-server restarts, leader failover, a webhook outage.
	$(GO) test -tags chaos -timeout 60m -count=1 -v -run '^TestChaos' ./test/e2e/ -args -chaos.long

.PHONY: fuzz
fuzz: ## Fuzz the INI writer against an oslo.config-like parser, then the admission handlers, for $(FUZZTIME) each.
	$(GO) test -run='^$$' -fuzz=FuzzINI -fuzztime=$(FUZZTIME) ./pkg/render/
	$(GO) test -run='^$$' -fuzz=FuzzAdmissionReview -fuzztime=$(FUZZTIME) ./pkg/admission/webhook/

.PHONY: build
build: ## Build glance-operator and glance-webhook into bin/.
	$(GO) build -o bin/glance-operator ./cmd/manager
	$(GO) build -o bin/glance-webhook ./cmd/webhook

.PHONY: images
images: ## Build the OCI image archives of both binaries into bin/images/ (no Docker needed).
	$(GO) run ./hack/images -go=$(GO) -out bin/images

# REGISTRY is HOST[:PORT][/NAMESPACE]; PLAIN_HTTP=true for a registry without
# TLS. Credentials come from `helm registry login`. SIGNING_KEY is a cosign
# key (cosign generate-key-pair), its password in COSIGN_PASSWORD.
REGISTRY ?=
PLAIN_HTTP ?= false
ARCHES ?= amd64,arm64
SIGNING_KEY ?=

.PHONY: release
release: ## Publish to REGISTRY, signed with SIGNING_KEY: both images as linux/amd64+arm64 indexes with SPDX SBOMs as referrers, the chart with their digests pinned, its static manifests; each with a cosign signature and SLSA provenance (docs/release.md; no Docker needed).
	@test -n "$(REGISTRY)" || { echo 'make release: give the registry, REGISTRY=HOST[:PORT][/NAMESPACE] (PLAIN_HTTP=true without TLS)' >&2; exit 2; }
	@test -n "$(SIGNING_KEY)" || { echo 'make release: give the signing key, SIGNING_KEY=cosign.key (cosign generate-key-pair makes one; its password in COSIGN_PASSWORD)' >&2; exit 2; }
	$(GO) run ./hack/release -registry=$(REGISTRY) -plain-http=$(PLAIN_HTTP) -arch=$(ARCHES) -go=$(GO) -signing-key=$(SIGNING_KEY) -out bin/release

.PHONY: control-plane
control-plane: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok and cert-manager, and the real node's kubelet, kube-proxy, CoreDNS, kube-network-policies and SeaweedFS (once per machine, into the artifact cache; linked from bin/k8s/).
	hack/build-control-plane.sh all
	hack/build-control-plane.sh node

.PHONY: control-plane-oldest
control-plane-oldest: ## Build kube-apiserver of the oldest Kubernetes the chart claims (Chart.yaml's kubeVersion) for test/compat (once per machine, into the artifact cache).
	hack/build-control-plane.sh oldest

# The Debian roots (hack/debianroots/NAME.packages) build into the artifact
# cache as debianroots/NAME-<key>, once per definition and machine.
.PHONY: conformance-root
conformance-root: ## Build the Debian trixie root with Glance for the conformance suite (once per machine, into the artifact cache; root + debootstrap).
	hack/debianroots/build.sh glance

.PHONY: realnode-roots
realnode-roots: conformance-root ## Build the Debian roots of the real node's images: sid's Glance for the upgrade, trixie's MariaDB and trixie's Keystone (once per machine, into the artifact cache; root + debootstrap).
	hack/debianroots/build.sh glance-sid mariadb keystone


.PHONY: cluster
cluster: control-plane localcluster ## Start a full local cluster with all CRDs (no sample) until Ctrl-C; NODE=real for a real node.
	exec bin/localcluster -mode=cluster -operator=false -node=$(NODE) -dir=$(RUN_DIR)/cluster

.PHONY: apiserver
apiserver: control-plane localcluster ## Start etcd + kube-apiserver with all CRDs until Ctrl-C.
	exec bin/localcluster -mode=apiserver -dir=$(RUN_DIR)/apiserver

# The local-cluster command runs as the recipe's own process (exec), not
# under `go run`: a signal then reaches it alone, it stops the cluster and
# exits 0.
.PHONY: localcluster
localcluster:
	$(GO) build -o bin/localcluster ./hack/localcluster

.PHONY: cluster-down
cluster-down: ## Stop a local cluster left behind by a killed run (by recorded PID).
	$(GO) run ./hack/localcluster -stop -dir=$(RUN_DIR)/cluster

.PHONY: clean
clean: ## Remove run state (keeps the built control-plane binaries).
	rm -rf $(RUN_DIR)

.PHONY: clean-all
clean-all: clean ## Remove run state and bin/ (the artifact cache stays: make clean-cache).
	rm -rf bin

# Every clone on the machine shares the cache (hack/artifact-cache.sh): the
# next build in any of them builds what it needs again.
.PHONY: clean-cache
clean-cache: ## Empty the machine's artifact cache: control-plane and node binaries, Debian roots.
	rm -rf "$$(hack/artifact-cache.sh dir)"
