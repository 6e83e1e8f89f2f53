package database

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/fixtures"
)

// object reads the object name of gvk; nil when there is none.
func (s *scene) object(gvk schema.GroupVersionKind, name string) *unstructured.Unstructured {
	s.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: name}, u)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		s.t.Fatal(err)
	}
	return u
}

// neighbour creates a second managed Glance, name, on the scene's MariaDB
// with its own credentials (database user user), and plays the
// mariadb-operator for its database objects.
func (s *scene) neighbour(name, user string) {
	s.t.Helper()
	s.Secret(name+"-db", map[string]string{"username": user, "password": "neighbour"})
	g := fixtures.NewGlance(s.NS, name, "2025.2")
	g.Spec.SecretStoreRef = &v1alpha1.SecretStoreReference{Kind: v1alpha1.ClusterSecretStoreKind, Name: s.Store}
	g.Spec.Database.SecretRef.Name = name + "-db"
	s.Create(g)
	s.provisionObjects(name, dbGVKs...)
}

// setDBPassword changes the password in the Glance's credentials Secret.
func (s *scene) setDBPassword(pw string) {
	s.t.Helper()
	var sec corev1.Secret
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: "glance-db"}, &sec); err != nil {
		s.t.Fatal(err)
	}
	sec.Data["password"] = []byte(pw)
	if err := cl.Update(context.Background(), &sec); err != nil {
		s.t.Fatal(err)
	}
}

// Glances "glance" and "glance-b" in one namespace, on one MariaDB, whose
// users are "glance" and "glance-b". Before, slot b of "glance" was User and
// Grant "glance-b" with SQL user "glance-b": the neighbour's own, which
// deleting "glance" deleted.
func (s *scene) neighbours() map[schema.GroupVersionKind]*unstructured.Unstructured {
	s.t.Helper()
	s.install()
	s.neighbour("glance-b", "glance-b")
	theirs := map[schema.GroupVersionKind]*unstructured.Unstructured{}
	for _, gvk := range []schema.GroupVersionKind{render.UserGVK, render.GrantGVK} {
		theirs[gvk] = s.object(gvk, "glance-b")
	}
	return theirs
}

// untouched checks that the neighbour's User and Grant are as they were.
func (s *scene) untouched(theirs map[schema.GroupVersionKind]*unstructured.Unstructured, what string) {
	s.t.Helper()
	for gvk, before := range theirs {
		after := s.object(gvk, "glance-b")
		switch {
		case after == nil:
			s.t.Errorf("%s deleted the neighbour's %s glance-b", what, gvk.Kind)
		case after.GetDeletionTimestamp() != nil:
			s.t.Errorf("%s deletes the neighbour's %s glance-b", what, gvk.Kind)
		case after.GetResourceVersion() != before.GetResourceVersion():
			s.t.Errorf("%s changed the neighbour's %s glance-b", what, gvk.Kind)
		}
	}
}

func TestDeletingAGlanceLeavesItsNeighboursUser(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	theirs := s.neighbours()
	if err := cl.Delete(context.Background(), s.ReadGlance()); err != nil {
		t.Fatal(err)
	}
	// The finalizer runs at once; the neighbour recreates what it lost,
	// so look while it does.
	s.Consistently("the neighbour's User and Grant stay while Glance glance goes", 3*time.Second, func() bool {
		for gvk, before := range theirs {
			after := s.object(gvk, "glance-b")
			if after == nil || after.GetDeletionTimestamp() != nil || after.GetUID() != before.GetUID() {
				return false
			}
		}
		return true
	})
	s.deleted("the Glance", &v1alpha1.Glance{})
	s.untouched(theirs, "deleting Glance glance")
}

// A rotation beside the neighbour makes the second user under names
// neither Glance shares: User and Grant "glance.b", SQL user "glance.b".
func TestRotationBesideANeighbour(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	theirs := s.neighbours()
	s.setDBPassword("second")
	s.provisionUser("glance.b")
	s.Eventually("the DSN names slot b", func() bool {
		var conn corev1.Secret
		return cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: "glance-db-connection"}, &conn) == nil &&
			string(conn.Data["slot"]) == "b" && strings.Contains(string(conn.Data["connection"]), "//glance.b:second@")
	}, nil)
	if spec, _, _ := unstructured.NestedString(s.object(render.UserGVK, "glance.b").Object, "spec", "name"); spec != "glance.b" {
		t.Errorf("slot b's User makes SQL user %q, want glance.b", spec)
	}
	s.rollOutChange()
	s.Eventually("slot a dropped after the roll", func() bool { return s.object(render.UserGVK, "glance") == nil }, nil)
	s.untouched(theirs, "the rotation of Glance glance")
}

// A User of the name slot b needs that is not the Glance's (made by hand
// here) holds the rotation back: DatabaseReady says whose it is, a Warning
// names it once, the DSN stays slot a's, and the User is never written or
// deleted, not even when the Glance goes.
func TestForeignDatabaseUserIsReportedNotAdopted(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	foreign := &unstructured.Unstructured{}
	foreign.SetGroupVersionKind(render.UserGVK)
	foreign.SetNamespace(s.NS)
	foreign.SetName("glance.b")
	foreign.Object["spec"] = map[string]any{"mariaDbRef": map[string]any{"name": "other"}, "name": "someone"}
	s.Create(foreign)
	version := s.object(render.UserGVK, "glance.b").GetResourceVersion()

	s.setDBPassword("second")
	c := s.ConditionSaying(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonDatabaseObjectConflict, `User "glance.b"`)
	if !strings.Contains(c.Message, "made outside the operator") {
		t.Errorf("DatabaseReady does not say the User has no controller: %s", c.Message)
	}
	s.ConditionSaying(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAllReady, v1alpha1.ReasonDatabaseObjectConflict)
	// A few passes: the poll, and a change that wakes the Glance.
	s.UpdateGlance(func(g *v1alpha1.Glance) { metav1.SetMetaDataLabel(&g.ObjectMeta, "wake", "1") })
	s.Consistently("the DSN stays slot a's and the User is left alone", 3*time.Second, func() bool {
		var conn corev1.Secret
		return cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: "glance-db-connection"}, &conn) == nil &&
			string(conn.Data["slot"]) == "a" && s.object(render.UserGVK, "glance.b").GetResourceVersion() == version
	})
	if n := len(s.warningsOf(v1alpha1.ReasonDatabaseObjectConflict)); n != 1 {
		t.Errorf("%d %s Warnings, want one for one cause", n, v1alpha1.ReasonDatabaseObjectConflict)
	}

	if err := cl.Delete(context.Background(), s.ReadGlance()); err != nil {
		t.Fatal(err)
	}
	s.deleted("the Glance", &v1alpha1.Glance{})
	if u := s.object(render.UserGVK, "glance.b"); u == nil || u.GetDeletionTimestamp() != nil {
		t.Error("deleting the Glance deleted a User it never owned")
	}
}

// A Glance whose credentials name the SQL user another Glance's User makes
// on the same MariaDB makes no User of its own and says whose it is.
func TestSharedSQLUserIsRefused(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	s.Secret("late-db", map[string]string{"username": "glance", "password": "late"})
	g := fixtures.NewGlance(s.NS, "late", "2025.2")
	g.Spec.SecretStoreRef = &v1alpha1.SecretStoreReference{Kind: v1alpha1.ClusterSecretStoreKind, Name: s.Store}
	g.Spec.Database.SecretRef.Name = "late-db"
	s.Create(g)
	s.Eventually(`Glance late refuses SQL user "glance"`, func() bool {
		var late v1alpha1.Glance
		if cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: "late"}, &late) != nil {
			return false
		}
		for _, c := range late.Status.Conditions {
			if c.Type == v1alpha1.ConditionDatabaseReady && c.Reason == v1alpha1.ReasonDatabaseObjectConflict &&
				strings.Contains(c.Message, `User "glance" of Glance "glance" makes SQL user "glance"`) {
				return true
			}
		}
		return false
	}, nil)
	if s.object(render.UserGVK, "late") != nil {
		t.Error("Glance late made a User for a SQL user another Glance makes")
	}
	s.Condition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady)
}

// A user that ends in slot b's suffix could be another Glance's second
// user: it is refused by its Secret's key.
func TestUsernameOfASecondUserIsRefused(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.Secret("glance-db", map[string]string{"username": "glance.b", "password": "pw"})
	s.Secret("glance-service-user", map[string]string{"password": "service-password"})
	s.DefaultBackend("primary")
	s.MariaDB(true)
	s.Glance()
	s.ConditionSaying(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonConfigError, `key "username" of Secret "glance-db": "glance.b" ends in ".b"`)
	if s.object(render.UserGVK, "glance") != nil {
		t.Error("a User was made for a refused user name")
	}
}

// A new user name in the credentials Secret is a rotation like a new
// password: the live User keeps the user the pods connect as, the other
// slot is made with the new one, and the old user is dropped after the
// roll. Before, the live User was rewritten to the new name at once while
// the DSN kept the old one, whose account was never dropped.
func TestUsernameChangeIsARotation(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	var sec corev1.Secret
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: "glance-db"}, &sec); err != nil {
		t.Fatal(err)
	}
	sec.Data["username"] = []byte("glance2")
	if err := cl.Update(context.Background(), &sec); err != nil {
		t.Fatal(err)
	}
	s.Consistently("the live User keeps the user the pods connect as", 3*time.Second, func() bool {
		name, _, _ := unstructured.NestedString(s.object(render.UserGVK, "glance").Object, "spec", "name")
		return name == "glance"
	})
	s.Eventually("slot b's User with the new user", func() bool {
		u := s.object(render.UserGVK, "glance.b")
		if u == nil {
			return false
		}
		name, _, _ := unstructured.NestedString(u.Object, "spec", "name")
		return name == "glance2.b"
	}, nil)
	s.provisionUser("glance.b")
	s.Eventually("the DSN names the new user", func() bool {
		var conn corev1.Secret
		return cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: "glance-db-connection"}, &conn) == nil &&
			string(conn.Data["slot"]) == "b" && strings.Contains(string(conn.Data["connection"]), "//glance2.b:pw@")
	}, nil)
	s.rollOutChange()
	s.Eventually("the old user dropped after the roll", func() bool { return s.object(render.UserGVK, "glance") == nil }, nil)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionTrue, v1alpha1.ReasonDatabaseSynced)
}

// A rotation that waits says what for, on DatabaseReady and in Ready's
// message, with one event as it starts waiting: first for the new user to be
// Ready, then for the pods still connecting as the old one.
func TestRotationSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	s.setDBPassword("second")
	c := s.ConditionSaying(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonDatabaseUserRotating, "waiting for database user slot b to be Ready")
	s.ConditionSaying(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAllReady, c.Message)
	s.provisionUser("glance.b")
	s.ConditionSaying(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonDatabaseUserRotating,
		"database user glance (slot a) is dropped once no pod or Job connects as it: Deployment glance")
	s.rollOutChange()
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionTrue, v1alpha1.ReasonDatabaseSynced)
	if n := len(s.eventsOf(v1alpha1.ReasonDatabaseUserRotating, "")); n != 1 {
		t.Errorf("%d DatabaseUserRotating events for one rotation, want 1", n)
	}
}

// A purge run started on the old user's DSN keeps the old user until it
// ends, as a schema Job does: dropping it would cut the run's connection.
func TestPurgeRunHoldsTheOldUsersDrop(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	s.setDBPassword("second")
	s.provisionUser("glance.b")
	s.Eventually("the DSN names slot b", func() bool {
		var conn corev1.Secret
		return cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: "glance-db-connection"}, &conn) == nil && string(conn.Data["slot"]) == "b"
	}, nil)
	run, done := s.startPurgeJob("glance-db-purge-1", time.Now())
	s.rollOutChange()
	s.Consistently("slot a's user stays while a purge run may connect as it", 3*time.Second, func() bool {
		return s.object(render.UserGVK, "glance") != nil
	})
	s.FinishJob(run.Name, true)
	done()
	s.Eventually("slot a dropped once the purge run ended", func() bool { return s.object(render.UserGVK, "glance") == nil }, nil)
}
