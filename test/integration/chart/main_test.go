// Package chart applies every render of the chart's values matrix to a real
// kube-apiserver, with the cert-manager and prometheus-operator CRDs
// installed: first as a server-side dry run, then for real, with strict
// field validation, so that a field the API server does not know fails here
// instead of being dropped at `helm install`.
package chart

import (
	"os"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/c5c3/glance-operator/test/chart"
	"github.com/c5c3/glance-operator/test/controlplane"
)

var (
	cfg     *rest.Config
	applier *chart.Applier
)

func TestMain(m *testing.M) {
	// The chart brings the Glance CRDs itself; the others are what its
	// objects and its RBAC rules name.
	crds := controlplane.CRDs{MariaDB: true, ExternalSecrets: true, GatewayAPI: true, CertManager: true, PrometheusOperator: true}
	os.Exit(controlplane.RunTests(m, controlplane.APIServerOptions{CRDs: crds}, func(srv *controlplane.APIServer) (func(), error) {
		cfg = srv.Config
		var err error
		applier, err = chart.NewApplier(cfg)
		return nil, err
	}))
}
