package render

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/database"
)

func TestDatabaseObjects(t *testing.T) {
	g := minimalGlance()
	g.Spec.Database.ClusterRef = &v1alpha1.LocalObjectReference{Name: "mariadb"}
	g.Spec.Database.Database = "glance"

	for _, c := range []struct {
		slot           database.Slot
		name, user     string
		passwordSecret string
	}{
		{database.SlotA, g.Name, "glance-user", g.Name + "-db-user-a"},
		{database.SlotB, g.Name + ".b", "glance-user.b", g.Name + "-db-user-b"},
	} {
		objs := DatabaseObjects(g, c.slot, c.slot.Username("glance-user"))
		var kinds []string
		for _, o := range objs {
			kinds = append(kinds, o.GetKind())
			want := c.name
			if o.GetKind() == "Database" {
				want = g.Name
			}
			if o.GetName() != want || o.GetNamespace() != g.Namespace {
				t.Errorf("slot %s: %s %s/%s, want %s/%s", c.slot, o.GetKind(), o.GetNamespace(), o.GetName(), g.Namespace, want)
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
		ref, _, _ := unstructured.NestedStringMap(objs[1].Object, "spec", "passwordSecretKeyRef")
		if ref["name"] != c.passwordSecret || ref["key"] != DatabaseUserPasswordKey {
			t.Errorf("slot %s: the User reads its password from %v, want the slot's Secret %s", c.slot, ref, c.passwordSecret)
		}
		for _, o := range objs[1:] {
			if name, _, _ := unstructured.NestedString(o.Object, "spec", map[string]string{"User": "name", "Grant": "username"}[o.GetKind()]); name != c.user {
				t.Errorf("slot %s: %s names user %q, want %s", c.slot, o.GetKind(), name, c.user)
			}
		}
	}

	// The secret store issues dynamic users: only the Database is the
	// operator's.
	g.Spec.Database.CredentialsMode = v1alpha1.CredentialsModeDynamic
	if objs := DatabaseObjects(g, database.SlotA, "u"); len(objs) != 1 || objs[0].GetKind() != "Database" {
		t.Errorf("Dynamic credentials give %d objects, want the Database alone", len(objs))
	}
}
