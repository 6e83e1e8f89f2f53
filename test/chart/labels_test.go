package chart

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// TestCommonLabels: every object the chart renders, and every pod, carries
// commonLabels; none can take the chart's own labels over.
func TestCommonLabels(t *testing.T) {
	want := mustValues(t, "common-labels")["commonLabels"].(map[string]any)
	r := render(t, "common-labels")
	for _, obj := range r.Objects {
		for k, v := range want {
			if got, ok := obj.GetLabels()[k]; !ok || got != v {
				t.Errorf("%s %s: label %s = %q, want %q", obj.GetKind(), obj.GetName(), k, got, v)
			}
		}
	}
	for _, d := range r.Select("Deployment") {
		labels := decode[appsv1.Deployment](t, d).Spec.Template.Labels
		for k, v := range want {
			if labels[k] != v {
				t.Errorf("Deployment %s's pods: label %s = %q, want %q", d.GetName(), k, labels[k], v)
			}
		}
	}
	if len(r.Objects) < 20 {
		t.Fatalf("the render holds %d objects", len(r.Objects))
	}

	_, err := Render(map[string]any{"commonLabels": map[string]any{"app.kubernetes.io/name": "other"}}, Options{})
	if err == nil {
		t.Error("commonLabels took over app.kubernetes.io/name")
	}
}
