// Package requeue checks the requeue intervals of the architecture's
// "Requeue semantics" table against a real kube-apiserver: for each waiting
// state the table names, the ctrl.Result the real controllers return asks to
// come back after the stated interval. The results are read from
// controller-runtime's own log of each reconcile (operatortest.ReconcileLog).
// Each test has a namespace and a manager of its own and plays the
// mariadb-operator, the Job and the Deployment controllers by writing their
// status.
package requeue

import (
	"os"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/operatortest"
)

var (
	cfg        *rest.Config
	cl         client.Client
	reconciles = operatortest.RecordReconciles()
)

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunTests(m, controlplane.APIServerOptions{
		CRDs: controlplane.CRDs{Glance: true, MariaDB: true, ExternalSecrets: true, GatewayAPI: true},
	}, func(srv *controlplane.APIServer) (func(), error) {
		cfg = srv.Config
		var err error
		cl, err = operatortest.NewClient(cfg)
		return nil, err
	}))
}
