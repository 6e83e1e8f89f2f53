package targetcluster

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/metrics"
)

// RegistryOptions configure a Registry.
type RegistryOptions struct {
	// Namespace holds the kubeconfig Secrets: the manager's
	// --clusters-namespace.
	Namespace string
	// Management is what a Glance without a targetClusterRef resolves to.
	Management *Cluster
	// Scheme knows the CRs and the child kinds; every target's client and
	// caches use it.
	Scheme *runtime.Scheme
	// WatchNamespaces scope every target's caches as the management
	// cluster's are; empty means all.
	WatchNamespaces []string
	// HTTPClient reaches the management cluster for the kubeconfig Secrets
	// (the manager's); nil builds one from the config.
	HTTPClient *http.Client
	// Metrics, when set, exports the target clusters gauge.
	Metrics *metrics.TargetClusters
	// ProbeInterval is how often each target's API server is probed for
	// its /readyz; 0 means 10s.
	ProbeInterval time.Duration
	// ProbeTimeout bounds one probe; 0 means 5s.
	ProbeTimeout time.Duration
	// ConnectTimeout bounds how long Resolve waits for a target that is
	// still connecting (the first list of the kubeconfig Secrets, a target's
	// first cache sync), so a manager start or a kubeconfig rotation does not
	// flap the Glances on it to TargetClusterUnavailable; 0 means 10s.
	ConnectTimeout time.Duration
	// Logger; the zero value means controller-runtime's log.
	Logger logr.Logger
	// RegisterIndexes registers the field indexes of the children on a
	// target's cache before it starts; nil registers none.
	RegisterIndexes func(context.Context, client.FieldIndexer) error
}

// Target is a registered target cluster while it runs.
type Target struct {
	// Name is the name of its kubeconfig Secret.
	Name string
	// Cluster holds its client, the cache of the operator's children on it
	// (scoped by CacheOptions), its API reader and its RESTMapper.
	cluster.Cluster
	// References are the metadata-only caches of the user's Secrets and
	// ConfigMaps on it, one per namespace that holds a Glance.
	References *References
}

// Registry resolves a Glance to the management cluster or to a registered
// target cluster. As a manager.Runnable it watches the kubeconfig Secrets
// and runs one controller-runtime cluster per Secret: started when the
// Secret appears, restarted when its kubeconfig changes, stopped when the
// Secret goes or loses the label.
type Registry struct {
	cfg *rest.Config
	o   RegistryOptions
	log logr.Logger
	// listed closes once the kubeconfig Secrets have been listed.
	listed chan struct{}

	mu       sync.Mutex
	ctx      context.Context // Start's; every target runs under it
	stopping bool
	clusters map[string]*registration
	// deregistered closes once the last run of a deregistered name has
	// stopped, so a Secret created again starts only after that.
	deregistered map[string]<-chan struct{}
	onStart      []func(context.Context, *Target)
	onStop       []func(string)
	onReach      []func(string)
	runs         sync.WaitGroup
}

var (
	_ Resolver                       = (*Registry)(nil)
	_ manager.Runnable               = (*Registry)(nil)
	_ manager.LeaderElectionRunnable = (*Registry)(nil)
)

// NewRegistry builds a Registry reading the kubeconfig Secrets through cfg,
// the management cluster's config. Add it to the manager with mgr.Add.
func NewRegistry(cfg *rest.Config, o RegistryOptions) (*Registry, error) {
	switch {
	case cfg == nil:
		return nil, errors.New("target cluster registry: no config of the management cluster")
	case o.Namespace == "":
		return nil, errors.New("target cluster registry: no clusters namespace")
	case o.Management == nil:
		return nil, errors.New("target cluster registry: no management cluster")
	case o.Scheme == nil:
		return nil, errors.New("target cluster registry: no scheme")
	}
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = 10 * time.Second
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = 5 * time.Second
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	log := o.Logger
	if log.GetSink() == nil {
		log = ctrllog.Log
	}
	return &Registry{
		cfg: cfg, o: o, log: log.WithName("target-clusters"),
		listed:   make(chan struct{}),
		clusters: map[string]*registration{}, deregistered: map[string]<-chan struct{}{},
	}, nil
}

// OnStart registers fn, called each time a target cluster has connected
// after it started (its Secret appeared or its kubeconfig changed): its
// caches have synced and its API server answers. ctx ends when that target
// stops, so watches started with it end with it. fn runs on the target's
// goroutine and must not block. Register before Start.
func (r *Registry) OnStart(fn func(ctx context.Context, t *Target)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onStart = append(r.onStart, fn)
}

// OnStop registers fn, called once a target that OnStart reported has
// stopped: its Secret went, lost the label or changed, or the registry shut
// down. A restarted target's OnStop comes before its new OnStart. Register
// before Start.
func (r *Registry) OnStop(fn func(name string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onStop = append(r.onStop, fn)
}

// OnReachabilityChange registers fn, called each time a started target's
// API server stops answering or answers again, so what resolves it can
// report the change without waiting for a requeue. fn runs on the target's
// goroutine and must not block. Register before Start.
func (r *Registry) OnReachabilityChange(fn func(name string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onReach = append(r.onReach, fn)
}

// NeedLeaderElection is false: like the manager's caches, the targets'
// caches warm on every replica, so a new leader resolves at once.
func (r *Registry) NeedLeaderElection() bool { return false }

// Resolve implements Resolver: nil is the management cluster; a reference
// is its registered target, or an error saying why not.
func (r *Registry) Resolve(ctx context.Context, ref *v1alpha1.TargetClusterReference) (*Cluster, error) {
	if ref == nil {
		return r.o.Management, nil
	}
	if !r.wait(ctx, r.listed) {
		return nil, fmt.Errorf("target cluster %q is not known yet: the kubeconfig Secrets in namespace %q have not been read yet", ref.Name, r.o.Namespace)
	}
	r.mu.Lock()
	reg := r.clusters[ref.Name]
	r.mu.Unlock()
	switch {
	case reg == nil:
		return nil, fmt.Errorf("target cluster %q is %w: no Secret %q in namespace %q carries the label %s: \"true\"",
			ref.Name, ErrNotRegistered, ref.Name, r.o.Namespace, KubeconfigSecretLabel)
	case reg.refused != nil:
		return nil, fmt.Errorf("target cluster %q is refused: kubeconfig Secret %s/%s: %w", ref.Name, r.o.Namespace, ref.Name, reg.refused)
	}
	r.wait(ctx, reg.run.settled)
	c, err := reg.run.state()
	if err != nil {
		return nil, fmt.Errorf("target cluster %q is not reachable: %w", ref.Name, err)
	}
	return c, nil
}

// wait waits for ch, at most ConnectTimeout.
func (r *Registry) wait(ctx context.Context, ch <-chan struct{}) bool {
	t := time.NewTimer(r.o.ConnectTimeout)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
	case <-t.C:
	}
	return false
}

// Start watches the kubeconfig Secrets and runs their clusters until ctx
// ends, then stops every cluster and returns once all have stopped.
func (r *Registry) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.mu.Lock()
	if r.ctx != nil {
		r.mu.Unlock()
		return errors.New("target cluster registry started twice")
	}
	r.ctx = ctx
	r.mu.Unlock()

	// A cache of its own: the kubeconfig Secrets of one namespace, by label,
	// and nothing else.
	secrets, err := cache.New(r.cfg, cache.Options{
		Scheme:               r.o.Scheme,
		HTTPClient:           r.o.HTTPClient,
		DefaultNamespaces:    map[string]cache.Config{r.o.Namespace: {}},
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{KubeconfigSecretLabel: "true"}),
		DefaultTransform:     cache.TransformStripManagedFields(),
	})
	if err != nil {
		return fmt.Errorf("target cluster registry: %w", err)
	}
	informer, err := secrets.GetInformer(ctx, &corev1.Secret{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("target cluster registry: watch the kubeconfig Secrets: %w", err)
	}
	handle, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.secretChanged(obj, false) },
		UpdateFunc: func(_, obj any) { r.secretChanged(obj, false) },
		DeleteFunc: func(obj any) { r.secretChanged(obj, true) },
	})
	if err != nil {
		return fmt.Errorf("target cluster registry: watch the kubeconfig Secrets: %w", err)
	}
	var startErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		startErr = secrets.Start(ctx)
		cancel()
	}()
	if toolscache.WaitForCacheSync(ctx.Done(), handle.HasSynced) {
		close(r.listed)
		r.log.Info("Kubeconfig Secrets listed", "namespace", r.o.Namespace)
	}
	<-ctx.Done()
	r.shutdown()
	<-done
	return startErr
}

func (r *Registry) shutdown() {
	r.mu.Lock()
	r.stopping = true
	for name, reg := range r.clusters {
		reg.stop()
		r.o.Metrics.Forget(name)
	}
	r.mu.Unlock()
	r.runs.Wait()
}

func (r *Registry) secretChanged(obj any, deleted bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return
	}
	if deleted {
		r.apply(s.Name, nil)
		return
	}
	r.apply(s.Name, s)
}

// registration is the state of one kubeconfig Secret: refused, or running.
type registration struct {
	// digest is of the kubeconfig, so other edits of the Secret restart
	// nothing.
	digest  [sha256.Size]byte
	refused error
	run     *run
	// prev closes once the previous run of the same name has stopped; a
	// refused registration carries it on to the next run.
	prev <-chan struct{}
}

// stop stops the registration's run and returns what closes once it and
// those before it have stopped.
func (reg *registration) stop() <-chan struct{} {
	if reg.run == nil {
		return reg.prev
	}
	reg.run.cancel()
	return reg.run.done
}

// apply makes the registration of name follow its Secret (nil: gone). It
// never waits for a cluster, so one slow target holds up no other.
func (r *Registry) apply(name string, s *corev1.Secret) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping {
		return
	}
	old := r.clusters[name]
	if s == nil {
		if old != nil {
			r.deregistered[name] = old.stop()
			delete(r.clusters, name)
			r.o.Metrics.Forget(name)
			r.log.Info("Target cluster deregistered", "cluster", name)
		}
		return
	}
	data, hasKey := s.Data[KubeconfigSecretKey]
	digest := sha256.Sum256(append([]byte{boolByte(hasKey)}, data...))
	if old != nil && old.digest == digest {
		return
	}
	reg := &registration{digest: digest, prev: r.deregistered[name]}
	delete(r.deregistered, name)
	if old != nil {
		reg.prev = old.stop()
	}
	cfg, err := KubeconfigFromSecret(s)
	if err == nil {
		reg.run, err = r.newRun(name, cfg)
	}
	r.clusters[name] = reg
	r.o.Metrics.Set(name, false)
	if err != nil {
		reg.refused = err
		r.log.Info("Target cluster refused", "cluster", name, "reason", err.Error())
		return
	}
	if old != nil {
		r.log.Info("Target cluster kubeconfig changed, restarting", "cluster", name)
	} else {
		r.log.Info("Target cluster registered", "cluster", name)
	}
	r.runs.Add(1)
	go r.run(reg.run, reg.prev)
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// run is one start of a target cluster, from its kubeconfig to its stop.
type run struct {
	name   string
	config *rest.Config
	http   *http.Client
	probe  rest.Interface
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// settled closes once Resolve need not wait for the run: it connected,
	// a probe failed, or ConnectTimeout passed.
	settled chan struct{}

	mu       sync.Mutex
	target   *Target  // once built
	cluster  *Cluster // once built
	probeErr error    // of the last probe; errConnecting before the first
	synced   bool     // both caches have synced once
	syncErr  error    // why they have not, when known
	failed   error    // a cache stopped on its own
}

var errConnecting = errors.New("the operator is still connecting to it")

// discoveryTimeout bounds each discovery request of a target, so a server
// that accepts connections and never answers holds up neither its run's
// stop nor the registry's shutdown.
const discoveryTimeout = 30 * time.Second

// newRun prepares a run of name; nothing in it reaches the target yet.
func (r *Registry) newRun(name string, cfg *rest.Config) (*run, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		// controller-runtime's defaults for the management cluster.
		cfg.QPS, cfg.Burst = 20, 30
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		// client-go names what it could not load, not its contents.
		return nil, fmt.Errorf("no client can be built from the kubeconfig: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("no client can be built from the kubeconfig: %w", err)
	}
	rn := &run{
		name: name, config: cfg, http: hc, probe: dc.RESTClient(), probeErr: errConnecting,
		done: make(chan struct{}), settled: make(chan struct{}),
	}
	rn.ctx, rn.cancel = context.WithCancel(r.ctx)
	return rn, nil
}

// build makes the target's cluster and references cache. Both look up how
// the cached kinds are scoped, so this needs the target's discovery.
func (r *Registry) build(rn *run) (*Target, error) {
	watchError := func(ctx context.Context, refl *toolscache.Reflector, err error) {
		rn.setSyncErr(err)
		toolscache.DefaultWatchErrorHandler(ctx, refl, err)
	}
	discoveryHTTP := *rn.http
	discoveryHTTP.Timeout = discoveryTimeout
	c, err := cluster.New(rn.config, func(o *cluster.Options) {
		o.Scheme = r.o.Scheme
		o.HTTPClient = rn.http
		o.MapperProvider = func(cfg *rest.Config, _ *http.Client) (meta.RESTMapper, error) {
			return apiutil.NewDynamicRESTMapper(cfg, &discoveryHTTP)
		}
		o.Cache = CacheOptions(r.o.WatchNamespaces)
		o.NewCache = NewCache
		o.Client = ClientOptions()
		o.Cache.DefaultWatchErrorHandler = watchError
		o.Logger = r.log.WithValues("cluster", rn.name)
	})
	if err != nil {
		return nil, err
	}
	if r.o.RegisterIndexes != nil {
		if err := r.o.RegisterIndexes(context.Background(), c.GetFieldIndexer()); err != nil {
			return nil, err
		}
	}
	opts := ReferencesCacheOptions()
	opts.Scheme, opts.Mapper, opts.HTTPClient = r.o.Scheme, c.GetRESTMapper(), rn.http
	opts.DefaultWatchErrorHandler = watchError
	return &Target{Name: rn.name, Cluster: c, References: NewReferences(rn.config, opts, r.o.WatchNamespaces, c.GetAPIReader())}, nil
}

// run runs rn once the run before it (prev) has stopped, until rn's
// context ends.
func (r *Registry) run(rn *run, prev <-chan struct{}) {
	defer r.runs.Done()
	defer close(rn.done)
	settle := sync.OnceFunc(func() { close(rn.settled) })
	defer settle()
	if prev != nil {
		<-prev
	}
	ctx := rn.ctx
	if ctx.Err() != nil {
		return
	}
	log := r.log.WithValues("cluster", rn.name)

	var wg sync.WaitGroup
	synced := make(chan struct{})
	wg.Go(func() {
		if r.connect(ctx, rn, &wg) {
			close(synced)
		}
	})
	connectTimeout := time.NewTimer(r.o.ConnectTimeout)
	defer connectTimeout.Stop()
	probe := time.NewTicker(r.o.ProbeInterval)
	defer probe.Stop()

	var target *Target
	reported, wasConnected := false, false
	rn.setProbeErr(r.probe(ctx, rn))
	for ctx.Err() == nil {
		_, err := rn.state()
		connected := err == nil
		// Log what changed, not each probe; connecting is not a failure.
		if !errors.Is(err, errConnecting) && (!reported || connected != wasConnected) {
			changed := reported && target != nil
			reported, wasConnected = true, connected
			if connected {
				log.Info("Target cluster connected")
			} else {
				log.Info("Target cluster not reachable", "reason", err.Error())
			}
			if changed {
				r.mu.Lock()
				onReach := r.onReach
				r.mu.Unlock()
				for _, fn := range onReach {
					fn(rn.name)
				}
			}
		}
		if connected || rn.probeFailed() {
			settle()
		}
		r.report(rn, connected)
		if connected && target == nil {
			rn.mu.Lock()
			target = rn.target
			rn.mu.Unlock()
			for _, fn := range r.listeners() {
				fn(ctx, target)
			}
		}
		select {
		case <-ctx.Done():
		case <-synced:
			synced = nil
			rn.setSynced()
		case <-connectTimeout.C:
			settle()
		case <-probe.C:
			rn.setProbeErr(r.probe(ctx, rn))
		}
	}
	wg.Wait()
	log.Info("Target cluster stopped")
	if target != nil {
		r.mu.Lock()
		onStop := r.onStop
		r.mu.Unlock()
		for _, fn := range onStop {
			fn(rn.name)
		}
	}
}

// connect builds the target's caches, starts them (on wg) and waits until
// they have synced, retrying what fails until ctx ends.
func (r *Registry) connect(ctx context.Context, rn *run, wg *sync.WaitGroup) bool {
	var target *Target
	for target == nil {
		var err error
		if target, err = r.build(rn); err != nil {
			rn.setSyncErr(err)
			if !sleep(ctx, r.o.ProbeInterval) {
				return false
			}
		}
	}
	rn.mu.Lock()
	rn.target = target
	rn.cluster = &Cluster{
		Name: rn.name, Client: target.GetClient(), Reader: target.GetAPIReader(), Scheme: r.o.Scheme, RESTMapper: target.GetRESTMapper(),
		References:   target.References,
		ServiceProxy: &ServiceProxy{Host: target.GetConfig().Host, Client: target.GetHTTPClient()},
	}
	rn.mu.Unlock()
	for _, start := range []func(context.Context) error{target.Start, target.References.Start} {
		wg.Go(func() {
			if err := start(ctx); err != nil && ctx.Err() == nil {
				rn.fail(err)
			}
		})
	}
	// Informers for every kind the caches hold, so a synced target has
	// answered for all of them.
	for {
		err := startInformers(ctx, target)
		if err == nil {
			break
		}
		rn.setSyncErr(err)
		if !sleep(ctx, r.o.ProbeInterval) {
			return false
		}
	}
	return target.GetCache().WaitForCacheSync(ctx)
}

func startInformers(ctx context.Context, t *Target) error {
	for _, obj := range CachedKinds() {
		if _, err := t.GetCache().GetInformer(ctx, obj, cache.BlockUntilSynced(false)); err != nil {
			return err
		}
	}
	return nil
}

// sleep waits d, false when ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (r *Registry) listeners() []func(context.Context, *Target) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.onStart
}

// probe asks the target's API server whether it is ready.
func (r *Registry) probe(ctx context.Context, rn *run) error {
	ctx, cancel := context.WithTimeout(ctx, r.o.ProbeTimeout)
	defer cancel()
	_, err := rn.probe.Get().AbsPath("/readyz").DoRaw(ctx)
	return err
}

// report sets the gauge of a run that is still its cluster's current one.
func (r *Registry) report(rn *run, connected bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if reg := r.clusters[rn.name]; r.stopping || reg == nil || reg.run != rn {
		return
	}
	r.o.Metrics.Set(rn.name, connected)
}

// state is the target's Cluster while it is connected, else why not.
func (rn *run) state() (*Cluster, error) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	switch {
	case rn.failed != nil:
		return nil, fmt.Errorf("its cache stopped: %w", rn.failed)
	case rn.probeErr != nil:
		return nil, rn.probeErr
	case !rn.synced && rn.syncErr != nil:
		return nil, fmt.Errorf("its caches have not synced: %w", rn.syncErr)
	case !rn.synced:
		return nil, fmt.Errorf("%w: its caches have not synced yet", errConnecting)
	}
	return rn.cluster, nil
}

func (rn *run) probeFailed() bool {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	return rn.probeErr != nil && rn.probeErr != errConnecting
}

func (rn *run) setProbeErr(err error) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.probeErr = err
}

func (rn *run) setSyncErr(err error) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.syncErr = err
}

func (rn *run) setSynced() {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.synced = true
}

func (rn *run) fail(err error) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.failed = err
}
