package crd

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	schemacel "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/crdcases"
)

// loadCRD reads a generated CRD from the chart, its one home.
func loadCRD(t *testing.T, plural string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "charts", "glance-operator", "files", "crds", "glance.openstack.c5c3.io_"+plural+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// TestTypeTransitionRule evaluates the spec.type transition rule with the API
// server's own CEL library. S3 is the only type today, so no update through
// the API server can reach the rule past the enum; it guards the day a second
// type exists.
func TestTypeTransitionRule(t *testing.T) {
	crd := loadCRD(t, "glancebackends")
	v1props := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["type"]
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(&v1props, internal, nil); err != nil {
		t.Fatal(err)
	}
	ss, err := structuralschema.NewStructural(internal)
	if err != nil {
		t.Fatal(err)
	}
	validator := schemacel.NewValidator(ss, false, celconfig.PerCallLimit)
	for _, tc := range []struct {
		old, new string
		wantErr  bool
	}{{"S3", "S3", false}, {"S3", "Swift", true}} {
		errs, _ := validator.Validate(context.Background(), field.NewPath("spec", "type"), ss, tc.new, tc.old, celconfig.RuntimeCELCostBudget)
		if got := len(errs) > 0; got != tc.wantErr {
			t.Fatalf("type %s -> %s: errors %v, want error %v", tc.old, tc.new, errs, tc.wantErr)
		}
		if tc.wantErr && errs[0].Detail != crdcases.MsgTypeFixed {
			t.Fatalf("type %s -> %s: message %q, want %q", tc.old, tc.new, errs[0].Detail, crdcases.MsgTypeFixed)
		}
	}
}
