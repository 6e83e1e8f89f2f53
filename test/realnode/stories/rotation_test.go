package stories

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/realnode"
)

// rotatedServiceUser, rotatedServicePassword and rotatedDBPassword are the
// credentials after the rotation.
const (
	rotatedServiceUser     = "glance-b"
	rotatedServicePassword = "rotated/service-password$1"
	rotatedDBPassword      = "rotated:db/password#2"
)

// rotate: the service user's credential rotates, then the DB password, and
// each time External Secrets brings the Secret up to date: each rotation
// rolls the pods once, the new pods authenticate with the new credentials,
// and the scene's traffic sees no request fail during either roll.
// The two Secrets change one after the other, as two ExternalSecrets
// refresh on their own: one roll for both would hold only when the operator
// happens to read both changes in one pass.
//
// Keystone holds one password per user and revokes the user's tokens with
// it, so a source that changed the password of the user the pods run as
// would fail the outgoing pods' token validations until the roll replaced
// them. The source alternates two Keystone users instead: it sets the new
// password on the second one, then switches the Secret's username and
// password to it, and both stay valid through the roll. The DB password
// changes in place at the source; the operator rotates onto its second
// database user and drops the first after the roll.
func (s *scene) rotate(t *testing.T) {
	start := time.Now()
	s.rotateOne(t, "service user", realnode.ServiceSecretName, map[string]string{"username": rotatedServiceUser, "password": rotatedServicePassword}, "glance.c5c3.io/authtoken-hash", func() {
		s.setKeystoneUser(t, rotatedServiceUser, rotatedServicePassword, v1alpha1.DefaultServiceProjectName, "service", "admin")
	})
	rolled := time.Now()
	// The stand-in for mariadb-operator makes the second user in MariaDB.
	s.rotateOne(t, "DB", realnode.DBSecretName, map[string]string{"username": "glance", "password": rotatedDBPassword}, "glance.c5c3.io/db-connection-hash", func() {})
	// The pods connect as the other database user now; the first is
	// dropped (the stand-in releases its User once DROP USER is done).
	s.waitUserDropped(t, realnode.GlanceName)

	// Keystone's audit: the new pods authenticate as the second service
	// user, and Keystone, which knows only its new password, accepts every
	// attempt; once the old pods are gone, nothing authenticates as the
	// first.
	var rotated int
	for _, a := range s.keystoneAttempts(t, rotatedServiceUser, start) {
		if a.OK {
			rotated++
		} else {
			t.Errorf("Keystone refused an authentication of the second service user at %s", a.At.Format(time.RFC3339Nano))
		}
	}
	if rotated == 0 {
		t.Error("no Glance pod authenticated as the second service user during the roll")
	}
	if n := len(s.keystoneAttempts(t, v1alpha1.DefaultServiceUsername, rolled)); n > 0 {
		t.Errorf("after the roll the first service user authenticated %d times", n)
	}
	rt := s.uploadFromPod(t, "after-rotation", s.APIURL())
	if obj, ok := s.object(t, rt.ID); !ok || obj.SHA256 != rt.SHA256 {
		t.Errorf("after the rotation, the upload's object: present %v, %+v; want sha256 %s", ok, obj, rt.SHA256)
	}
}

// rotateOne rotates one credential under the scene's traffic: source
// changes it where it is checked, then the Secret secret gets data. The
// pods roll once, the pod template's annotation changes, and no request
// fails during the roll.
func (s *scene) rotateOne(t *testing.T, what, secret string, data map[string]string, annotation string, source func()) {
	t.Helper()
	tr := s.traffic(t)
	before := s.deployment(t)
	start := time.Now()
	source()
	obj := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: s.Namespace}, StringData: data}
	if _, err := env.CS.CoreV1().Secrets(s.Namespace).Update(t.Context(), obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rolled := s.waitRollout(t, before.Generation)
	done := time.Now()
	tr.report(t, what+" rotation roll", start, done, true)
	// Once the roll is over, nothing holds the old password: every request
	// is served.
	tr.served(t, "traffic after the "+what+" rotation roll", done)
	if n := s.replicaSetsSince(t, start); n != 1 {
		t.Errorf("the %s rotation made %d new ReplicaSets, want the pods to roll once", what, n)
	}
	if before.Spec.Template.Annotations[annotation] == rolled.Spec.Template.Annotations[annotation] {
		t.Errorf("the %s rotation left the pod template's %s as it was", what, annotation)
	}
}

// waitRollout waits until the Glance's Deployment has a generation after
// generation, fully rolled out, and the Glance is Ready again.
func (s *scene) waitRollout(t *testing.T, generation int64) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	if err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		if d, err = env.CS.AppsV1().Deployments(s.Namespace).Get(ctx, realnode.GlanceName, metav1.GetOptions{}); err != nil {
			return false, err
		}
		want := *d.Spec.Replicas
		return d.Generation > generation && d.Status.ObservedGeneration == d.Generation &&
			d.Status.UpdatedReplicas == want && d.Status.Replicas == want && d.Status.AvailableReplicas == want, nil
	}); err != nil {
		t.Fatalf("the Glance Deployment did not roll out: %v%s", err, env.DeploymentPods(context.Background(), s.Namespace, realnode.GlanceName))
	}
	s.waitReady(t, 0)
	return d
}

// replicaSetsSince counts the Glance Deployment's ReplicaSets created
// since t0.
func (s *scene) replicaSetsSince(t *testing.T, t0 time.Time) int {
	t.Helper()
	list, err := env.CS.AppsV1().ReplicaSets(s.Namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, rs := range list.Items {
		if metav1.IsControlledBy(&rs, s.deployment(t)) && !rs.CreationTimestamp.Time.Before(t0.Truncate(time.Second)) {
			n++
		}
	}
	return n
}

// waitUserDropped waits until the mariadb-operator User name is gone.
func (s *scene) waitUserDropped(t *testing.T, name string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(render.UserGVK)
	if err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := cl.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, u)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}); err != nil {
		t.Fatalf("the database user %s was not dropped after the roll: %v", name, err)
	}
}
