package targetcluster

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretReader reads the user's Secrets that Glances and backends name.
// Their contents are not cached, as most Secrets are no Glance's; they are
// read from the API server once per resourceVersion instead. The metadata
// of every Secret is in the references cache, so a Secret whose
// resourceVersion there has not moved since the last read is answered from
// that read. A changed Secret has a new resourceVersion in the cache before
// its watch event wakes a Glance, so the pass it wakes reads it again.
type SecretReader struct {
	// Metadata is the references cache, which holds every Secret's
	// metadata.
	Metadata client.Reader
	// Reader reads from the API server.
	Reader client.Reader

	mu   sync.Mutex
	last map[client.ObjectKey]*corev1.Secret
}

// Get reads the Secret key into s.
func (r *SecretReader) Get(ctx context.Context, key client.ObjectKey, s *corev1.Secret) error {
	current := &metav1.PartialObjectMetadata{}
	current.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	// A Secret the cache does not hold (yet) is read from the server.
	if r.Metadata.Get(ctx, key, current) == nil {
		r.mu.Lock()
		last := r.last[key]
		r.mu.Unlock()
		if last != nil && last.UID == current.UID && last.ResourceVersion == current.ResourceVersion {
			last.DeepCopyInto(s)
			return nil
		}
	}
	err := r.Reader.Get(ctx, key, s)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil:
		if r.last == nil {
			r.last = map[client.ObjectKey]*corev1.Secret{}
		}
		// What the readers use, and nothing else: no labels, annotations
		// or managed fields kept for each.
		kept := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion},
			Type:       s.Type,
			Data:       s.Data,
		}
		r.last[key] = kept.DeepCopy()
	case apierrors.IsNotFound(err):
		delete(r.last, key)
	}
	return err
}
