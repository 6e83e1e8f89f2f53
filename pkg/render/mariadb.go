package render

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/database"
)

// The mariadb-operator kinds a managed database is made of.
var (
	MariaDBGVK  = schema.GroupVersionKind{Group: "k8s.mariadb.com", Version: "v1alpha1", Kind: "MariaDB"}
	DatabaseGVK = schema.GroupVersionKind{Group: "k8s.mariadb.com", Version: "v1alpha1", Kind: "Database"}
	UserGVK     = schema.GroupVersionKind{Group: "k8s.mariadb.com", Version: "v1alpha1", Kind: "User"}
	GrantGVK    = schema.GroupVersionKind{Group: "k8s.mariadb.com", Version: "v1alpha1", Kind: "Grant"}
)

// ComponentDatabase is the component label of the database children.
const ComponentDatabase = "database"

// DatabaseObjects are the mariadb-operator Database of a Glance with
// spec.database.clusterRef, named after it, and the User and Grant of the
// database user slot the DSN names (see database.Slot), whose SQL user is
// user. With Dynamic credentials the secret store issues the users, so
// only the Database is the operator's.
func DatabaseObjects(g *v1alpha1.Glance, slot database.Slot, user string) []*unstructured.Unstructured {
	db := databaseChild(g, DatabaseGVK, g.Name, map[string]any{
		"mariaDbRef": mariaDBRef(g), "name": g.Spec.Database.Database, "characterSet": "utf8", "collate": "utf8_general_ci",
	})
	if g.Spec.Database.CredentialsMode == v1alpha1.CredentialsModeDynamic {
		return []*unstructured.Unstructured{db}
	}
	return append([]*unstructured.Unstructured{db}, DatabaseUserObjects(g, slot, user)...)
}

// DatabaseUserObjects are the User and Grant of a database user slot whose
// SQL user is user (slot.Username of the credentials' user when the slot is
// made): slot A's are named after the Glance, slot B's with
// database.SlotBSuffix appended, a name no Glance's slot A can have; its
// password is the slot's password Secret's.
func DatabaseUserObjects(g *v1alpha1.Glance, slot database.Slot, user string) []*unstructured.Unstructured {
	name := DatabaseUserObjectName(g.Name, slot)
	return []*unstructured.Unstructured{
		databaseChild(g, UserGVK, name, map[string]any{
			"mariaDbRef": mariaDBRef(g), "name": user, "host": "%",
			"passwordSecretKeyRef": map[string]any{"name": DatabaseUserSecretName(g.Name, slot), "key": DatabaseUserPasswordKey},
		}),
		databaseChild(g, GrantGVK, name, map[string]any{
			"mariaDbRef": mariaDBRef(g), "privileges": []any{"ALL PRIVILEGES"}, "database": g.Spec.Database.Database, "table": "*",
			"username": user, "host": "%",
		}),
	}
}

// DatabaseUserObjectName names a slot's User and Grant.
func DatabaseUserObjectName(glanceName string, slot database.Slot) string {
	if slot == database.SlotB {
		return glanceName + database.SlotBSuffix
	}
	return glanceName
}

// DatabaseUserSecretName names the operator's Secret of a slot's user and
// password, which its User reads: the credentials Secret's password is
// copied there only when the slot's user is made, so a rotation never
// changes a user the pods connect as.
func DatabaseUserSecretName(glanceName string, slot database.Slot) string {
	return glanceName + "-db-user-" + string(slot)
}

// The keys of a slot's Secret.
const (
	DatabaseUserUsernameKey = "username"
	DatabaseUserPasswordKey = "password"
)

func mariaDBRef(g *v1alpha1.Glance) map[string]any {
	return map[string]any{"name": g.Spec.Database.ClusterRef.Name}
}

func databaseChild(g *v1alpha1.Glance, gvk schema.GroupVersionKind, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(g.Namespace)
	u.SetName(name)
	u.SetLabels(ChildLabels(g.Name, ComponentDatabase))
	return u
}
