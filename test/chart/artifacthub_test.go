package chart

import (
	"context"
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/c5c3/glance-operator/pkg/admission/check"
)

// artifactHubList decodes the YAML list an Artifact Hub annotation holds.
func artifactHubList[T any](t *testing.T, annotations map[string]string, key string) []T {
	t.Helper()
	var items []T
	if err := yaml.UnmarshalStrict([]byte(annotations[key]), &items); err != nil || len(items) == 0 {
		t.Fatalf("Chart.yaml annotation %s: %d items, %v:\n%s", key, len(items), err, annotations[key])
	}
	return items
}

// The images Artifact Hub lists are the ones the default install runs, and
// its CRD examples pass the admission rules the cluster enforces.
func TestArtifactHubAnnotations(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	annotations := c.Metadata.Annotations

	var running []string
	for _, d := range render(t, "defaults").Select("Deployment") {
		for _, ctr := range decode[appsv1.Deployment](t, d).Spec.Template.Spec.Containers {
			running = append(running, ctr.Image)
		}
	}
	var listed []string
	for _, image := range artifactHubList[struct{ Name, Image string }](t, annotations, "artifacthub.io/images") {
		listed = append(listed, image.Image)
	}
	slices.Sort(running)
	slices.Sort(listed)
	if !slices.Equal(running, listed) {
		t.Errorf("artifacthub.io/images lists %v; the default install runs %v", listed, running)
	}

	var crdNames []string
	for _, crd := range c.CRDObjects() {
		crdNames = append(crdNames, crd.Name)
	}
	for _, o := range render(t, "defaults").Select("CustomResourceDefinition") {
		crdNames = append(crdNames, o.GetName())
	}
	var listedCRDs []string
	for _, crd := range artifactHubList[struct{ Kind, Version, Name, DisplayName, Description string }](t, annotations, "artifacthub.io/crds") {
		if crd.Description == "" {
			t.Errorf("artifacthub.io/crds: %s has no description", crd.Name)
		}
		listedCRDs = append(listedCRDs, crd.Name)
	}
	slices.Sort(crdNames)
	slices.Sort(listedCRDs)
	if !slices.Equal(crdNames, listedCRDs) {
		t.Errorf("artifacthub.io/crds lists %v; the chart installs %v", listedCRDs, crdNames)
	}

	examples := artifactHubList[map[string]any](t, annotations, "artifacthub.io/crdsExamples")
	evaluator, err := check.NewEvaluator()
	if err != nil {
		t.Fatal(err)
	}
	var docs []check.Document
	kinds := map[string]bool{}
	for i, obj := range examples {
		u := &unstructured.Unstructured{Object: obj}
		kinds[u.GetKind()] = true
		docs = append(docs, check.Document{Source: fmt.Sprintf("artifacthub.io/crdsExamples#%d", i), Object: u})
	}
	if !kinds["Glance"] || !kinds["GlanceBackend"] {
		t.Errorf("artifacthub.io/crdsExamples has the kinds %v, want a Glance and a GlanceBackend", kinds)
	}
	for _, r := range evaluator.Evaluate(context.Background(), docs, nil) {
		if !r.Allowed || len(r.Errors) > 0 || len(r.Warnings) > 0 {
			t.Errorf("%s %s: allowed %v, errors %v, warnings %v", r.Source, r.Kind, r.Allowed, r.Errors, r.Warnings)
		}
	}
}
