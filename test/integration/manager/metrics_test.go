package manager

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/fixtures"
	"github.com/c5c3/glance-operator/test/operatortest"
)

// TestDeletedWithoutFinalizerLeavesNoSeries deletes a Glance the refusal
// gate stopped before it took a finalizer: its counters, created at 0 on
// its first pass, go with it.
func TestDeletedWithoutFinalizerLeavesNoSeries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Credentials("pw")
	g := fixtures.NewGlance(e.NS, "glance", "2025.2")
	g.Spec.SecretStoreRef = &v1alpha1.SecretStoreReference{Kind: v1alpha1.ClusterSecretStoreKind, Name: e.Store}
	cleanGlance(g)
	extraConfig("DEFAULT", "image_size_cap", "1\n[DEFAULT]\n"+injectedDebug)(g)
	ctx := context.Background()
	if err := cl.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	expectRefusal(t, e, "spec.extraConfig[DEFAULT][image_size_cap]", true)
	if fin := e.ReadGlance().Finalizers; len(fin) != 0 {
		t.Fatalf("a refused Glance holds finalizers %v", fin)
	}
	counters := []prometheus.Collector{mgr.Metrics.ImageCacheEvictions, mgr.Metrics.DBSync.Total, mgr.Metrics.DBPurge.Total}
	if n := seriesIn(t, e.NS, counters...); n != 5 {
		t.Fatalf("%d counter series of the refused Glance, want 5 at 0", n)
	}

	if err := cl.Delete(ctx, g); err != nil {
		t.Fatal(err)
	}
	operatortest.Eventually(t, "the deleted Glance's series to go", func() error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(g), &v1alpha1.Glance{}); !apierrors.IsNotFound(err) {
			return errors.New("the Glance is still there")
		}
		if n := seriesIn(t, e.NS, counters...); n != 0 {
			return fmt.Errorf("%d series left", n)
		}
		return nil
	})
}

// seriesIn counts the series of the collectors labelled with namespace.
func seriesIn(t *testing.T, namespace string, cs ...prometheus.Collector) int {
	t.Helper()
	n := 0
	for _, c := range cs {
		ch := make(chan prometheus.Metric)
		go func() {
			c.Collect(ch)
			close(ch)
		}()
		for m := range ch {
			var pb dto.Metric
			if err := m.Write(&pb); err != nil {
				t.Fatal(err)
			}
			for _, l := range pb.GetLabel() {
				if l.GetName() == "namespace" && l.GetValue() == namespace {
					n++
				}
			}
		}
	}
	return n
}
