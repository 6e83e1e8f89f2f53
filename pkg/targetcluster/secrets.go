package targetcluster

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretReader derives what the operator needs from the user's Secrets (a
// missing key, a keyed digest, the name of a child built from them) and
// keeps the derivation, never the Secret. Their contents are not cached,
// as most Secrets are no Glance's, and a password kept in memory outlives
// its rotation. A derivation is kept with the uid and resourceVersion of
// each Secret it read, and is answered again without a read while the
// references cache shows them unchanged. A changed Secret has a new
// resourceVersion in the cache before its watch event wakes a Glance, so
// the pass it wakes derives again.
type SecretReader struct {
	// Metadata is the references cache, which holds every Secret's
	// metadata.
	Metadata client.Reader
	// Reader reads from the API server.
	Reader client.Reader

	mu      sync.Mutex
	derived map[string]*derivation
	known   map[knownKey]*knownValue
	swept   time.Time
}

// knownKey names what is known of one Secret (Remember).
type knownKey struct {
	uid  types.UID
	what string
}

// knownValue is what was known of a Secret at one resourceVersion.
type knownValue struct {
	resourceVersion string
	value           any
	used            time.Time
}

// derivation is what a Derive kept: no secret value, by Derive's contract.
type derivation struct {
	inputs   string
	versions []string
	value    any
	used     time.Time
}

// derivationIdle is how long a derivation nobody asks for is kept: that of
// a deleted Glance or backend goes, and the next ask after it is one read.
const derivationIdle = time.Hour

// SecretRead is one Secret a derivation asked for: the Secret, or why it
// could not be read (NotFound when it does not exist).
type SecretRead struct {
	Key    client.ObjectKey
	Secret *corev1.Secret
	Err    error
}

// Derive returns what derive makes of the Secrets keys, and whether derive
// ran for this call. id names the derivation (one per consumer: a Glance's
// credentials, its backends); inputs are what else the result depends on.
// Neither inputs nor the result may hold a secret value: they are kept.
// The kept result is returned while inputs and every Secret's uid and
// resourceVersion in the references cache are as they were; a Secret that
// could not be read, or that the cache lacks, is read again each time.
// derive sees the Secrets read from the API server, and nothing keeps them
// after it returns. A Cluster without references derives on every call.
func Derive[T any](ctx context.Context, c *Cluster, id, inputs string, keys []client.ObjectKey, derive func([]SecretRead) (T, error)) (T, bool, error) {
	if c.References == nil {
		return deriveFresh(ctx, c.Reader, keys, derive)
	}
	return deriveKept(ctx, c.References.Secrets, id, inputs, keys, derive)
}

// Forget drops the derivation id, so the next Derive of it reads its
// Secrets: for a consumer that found what it derived before no longer
// holds (a child built from it was changed or deleted).
func (c *Cluster) Forget(id string) {
	if c.References == nil {
		return
	}
	r := c.References.Secrets
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.derived, id)
}

func deriveFresh[T any](ctx context.Context, reader client.Reader, keys []client.ObjectKey, derive func([]SecretRead) (T, error)) (T, bool, error) {
	v, err := derive(readAll(ctx, reader, keys))
	return v, true, err
}

// readAll reads the Secrets keys from reader, at once: each is a round
// trip to the API server.
func readAll(ctx context.Context, reader client.Reader, keys []client.ObjectKey) []SecretRead {
	reads := make([]SecretRead, len(keys))
	var wg sync.WaitGroup
	for i, key := range keys {
		wg.Go(func() {
			s := &corev1.Secret{}
			if err := reader.Get(ctx, key, s); err != nil {
				reads[i] = SecretRead{Key: key, Err: err}
				return
			}
			reads[i] = SecretRead{Key: key, Secret: s}
		})
	}
	wg.Wait()
	return reads
}

func deriveKept[T any](ctx context.Context, r *SecretReader, id, inputs string, keys []client.ObjectKey, derive func([]SecretRead) (T, error)) (T, bool, error) {
	if v, ok := r.kept(ctx, id, inputs, keys); ok {
		if t, ok := v.(T); ok {
			return t, false, nil
		}
	}
	reads := readAll(ctx, r.Reader, keys)
	versions := make([]string, len(keys))
	complete := true
	for i, read := range reads {
		if read.Err != nil {
			complete = false
			continue
		}
		versions[i] = version(&read.Secret.ObjectMeta)
	}
	v, err := derive(reads)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil || !complete {
		delete(r.derived, id)
		return v, true, err
	}
	if r.derived == nil {
		r.derived = map[string]*derivation{}
	}
	r.derived[id] = &derivation{inputs: inputs, versions: versions, value: v, used: time.Now()}
	return v, true, nil
}

// kept is the derivation id when it still holds: the same inputs, and each
// Secret in the references cache as it was read.
func (r *SecretReader) kept(ctx context.Context, id, inputs string, keys []client.ObjectKey) (any, bool) {
	r.mu.Lock()
	d := r.derived[id]
	r.sweep()
	r.mu.Unlock()
	if d == nil || d.inputs != inputs || len(d.versions) != len(keys) {
		return nil, false
	}
	for i, key := range keys {
		current := &metav1.PartialObjectMetadata{}
		current.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		if r.Metadata.Get(ctx, key, current) != nil || version(&current.ObjectMeta) != d.versions[i] {
			return nil, false
		}
	}
	r.mu.Lock()
	d.used = time.Now()
	r.mu.Unlock()
	return d.value, true
}

// sweep drops derivations and what is known of Secrets idle for
// derivationIdle, at most once per derivationIdle; r.mu is held.
func (r *SecretReader) sweep() {
	now := time.Now()
	if now.Sub(r.swept) < derivationIdle {
		return
	}
	r.swept = now
	for id, d := range r.derived {
		if now.Sub(d.used) > derivationIdle {
			delete(r.derived, id)
		}
	}
	for k, v := range r.known {
		if now.Sub(v.used) > derivationIdle {
			delete(r.known, k)
		}
	}
}

// Remember keeps v as what of a Secret (a child of the operator's) holds at
// the uid and resourceVersion of m, for Known: so that what the operator
// wrote, or read once, need not be read again while the Secret stays as it
// was. v is kept in memory, so it must hold no user's credential: keyed
// digests of the values, or what the operator derived from them. An m
// without uid or resourceVersion (not read from or written to a server) is
// not kept. A Cluster without references keeps nothing.
func (c *Cluster) Remember(m metav1.Object, what string, v any) {
	if c.References == nil || m.GetUID() == "" || m.GetResourceVersion() == "" {
		return
	}
	r := c.References.Secrets
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.known == nil {
		r.known = map[knownKey]*knownValue{}
	}
	r.known[knownKey{uid: m.GetUID(), what: what}] = &knownValue{resourceVersion: m.GetResourceVersion(), value: v, used: time.Now()}
	r.sweep()
}

// Known is what Remember kept as what of the Secret at m's uid and
// resourceVersion; nothing once the Secret changed.
func (c *Cluster) Known(m metav1.Object, what string) (any, bool) {
	if c.References == nil {
		return nil, false
	}
	r := c.References.Secrets
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.known[knownKey{uid: m.GetUID(), what: what}]
	if v == nil || v.resourceVersion != m.GetResourceVersion() {
		return nil, false
	}
	v.used = time.Now()
	return v.value, true
}

// version tells two states of a Secret apart: a new resourceVersion, or a
// Secret deleted and created again under the same name.
func version(m *metav1.ObjectMeta) string {
	return string(m.UID) + "/" + m.ResourceVersion
}
