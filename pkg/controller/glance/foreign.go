package glance

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
)

// foreignObjectError is a database object the Glance needs, or a Secret of
// one, that another owner holds: the Glance never adopts, changes or
// deletes it, since its password or grants are another tenant's access.
type foreignObjectError struct {
	kind, name string
	// owner says who holds it, for the message.
	owner string
	// sqlUser is set when the object is named otherwise but makes the same
	// SQL user as the Glance on its MariaDB.
	sqlUser string
}

func (e *foreignObjectError) Error() string {
	if e.sqlUser != "" {
		return fmt.Sprintf("%s %q of %s makes SQL user %q on the same MariaDB as this Glance: two owners of one user would overwrite each other's password; give this Glance another user in its credentials Secret",
			e.kind, e.name, e.owner, e.sqlUser)
	}
	return fmt.Sprintf("%s %q is not this Glance's but %s's: the operator neither adopts, changes nor deletes it; delete or rename it, or this Glance",
		e.kind, e.name, e.owner)
}

// ownerOf names who holds obj, for a message: its controller, its owner
// labels on a target cluster, or nobody.
func ownerOf(obj client.Object) string {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		return fmt.Sprintf("%s %q", ref.Kind, ref.Name)
	}
	if key, ok := targetcluster.OwnerOf(obj.GetLabels(), "Glance"); ok {
		return fmt.Sprintf("Glance %q", key.String())
	}
	return "no controller (made outside the operator)"
}

// refuseForeign returns a foreignObjectError when obj, of kind, is not g's.
func refuseForeign(obj client.Object, kind string, g *v1alpha1.Glance) error {
	if ownedBy(obj, g) {
		return nil
	}
	return &foreignObjectError{kind: kind, name: obj.GetName(), owner: ownerOf(obj)}
}

// exclusiveChild reports whether a child is one the Glance must never adopt:
// the database objects and their Secrets, which carry a user's access.
func exclusiveChild(obj client.Object) bool {
	return obj.GetLabels()[render.LabelComponent] == componentDatabase
}

// userSQLUserIndex is a User's IndexUserSQLUser value.
func userSQLUserIndex(o client.Object) []string {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	return []string{sqlUserKey(u)}
}

// sqlUserKey says which SQL user a User makes on which MariaDB:
// "<namespace>/<MariaDB>/<user>".
func sqlUserKey(u *unstructured.Unstructured) string {
	mdb, _, _ := unstructured.NestedString(u.Object, "spec", "mariaDbRef", "name")
	ns, _, _ := unstructured.NestedString(u.Object, "spec", "mariaDbRef", "namespace")
	name, _, _ := unstructured.NestedString(u.Object, "spec", "name")
	if ns == "" {
		ns = u.GetNamespace()
	}
	if name == "" {
		// mariadb-operator's default: the object's name.
		name = u.GetName()
	}
	return ns + "/" + mdb + "/" + name
}

// refuseSharedSQLUsers returns a foreignObjectError when a User in g's
// namespace that is not g's makes one of users on g's MariaDB: another
// Glance whose credentials name the same user, say. Users are read from the
// cache, by IndexUserSQLUser where the cache has it.
func refuseSharedSQLUsers(ctx context.Context, p *pass, g *v1alpha1.Glance, users ...string) error {
	for _, user := range users {
		key := g.Namespace + "/" + g.Spec.Database.ClusterRef.Name + "/" + user
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(render.UserGVK.GroupVersion().WithKind(render.UserGVK.Kind + "List"))
		opts := []client.ListOption{client.InNamespace(g.Namespace)}
		if p.cluster.IsManagement() && p.r != nil && p.r.usersIndexed {
			opts = append(opts, client.MatchingFields{v1alpha1.IndexUserSQLUser: key})
		}
		if err := p.cluster.Client.List(ctx, list, opts...); err != nil {
			if meta.IsNoMatchError(err) {
				return nil
			}
			return fmt.Errorf("list Users in %s: %w", g.Namespace, err)
		}
		for i := range list.Items {
			u := &list.Items[i]
			if sqlUserKey(u) == key && !ownedBy(u, g) && u.GetDeletionTimestamp() == nil {
				return &foreignObjectError{kind: render.UserGVK.Kind, name: u.GetName(), owner: ownerOf(u), sqlUser: user}
			}
		}
	}
	return nil
}

// databaseConflict reports a foreignObjectError in err, if it holds one, on
// DatabaseReady with a Warning event once per cause, and ends the pass to
// look again later; handled says whether it did. The Glance keeps what it
// runs with.
func databaseConflict(ctx context.Context, g *v1alpha1.Glance, p *pass, err error) (result ctrl.Result, handled bool) {
	var foreign *foreignObjectError
	if !errors.As(err, &foreign) {
		return ctrl.Result{}, false
	}
	msg := foreign.Error()
	prev := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionDatabaseReady)
	if prev == nil || prev.Reason != v1alpha1.ReasonDatabaseObjectConflict || prev.Message != msg {
		announce(ctx, p, g, nil, corev1.EventTypeWarning, v1alpha1.ReasonDatabaseObjectConflict, "Refuse", "%s", msg)
	}
	pipeline.SetCondition(g, v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonDatabaseObjectConflict, msg)
	return ctrl.Result{RequeueAfter: DatabasePollInterval}, true
}
