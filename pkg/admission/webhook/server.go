package webhook

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/admission"
)

// Defaults of ServerOptions.
const (
	DefaultPort            = 9443
	DefaultCertDir         = "/tmp/k8s-webhook-server/serving-certs"
	DefaultCertName        = "tls.crt"
	DefaultKeyName         = "tls.key"
	DefaultMetricsAddress  = ":8080"
	DefaultHealthAddress   = ":8081"
	DefaultShutdownTimeout = 15 * time.Second
)

// DisabledAddress turns the metrics or the health listener off.
const DisabledAddress = "0"

// ServerOptions configure the admission server. Zero values take the
// defaults above.
type ServerOptions struct {
	// BindAddress is the host the HTTPS listener binds; empty binds all.
	BindAddress string
	// Port of the HTTPS listener.
	Port int
	// CertDir holds the serving certificate and key, typically a mounted
	// Secret issued by cert-manager. They may appear after start, and are
	// re-read whenever they change.
	CertDir           string
	CertName, KeyName string
	// MetricsAddress serves /metrics; DisabledAddress turns it off.
	MetricsAddress string
	// HealthAddress serves /healthz and /readyz; DisabledAddress turns it off.
	HealthAddress string
	// ShutdownTimeout bounds how long in-flight reviews may run after the
	// context is cancelled; reviews still running then are cancelled.
	// controller-runtime's server stops waiting for connections after one
	// minute, so a longer timeout acts as one minute.
	ShutdownTimeout time.Duration
	// EnableHTTP2 offers HTTP/2 (ALPN h2). Off, the listener speaks
	// HTTP/1.1 only, as kubebuilder's scaffold does: HTTP/2's stream reset
	// lets one connection start work faster than the server can cancel it
	// (CVE-2023-44487, "rapid reset"). The API server's webhook client
	// speaks HTTP/1.1 too.
	EnableHTTP2 bool
	// Lookups answers the cross-object questions of validation. Nil means
	// CachedLookups over a watch of the GlanceBackends of WatchNamespaces
	// and an uncached client of the rest config.
	Lookups admission.Lookups
	// WatchNamespaces scopes the watch of GlanceBackends; empty means all.
	WatchNamespaces []string
	// MaxInFlightBytes bounds the request bodies of the reviews served at
	// once, each charged at least 64 KiB; a review over it is answered 429
	// at once, and the API server retries it. At least the largest review.
	MaxInFlightBytes int64
}

// DefaultServerOptions returns the options with every default filled in.
func DefaultServerOptions() ServerOptions {
	return ServerOptions{
		Port:            DefaultPort,
		CertDir:         DefaultCertDir,
		CertName:        DefaultCertName,
		KeyName:         DefaultKeyName,
		MetricsAddress:  DefaultMetricsAddress,
		HealthAddress:   DefaultHealthAddress,
		ShutdownTimeout: DefaultShutdownTimeout,

		MaxInFlightBytes: DefaultMaxInFlightBytes,
	}
}

func (o ServerOptions) withDefaults() (ServerOptions, error) {
	d := DefaultServerOptions()
	o.Port = cmp.Or(o.Port, d.Port)
	o.CertDir = cmp.Or(o.CertDir, d.CertDir)
	o.CertName = cmp.Or(o.CertName, d.CertName)
	o.KeyName = cmp.Or(o.KeyName, d.KeyName)
	o.MetricsAddress = cmp.Or(o.MetricsAddress, d.MetricsAddress)
	o.HealthAddress = cmp.Or(o.HealthAddress, d.HealthAddress)
	o.ShutdownTimeout = cmp.Or(o.ShutdownTimeout, d.ShutdownTimeout)
	o.MaxInFlightBytes = cmp.Or(o.MaxInFlightBytes, d.MaxInFlightBytes)
	switch {
	case o.MaxInFlightBytes < maxReviewSize:
		return o, fmt.Errorf("max in-flight bytes %d is less than the largest review, %d bytes", o.MaxInFlightBytes, maxReviewSize)
	case o.Port < 1 || o.Port > 65535:
		return o, fmt.Errorf("webhook port %d is not in 1-65535", o.Port)
	case o.ShutdownTimeout < 0:
		return o, fmt.Errorf("shutdown timeout %s is negative", o.ShutdownTimeout)
	}
	return o, nil
}

// errDrainTimeout cancels the reviews still running when the shutdown
// timeout passes.
var errDrainTimeout = errors.New("admission server shutdown timeout passed")

// RunServer serves the four admission webhooks over HTTPS until ctx is
// cancelled, then stops accepting connections and lets in-flight reviews
// finish for at most ShutdownTimeout.
//
// It runs them on a controller-runtime manager, which serves /healthz and
// /readyz on the health address, /metrics on the metrics address and the
// webhooks on the HTTPS port, and stops them in that order's reverse. The
// manager's cache holds the GlanceBackends alone, for CachedLookups, unless
// opts.Lookups answers the lookups; /readyz waits for it to sync.
//
// The serving certificate is read from CertDir once it exists and re-read
// on every change (controller-runtime's certwatcher): each handshake takes
// the certificate loaded last, so a rotation needs no restart and fails no
// request. /readyz reports ready once the certificate is loaded and the TLS
// listener completes a handshake, and not ready again once shutdown begins.
//
// The verdict metrics are in controller-runtime's registry, next to its own
// webhook and certwatcher series. Every replica serves; there is no leader
// election.
func RunServer(ctx context.Context, cfg *rest.Config, opts ServerOptions, log logr.Logger) error {
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	if cfg == nil {
		return errors.New("a rest config is required")
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := schedulingv1.AddToScheme(scheme); err != nil {
		return err
	}
	drain, drainExpired := context.WithCancelCause(context.Background())
	defer drainExpired(nil)
	s := &server{opts: opts, log: log, metrics: processMetrics(), drain: drain, shutdown: ctx, budget: &inFlightBudget{max: opts.MaxInFlightBytes}}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   lookupCacheOptions(opts.WatchNamespaces),
		Logger:                  log,
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsAddress},
		HealthProbeBindAddress:  opts.HealthAddress,
		GracefulShutdownTimeout: &opts.ShutdownTimeout,
		WebhookServer: crwebhook.NewServer(crwebhook.Options{
			Host: opts.BindAddress,
			Port: opts.Port,
			TLSOpts: []func(*tls.Config){func(c *tls.Config) {
				c.GetCertificate = s.getCertificate
				c.MinVersion = tls.VersionTLS12
				if !opts.EnableHTTP2 {
					// In place of controller-runtime's h2.
					c.NextProtos = []string{"http/1.1"}
				}
			}},
		}),
	})
	if err != nil {
		return err
	}
	lookups := opts.Lookups
	if lookups == nil {
		// Registering the index creates the informer, which starts with
		// the manager's cache.
		if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.GlanceBackend{}, v1alpha1.IndexBackendGlance, v1alpha1.BackendGlanceIndex); err != nil {
			return err
		}
		lookups = CachedLookups{APILookups: APILookups{Reader: mgr.GetAPIReader()}, Cache: mgr.GetCache()}
		if err := mgr.AddReadyzCheck("backends-cache", cacheSynced(mgr.GetCache())); err != nil {
			return err
		}
	}
	hooks := Handlers(scheme, lookups)
	paths := slices.Sorted(maps.Keys(hooks))
	hookServer := mgr.GetWebhookServer()
	for _, p := range paths {
		hookServer.Register(p, s.instrument(p, hooks[p]))
	}
	if err := s.addHealthChecks(mgr, hookServer.StartedChecker()); err != nil {
		return err
	}
	if err := mgr.Add(manager.RunnableFunc(s.watchCertificate)); err != nil {
		return err
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		s.budget.releaseWhenIdle(ctx, idleReleaseEvery, idleReleaseAbove, debug.FreeOSMemory)
		return nil
	})); err != nil {
		return err
	}
	context.AfterFunc(ctx, func() {
		log.Info("shutting down: no new connections, draining in-flight reviews", "inFlight", s.inFlight.Load(), "timeout", opts.ShutdownTimeout.String())
	})
	log.Info("serving admission webhooks", "address", net.JoinHostPort(opts.BindAddress, strconv.Itoa(opts.Port)), "paths", paths)

	err = mgr.Start(ctx)
	n := s.inFlight.Load()
	drainExpired(errDrainTimeout)
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return fmt.Errorf("shutdown timeout %s passed with %d reviews in flight; they were cancelled", opts.ShutdownTimeout, n)
	case err != nil:
		return fmt.Errorf("admission server: %w", err)
	}
	log.Info("admission server stopped")
	return nil
}

// server is the state RunServer shares with its handlers.
type server struct {
	opts    ServerOptions
	log     logr.Logger
	metrics *serverMetrics
	// drain is cancelled when the shutdown timeout passes.
	drain context.Context
	// shutdown is RunServer's context: once it is done, the server drains.
	shutdown context.Context

	certificate atomic.Pointer[certwatcher.CertWatcher]
	inFlight    atomic.Int64
	budget      *inFlightBudget
}

// instrument wraps a webhook so that each review is counted, timed and
// logged by verdict, and runs under a context that shutdown does not cancel.
func (s *server) instrument(path string, hook *cradmission.Webhook) http.Handler {
	hook.Handler = recordResponse(hook.Handler)
	review := reviewHandler{hook: hook}
	m := s.metrics.forPath(path)
	log := s.log.WithValues("webhook", path)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		charge := reviewCharge(r)
		if !s.budget.acquire(charge) {
			writeTooManyRequests(w)
			m.requests[VerdictThrottled].Inc()
			m.duration[VerdictThrottled].Observe(time.Since(start).Seconds())
			log.V(1).Info("review refused: the reviews in flight are at the limit", "bodyBytes", r.ContentLength, "limitBytes", s.budget.max)
			return
		}
		defer s.budget.release(charge)
		// A body sent slowly would hold its charge: the API server gives a
		// webhook 30s at most.
		_ = http.NewResponseController(w).SetReadDeadline(start.Add(maxReviewTime))
		s.inFlight.Add(1)
		m.inFlight.Inc()
		defer func() {
			m.inFlight.Dec()
			s.inFlight.Add(-1)
		}()

		ctx, release := reviewContext(r.Context(), s.shutdown, s.drain)
		defer release()
		rec := &reviewRecord{}
		review.ServeHTTP(w, r.WithContext(context.WithValue(ctx, reviewRecordKey{}, rec)))

		elapsed := time.Since(start)
		verdict := rec.verdict()
		m.requests[verdict].Inc()
		m.duration[verdict].Observe(elapsed.Seconds())
		logReview(log, rec, verdict, elapsed)
	})
}

// reviewContext derives the context a review runs under from its request's.
// The webhook server cancels every request context when it shuts down;
// a review ignores that cancellation so that it can drain, but still stops
// when its client goes away or the drain context ends.
func reviewContext(req, shutdown, drain context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(req))
	stopReq := context.AfterFunc(req, func() {
		if shutdown.Err() == nil {
			cancel(context.Cause(req))
		}
	})
	stopDrain := context.AfterFunc(drain, func() { cancel(context.Cause(drain)) })
	return ctx, func() {
		stopReq()
		stopDrain()
		cancel(nil)
	}
}

// lookupCacheOptions scope the webhook's cache to the GlanceBackends of
// namespaces (all when empty), without their managed fields.
func lookupCacheOptions(namespaces []string) cache.Options {
	o := cache.Options{DefaultTransform: cache.TransformStripManagedFields()}
	if len(namespaces) > 0 {
		o.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			o.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return o
}

// cacheSynced is ready once the GlanceBackend informer has listed: before,
// each sibling lookup would go to the API server.
func cacheSynced(c cache.Cache) healthz.Checker {
	return func(r *http.Request) error {
		inf, err := c.GetInformer(r.Context(), &v1alpha1.GlanceBackend{}, cache.BlockUntilSynced(false))
		if err != nil {
			return err
		}
		if !inf.HasSynced() {
			return errors.New("the GlanceBackends are not listed yet")
		}
		return nil
	}
}
