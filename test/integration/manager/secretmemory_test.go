package manager

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// TestSecretValuesAreNotKept looks for a service-user password in the
// manager's memory once its Glance has settled. The operator keeps what it
// derives from a user's Secret (a keyed digest, the keys it lacks), never
// the Secret: a value kept would outlive its rotation in every heap dump
// and core file. No child holds this password (the pods read it from the
// user's Secret), so no copy of it has a reason to stay.
func TestSecretValuesAreNotKept(t *testing.T) {
	e := newEnv(t)
	// The test keeps the password masked, so its own memory holds no copy.
	password, mask := randomLetters(t), randomLetters(t)
	masked := xor(password, mask)
	e.Secret("glance-db", map[string]string{"username": "glance", "password": "db-password"})
	su := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "glance-service-user"},
		Data:       map[string][]byte{"password": password},
	}
	e.Create(su)
	clear(password)
	clear(su.Data["password"]) // the server's answer, decoded
	e.DefaultBackend("alpha")
	e.Glance()
	e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionTrue, v1alpha1.ReasonSecretsAvailable)
	e.Condition(v1alpha1.ConditionBackendsReady, metav1.ConditionTrue, v1alpha1.ReasonAllBackendsProjected)

	runtime.GC()
	path := filepath.Join(t.TempDir(), "heap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	debug.WriteHeapDump(f.Fd())
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	dump, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	needle := xor(masked, mask)
	if n := bytes.Count(dump, needle); n > 0 {
		t.Fatalf("the service-user password is in the manager's memory %d times after its Glance settled (heap dump of %d MiB)", n, len(dump)>>20)
	}
	// The dump must hold what the manager keeps, or finding nothing proves
	// nothing: the Glance's name is in its cached copy.
	if !bytes.Contains(dump, []byte(e.NS)) {
		t.Fatalf("the heap dump (%d MiB) does not hold the test's namespace %q", len(dump)>>20, e.NS)
	}
}

// randomLetters are 32 random printable bytes.
func randomLetters(t *testing.T) []byte {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 'A' + b[i]%26
	}
	return b
}

func xor(a, b []byte) []byte {
	out := make([]byte, len(a))
	for i := range a {
		out[i] = a[i] ^ b[i]
	}
	return out
}
