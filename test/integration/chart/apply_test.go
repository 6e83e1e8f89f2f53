package chart

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/test/chart"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/operatortest"
)

func TestEveryRenderIsAccepted(t *testing.T) {
	ctx := context.Background()
	for _, ns := range []string{chart.Namespace, "openstack", "tenant-b"} {
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for _, m := range chart.Matrix {
		t.Run(m.Name, func(t *testing.T) {
			r, err := chart.Render(m.Values, chart.Options{})
			if err != nil {
				t.Fatal(err)
			}
			// CRDs first: the chart's own kinds must be served before
			// anything could name them.
			var crds, rest []*unstructured.Unstructured
			for _, o := range r.Objects {
				if o.GetKind() == "CustomResourceDefinition" {
					crds = append(crds, o)
				} else {
					rest = append(rest, o)
				}
			}
			for _, batch := range [][]*unstructured.Unstructured{crds, rest} {
				for _, dryRun := range []bool{true, false} {
					for _, o := range batch {
						if err := apply(ctx, o, dryRun); err != nil {
							t.Errorf("dry run %v: %s %s/%s: %v", dryRun, o.GetKind(), o.GetNamespace(), o.GetName(), err)
						}
					}
				}
				if t.Failed() {
					return
				}
				for _, o := range batch {
					if o.GetKind() == "CustomResourceDefinition" {
						waitEstablished(t, ctx, o.GetName())
					}
				}
			}
		})
	}
}

// apply server-side applies obj with strict field validation.
func apply(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) error {
	mapping, err := cl.RESTMapper().RESTMapping(obj.GroupVersionKind().GroupKind(), obj.GroupVersionKind().Version)
	if err != nil {
		return err
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{FieldManager: "helm", Force: ptr.To(true), FieldValidation: metav1.FieldValidationStrict}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	resource := dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == "namespace" {
		_, err = resource.Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts)
	} else {
		_, err = resource.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts)
	}
	return err
}

func waitEstablished(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	operatortest.Eventually(t, "CRD "+name+" established", func() error {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
			return err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", crd.Status.Conditions)
	})
	// The client's RESTMapper learns the new kinds lazily; reset it.
	if err := resetMapper(); err != nil {
		t.Fatal(err)
	}
}

func resetMapper() error {
	var err error
	cl, err = client.New(cfg, client.Options{})
	return err
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
		if err := apply(ctx, o, false); err != nil {
			t.Fatal(err)
		}
		waitEstablished(t, ctx, o.GetName())
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
