package render

import (
	"cmp"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/c5c3/glance-operator/api/v1alpha1"
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

// DatabaseObjects are the mariadb-operator Database, User and Grant of a
// Glance with spec.database.clusterRef, named after it; username is its
// database user. With Dynamic credentials the secret store issues the
// users, so only the Database is the operator's.
func DatabaseObjects(g *v1alpha1.Glance, username string) []*unstructured.Unstructured {
	ref := map[string]any{"name": g.Spec.Database.ClusterRef.Name}
	obj := func(gvk schema.GroupVersionKind, spec map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(g.Namespace)
		u.SetName(g.Name)
		u.SetLabels(ChildLabels(g.Name, ComponentDatabase))
		return u
	}
	db := g.Spec.Database.Database
	objs := []*unstructured.Unstructured{obj(DatabaseGVK, map[string]any{
		"mariaDbRef": ref, "name": db, "characterSet": "utf8", "collate": "utf8_general_ci",
	})}
	if g.Spec.Database.CredentialsMode == v1alpha1.CredentialsModeDynamic {
		return objs
	}
	secret := g.Spec.Database.SecretRef
	return append(objs,
		obj(UserGVK, map[string]any{
			"mariaDbRef": ref, "name": username, "host": "%",
			"passwordSecretKeyRef": map[string]any{"name": secret.Name, "key": cmp.Or(secret.Key, v1alpha1.DefaultDatabasePasswordKey)},
		}),
		obj(GrantGVK, map[string]any{
			"mariaDbRef": ref, "privileges": []any{"ALL PRIVILEGES"}, "database": db, "table": "*",
			"username": username, "host": "%",
		}),
	)
}
