package targetcluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// referencesSyncTimeout bounds how long Ensure waits for a namespace's
// cache to sync.
const referencesSyncTimeout = 30 * time.Second

// References are the metadata-only caches of the user's Secrets and
// ConfigMaps on a cluster: one per namespace that holds a Glance, started
// by the first pass there (Ensure). The Secrets of the cluster's other
// namespaces cost the operator nothing, where one cache of every namespace
// held each of them. A namespace's cache runs until the operator stops,
// also after its last Glance is gone.
type References struct {
	cfg     *rest.Config
	options cache.Options
	// allowed are the namespaces served; nil serves every namespace.
	allowed map[string]bool
	// Secrets derives from the user's Secrets, again only when these
	// caches' metadata shows them changed.
	Secrets *SecretReader

	mu     sync.Mutex
	ctx    context.Context
	caches map[string]*namespaceReferences
	hooks  []func(context.Context, cache.Cache)
}

// namespaceReferences is the cache of one namespace; ready is closed once
// it has synced and the hooks have been called, or it failed (err).
type namespaceReferences struct {
	cache cache.Cache
	ready chan struct{}
	err   error
}

// NewReferences serves namespaces (empty: all) with caches built from
// options (ReferencesCacheOptions, with the scheme, mapper and HTTP client
// filled in); each cache's namespace is its own. server reads a Secret's
// contents from the API server.
func NewReferences(cfg *rest.Config, options cache.Options, namespaces []string, server client.Reader) *References {
	r := &References{cfg: cfg, options: options, caches: map[string]*namespaceReferences{}}
	r.Secrets = &SecretReader{Metadata: r, Reader: server}
	if len(namespaces) > 0 {
		r.allowed = map[string]bool{}
		for _, ns := range namespaces {
			r.allowed[ns] = true
		}
	}
	return r
}

// Start lets Ensure start caches, which run until ctx ends.
func (r *References) Start(ctx context.Context) error {
	r.mu.Lock()
	if r.ctx != nil {
		r.mu.Unlock()
		return errors.New("references started twice")
	}
	r.ctx = ctx
	r.mu.Unlock()
	<-ctx.Done()
	return nil
}

// NeedLeaderElection is false: a standby's caches are warm when it leads.
func (r *References) NeedLeaderElection() bool { return false }

// OnNamespace calls hook with each namespace's cache once it has synced:
// the caches running now, and every one started later. Controllers add
// their watches of the user's Secrets and ConfigMaps there.
func (r *References) OnNamespace(hook func(context.Context, cache.Cache)) {
	r.mu.Lock()
	r.hooks = append(r.hooks, hook)
	ctx := r.ctx
	var running []cache.Cache
	for _, nr := range r.caches {
		if nr.cache != nil {
			running = append(running, nr.cache)
		}
	}
	r.mu.Unlock()
	for _, c := range running {
		hook(ctx, c)
	}
}

// Ensure starts the cache of namespace unless it runs, and waits until it
// has synced. A namespace the operator does not serve is left alone.
func (r *References) Ensure(ctx context.Context, namespace string) error {
	if r.allowed != nil && !r.allowed[namespace] {
		return nil
	}
	r.mu.Lock()
	if r.ctx == nil {
		r.mu.Unlock()
		return errors.New("the references caches have not been started")
	}
	nr, ok := r.caches[namespace]
	if !ok {
		nr = &namespaceReferences{ready: make(chan struct{})}
		r.caches[namespace] = nr
		go r.start(r.ctx, namespace, nr)
	}
	r.mu.Unlock()
	select {
	case <-nr.ready:
		return nr.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// start builds and starts the cache of namespace, waits for its informers
// to sync, and calls the hooks on it. A cache that fails is forgotten, so
// that the next Ensure tries again.
func (r *References) start(ctx context.Context, namespace string, nr *namespaceReferences) {
	c, err := r.run(ctx, namespace)
	r.mu.Lock()
	var hooks []func(context.Context, cache.Cache)
	if err != nil {
		nr.err = fmt.Errorf("watch the Secrets and ConfigMaps of namespace %s: %w", namespace, err)
		delete(r.caches, namespace)
	} else {
		nr.cache, hooks = c, append(hooks, r.hooks...)
	}
	r.mu.Unlock()
	for _, hook := range hooks {
		hook(ctx, c)
	}
	close(nr.ready)
}

func (r *References) run(ctx context.Context, namespace string) (cache.Cache, error) {
	options := r.options
	options.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	c, err := cache.New(r.cfg, options)
	if err != nil {
		return nil, err
	}
	cacheCtx, stop := context.WithCancel(ctx)
	go func() {
		defer stop()
		_ = c.Start(cacheCtx)
	}()
	// A namespace whose Secrets cannot be listed (no RBAC, say) fails its
	// pass, which retries, rather than holding a worker until it can.
	syncCtx, cancel := context.WithTimeout(cacheCtx, referencesSyncTimeout)
	defer cancel()
	for _, obj := range ReferenceKinds() {
		// Blocks until the informer has synced, or syncCtx ends.
		if _, err := c.GetInformer(syncCtx, obj); err != nil {
			stop()
			return nil, err
		}
	}
	return c, nil
}

// Get reads an object's metadata from its namespace's cache. A namespace
// with no cache running answers NotFound: the caller reads the server.
func (r *References) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c := r.cacheOf(key.Namespace)
	if c == nil {
		return apierrors.NewNotFound(schema.GroupResource{Resource: obj.GetObjectKind().GroupVersionKind().Kind}, key.Name)
	}
	return c.Get(ctx, key, obj, opts...)
}

// List lists a namespace's cache; only a namespaced list is served.
func (r *References) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	c := r.cacheOf(o.Namespace)
	if c == nil {
		if o.Namespace == "" {
			return errors.New("the references caches serve namespaced lists only")
		}
		return nil
	}
	return c.List(ctx, list, opts...)
}

func (r *References) cacheOf(namespace string) cache.Cache {
	r.mu.Lock()
	defer r.mu.Unlock()
	if nr := r.caches[namespace]; nr != nil {
		return nr.cache
	}
	return nil
}
