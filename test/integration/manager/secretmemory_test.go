package manager

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/operatortest"
)

// TestSecretValuesAreNotKept looks for every credential of a managed
// Glance in the manager's memory once it has settled after a database
// password rotation: the service-user password, both database passwords
// (slot a's, which the pods still run as, and slot b's, which the DSN has
// switched to), both DSNs, and the S3 access and secret keys. The operator
// keeps what it derives from a Secret (a keyed digest, the keys it lacks),
// never a value, and caches its own Secrets as metadata only: a value kept
// would outlive its rotation in every heap dump and core file.
func TestSecretValuesAreNotKept(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// The test keeps every value masked, so its own memory holds no copy.
	dbPassword, rotated := newMasked(t, "the database password of slot a"), newMasked(t, "the database password of slot b")
	servicePassword := newMasked(t, "the service-user password")
	accessKey, secretKey := newMasked(t, "the S3 access key"), newMasked(t, "the S3 secret key")
	dsn := func(name, user string, password masked) masked {
		return password.within(name, "mysql+pymysql://"+user+":", "@mariadb."+e.NS+".svc:3306/glance?charset=utf8")
	}
	dsnA, dsnB := dsn("the DSN of slot a", "glance", dbPassword), dsn("the DSN of slot b", "glance.b", rotated)

	e.MariaDB(true)
	createSecret(t, e, "glance-db", map[string]masked{"password": dbPassword}, map[string]string{"username": "glance"})
	createSecret(t, e, "glance-service-user", map[string]masked{"password": servicePassword}, nil)
	createSecret(t, e, "s3", map[string]masked{"access-key-id": accessKey, "secret-access-key": secretKey}, nil)
	e.Backend("alpha", true, "s3")
	e.Glance()
	e.Condition(v1alpha1.ConditionBackendsReady, metav1.ConditionTrue, v1alpha1.ReasonAllBackendsProjected)
	provision(t, e, "glance", render.DatabaseGVK, render.UserGVK, render.GrantGVK)
	e.FinishJob("glance-db-sync", true)
	e.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionTrue, v1alpha1.ReasonDatabaseSynced)
	// A Deployment that has not rolled out onto slot b keeps slot a's user
	// and its Secret.
	e.Deployment(nil)

	// Rotate: slot b is made with the new password, and the DSN switches
	// to it once its User and Grant are Ready.
	patchSecret(t, e, "glance-db", "password", rotated)
	provision(t, e, "glance.b", render.UserGVK, render.GrantGVK)
	e.Eventually("the DSN switched to slot b", func() bool {
		var events eventsv1.EventList
		if err := cl.List(ctx, &events, client.InNamespace(e.NS)); err != nil {
			return false
		}
		for _, ev := range events.Items {
			if ev.Reason == v1alpha1.EventDatabaseUserSwitched {
				return true
			}
		}
		return false
	}, nil)
	for _, name := range []string{"glance-db-user-a", "glance-db-user-b", "glance-db-connection", "glance-digest-key"} {
		if err := cl.Get(ctx, client.ObjectKey{Namespace: e.NS, Name: name}, secretMetadata()); err != nil {
			t.Fatalf("Secret %s after the rotation: %v", name, err)
		}
	}
	settle(t, e)

	dump := heapDump(t)
	var found []string
	for _, v := range []masked{dbPassword, rotated, dsnA, dsnB, servicePassword, accessKey, secretKey} {
		needle := v.reveal()
		if n := bytes.Count(dump, needle); n > 0 {
			found = append(found, v.name+" ("+strconv.Itoa(n)+" times)")
		}
		clear(needle)
	}
	if len(found) > 0 {
		t.Errorf("the manager's memory holds, after its Glance settled (heap dump of %d MiB): %s", len(dump)>>20, strings.Join(found, "; "))
	}
	// The dump must hold what the manager keeps, or finding nothing proves
	// nothing: the Glance's namespace is in its cached copy.
	if !bytes.Contains(dump, []byte(e.NS)) {
		t.Fatalf("the heap dump (%d MiB) does not hold the test's namespace %q", len(dump)>>20, e.NS)
	}
}

// masked is a credential of the test, held as value xor mask.
type masked struct {
	name         string
	value, mask  []byte
	prefix, tail string
}

// newMasked is a random credential of 32 letters.
func newMasked(t *testing.T, name string) masked {
	plain, mask := randomLetters(t), randomLetters(t)
	m := masked{name: name, value: xor(plain, mask), mask: mask}
	clear(plain)
	return m
}

// within is the credential between prefix and tail, as a DSN holds a
// password.
func (m masked) within(name, prefix, tail string) masked {
	return masked{name: name, value: m.value, mask: m.mask, prefix: prefix, tail: tail}
}

// reveal is a new copy of the value, which the caller clears after use.
func (m masked) reveal() []byte {
	out := make([]byte, 0, len(m.prefix)+len(m.value)+len(m.tail))
	out = append(out, m.prefix...)
	for i := range m.value {
		out = append(out, m.value[i]^m.mask[i])
	}
	return append(out, m.tail...)
}

// createSecret creates the Secret name holding the masked values and the
// plain ones, leaving no copy of a masked value in the test's memory.
func createSecret(t *testing.T, e *operatortest.Env, name string, values map[string]masked, plain map[string]string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: name}, Data: map[string][]byte{}}
	var revealed [][]byte
	for k, v := range values {
		b := v.reveal()
		revealed = append(revealed, b)
		s.Data[k] = b
	}
	for k, v := range plain {
		s.Data[k] = []byte(v)
	}
	err := cl.Create(context.Background(), s)
	for _, b := range revealed {
		clear(b)
	}
	for _, b := range s.Data {
		clear(b) // the server's answer, decoded
	}
	if err != nil {
		t.Fatalf("create Secret %s: %v", name, err)
	}
}

// patchSecret sets one key of a Secret to a masked value, reading back
// only the Secret's metadata.
func patchSecret(t *testing.T, e *operatortest.Env, name, key string, v masked) {
	t.Helper()
	plain := v.reveal()
	encoded := make([]byte, base64.StdEncoding.EncodedLen(len(plain)))
	base64.StdEncoding.Encode(encoded, plain)
	clear(plain)
	patch := append(append([]byte(`{"data":{"`+key+`":"`), encoded...), `"}}`...)
	clear(encoded)
	m := secretMetadata()
	m.Namespace, m.Name = e.NS, name
	err := cl.Patch(context.Background(), m, client.RawPatch(types.MergePatchType, patch))
	clear(patch)
	if err != nil {
		t.Fatalf("patch Secret %s: %v", name, err)
	}
}

func secretMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return m
}

// provision waits for the MariaDB objects of those kinds and name that
// the operator makes, and marks each Ready as the mariadb-operator would.
func provision(t *testing.T, e *operatortest.Env, name string, gvks ...schema.GroupVersionKind) {
	t.Helper()
	for _, gvk := range gvks {
		e.Eventually(gvk.Kind+" "+name, func() bool {
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(gvk)
			return cl.Get(context.Background(), client.ObjectKey{Namespace: e.NS, Name: name}, m) == nil
		}, nil)
		e.SetReady(gvk, name)
	}
}

// settle waits until the operator has sent no write for two seconds.
func settle(t *testing.T, e *operatortest.Env) {
	t.Helper()
	last := mgr.Writes.Load()
	e.Eventually("the operator to settle", func() bool {
		time.Sleep(2 * time.Second)
		now := mgr.Writes.Load()
		settled := now == last
		last = now
		return settled
	}, nil)
}

// heapDump is a dump of this process's heap, the manager's included, after
// two collections: a sync.Pool's victim cache survives one.
func heapDump(t *testing.T) []byte {
	t.Helper()
	runtime.GC()
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
	return dump
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
