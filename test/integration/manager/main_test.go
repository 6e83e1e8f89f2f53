// Package manager runs both controllers in a real manager against a real
// kube-apiserver and checks the Secrets, DBConnectionSecret, Backends and
// Config steps and the GlanceBackend controller as users see them: through
// conditions, events and the objects the operator writes.
package manager

import (
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/pkg/operator"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/operatortest"
)

var (
	cl  client.Client
	mgr *operatortest.Manager
)

// reconcileTrace is controller-runtime's log of every reconcile in this
// process: it must take the logger before any manager logs (see
// RecordReconciles).
var reconcileTrace = operatortest.RecordReconciles()

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunTests(m, controlplane.APIServerOptions{
		CRDs: controlplane.CRDs{Glance: true, MariaDB: true, ExternalSecrets: true, GatewayAPI: true},
	}, func(srv *controlplane.APIServer) (func(), error) {
		var err error
		if cl, err = operatortest.NewClient(srv.Config); err != nil {
			return nil, err
		}
		if mgr, err = operatortest.StartManager(srv.Config, operator.Options{}); err != nil {
			return nil, err
		}
		return func() { _ = mgr.Stop() }, nil
	}))
}

func newEnv(t *testing.T) *operatortest.Env { return operatortest.NewEnv(t, cl) }
