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

// TestRotation: the service user's password rotates in Keystone and the DB
// password in MariaDB, and External Secrets brings both Secrets up to date;
// the pods roll once, the new pods authenticate with the new passwords,
// and a client sending requests through the Service sees none fail.
func TestRotation(t *testing.T) {
	s := newScene(t, "2026.1", nil)
	tr := s.startTraffic(t)
	before := s.deployment(t)
	start := time.Now()

	// The source changes first; the Secrets follow, as External Secrets
	// syncs them.
	s.setKeystoneUser(t, v1alpha1.DefaultServiceUsername, rotatedServicePassword, v1alpha1.DefaultServiceProjectName, "service", "admin")
	for name, data := range map[string]map[string]string{
		"glance-service-user": {"password": rotatedServicePassword},
		"glance-db":           {"username": "glance", "password": rotatedDBPassword},
	} {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace}, StringData: data}
		if _, err := env.CS.CoreV1().Secrets(s.Namespace).Update(t.Context(), secret, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rolled := s.waitRollout(t, before.Generation)
	end := time.Now()
	tr.report(t, "rotation roll", start, end, true)

	if n := s.replicaSetsSince(t, start); n != 1 {
		t.Errorf("the rotation made %d new ReplicaSets, want the pods to roll once", n)
	}
	for _, key := range []string{"glance.c5c3.io/authtoken-hash", "glance.c5c3.io/db-connection-hash"} {
		if before.Spec.Template.Annotations[key] == rolled.Spec.Template.Annotations[key] {
			t.Errorf("the pod template's %s did not change", key)
		}
	}
	// The new pods authenticate the service user with the new password;
	// once the old pods are gone, nothing tries the old one.
	var rotated int
	for _, a := range s.keystoneAttempts(t, v1alpha1.DefaultServiceUsername, start) {
		switch {
		case a.OK && a.Password == rotatedServicePassword:
			rotated++
		case !a.At.Before(end):
			t.Errorf("after the roll the service user authenticated with the old or a wrong password (accepted %v)", a.OK)
		}
	}
	rt := s.uploadFromPod(t, "after-rotation", s.APIURL())
	if obj, ok := s.object(t, rt.ID); !ok || obj.SHA256 != rt.SHA256 {
		t.Errorf("after the rotation, the upload's object: present %v, %+v; want sha256 %s", ok, obj, rt.SHA256)
	}
	if rotated == 0 {
		t.Error("no Glance pod authenticated its service user with the new password during the roll")
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
