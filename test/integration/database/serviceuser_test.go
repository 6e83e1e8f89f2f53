package database

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
)

// keyedDigest is what the pod template's digests of a secret value are: its
// HMAC-SHA256 under the Glance's digest key.
func (s *scene) keyedDigest(v string) string {
	mac := hmac.New(sha256.New, s.digestKey())
	mac.Write([]byte(v))
	return hex.EncodeToString(mac.Sum(nil))
}

// usernameEnv is the OS_KEYSTONE_AUTHTOKEN__USERNAME of each container of the
// pod template that has one, by container.
func usernameEnv(tpl corev1.PodTemplateSpec) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, c := range slices.Concat(tpl.Spec.InitContainers, tpl.Spec.Containers) {
		for _, e := range c.Env {
			if e.Name == render.EnvAuthtokenUsername {
				out[c.Name] = e
			}
		}
	}
	return out
}

// setServiceUserSecret writes data over the service-user Secret's keys.
func (s *scene) setServiceUserSecret(data map[string]string) {
	s.t.Helper()
	ctx := context.Background()
	var sec corev1.Secret
	if err := cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: "glance-service-user"}, &sec); err != nil {
		s.t.Fatal(err)
	}
	for k, v := range data {
		sec.Data[k] = []byte(v)
	}
	if err := cl.Update(ctx, &sec); err != nil {
		s.t.Fatal(err)
	}
}

// TestSecretUsernameNeedsTheSpec: a "username" key in the service-user
// Secret, which an External Secrets template may carry for other consumers,
// changes nothing unless spec.serviceUser.usernameKey names it: no
// OS_KEYSTONE_AUTHTOKEN__USERNAME, the digest of the password alone, no
// roll. Named, the pods take the user from it (one roll), and a source that
// alternates two Keystone users switches it with one roll more. Named and
// missing from the Secret, the Glance waits for it, naming the key and the
// field.
func TestSecretUsernameNeedsTheSpec(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	key := client.ObjectKey{Namespace: s.NS, Name: "glance"}
	const password = "service-password" // operatortest.Env.Credentials'
	annotation := func(d *appsv1.Deployment) string {
		return d.Spec.Template.Annotations[render.AnnotationAuthtokenHash]
	}
	before := s.Deployment(nil)
	if got, want := annotation(before), s.keyedDigest(password); got != want {
		t.Fatalf("authtoken hash %q before any username key, want the digest of the password, %q", got, want)
	}

	s.setServiceUserSecret(map[string]string{"username": "someone-else"})
	s.awaitQuiet(key)
	reconcileTrace.NextPasses(t, cl, "glance", s.ReadGlance())
	d := s.Deployment(nil)
	if env := usernameEnv(d.Spec.Template); len(env) != 0 {
		t.Errorf("no spec.serviceUser.usernameKey, yet the pods read %s: %+v", render.EnvAuthtokenUsername, env)
	}
	if got := annotation(d); got != annotation(before) {
		t.Errorf("authtoken hash %q after the Secret got a username key the spec does not name, want it unchanged, %q", got, annotation(before))
	}
	if d.Generation != before.Generation {
		t.Errorf("the Deployment went from generation %d to %d on a username key the spec does not name; want no roll", before.Generation, d.Generation)
	}

	// Named: the pods run as the Secret's user.
	s.UpdateGlance(func(g *v1alpha1.Glance) { g.Spec.ServiceUser.UsernameKey = "username" })
	want := s.keyedDigest("someone-else\x00" + password)
	d = s.Deployment(func(d *appsv1.Deployment) bool { return annotation(d) == want })
	env := usernameEnv(d.Spec.Template)
	containers := slices.Concat(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers)
	if len(env) != len(containers) {
		t.Errorf("%s in %d of %d containers: %+v", render.EnvAuthtokenUsername, len(env), len(containers), env)
	}
	for name, e := range env {
		ref := e.ValueFrom.SecretKeyRef
		if ref == nil || ref.Name != "glance-service-user" || ref.Key != "username" || ref.Optional != nil {
			t.Errorf("container %s: %s from %+v, want the required key username of Secret glance-service-user", name, render.EnvAuthtokenUsername, ref)
		}
	}
	s.awaitQuiet(key)
	named := s.Deployment(nil)
	if named.Generation != before.Generation+1 {
		t.Fatalf("the Deployment went from generation %d to %d on naming the key; want one roll", before.Generation, named.Generation)
	}

	// A switch to the other user with the same password rolls them once.
	s.setServiceUserSecret(map[string]string{"username": "glance-b"})
	want = s.keyedDigest("glance-b\x00" + password)
	s.Deployment(func(d *appsv1.Deployment) bool { return annotation(d) == want })
	s.awaitQuiet(key)
	if got := s.Deployment(nil).Generation; got != named.Generation+1 {
		t.Fatalf("the Deployment went from generation %d to %d on a switch of the service user; want one roll", named.Generation, got)
	}

	// Named and missing: waited for, as a missing password is.
	s.UpdateGlance(func(g *v1alpha1.Glance) { g.Spec.ServiceUser.UsernameKey = "login" })
	c := s.ConditionSaying(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForServiceUserCredentials, `"login"`)
	if !strings.Contains(c.Message, "spec.serviceUser.usernameKey") || strings.Contains(c.Message, "glance-b") {
		t.Errorf("SecretsReady message %q: want it to name the field, and no value", c.Message)
	}
	if got := s.Deployment(nil); got.Generation != named.Generation+1 || annotation(got) != want {
		t.Errorf("the Deployment changed while the Glance waits for the key: generation %d, hash %q", got.Generation, annotation(got))
	}
}
