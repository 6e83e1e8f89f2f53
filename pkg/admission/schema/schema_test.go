package schema_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	runtimeschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/c5c3/glance-operator/pkg/admission/schema"
	"github.com/c5c3/glance-operator/test/fixtures"
)

var minimalGlance = fixtures.MinimalGlance + "metadata: {name: glance, namespace: openstack}\n"

var minimalBackend = fixtures.MinimalBackend + "metadata: {name: s3-primary, namespace: openstack}\n"

const skippedRules = "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"

func kindOf(t *testing.T, kind string) *schema.Kind {
	t.Helper()
	set, err := schema.Load()
	if err != nil {
		t.Fatal(err)
	}
	k, ok := set.For(runtimeschema.GroupVersionKind{Group: "glance.openstack.c5c3.io", Version: "v1alpha1", Kind: kind})
	if !ok {
		t.Fatalf("no evaluator for %s", kind)
	}
	return k
}

// manifest decodes YAML and applies edits, each a dotted path and a YAML
// value ("-" deletes).
func manifest(t *testing.T, doc string, edits ...string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(edits); i += 2 {
		path := strings.Split(edits[i], ".")
		if edits[i+1] == "-" {
			unstructured.RemoveNestedField(m, path...)
			continue
		}
		var v any
		if err := yaml.Unmarshal([]byte(edits[i+1]), &v); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(m, v, path...); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func decode(t *testing.T, k *schema.Kind, obj map[string]any) map[string]any {
	t.Helper()
	d, err := k.Decode(obj)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return d
}

func nested(t *testing.T, obj map[string]any, path string) (any, bool) {
	t.Helper()
	v, found, err := unstructured.NestedFieldNoCopy(obj, strings.Split(path, ".")...)
	if err != nil {
		t.Fatal(err)
	}
	return v, found
}

func TestLoadServesTheOperatorKinds(t *testing.T) {
	set, err := schema.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"Glance", "GlanceBackend"} {
		gvk := runtimeschema.GroupVersionKind{Group: "glance.openstack.c5c3.io", Version: "v1alpha1", Kind: kind}
		k, ok := set.For(gvk)
		if !ok || k.GroupVersionKind() != gvk {
			t.Errorf("For(%s) = %v, %v", gvk, k, ok)
		}
	}
	if _, ok := set.For(runtimeschema.GroupVersionKind{Group: "glance.openstack.c5c3.io", Version: "v1", Kind: "Glance"}); ok {
		t.Error("For(v1 Glance) found an evaluator for a version the CRD does not serve")
	}
}

func TestDecodeAppliesStructuralDefaults(t *testing.T) {
	k := kindOf(t, "Glance")
	in := manifest(t, minimalGlance, "spec.dbPurge", "{ageInDays: 7}")
	d := decode(t, k, in)
	for path, want := range map[string]any{
		"spec.database.port":            int64(3306),
		"spec.database.credentialsMode": "Static",
		"spec.serviceUser.username":     "glance",
		"spec.dbPurge.ageInDays":        int64(7), // set, and an int64 as the server decodes it
		"spec.dbPurge.schedule":         "0 3 * * *",
		"spec.dbPurge.suspend":          false,
	} {
		if got, _ := nested(t, d, path); !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", path, got, want)
		}
	}
	// Defaults apply below objects that are present only.
	if _, found := nested(t, d, "spec.deployment"); found {
		t.Error("spec.deployment was created by defaulting; the server only defaults inside present objects")
	}
	if _, found := nested(t, in, "spec.database.port"); found {
		t.Error("Decode modified its input")
	}
}

func TestDecodeDropsNullsLikeTheServer(t *testing.T) {
	k := kindOf(t, "Glance")
	d := decode(t, k, manifest(t, minimalGlance, "spec.region", "null", "spec.database.port", "null"))
	if _, found := nested(t, d, "spec.region"); found {
		t.Error("spec.region: null survived; the server drops nulls of non-nullable fields without a default")
	}
	if got, _ := nested(t, d, "spec.database.port"); got != int64(3306) {
		t.Errorf("spec.database.port: null decoded to %#v, want the default 3306", got)
	}
}

func TestDecodeReportsUnknownFieldsAsTheServer(t *testing.T) {
	k := kindOf(t, "Glance")
	in := manifest(t, minimalGlance,
		"metadata.colour", "blue",
		"spec.replicas", "3",
		"spec.middleware", "[{name: a, filterFactory: 'm:f', order: 1}]",
		"bogus", "true")
	d, err := k.Decode(in)
	var de *schema.DecodeError
	if !errors.As(err, &de) || !apierrors.IsBadRequest(err) {
		t.Fatalf("want a Bad Request *DecodeError, got %T %v", err, err)
	}
	wantFields := []string{"metadata.colour", "bogus", "spec.middleware[0].order", "spec.replicas"}
	if !reflect.DeepEqual(de.UnknownFields, wantFields) {
		t.Errorf("UnknownFields = %q, want %q", de.UnknownFields, wantFields)
	}
	wantMsg := `Glance in version "v1alpha1" cannot be handled as a Glance: strict decoding error: ` +
		`unknown field "metadata.colour", unknown field "bogus", unknown field "spec.middleware[0].order", unknown field "spec.replicas"`
	if err.Error() != wantMsg {
		t.Errorf("message\n got %s\nwant %s", err, wantMsg)
	}
	if d == nil {
		t.Fatal("no decoded object returned alongside the unknown fields")
	}
	for _, path := range []string{"bogus", "spec.replicas", "metadata.colour"} {
		if _, found := nested(t, d, path); found {
			t.Errorf("%s was not pruned", path)
		}
	}
	if got, _ := nested(t, d, "spec.middleware"); !reflect.DeepEqual(got, []any{map[string]any{"name": "a", "filterFactory": "m:f", "position": "after"}}) {
		t.Errorf("spec.middleware = %#v, want the item pruned and defaulted", got)
	}
}

func TestDecodeRejectsMalformedMetadata(t *testing.T) {
	k := kindOf(t, "Glance")
	d, err := k.Decode(manifest(t, minimalGlance, "metadata.labels", "[a]"))
	var de *schema.DecodeError
	if !errors.As(err, &de) || !apierrors.IsBadRequest(err) || d != nil || len(de.UnknownFields) != 0 {
		t.Fatalf("want a Bad Request without object or unknown fields, got %v, %#v", d, err)
	}
	if !strings.HasPrefix(err.Error(), `Glance in version "v1alpha1" cannot be handled as a Glance: `) {
		t.Errorf("message %q", err)
	}
}

func TestDefaultReappliesDefaultsAfterAPatch(t *testing.T) {
	k := kindOf(t, "Glance")
	patched := decode(t, k, manifest(t, minimalGlance))
	unstructured.RemoveNestedField(patched, "spec", "database", "port")
	patched["spec"].(map[string]any)["webhookAdded"] = "kept"
	patched["spec"].(map[string]any)["deployment"] = map[string]any{"replicas": 2} // an int, as Go code sets it
	d, err := k.Default(patched)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]any{
		"spec.database.port":                  int64(3306),
		"spec.deployment.replicas":            int64(2),
		"spec.deployment.preStopSleepSeconds": int64(5),
		"spec.webhookAdded":                   "kept", // the dispatcher does not prune
	} {
		if got, _ := nested(t, d, path); !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", path, got, want)
		}
	}
}

// cause is a field error reduced to what a StatusCause shows.
type cause struct{ typ, field, message string }

func causes(errs field.ErrorList) []cause {
	var out []cause
	for _, e := range errs {
		out = append(out, cause{string(e.Type), e.Field, e.ErrorBody()})
	}
	return out
}

func TestValidate(t *testing.T) {
	ctx := context.Background()
	glance, backend := kindOf(t, "Glance"), kindOf(t, "GlanceBackend")
	cases := []struct {
		name string
		kind *schema.Kind
		old  map[string]any // nil: a create
		obj  map[string]any
		want []cause
	}{
		{name: "minimal glance", kind: glance, obj: manifest(t, minimalGlance)},
		{name: "minimal backend", kind: backend, obj: manifest(t, minimalBackend)},
		{name: "status is dropped on create", kind: glance, obj: manifest(t, minimalGlance, "status", "{observedGeneration: soon}")},
		{name: "namespace missing", kind: glance, obj: manifest(t, minimalGlance, "metadata.namespace", "-"),
			want: []cause{
				{"FieldValueRequired", "metadata.namespace", "Required value"},
				{"FieldValueInvalid", "<nil>", "Invalid value: null: " + skippedRules}, // Required blocks CEL
			}},
		{name: "root rule on metadata.name", kind: glance, obj: manifest(t, minimalGlance, "metadata.name", "glance.api"),
			want: []cause{{"FieldValueInvalid", "<nil>", `Invalid value: metadata.name must be a DNS-1035 label of at most 43 characters (lowercase letters, digits and '-', starting with a letter)`}}},
		{name: "reserved backend name: the name format only (admission judges the reservation)", kind: backend, obj: manifest(t, minimalBackend, "metadata.name", "glance_store"),
			want: []cause{
				{"FieldValueInvalid", "metadata.name", `Invalid value: "glance_store": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
			}},
		{name: "pattern", kind: glance, obj: manifest(t, minimalGlance, "spec.openStackRelease", `"2025.3"`),
			want: []cause{{"FieldValueInvalid", "spec.openStackRelease", `Invalid value: "2025.3": spec.openStackRelease in body should match '^\d{4}\.[12]$'`}}},
		{name: "enum keeps CEL from running", kind: glance, obj: manifest(t, minimalGlance, "spec.database.tls", "{mode: strict}"),
			want: []cause{
				{"FieldValueNotSupported", "spec.database.tls.mode", `Unsupported value: "strict": supported values: "disabled", "prefer", "require", "verify-ca", "verify-full"`},
				{"FieldValueInvalid", "<nil>", "Invalid value: null: " + skippedRules},
			}},
		{name: "list-map duplicate", kind: glance, obj: manifest(t, minimalGlance, "spec.middleware", "[{name: a, filterFactory: 'm:f'}, {name: a, filterFactory: 'm:g'}]"),
			want: []cause{{"FieldValueDuplicate", "spec.middleware[1]", `Duplicate value: {"name":"a"}`}}},
		{name: "CEL rule", kind: glance, obj: manifest(t, minimalGlance, "spec.database.host", "db.example.com"),
			want: []cause{{"FieldValueInvalid", "spec.database", `Invalid value: exactly one of database.clusterRef or database.host must be set`}}},
		{name: "transition rule: targetClusterRef renamed", kind: glance,
			old:  manifest(t, minimalGlance, "spec.targetClusterRef", "{name: region-two}"),
			obj:  manifest(t, minimalGlance, "spec.targetClusterRef", "{name: region-three}"),
			want: []cause{{"FieldValueInvalid", "spec.targetClusterRef.name", `Invalid value: "region-three": targetClusterRef.name is immutable`}}},
		{name: "transition rule: targetClusterRef added", kind: glance,
			old: manifest(t, minimalGlance), obj: manifest(t, minimalGlance, "spec.targetClusterRef", "{name: region-two}"),
			want: []cause{{"FieldValueInvalid", "spec", `Invalid value: targetClusterRef cannot be added or removed after creation`}}},
		{name: "update ratchets an unchanged invalid field", kind: glance,
			old: manifest(t, minimalGlance, "spec.database.database", "glance-db"),
			obj: manifest(t, minimalGlance, "spec.database.database", "glance-db", "spec.region", "RegionTwo")},
		{name: "update validates a changed invalid field", kind: glance,
			old:  manifest(t, minimalGlance, "spec.database.database", "glance-db"),
			obj:  manifest(t, minimalGlance, "spec.database.database", "glance-db2"),
			want: []cause{{"FieldValueInvalid", "spec.database.database", `Invalid value: "glance-db2": spec.database.database in body should match '^[A-Za-z0-9_]{1,64}$'`}}},
		{name: "update cannot rename", kind: backend,
			old: manifest(t, minimalBackend), obj: manifest(t, minimalBackend, "metadata.name", "s3-secondary"),
			// Once from the registry's common ObjectMeta checks, once from the
			// strategy's: the server lists it twice too.
			want: []cause{
				{"FieldValueInvalid", "metadata.name", `Invalid value: "s3-secondary": field is immutable`},
				{"FieldValueInvalid", "metadata.name", `Invalid value: "s3-secondary": field is immutable`},
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := decode(t, tc.kind, tc.obj)
			var old map[string]any
			if tc.old != nil {
				old = decode(t, tc.kind, tc.old)
			}
			got := causes(tc.kind.Validate(ctx, obj, old))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("causes\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestInvalidIsTheServersError(t *testing.T) {
	k := kindOf(t, "Glance")
	obj := decode(t, k, manifest(t, minimalGlance, "spec.database.port", "0"))
	err := k.Invalid("glance", k.Validate(context.Background(), obj, nil))
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want Invalid, got %v", err)
	}
	want := `Glance.glance.openstack.c5c3.io "glance" is invalid: spec.database.port: Invalid value: 0: spec.database.port in body should be greater than or equal to 1`
	if err.Error() != want {
		t.Errorf("got  %s\nwant %s", err, want)
	}
}
