package controlplane

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The Stage builders write YAML by hand: each must decode to one Stage
// whose selector holds the caller's expressions and the builder's own, and
// whose status template says what the stage does.
func TestPodStages(t *testing.T) {
	caller := `{key: .metadata.namespace, operator: In, values: ["doomed"]}`
	for _, tc := range []struct {
		name, yaml string
		selectors  int
		template   []string
	}{
		{"failing", FailingPodStage("fail", caller), 3, []string{"phase: Failed", "exitCode: 1"}},
		{"evicted", EvictedPodStage("evict", `Usage of EmptyDir volume "image-cache" exceeds the limit "10Gi". `, caller), 3,
			[]string{"phase: Failed", "reason: Evicted", `message: "Usage of EmptyDir volume \"image-cache\" exceeds the limit \"10Gi\". "`, `status: "False", type: Ready`}},
		{"ready", ReadyPodStage("ready", "10.244.252.2", caller), 4, []string{"phase: Running", `podIP: "10.244.252.2"`, `type: Ready`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := DecodeObjects([]byte(tc.yaml))
			if err != nil {
				t.Fatalf("decode:\n%s\n%v", tc.yaml, err)
			}
			if len(objs) != 1 || objs[0].GetKind() != "Stage" {
				t.Fatalf("decoded %d objects, want one Stage", len(objs))
			}
			exprs, _, _ := unstructured.NestedSlice(objs[0].Object, "spec", "selector", "matchExpressions")
			if len(exprs) != tc.selectors {
				t.Errorf("%d selector expressions, want %d: %v", len(exprs), tc.selectors, exprs)
			}
			if first, _ := exprs[0].(map[string]any); first["key"] != ".metadata.namespace" {
				t.Errorf("the caller's expression is not first: %v", exprs[0])
			}
			if w, _, _ := unstructured.NestedInt64(objs[0].Object, "spec", "weight"); w != 10000 {
				t.Errorf("weight %d, want 10000", w)
			}
			tmpl, _, _ := unstructured.NestedString(objs[0].Object, "spec", "next", "statusTemplate")
			for _, want := range tc.template {
				if !strings.Contains(tmpl, want) {
					t.Errorf("status template lacks %q:\n%s", want, tmpl)
				}
			}
		})
	}
}
