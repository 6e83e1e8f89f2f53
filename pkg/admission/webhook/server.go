package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
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
	// APILookups over an uncached client of the rest config.
	Lookups admission.Lookups
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
	}
}

func (o ServerOptions) withDefaults() (ServerOptions, error) {
	d := DefaultServerOptions()
	if o.Port == 0 {
		o.Port = d.Port
	}
	if o.CertDir == "" {
		o.CertDir = d.CertDir
	}
	if o.CertName == "" {
		o.CertName = d.CertName
	}
	if o.KeyName == "" {
		o.KeyName = d.KeyName
	}
	if o.MetricsAddress == "" {
		o.MetricsAddress = d.MetricsAddress
	}
	if o.HealthAddress == "" {
		o.HealthAddress = d.HealthAddress
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = d.ShutdownTimeout
	}
	switch {
	case o.Port < 1 || o.Port > 65535:
		return o, fmt.Errorf("webhook port %d is not in 1-65535", o.Port)
	case o.ShutdownTimeout < 0:
		return o, fmt.Errorf("shutdown timeout %s is negative", o.ShutdownTimeout)
	}
	return o, nil
}

// errServerShutdown is the cause the webhook server's base context is
// cancelled with, so that reviews can tell shutdown (drain, keep going)
// from their client going away (stop).
var errServerShutdown = errors.New("admission server shutting down")

// errDrainTimeout cancels the reviews still running when the shutdown
// timeout passes.
var errDrainTimeout = errors.New("admission server shutdown timeout passed")

// RunServer serves the four admission webhooks over HTTPS until ctx is
// cancelled, then stops accepting connections and lets in-flight reviews
// finish for at most ShutdownTimeout.
//
// The serving certificate is read from CertDir once it exists and re-read
// on every change (controller-runtime's certwatcher): each handshake takes
// the certificate loaded last, so a rotation needs no restart and fails no
// request. /readyz on the health address reports ready once the
// certificate is loaded and the TLS listener completes a handshake, and
// not ready again once shutdown begins; /healthz reports the process alive.
//
// The request metrics are in a prometheus registry of this server's own,
// served on the metrics address with the Go and process collectors, rather
// than controller-runtime's global registry: each server counts only its
// own reviews, and several can run in one process (tests, benchmarks).
// The metrics address serves controller-runtime's global registry too (see
// metricsGatherer).
//
// Every replica serves; there is no leader election. With no
// opts.Lookups, lookups go to the API server uncached, through cfg.
func RunServer(ctx context.Context, cfg *rest.Config, opts ServerOptions, log logr.Logger) error {
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := schedulingv1.AddToScheme(scheme); err != nil {
		return err
	}
	lookups := opts.Lookups
	if lookups == nil {
		if cfg == nil {
			return errors.New("a rest config is required for the API lookups")
		}
		// Uncached: a webhook judging against a stale cache lets two
		// default backends in.
		reader, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return fmt.Errorf("create API client: %w", err)
		}
		lookups = APILookups{Reader: reader}
	}

	hooks := Handlers(scheme, lookups)
	paths := make([]string, 0, len(hooks))
	for p := range hooks {
		paths = append(paths, p)
	}
	slices.Sort(paths)

	registry := prometheus.NewRegistry()
	registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	drain, drainExpired := context.WithCancelCause(context.Background())
	defer drainExpired(nil)
	s := &server{
		opts:    opts,
		log:     log,
		metrics: newServerMetrics(registry, paths),
		drain:   drain,
	}

	aux := newAuxServers()
	defer aux.close()
	if err := aux.start(opts.HealthAddress, s.healthMux()); err != nil {
		return fmt.Errorf("health listener: %w", err)
	}
	if err := aux.start(opts.MetricsAddress, metricsMux(registry)); err != nil {
		return fmt.Errorf("metrics listener: %w", err)
	}

	watcher, err := s.waitForCertificate(ctx, aux.errs)
	if err != nil || watcher == nil {
		return err
	}
	watchCtx, stopWatching := context.WithCancel(context.Background())
	defer stopWatching()
	go func() {
		if err := watcher.Start(watchCtx); err != nil {
			log.Error(err, "serving certificate watch stopped; rotations are no longer picked up")
		}
	}()

	hookServer := crwebhook.NewServer(crwebhook.Options{
		Host: opts.BindAddress,
		Port: opts.Port,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) {
			c.GetCertificate = watcher.GetCertificate
			c.MinVersion = tls.VersionTLS12
			if !opts.EnableHTTP2 {
				// In place of controller-runtime's h2.
				c.NextProtos = []string{"http/1.1"}
			}
		}},
	})
	for _, p := range paths {
		hookServer.Register(p, s.instrument(p, hooks[p]))
	}
	started := hookServer.StartedChecker()
	s.tlsChecker.Store(&started)

	serveCtx, stopServing := context.WithCancelCause(context.Background())
	defer stopServing(nil)
	served := make(chan error, 1)
	go func() { served <- hookServer.Start(serveCtx) }()
	log.Info("serving admission webhooks", "address", net.JoinHostPort(opts.BindAddress, strconv.Itoa(opts.Port)), "paths", paths)

	select {
	case <-ctx.Done():
	case err := <-served:
		if err == nil {
			err = errors.New("webhook server stopped")
		}
		return fmt.Errorf("webhook server: %w", err)
	case err := <-aux.errs:
		return err
	}

	s.shuttingDown.Store(true)
	log.Info("shutting down: no new connections, draining in-flight reviews", "inFlight", s.inFlight.Load(), "timeout", opts.ShutdownTimeout.String())
	stopServing(errServerShutdown)
	deadline := time.NewTimer(opts.ShutdownTimeout)
	defer deadline.Stop()
	select {
	case err := <-served:
		if err != nil {
			return fmt.Errorf("webhook server shutdown: %w", err)
		}
		log.Info("admission server stopped")
		return nil
	case <-deadline.C:
		n := s.inFlight.Load()
		drainExpired(errDrainTimeout)
		return fmt.Errorf("shutdown timeout %s passed with %d reviews in flight; they were cancelled", opts.ShutdownTimeout, n)
	}
}

// server is the state RunServer shares with its handlers.
type server struct {
	opts    ServerOptions
	log     logr.Logger
	metrics *serverMetrics
	// drain is cancelled when the shutdown timeout passes.
	drain context.Context

	certificate  atomic.Pointer[certwatcher.CertWatcher]
	tlsChecker   atomic.Pointer[healthz.Checker]
	shuttingDown atomic.Bool
	inFlight     atomic.Int64
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
		s.inFlight.Add(1)
		m.inFlight.Inc()
		defer func() {
			m.inFlight.Dec()
			s.inFlight.Add(-1)
		}()

		ctx, release := reviewContext(r.Context(), s.drain)
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
func reviewContext(req, drain context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(req))
	stopReq := context.AfterFunc(req, func() {
		if cause := context.Cause(req); !errors.Is(cause, errServerShutdown) {
			cancel(cause)
		}
	})
	stopDrain := context.AfterFunc(drain, func() { cancel(context.Cause(drain)) })
	return ctx, func() {
		stopReq()
		stopDrain()
		cancel(nil)
	}
}

// auxServers are the plain-HTTP health and metrics servers.
type auxServers struct {
	servers []*http.Server
	errs    chan error
	wg      sync.WaitGroup
}

func newAuxServers() *auxServers { return &auxServers{errs: make(chan error, 2)} }

// start listens on addr before returning, so that a taken port is an error
// of RunServer, and serves in the background.
func (a *auxServers) start(addr string, handler http.Handler) error {
	if addr == DisabledAddress {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	a.servers = append(a.servers, srv)
	a.wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.errs <- fmt.Errorf("serve %s: %w", addr, err)
		}
	})
	return nil
}

// close stops them at once: they run until the webhooks have drained, and
// a probe or scrape cut short then does no harm.
func (a *auxServers) close() {
	for _, srv := range a.servers {
		_ = srv.Close()
	}
	a.wg.Wait()
}
