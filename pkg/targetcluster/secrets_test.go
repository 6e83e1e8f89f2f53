package targetcluster_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/c5c3/glance-operator/pkg/targetcluster"
)

// secretWorld is an API server (server) and a references cache (cache)
// that may lag behind it, with the server's Secret GETs and the
// derivations counted.
type secretWorld struct {
	server, cache client.Client
	gets          atomic.Int32
	derived       int
	cluster       *targetcluster.Cluster
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
				w.gets.Add(1)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	w.cluster = &targetcluster.Cluster{Reader: counted, References: &targetcluster.References{
		Secrets: &targetcluster.SecretReader{Metadata: w.cache, Reader: counted},
	}}
	return w
}

// derive derives the length of each named Secret's password, under the
// inputs, and says whether the derivation ran.
func (w *secretWorld) derive(t *testing.T, inputs string, names ...string) ([]int, bool, error) {
	t.Helper()
	keys := make([]client.ObjectKey, len(names))
	for i, n := range names {
		keys[i] = client.ObjectKey{Namespace: "ns", Name: n}
	}
	return targetcluster.Derive(context.Background(), w.cluster, "consumer", inputs, keys, func(reads []targetcluster.SecretRead) ([]int, error) {
		w.derived++
		out := make([]int, len(reads))
		for i, r := range reads {
			if r.Err != nil {
				return nil, r.Err
			}
			out[i] = len(r.Secret.Data["password"])
		}
		return out, nil
	})
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
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"team": "a"}},
		Data:       map[string][]byte{"password": []byte(password)},
	}
}

func TestDeriveReadsOncePerResourceVersion(t *testing.T) {
	w := newSecretWorld(t, userSecret("db", "one"), userSecret("su", "three"))
	for i := range 3 {
		got, fresh, err := w.derive(t, "in", "db", "su")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, []int{3, 5}) || fresh != (i == 0) {
			t.Fatalf("pass %d: derived %v, fresh %v; want [3 5], fresh on the first pass only", i, got, fresh)
		}
	}
	if w.gets.Load() != 2 || w.derived != 1 {
		t.Fatalf("%d GETs and %d derivations for three asks of two unchanged Secrets, want 2 and 1", w.gets.Load(), w.derived)
	}
}

func TestDeriveAgainWhenASecretOrTheInputsChange(t *testing.T) {
	w := newSecretWorld(t, userSecret("db", "one"), userSecret("su", "three"))
	if _, _, err := w.derive(t, "in", "db", "su"); err != nil {
		t.Fatal(err)
	}
	// The cache has not seen the change: the derivation may still be the
	// last one, and the watch event that follows wakes the next pass.
	w.update(t, "su", "seven!", false)
	if got, fresh, err := w.derive(t, "in", "db", "su"); err != nil || fresh || got[1] != 5 {
		t.Fatalf("before the cache saw the change: %v, fresh %v, %v; want the kept [3 5]", got, fresh, err)
	}
	w.update(t, "su", "seven!", true)
	if got, fresh, err := w.derive(t, "in", "db", "su"); err != nil || !fresh || got[1] != 6 {
		t.Fatalf("after the cache saw the change: %v, fresh %v, %v; want [3 6] derived again", got, fresh, err)
	}
	if _, fresh, err := w.derive(t, "other inputs", "db", "su"); err != nil || !fresh {
		t.Fatalf("other inputs: fresh %v, %v; want derived again", fresh, err)
	}
	if _, fresh, err := w.derive(t, "other inputs", "db"); err != nil || !fresh {
		t.Fatalf("other Secrets: fresh %v, %v; want derived again", fresh, err)
	}
	w.cluster.Forget("consumer")
	if _, fresh, err := w.derive(t, "other inputs", "db"); err != nil || !fresh {
		t.Fatalf("after Forget: fresh %v, %v; want derived again", fresh, err)
	}
}

func TestDeriveAsksTheServerForWhatTheCacheLacksOrCannotBeRead(t *testing.T) {
	w := newSecretWorld(t, userSecret("db", "one"))
	for range 2 {
		if _, fresh, err := w.derive(t, "in", "db", "missing"); !apierrors.IsNotFound(err) || !fresh {
			t.Fatalf("derive: fresh %v, %v; want NotFound, derived", fresh, err)
		}
	}
	if w.gets.Load() != 4 || w.derived != 2 {
		t.Fatalf("%d GETs and %d derivations for two asks naming a missing Secret, want 4 and 2", w.gets.Load(), w.derived)
	}
}

// What a derivation read is not kept: a second ask of an unchanged Secret
// hands the kept result out without reading it, and never a Secret.
func TestDeriveKeepsTheResultNotTheSecret(t *testing.T) {
	w := newSecretWorld(t, userSecret("db", "one"))
	var seen []*corev1.Secret
	keys := []client.ObjectKey{{Namespace: "ns", Name: "db"}}
	for range 2 {
		_, _, err := targetcluster.Derive(context.Background(), w.cluster, "consumer", "", keys, func(reads []targetcluster.SecretRead) (string, error) {
			seen = append(seen, reads[0].Secret)
			return "digest", nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 1 {
		t.Fatalf("the derivation saw %d Secrets for two asks, want 1", len(seen))
	}
}

// A Cluster without references (a target cluster's reader) derives on
// every ask.
func TestDeriveWithoutReferencesReadsEachTime(t *testing.T) {
	w := newSecretWorld(t, userSecret("db", "one"))
	w.cluster.References = nil
	for range 2 {
		if _, fresh, err := w.derive(t, "in", "db"); err != nil || !fresh {
			t.Fatalf("fresh %v, %v; want derived", fresh, err)
		}
	}
	if w.gets.Load() != 2 {
		t.Fatalf("%d GETs, want 2", w.gets.Load())
	}
}

// What is remembered of a Secret holds for the version it was remembered
// at, and for nothing else: another resourceVersion, uid or name of what
// is known, or a Cluster without references.
func TestRememberHoldsForOneVersion(t *testing.T) {
	w := newSecretWorld(t)
	at := func(uid, rv string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "child", UID: types.UID(uid), ResourceVersion: rv}}
	}
	w.cluster.Remember(at("u1", "1"), "digests", "d1")
	if v, ok := w.cluster.Known(at("u1", "1"), "digests"); !ok || v != "d1" {
		t.Fatalf("known %v %v, want d1", v, ok)
	}
	for _, tt := range []struct {
		name string
		m    *metav1.PartialObjectMetadata
		what string
	}{
		{"a later version", at("u1", "2"), "digests"},
		{"the Secret made again", at("u2", "1"), "digests"},
		{"something else of it", at("u1", "1"), "other"},
	} {
		if v, ok := w.cluster.Known(tt.m, tt.what); ok {
			t.Errorf("%s: known %v, want nothing", tt.name, v)
		}
	}
	// Not read from a server: nothing to hold it to.
	w.cluster.Remember(at("", ""), "digests", "d0")
	if _, ok := w.cluster.Known(at("", ""), "digests"); ok {
		t.Error("kept what was remembered of a Secret with no uid")
	}
	bare := &targetcluster.Cluster{}
	bare.Remember(at("u1", "1"), "digests", "d1")
	if _, ok := bare.Known(at("u1", "1"), "digests"); ok {
		t.Error("a Cluster without references kept something")
	}
}
