package compat

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/c5c3/glance-operator/test/chart"
)

// TestChartObjectsAccepted applies every render of the chart's values
// matrix, for this version, as test/integration/chart does on the current
// one: server-side, with strict field validation, first as a dry run, then
// for real. The webhook configurations stay a dry run: for real they would
// send this suite's writes to a Service nobody serves.
func TestChartObjectsAccepted(t *testing.T) {
	applier, err := chart.NewApplier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{chart.Namespace, "openstack", "tenant-b"} {
		if err := cl.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	webhookConfiguration := func(o *unstructured.Unstructured) bool {
		return o.GetKind() == "MutatingWebhookConfiguration" || o.GetKind() == "ValidatingWebhookConfiguration"
	}
	for _, m := range chart.Matrix {
		t.Run(m.Name, func(t *testing.T) {
			r, err := chart.Render(m.Values, chart.Options{KubeVersion: chart.OldestKubeVersion()})
			if err != nil {
				t.Fatal(err)
			}
			applier.ApplyRender(t, r, webhookConfiguration)
		})
	}
}
