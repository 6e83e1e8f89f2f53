package targetcluster_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/c5c3/glance-operator/pkg/targetcluster"
)

// secretWorld is an API server (server) and a references cache (cache)
// that may lag behind it, with the server's Secret GETs counted.
type secretWorld struct {
	server, cache client.Client
	gets          int
	reader        *targetcluster.SecretReader
}

func newSecretWorld(t *testing.T, objs ...client.Object) *secretWorld {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	w := &secretWorld{}
	w.server = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	w.cache = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	counted := interceptor.NewClient(w.server.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Secret); ok {
				w.gets++
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	w.reader = &targetcluster.SecretReader{Metadata: w.cache, Reader: counted}
	return w
}

func (w *secretWorld) read(t *testing.T, name string) (*corev1.Secret, error) {
	t.Helper()
	var s corev1.Secret
	err := w.reader.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, &s)
	return &s, err
}

// update writes the Secret on the server and, when synced, into the cache.
func (w *secretWorld) update(t *testing.T, name, value string, synced bool) {
	t.Helper()
	ctx := context.Background()
	var s corev1.Secret
	if err := w.server.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, &s); err != nil {
		t.Fatal(err)
	}
	s.Data["password"] = []byte(value)
	if err := w.server.Update(ctx, &s); err != nil {
		t.Fatal(err)
	}
	if !synced {
		return
	}
	// As a watch would: the cache's copy moves to a new resourceVersion.
	var cached corev1.Secret
	if err := w.cache.Get(ctx, client.ObjectKeyFromObject(&s), &cached); err != nil {
		t.Fatal(err)
	}
	cached.Data = s.Data
	if err := w.cache.Update(ctx, &cached); err != nil {
		t.Fatal(err)
	}
}

func userSecret(name, password string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: "uid-1", Labels: map[string]string{"team": "a"}},
		Data:       map[string][]byte{"password": []byte(password)},
	}
}

func TestSecretReaderReadsOncePerResourceVersion(t *testing.T) {
	w := newSecretWorld(t, userSecret("db", "one"))
	for range 3 {
		s, err := w.read(t, "db")
		if err != nil {
			t.Fatal(err)
		}
		if string(s.Data["password"]) != "one" {
			t.Fatalf("password %q, want one", s.Data["password"])
		}
	}
	if w.gets != 1 {
		t.Fatalf("%d GETs for three reads of an unchanged Secret, want 1", w.gets)
	}
}

func TestSecretReaderRereadsAChangedSecret(t *testing.T) {
	w := newSecretWorld(t, userSecret("db", "one"))
	if _, err := w.read(t, "db"); err != nil {
		t.Fatal(err)
	}
	// The cache has not seen the change: the read may still be the last
	// one, and the watch event that follows wakes the next pass.
	w.update(t, "db", "two", false)
	if s, err := w.read(t, "db"); err != nil || string(s.Data["password"]) != "one" || w.gets != 1 {
		t.Fatalf("read before the cache saw the change: %q, %v, %d GETs; want the last read, one", s.Data["password"], err, w.gets)
	}
	w.update(t, "db", "three", true)
	s, err := w.read(t, "db")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(s.Data["password"]); got != "three" {
		t.Fatalf("password %q after the cache saw the change, want three", got)
	}
}

func TestSecretReaderAsksTheServerForWhatTheCacheLacks(t *testing.T) {
	w := newSecretWorld(t)
	for range 2 {
		if _, err := w.read(t, "missing"); !apierrors.IsNotFound(err) {
			t.Fatalf("read: %v, want NotFound", err)
		}
	}
	if w.gets != 2 {
		t.Fatalf("%d GETs for two reads of a Secret the cache lacks, want 2", w.gets)
	}
}

func TestSecretReaderKeepsNoMetadataAndHandsOutCopies(t *testing.T) {
	w := newSecretWorld(t, userSecret("db", "one"))
	first, err := w.read(t, "db")
	if err != nil {
		t.Fatal(err)
	}
	first.Data["password"] = []byte("changed by a caller")
	second, err := w.read(t, "db")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(second.Data["password"]); got != "one" {
		t.Fatalf("password %q: a caller's change reached the next read", got)
	}
	if len(second.Labels) != 0 {
		t.Fatalf("labels %v kept for a read Secret", second.Labels)
	}
}
