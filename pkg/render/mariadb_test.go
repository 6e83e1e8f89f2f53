package render

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

func TestDatabaseObjects(t *testing.T) {
	g := minimalGlance()
	g.Spec.Database.ClusterRef = &v1alpha1.LocalObjectReference{Name: "mariadb"}
	g.Spec.Database.Database = "glance"

	objs := DatabaseObjects(g, "glance-user")
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
		if o.GetName() != g.Name || o.GetNamespace() != g.Namespace {
			t.Errorf("%s %s/%s, want it named after the Glance %s/%s", o.GetKind(), o.GetNamespace(), o.GetName(), g.Namespace, g.Name)
		}
		if o.GetLabels()[LabelComponent] != ComponentDatabase || o.GetLabels()[LabelInstance] != g.Name {
			t.Errorf("%s labels %v", o.GetKind(), o.GetLabels())
		}
		if ref, _, _ := unstructured.NestedString(o.Object, "spec", "mariaDbRef", "name"); ref != "mariadb" {
			t.Errorf("%s mariaDbRef %q, want mariadb", o.GetKind(), ref)
		}
	}
	if len(objs) != 3 || kinds[0] != "Database" || kinds[1] != "User" || kinds[2] != "Grant" {
		t.Fatalf("kinds %v, want Database, User, Grant", kinds)
	}
	if key, _, _ := unstructured.NestedString(objs[1].Object, "spec", "passwordSecretKeyRef", "key"); key != v1alpha1.DefaultDatabasePasswordKey {
		t.Errorf("the User reads password key %q, want the default %q", key, v1alpha1.DefaultDatabasePasswordKey)
	}
	for _, o := range objs[1:] {
		if name, _, _ := unstructured.NestedString(o.Object, "spec", map[string]string{"User": "name", "Grant": "username"}[o.GetKind()]); name != "glance-user" {
			t.Errorf("%s names user %q, want glance-user", o.GetKind(), name)
		}
	}

	g.Spec.Database.SecretRef.Key = "pw"
	if key, _, _ := unstructured.NestedString(DatabaseObjects(g, "u")[1].Object, "spec", "passwordSecretKeyRef", "key"); key != "pw" {
		t.Errorf("the User reads password key %q, want the spec's pw", key)
	}

	// The secret store issues dynamic users: only the Database is the
	// operator's.
	g.Spec.Database.CredentialsMode = v1alpha1.CredentialsModeDynamic
	if objs := DatabaseObjects(g, "u"); len(objs) != 1 || objs[0].GetKind() != "Database" {
		t.Errorf("Dynamic credentials give %d objects, want the Database alone", len(objs))
	}
}
