package glance

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The first call creates the key, random and immutable, owned by the
// Glance; later calls read it and write nothing.
func TestEnsureDigestKeyCreatesOnce(t *testing.T) {
	s := newApplyScene(t, "")
	ctx := context.Background()
	first, err := ensureDigestKey(ctx, s.p, s.g)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != digestKeySize || bytes.Equal(first, make([]byte, digestKeySize)) {
		t.Fatalf("key of %d bytes %x; want %d random bytes", len(first), first, digestKeySize)
	}
	var stored corev1.Secret
	if err := s.server.Get(ctx, client.ObjectKey{Namespace: s.g.Namespace, Name: "glance-digest-key"}, &stored); err != nil {
		t.Fatal(err)
	}
	if stored.Immutable == nil || !*stored.Immutable || !metav1.IsControlledBy(&stored, s.g) {
		t.Errorf("the key Secret is immutable %v, controlled by the Glance %v; want both", stored.Immutable, metav1.IsControlledBy(&stored, s.g))
	}
	for range 2 {
		again, err := ensureDigestKey(ctx, s.p, s.g)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, first) {
			t.Fatal("a later pass got another key: the pods would roll on every pass")
		}
	}
	if w := *s.writes; w.creates != 1 || w.updates+w.patches+w.deletes != 0 {
		t.Fatalf("writes %+v; want the one create", w)
	}
}

// A key Secret the operator did not make, without a usable key, is refused
// with what to do; it is not overwritten, and the error holds no key bytes.
func TestEnsureDigestKeyRefusesAShortKey(t *testing.T) {
	short := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "glance-digest-key"},
		Data:       map[string][]byte{DigestKeyKey: []byte("tooshort")},
	}
	s := newApplyScene(t, "", short)
	_, err := ensureDigestKey(context.Background(), s.p, s.g)
	if err == nil || !strings.Contains(err.Error(), "glance-digest-key") || !strings.Contains(err.Error(), "delete it") {
		t.Fatalf("error %v; want one naming the Secret and the fix", err)
	}
	if strings.Contains(err.Error(), "tooshort") {
		t.Fatalf("the error %q shows the key", err)
	}
	if w := *s.writes; w.creates+w.updates+w.patches+w.deletes != 0 {
		t.Fatalf("writes %+v; want none", w)
	}
}

// A keyed digest is not the plain SHA-256 of the value, which anyone
// could recompute from a guess, and differs under another key.
func TestKeyedDigest(t *testing.T) {
	key, other := bytes.Repeat([]byte{1}, digestKeySize), bytes.Repeat([]byte{2}, digestKeySize)
	d := keyedDigest(key, "s3cr3t")
	switch {
	case d == digest("s3cr3t"):
		t.Fatal("the keyed digest is the plain SHA-256")
	case d != keyedDigest(key, "s3cr3t"):
		t.Fatal("the keyed digest is not stable: the pods would roll on every pass")
	case d == keyedDigest(other, "s3cr3t"):
		t.Fatal("two keys give the same digest")
	case d == keyedDigest(key, "s3cr3u"):
		t.Fatal("two values give the same digest")
	case len(d) != 64:
		t.Fatalf("digest %q is not 64 hex characters", d)
	}
}
