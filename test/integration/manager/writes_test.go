package manager

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// reconciles reads controller-runtime's reconcile counter of a controller.
func reconciles(t *testing.T, controller string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, "controller") == controller {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestNoOpReconcileWritesNothing re-reconciles an unchanged Glance and its
// backend and counts the operator's API writes and reads: there must be
// none. Everything a pass reads is in the caches, and what it derived from
// the user's Secrets is kept while their resourceVersions stay. It runs alone (not parallel), so every request
// counted is this test's.
func TestNoOpReconcileWritesNothing(t *testing.T) {
	e := newEnv(t)
	e.Credentials("pw")
	e.DefaultBackend("alpha")
	e.Glance()
	e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionTrue, v1alpha1.ReasonSecretsAvailable)
	e.Condition(v1alpha1.ConditionBackendsReady, metav1.ConditionTrue, v1alpha1.ReasonAllBackendsProjected)
	e.Eventually("the config ConfigMap", func() bool { return len(e.Names(&corev1.ConfigMapList{}, "config")) == 1 }, nil)

	settle(t, e)

	glances, backends := reconciles(t, "glance"), reconciles(t, "glancebackend")
	before, reads := mgr.Writes.Load(), mgr.Reads.Mark()
	// A label change wakes both controllers (the backend controller watches
	// its parent) without changing anything they render.
	e.UpdateGlance(func(g *v1alpha1.Glance) { g.Labels = map[string]string{"touched": "yes"} })
	e.Eventually("both controllers to reconcile again", func() bool {
		return reconciles(t, "glance") > glances && reconciles(t, "glancebackend") > backends
	}, nil)
	time.Sleep(time.Second) // let anything the passes would write land
	if got := mgr.Writes.Load() - before; got != 0 {
		t.Fatalf("re-reconciling an unchanged Glance issued %d API writes, want 0", got)
	}
	if got := mgr.Reads.Since(reads); len(got) != 0 {
		t.Fatalf("re-reconciling an unchanged Glance read %d times from the API server, want none: %v", len(got), got)
	}
}
