package chart

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/test/operatortest"
)

// Applier server-side applies rendered objects to an API server as helm
// writes them, with strict field validation, so that a field the API server
// does not know fails instead of being dropped at `helm install`.
type Applier struct {
	cfg *rest.Config
	dyn *dynamic.DynamicClient
	// cl maps kinds to resources; it learns new kinds lazily and is
	// renewed once a CRD is established.
	cl client.Client
}

// NewApplier returns an Applier of the API server of cfg.
func NewApplier(cfg *rest.Config) (*Applier, error) {
	a := &Applier{cfg: cfg}
	var err error
	if a.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return a, a.resetMapper()
}

// Client is the Applier's client (cluster-admin, the client-go scheme).
func (a *Applier) Client() client.Client { return a.cl }

// Apply server-side applies obj as field manager helm, with dry run when
// dryRun is set.
func (a *Applier) Apply(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) error {
	mapping, err := a.cl.RESTMapper().RESTMapping(obj.GroupVersionKind().GroupKind(), obj.GroupVersionKind().Version)
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
	resource := a.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == "namespace" {
		_, err = resource.Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts)
	} else {
		_, err = resource.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts)
	}
	return err
}

// ApplyRender applies the objects of a render, CRDs first (the chart's own
// kinds must be served before anything could name them): each batch with
// dry run, then for real, except the objects dryRunOnly (when not nil)
// keeps to the dry run, then it waits for the batch's CRDs to be
// established. Each refusal is an error of t; a refused batch ends it.
func (a *Applier) ApplyRender(t *testing.T, r *Rendered, dryRunOnly func(*unstructured.Unstructured) bool) {
	t.Helper()
	ctx := context.Background()
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
				if !dryRun && dryRunOnly != nil && dryRunOnly(o) {
					continue
				}
				if err := a.Apply(ctx, o, dryRun); err != nil {
					t.Errorf("dry run %v: %s %s/%s: %v", dryRun, o.GetKind(), o.GetNamespace(), o.GetName(), err)
				}
			}
		}
		if t.Failed() {
			return
		}
		for _, o := range batch {
			if o.GetKind() == "CustomResourceDefinition" {
				a.WaitEstablished(t, o.GetName())
			}
		}
	}
}

// WaitEstablished waits for the CRD name to be established, then renews
// the Applier's mapper so that its kinds are found.
func (a *Applier) WaitEstablished(t testing.TB, name string) {
	t.Helper()
	operatortest.Eventually(t, "CRD "+name+" established", func() error {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := a.cl.Get(context.Background(), client.ObjectKey{Name: name}, &crd); err != nil {
			return err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", crd.Status.Conditions)
	})
	if err := a.resetMapper(); err != nil {
		t.Fatal(err)
	}
}

func (a *Applier) resetMapper() error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return err
	}
	cl, err := client.New(a.cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	a.cl = cl
	return nil
}
