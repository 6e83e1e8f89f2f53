package stories

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/realnode"
)

// rotatedServicePassword and rotatedDBPassword are the passwords after the
// rotation.
const (
	rotatedServicePassword = "rotated/service-password$1"
	rotatedDBPassword      = "rotated:db/password#2"
)

// rotate: the service user's password rotates in Keystone, then the DB
// password in MariaDB, and each time External Secrets brings the Secret up
// to date: each rotation rolls the pods once, and the new pods authenticate
// with the new passwords.
// The two Secrets change one after the other, as two ExternalSecrets
// refresh on their own: one roll for both would hold only when the operator
// happens to read both changes in one pass.
//
// Both rolls report their failed requests rather than fail on them: each
// credential has one password at its source, and once the source takes the
// new one the outgoing pods hold a refused one until the roll replaces them.
// Keystone revokes the service user's tokens with its password, so an
// outgoing pod serves only the user tokens it validated before; MariaDB
// refuses an outgoing pod's new connections. On an idle node the roll is
// quick and none fail; on a loaded one some do. Zero needs two credentials
// valid at once: a second database user the operator rotates onto, and a
// second service user (or application credential) at the source.
func (s *scene) rotate(t *testing.T) {
	start := time.Now()
	// The source changes first; the Secret follows, as External Secrets
	// syncs it.
	s.rotateOne(t, "service user", realnode.ServiceSecretName, map[string]string{"password": rotatedServicePassword}, "glance.c5c3.io/authtoken-hash", func() {
		s.setKeystoneUser(t, v1alpha1.DefaultServiceUsername, rotatedServicePassword, v1alpha1.DefaultServiceProjectName, "service", "admin")
	})
	rolled := time.Now()
	// The stand-in for mariadb-operator changes the password in MariaDB
	// when the Secret changes.
	s.rotateOne(t, "DB", realnode.DBSecretName, map[string]string{"username": "glance", "password": rotatedDBPassword}, "glance.c5c3.io/db-connection-hash", func() {})

	// The new pods authenticate the service user with the new password;
	// once the old pods are gone, nothing tries the old one.
	var rotated int
	for _, a := range s.keystoneAttempts(t, v1alpha1.DefaultServiceUsername, start) {
		switch {
		case a.OK && a.Password == rotatedServicePassword:
			rotated++
		case !a.At.Before(rolled):
			t.Errorf("after the roll the service user authenticated with the old or a wrong password (accepted %v)", a.OK)
		}
	}
	if rotated == 0 {
		t.Error("no Glance pod authenticated its service user with the new password during the roll")
	}
	rt := s.uploadFromPod(t, "after-rotation", s.APIURL())
	if obj, ok := s.object(t, rt.ID); !ok || obj.SHA256 != rt.SHA256 {
		t.Errorf("after the rotation, the upload's object: present %v, %+v; want sha256 %s", ok, obj, rt.SHA256)
	}
}

// rotateOne rotates one password under the scene's traffic: source changes
// it where it is checked, then the Secret secret gets data. The pods roll
// once and the pod template's annotation changes; the failed requests are
// reported (see rotate).
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
	tr.report(t, what+" password rotation roll", start, done, false)
	// Once the roll is over, nothing holds the old password: every request
	// is served.
	tr.served(t, "traffic after the "+what+" password rotation roll", done)
	if n := s.replicaSetsSince(t, start); n != 1 {
		t.Errorf("the %s password rotation made %d new ReplicaSets, want the pods to roll once", what, n)
	}
	if before.Spec.Template.Annotations[annotation] == rolled.Spec.Template.Annotations[annotation] {
		t.Errorf("the %s password rotation left the pod template's %s as it was", what, annotation)
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
