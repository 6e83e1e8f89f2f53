// Package operator assembles the manager of cmd/manager: the scheme, the
// scoped caches, both controllers, metrics, health checks and leader
// election.
package operator

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/controller/glance"
	"github.com/c5c3/glance-operator/pkg/controller/glancebackend"
	"github.com/c5c3/glance-operator/pkg/metrics"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
)

// Options configure the manager.
type Options struct {
	// MetricsAddress serves /metrics; "0" disables it.
	MetricsAddress string
	// HealthAddress serves /healthz and /readyz; "0" disables them.
	HealthAddress string
	// PprofAddress serves Go's /debug/pprof endpoints; "" or "0" disables
	// them.
	PprofAddress string
	// LeaderElection makes one replica of several the active one.
	LeaderElection          bool
	LeaderElectionNamespace string
	// LeaseDuration is how long a standby waits before it takes a lease
	// its leader stopped renewing; RenewDeadline how long the leader tries
	// to renew before it stops leading; RetryPeriod how often either
	// tries. Zero takes the Default ones.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// MaxConcurrentReconciles per controller.
	MaxConcurrentReconciles int
	// CoalesceEvents holds each watch event this long in a controller's
	// queue, so the burst one change sets off wakes one pass; 0 wakes a
	// pass per event, as controller-runtime does.
	CoalesceEvents time.Duration
	// WatchNamespaces restricts the operator to these namespaces; empty
	// means all.
	WatchNamespaces []string
	// ClustersNamespace holds the kubeconfig Secrets of target clusters.
	ClustersNamespace string
	// GracefulShutdownTimeout bounds how long running reconciles may finish
	// on shutdown.
	GracefulShutdownTimeout time.Duration
	// Metrics registers the collectors; nil means controller-runtime's
	// global registry, which the metrics server serves.
	Metrics *metrics.Metrics
	// NewClient, when set, builds the manager's client (tests wrap it to
	// count writes).
	NewClient client.NewClientFunc
	// ClusterDomain is the cluster DNS domain of Service names, for the
	// health probe and status.endpoint.
	ClusterDomain string
	// OperatorNamespace is where the operator runs; NetworkPolicies admit
	// its health probes from there.
	OperatorNamespace string
	// DevHealthcheckAddress, when set, sends every health probe to this
	// host:port instead of the Glance's Service. Development only: it lets a
	// manager outside the cluster (make run) probe a stand-in.
	DevHealthcheckAddress string
	// Prober, when set, answers the health probes in place of HTTP (tests
	// choose the answers and count the probes).
	Prober glance.Prober
	// Probes, when set, is the cache of passing probes (tests drive its
	// clock past the TTL).
	Probes *glance.ProbeCache
	// SkipNameValidation lets several managers run in one process (tests);
	// controller names are otherwise process-wide unique.
	SkipNameValidation bool
	// RewindCheckInterval is how often the manager compares the API
	// server's resourceVersion with its caches', and stops when the server
	// went back (pipeline.RewindCheck); 0 never compares.
	RewindCheckInterval time.Duration
	// StaleCacheLimit is how long a controller waits for a cached Glance or
	// GlanceBackend older than its own last write to it, before it takes
	// the copy as current (the versions went back without the rewind check
	// noticing); zero means pipeline.DefaultStaleCacheLimit.
	StaleCacheLimit time.Duration
}

// Leader election takes a Lease in the operator's namespace and records its
// transitions as core Events there; the chart puts these rules in a Role of
// the release namespace.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=glance-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch,namespace=glance-system

// LeaderElectionID names the leader election lease.
const LeaderElectionID = "glance-operator.openstack.c5c3.io"

// NewScheme knows the kinds the operator reads and writes.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, gatewayv1.Install} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// The leader election's timings unless set: client-go's usual ones.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// checkStaleCacheLimit refuses a negative --stale-cache-limit, which would
// take every stale copy as current at once; zero is the default.
func checkStaleCacheLimit(o Options) error {
	if o.StaleCacheLimit < 0 {
		return fmt.Errorf("--stale-cache-limit (%s) must not be negative", o.StaleCacheLimit)
	}
	return nil
}

// leaderElectionTimings are o's timings with the defaults filled in, or why
// client-go's leader election would refuse them, by their flags' names.
func leaderElectionTimings(o Options) (lease, renew, retry time.Duration, err error) {
	lease, renew, retry = cmp.Or(o.LeaseDuration, DefaultLeaseDuration), cmp.Or(o.RenewDeadline, DefaultRenewDeadline), cmp.Or(o.RetryPeriod, DefaultRetryPeriod)
	switch {
	case lease < 0 || renew < 0 || retry < 0:
		err = fmt.Errorf("--leader-elect-lease-duration (%s), --leader-elect-renew-deadline (%s) and --leader-elect-retry-period (%s) must be positive", lease, renew, retry)
	case lease <= renew:
		err = fmt.Errorf("--leader-elect-lease-duration (%s) must be longer than --leader-elect-renew-deadline (%s)", lease, renew)
	case float64(renew) <= leaderelection.JitterFactor*float64(retry):
		err = fmt.Errorf("--leader-elect-renew-deadline (%s) must be longer than %.1f times --leader-elect-retry-period (%s)", renew, leaderelection.JitterFactor, retry)
	}
	return lease, renew, retry, err
}

// New builds the manager with both controllers.
func New(ctx context.Context, cfg *rest.Config, o Options) (ctrl.Manager, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	lease, renew, retry, err := leaderElectionTimings(o)
	if err != nil {
		return nil, err
	}
	if err := checkStaleCacheLimit(o); err != nil {
		return nil, err
	}
	m := o.Metrics
	if m == nil {
		if m, err = metrics.New(ctrlmetrics.Registry); err != nil {
			return nil, err
		}
	}
	// How long the API server takes to answer, and how long the client's
	// rate limit holds requests back: what a pass waits on.
	ctrlmetrics.RegisterRESTClientMetrics(ctrlmetrics.MetricRequestLatency, ctrlmetrics.MetricRateLimiterLatency)
	shutdown := o.GracefulShutdownTimeout
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddress},
		HealthProbeBindAddress:  o.HealthAddress,
		PprofBindAddress:        o.PprofAddress,
		LeaderElection:          o.LeaderElection,
		LeaderElectionID:        LeaderElectionID,
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		LeaseDuration:           &lease,
		RenewDeadline:           &renew,
		RetryPeriod:             &retry,
		// A new leader takes over at once after a clean shutdown.
		LeaderElectionReleaseOnCancel: true,
		// A clean stop is not an error (see withoutStopErrors).
		Logger:                  withoutStopErrors(ctrllog.Log),
		GracefulShutdownTimeout: &shutdown,
		NewClient:               o.NewClient,
		Cache:                   targetcluster.CacheOptions(o.WatchNamespaces),
		// Secrets, the operator's own included, are cached as metadata
		// only: no credential stays in the manager's memory.
		NewCache: targetcluster.NewCache,
		Client:   targetcluster.ClientOptions(),
	})
	if err != nil {
		return nil, err
	}

	// The user's Secrets and ConfigMaps are watched metadata-only in caches
	// of their own, one per namespace that holds a Glance (the main cache
	// holds only the operator's children), and read from the API server
	// when a Glance needs them (a Secret only when its resourceVersion
	// moved, and only what is derived from it is kept).
	referencesOptions := targetcluster.ReferencesCacheOptions()
	referencesOptions.Scheme, referencesOptions.Mapper, referencesOptions.HTTPClient = scheme, mgr.GetRESTMapper(), mgr.GetHTTPClient()
	references := targetcluster.NewReferences(cfg, referencesOptions, o.WatchNamespaces, mgr.GetAPIReader())
	if err := mgr.Add(references); err != nil {
		return nil, err
	}

	if o.RewindCheckInterval > 0 {
		if err := mgr.Add(rewindCheck(mgr.GetClient(), mgr.GetAPIReader(), o)); err != nil {
			return nil, err
		}
	}

	management := &targetcluster.Cluster{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Scheme: scheme, RESTMapper: mgr.GetRESTMapper(),
		References: references,
	}
	// Without a clusters namespace no target is registered, so every
	// targetClusterRef is refused.
	var resolver targetcluster.Resolver = targetcluster.ManagementOnly{Cluster: management}
	var targets glance.Targets
	if o.ClustersNamespace != "" {
		registry, err := targetcluster.NewRegistry(mgr.GetConfig(), targetcluster.RegistryOptions{
			Namespace: o.ClustersNamespace, Management: management, Scheme: scheme,
			WatchNamespaces: o.WatchNamespaces, HTTPClient: mgr.GetHTTPClient(), Metrics: m.TargetClusters,
			RegisterIndexes: registerChildIndexes,
		})
		if err != nil {
			return nil, err
		}
		if err := mgr.Add(registry); err != nil {
			return nil, err
		}
		resolver, targets = registry, registry
	}
	opts := controller.Options{
		MaxConcurrentReconciles: max(o.MaxConcurrentReconciles, 1), SkipNameValidation: &o.SkipNameValidation,
		NewQueue: newQueue(o.CoalesceEvents, nil, mgr.GetLogger()),
	}
	var prober glance.Prober = glance.HTTPProber{Redirect: o.DevHealthcheckAddress}
	if o.Prober != nil {
		prober = o.Prober
	}
	probes := o.Probes
	if probes == nil {
		probes = glance.NewProbeCache()
	}
	glanceReconciler := &glance.Reconciler{
		Client: mgr.GetClient(), Resolver: resolver, Targets: targets, Metrics: m,
		Recorder:          mgr.GetEventRecorder("glance-operator"),
		OperatorNamespace: o.OperatorNamespace,
		ClusterDomain:     o.ClusterDomain,
		Prober:            prober,
		Probes:            probes,
		StaleCacheLimit:   o.StaleCacheLimit,
	}
	if err := registerIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, fmt.Errorf("register the field indexes: %w", err)
	}
	glanceOpts := opts
	glanceOpts.NewQueue = newQueue(o.CoalesceEvents, glanceReconciler.Priority, mgr.GetLogger())
	if err := glanceReconciler.SetupWithManager(ctx, mgr, references, glanceOpts); err != nil {
		return nil, fmt.Errorf("set up the Glance controller: %w", err)
	}
	backendReconciler := &glancebackend.Reconciler{Client: mgr.GetClient(), Resolver: resolver, Targets: targets, Metrics: m, StaleCacheLimit: o.StaleCacheLimit}
	if err := backendReconciler.SetupWithManager(mgr, references, opts); err != nil {
		return nil, fmt.Errorf("set up the GlanceBackend controller: %w", err)
	}
	// A standby replica's cache holds the same Glances: only the leader
	// exports their state.
	leading := func() bool {
		select {
		case <-mgr.Elected():
			return true
		default:
			return false
		}
	}
	if err := m.RegisterLeaderMetrics(mgr.GetCache(), leading); err != nil {
		return nil, fmt.Errorf("register the Glance state metrics: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("caches", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("caches not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return mgr, nil
}

// rewindCheck compares the newest Glance the cache holds with a consistent
// list of one Glance from the API server: its list's resourceVersion is the
// server's now.
func rewindCheck(cache, server client.Reader, o Options) pipeline.RewindCheck {
	var scope []client.ListOption
	if len(o.WatchNamespaces) > 0 {
		scope = append(scope, client.InNamespace(o.WatchNamespaces[0]))
	}
	return pipeline.RewindCheck{
		Interval: o.RewindCheckInterval,
		Newest: func(ctx context.Context) (string, error) {
			var list v1alpha1.GlanceList
			if err := cache.List(ctx, &list); err != nil {
				return "", err
			}
			newest := ""
			for i := range list.Items {
				rv := list.Items[i].ResourceVersion
				if cmp, err := resourceversion.CompareResourceVersion(rv, newest); newest == "" || (err == nil && cmp > 0) {
					newest = rv
				}
			}
			return newest, nil
		},
		Current: func(ctx context.Context) (string, error) {
			var list v1alpha1.GlanceList
			if err := server.List(ctx, &list, append(scope, client.Limit(1))...); err != nil {
				return "", err
			}
			return list.ResourceVersion, nil
		},
	}
}
