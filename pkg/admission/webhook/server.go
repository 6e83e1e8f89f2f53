package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
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

// Verdicts, the values of the verdict label.
const (
	VerdictAllowed = "allowed"
	VerdictDenied  = "denied"
	// VerdictError is a review that could not be judged in full: an
	// undecodable request, a handler failure, or a failed lookup that made
	// the rules fail closed.
	VerdictError = "error"
)

// Metric names. They live in a registry of their own (see RunServer).
const (
	RequestsMetric          = "glance_webhook_requests_total"
	RequestDurationMetric   = "glance_webhook_request_duration_seconds"
	RequestsInFlightMetric  = "glance_webhook_requests_in_flight"
	CertificateExpiryMetric = "glance_webhook_serving_certificate_expiry_timestamp_seconds"
)

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

// certificatePollInterval is how often RunServer looks for a serving
// certificate that is not there yet.
const certificatePollInterval = time.Second

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

// waitForCertificate polls CertDir until the certificate and key load. It
// returns nil, nil when ctx ends first.
func (s *server) waitForCertificate(ctx context.Context, auxErrs <-chan error) (*certwatcher.CertWatcher, error) {
	certPath := filepath.Join(s.opts.CertDir, s.opts.CertName)
	keyPath := filepath.Join(s.opts.CertDir, s.opts.KeyName)
	tick := time.NewTicker(certificatePollInterval)
	defer tick.Stop()
	waiting := false
	for {
		w, err := certwatcher.New(certPath, keyPath)
		if err == nil {
			w.RegisterCallback(s.certificateLoaded)
			s.certificate.Store(w)
			return w, nil
		}
		if !waiting {
			s.log.Info("waiting for the serving certificate", "cert", certPath, "key", keyPath, "reason", err.Error())
			waiting = true
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case err := <-auxErrs:
			return nil, err
		case <-tick.C:
		}
	}
}

// certificateLoaded runs on the first load and on every rotation.
func (s *server) certificateLoaded(c tls.Certificate) {
	leaf := c.Leaf
	if leaf == nil {
		return
	}
	s.metrics.certificateExpiry.Set(float64(leaf.NotAfter.Unix()))
	s.log.Info("serving certificate loaded", "serial", leaf.SerialNumber.String(), "notAfter", leaf.NotAfter.UTC(), "dnsNames", leaf.DNSNames)
}

// healthMux serves /healthz (the process answers) and /readyz (the
// certificate is loaded, the TLS listener completes a handshake, and the
// server is not shutting down).
func (s *server) healthMux() *http.ServeMux {
	live := &healthz.Handler{Checks: map[string]healthz.Checker{"ping": healthz.Ping}}
	ready := &healthz.Handler{Checks: map[string]healthz.Checker{
		"serving-certificate": func(*http.Request) error {
			if s.certificate.Load() == nil {
				return fmt.Errorf("no serving certificate loaded from %s yet", s.opts.CertDir)
			}
			return nil
		},
		"tls-listener": func(r *http.Request) error {
			check := s.tlsChecker.Load()
			if check == nil {
				return errors.New("TLS listener not started")
			}
			return (*check)(r)
		},
		"not-shutting-down": func(*http.Request) error {
			if s.shuttingDown.Load() {
				return errors.New("shutting down")
			}
			return nil
		},
	}}
	mux := http.NewServeMux()
	for path, h := range map[string]http.Handler{"/healthz": live, "/readyz": ready} {
		mux.Handle(path, http.StripPrefix(path, h))
		mux.Handle(path+"/", http.StripPrefix(path, h))
	}
	return mux
}

func metricsMux(registry *prometheus.Registry) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(metricsGatherer(registry), promhttp.HandlerOpts{Registry: registry}))
	return mux
}

// metricsGatherer gathers the server's own registry and then controller-
// runtime's global one. controller-runtime records into the global registry
// whatever this server does: every review by webhook and HTTP code
// (controller_runtime_webhook_*), every certificate read and read error
// (certwatcher_*), and the API requests of the lookups by status code
// (rest_client_requests_total).
// That cannot be switched off, so it is served rather than thrown away:
// the HTTP codes and the certificate read errors are nowhere else. Those
// series are process-wide. A family the own registry has (the Go and
// process collectors, when something in the process registers them
// globally too) is served once, from the own registry.
func metricsGatherer(own prometheus.Gatherer) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		families, err := own.Gather()
		if err != nil {
			return families, err
		}
		seen := make(map[string]bool, len(families))
		for _, f := range families {
			seen[f.GetName()] = true
		}
		shared, err := crmetrics.Registry.Gather()
		for _, f := range shared {
			if !seen[f.GetName()] {
				families = append(families, f)
			}
		}
		slices.SortFunc(families, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
		return families, err
	})
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

// reviewRecord carries what logging and metrics need from a review from
// inside the webhook (where the request is decoded) out to instrument.
type reviewRecord struct {
	handled   bool
	uid       types.UID
	kind      string
	name      string
	namespace string
	operation admissionv1.Operation
	allowed   bool
	result    *metav1.Status
	// refusal is why a request was not judged: not an AdmissionReview the
	// server speaks, or not decodable.
	refusal error
}

type reviewRecordKey struct{}

// recordResponse notes the request and response of each review in the
// request's reviewRecord. A review that never gets here (refused by
// reviewHandler) or panics leaves the record unhandled.
func recordResponse(next cradmission.Handler) cradmission.Handler {
	return cradmission.HandlerFunc(func(ctx context.Context, req cradmission.Request) cradmission.Response {
		resp := next.Handle(ctx, req)
		if rec, ok := ctx.Value(reviewRecordKey{}).(*reviewRecord); ok {
			*rec = reviewRecord{
				handled:   true,
				uid:       req.UID,
				kind:      req.Kind.Kind,
				name:      req.Name,
				namespace: req.Namespace,
				operation: req.Operation,
				allowed:   resp.Allowed,
				result:    resp.Result,
			}
		}
		return resp
	})
}

func (r *reviewRecord) verdict() string {
	if !r.handled {
		return VerdictError
	}
	return verdictOf(r.allowed, r.result)
}

// verdictOf classifies an admission response.
func verdictOf(allowed bool, result *metav1.Status) string {
	if allowed {
		return VerdictAllowed
	}
	if result == nil {
		return VerdictDenied
	}
	if result.Code == http.StatusBadRequest || result.Code == http.StatusRequestEntityTooLarge || result.Code >= http.StatusInternalServerError {
		return VerdictError
	}
	if result.Details != nil {
		for _, c := range result.Details.Causes {
			if c.Type == metav1.CauseType(field.ErrorTypeInternal) {
				return VerdictError
			}
		}
	}
	return VerdictDenied
}

// logReview logs one review by its identity and verdict. It never logs the
// object or the response message, which quotes field values (an
// extraConfig value can be a password); a denial names only the fields.
func logReview(log logr.Logger, rec *reviewRecord, verdict string, elapsed time.Duration) {
	if !rec.handled {
		if rec.refusal != nil {
			log.Error(rec.refusal, "admission review refused before a verdict", "verdict", verdict, "durationSeconds", elapsed.Seconds())
			return
		}
		log.Error(errors.New("review failed before a verdict"), "admission review not judged (handler panic)", "verdict", verdict, "durationSeconds", elapsed.Seconds())
		return
	}
	kv := []any{
		"uid", rec.uid, "kind", rec.kind, "name", rec.name, "namespace", rec.namespace,
		"operation", rec.operation, "verdict", verdict, "durationSeconds", elapsed.Seconds(),
	}
	if rec.result != nil && verdict != VerdictAllowed {
		kv = append(kv, "code", rec.result.Code, "reason", rec.result.Reason)
		if d := rec.result.Details; d != nil && len(d.Causes) > 0 {
			fields := make([]string, 0, len(d.Causes))
			for _, c := range d.Causes {
				fields = append(fields, string(c.Type)+" "+c.Field)
			}
			kv = append(kv, "causes", fields)
		}
	}
	switch verdict {
	case VerdictAllowed:
		// Allowed reviews are the bulk; the API server's audit log has them.
		log.V(1).Info("admission review", kv...)
	case VerdictDenied:
		log.Info("admission review", kv...)
	default:
		log.Error(errors.New("admission review failed"), "admission review", kv...)
	}
}

// serverMetrics are the collectors of one server.
type serverMetrics struct {
	requests          *prometheus.CounterVec
	duration          *prometheus.HistogramVec
	inFlight          *prometheus.GaugeVec
	certificateExpiry prometheus.Gauge
	byPath            map[string]*pathMetrics
}

// pathMetrics are the series of one webhook, resolved once so that a review
// does no label lookups.
type pathMetrics struct {
	requests map[string]prometheus.Counter
	duration map[string]prometheus.Observer
	inFlight prometheus.Gauge
}

var verdicts = []string{VerdictAllowed, VerdictDenied, VerdictError}

func newServerMetrics(reg prometheus.Registerer, paths []string) *serverMetrics {
	m := &serverMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: RequestsMetric,
			Help: "Admission reviews served, by webhook path and verdict (allowed, denied, error).",
		}, []string{"webhook", "verdict"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: RequestDurationMetric,
			Help: "Time from receiving an admission review to writing its response, by webhook path and verdict.",
			// From in-process rule evaluation (sub-millisecond) to lookups
			// near the API server's webhook timeout (10s default, 30s max).
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"webhook", "verdict"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: RequestsInFlightMetric,
			Help: "Admission reviews being served, by webhook path.",
		}, []string{"webhook"}),
		certificateExpiry: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: CertificateExpiryMetric,
			Help: "NotAfter of the serving certificate loaded last, in Unix seconds; a value that does not advance means rotation is not picked up.",
		}),
		byPath: map[string]*pathMetrics{},
	}
	reg.MustRegister(m.requests, m.duration, m.inFlight, m.certificateExpiry)
	for _, p := range paths {
		pm := &pathMetrics{
			requests: map[string]prometheus.Counter{},
			duration: map[string]prometheus.Observer{},
			inFlight: m.inFlight.WithLabelValues(p),
		}
		// Every series exists from the start, so rate() over a verdict
		// that has not happened yet is 0 rather than absent.
		for _, v := range verdicts {
			pm.requests[v] = m.requests.WithLabelValues(p, v)
			pm.duration[v] = m.duration.WithLabelValues(p, v)
		}
		m.byPath[p] = pm
	}
	return m
}

func (m *serverMetrics) forPath(path string) *pathMetrics { return m.byPath[path] }

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
