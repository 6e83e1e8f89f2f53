package chart

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"

	"github.com/c5c3/glance-operator/test/chart"
	"github.com/c5c3/glance-operator/test/controlplane"
)

func TestEveryRenderIsAccepted(t *testing.T) {
	ctx := context.Background()
	for _, ns := range []string{chart.Namespace, "openstack", "tenant-b"} {
		if err := applier.Client().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for _, m := range chart.Matrix {
		t.Run(m.Name, func(t *testing.T) {
			r, err := chart.Render(m.Values, chart.Options{})
			if err != nil {
				t.Fatal(err)
			}
			applier.ApplyRender(t, r, nil)
		})
	}
}

// TestRBACScopesMatchDiscovery checks the chart's RBAC against what the API
// server serves: every resource the generated roles name exists (a typo in
// a marker grants nothing), and a namespaced install puts exactly the
// cluster-scoped ones in its ClusterRoles.
func TestRBACScopesMatchDiscovery(t *testing.T) {
	ctx := context.Background()
	// The chart's CRDs must be served for their resources to be discovered.
	r, err := chart.Render(nil, chart.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range r.Select("CustomResourceDefinition") {
		if err := applier.Apply(ctx, o, false); err != nil {
			t.Fatal(err)
		}
		applier.WaitEstablished(t, o.GetName())
	}
	namespaced, err := servedResources()
	if err != nil {
		t.Fatal(err)
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, component := range []string{"manager", "webhook"} {
		objs, err := controlplane.ReadObjects(filepath.Join(root, "charts", "glance-operator", "files", "rbac", component, "role.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			for _, gr := range ruleResources(t, o) {
				if _, ok := namespaced[gr]; !ok {
					t.Errorf("%s role names %s, which the API server does not serve", component, gr)
				}
			}
		}
	}

	nsr, err := chart.Render(map[string]any{"watchNamespace": "openstack"}, chart.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"ClusterRole", "Role"} {
		for _, o := range nsr.Select(kind) {
			if strings.HasSuffix(o.GetName(), "-view") || strings.HasSuffix(o.GetName(), "-edit") {
				continue // the aggregated user roles
			}
			for _, gr := range ruleResources(t, o) {
				isNamespaced, ok := namespaced[gr]
				switch {
				case !ok:
					t.Errorf("%s %s names %s, which the API server does not serve", kind, o.GetName(), gr)
				case kind == "ClusterRole" && isNamespaced:
					t.Errorf("namespaced install: ClusterRole %s grants the namespaced %s cluster-wide", o.GetName(), gr)
				case kind == "Role" && !isNamespaced:
					t.Errorf("namespaced install: Role %s/%s names the cluster-scoped %s, which a Role cannot grant", o.GetNamespace(), o.GetName(), gr)
				}
			}
		}
	}
}

// servedResources maps every served "group/resource" (subresources too) to
// whether it is namespaced.
func servedResources() (map[string]bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, l := range lists {
		group := strings.Split(l.GroupVersion, "/")[0]
		if !strings.Contains(l.GroupVersion, "/") {
			group = ""
		}
		for _, res := range l.APIResources {
			out[group+"/"+res.Name] = res.Namespaced
			// <resource>/finalizers is authorized but never served: setting
			// blockOwnerDeletion on a child needs update on it when the
			// OwnerReferencesPermissionEnforcement plugin is on.
			if !strings.Contains(res.Name, "/") {
				out[group+"/"+res.Name+"/finalizers"] = res.Namespaced
			}
		}
	}
	return out, nil
}

func ruleResources(t *testing.T, o *unstructured.Unstructured) []string {
	t.Helper()
	rules, _, err := unstructured.NestedSlice(o.Object, "rules")
	if err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
	var out []string
	for _, raw := range rules {
		rule, ok := raw.(map[string]any)
		if !ok {
			t.Fatalf("%s %s: rule %v", o.GetKind(), o.GetName(), raw)
		}
		groups, _, _ := unstructured.NestedStringSlice(rule, "apiGroups")
		resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
		for _, g := range groups {
			for _, r := range resources {
				out = append(out, fmt.Sprintf("%s/%s", g, r))
			}
		}
	}
	sort.Strings(out)
	return out
}
