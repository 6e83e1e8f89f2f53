package stack

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/c5c3/glance-operator/test/chart"
)

// TestChartIdentities checks what the stack takes from the chart: the RBAC
// kinds only, and for each binary the ServiceAccount its Deployment runs
// as, bound by the chart to a ClusterRole.
func TestChartIdentities(t *testing.T) {
	ids, err := renderChartIdentities()
	if err != nil {
		t.Fatal(err)
	}
	if ids.manager == ids.webhook {
		t.Fatalf("manager and webhook share the ServiceAccount %s", ids.manager)
	}
	kinds := map[string]int{}
	bound := map[string]bool{} // ServiceAccount namespace/name bound by a ClusterRoleBinding
	for _, obj := range ids.rbac {
		if !slices.Contains(rbacKinds, obj.GetKind()) {
			t.Errorf("the stack would apply %s %s, not an RBAC object", obj.GetKind(), obj.GetName())
		}
		kinds[obj.GetKind()]++
		if obj.GetKind() == "ClusterRoleBinding" {
			var b rbacv1.ClusterRoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &b); err != nil {
				t.Fatal(err)
			}
			for _, s := range b.Subjects {
				bound[s.Namespace+"/"+s.Name] = true
			}
		}
	}
	for _, kind := range rbacKinds {
		if kinds[kind] == 0 {
			t.Errorf("the chart renders no %s", kind)
		}
	}
	for _, sa := range []string{ids.manager.String(), ids.webhook.String()} {
		if !bound[sa] {
			t.Errorf("no ClusterRoleBinding of the chart binds the ServiceAccount %s", sa)
		}
	}
}

func TestDeploymentServiceAccountRejectsAMissingName(t *testing.T) {
	deployment := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "m", "namespace": OperatorNamespace, "labels": map[string]any{componentLabel: managerComponent}},
		"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{}}},
	}}
	rendered := &chart.Rendered{Objects: []*unstructured.Unstructured{deployment}}
	if _, err := deploymentServiceAccount(rendered, managerComponent); err == nil || !strings.Contains(err.Error(), "serviceAccountName") {
		t.Errorf("a Deployment without serviceAccountName: err = %v, want one naming serviceAccountName", err)
	}
	if err := unstructured.SetNestedField(deployment.Object, "missing", "spec", "template", "spec", "serviceAccountName"); err != nil {
		t.Fatal(err)
	}
	if _, err := deploymentServiceAccount(rendered, managerComponent); err == nil || !strings.Contains(err.Error(), "does not render") {
		t.Errorf("a Deployment running as an unrendered ServiceAccount: err = %v, want one saying so", err)
	}
}

// TestRBACDenials feeds the scanner the lines a denied client logs and a
// clean log.
func TestRBACDenials(t *testing.T) {
	dir := t.TempDir()
	manager := filepath.Join(dir, "glance-operator.log")
	webhook := filepath.Join(dir, "glance-webhook.log")
	denied := `E0101 00:00:00.000000 1 reflector.go:200] "Failed to watch" err="failed to list *v1.Pod: pods is forbidden: User \"system:serviceaccount:glance-system:glance-operator-manager\" cannot list resource \"pods\" in API group \"\" at the cluster scope"`
	reason := `{"level":"error","msg":"Reconciler error","error":"update status","reason":"Forbidden"}`
	for path, content := range map[string]string{
		manager: "I0101 starting\n" + denied + "\nI0101 ready\n",
		webhook: "I0101 serving\n" + reason + "\n",
	} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := &Stack{binaryLogs: []string{manager, webhook}}
	got, err := s.RBACDenials()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"glance-operator.log:2: " + denied, "glance-webhook.log:2: " + reason}
	if !slices.Equal(got, want) {
		t.Errorf("RBACDenials() =\n%q\nwant\n%q", got, want)
	}

	// The webhook's own verdicts name field causes; they are no RBAC denial.
	verdict := `time=2026-12-01T10:04:39.950Z level=INFO msg="admission review" verdict=denied code=422 reason=Invalid causes="[FieldValueForbidden spec.openStackRelease]"`
	if err := os.WriteFile(manager, []byte("I0101 starting\n"+verdict+"\nI0101 ready\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.binaryLogs = []string{manager} // the webhook never started
	if got, err := s.RBACDenials(); err != nil || len(got) != 0 {
		t.Errorf("RBACDenials() of a log without denials = %q, %v; want none", got, err)
	}
}
