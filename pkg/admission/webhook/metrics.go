package webhook

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metric names. They live in controller-runtime's registry, which the
// metrics address serves.
const (
	RequestsMetric          = "glance_webhook_requests_total"
	RequestDurationMetric   = "glance_webhook_request_duration_seconds"
	RequestsInFlightMetric  = "glance_webhook_requests_in_flight"
	CertificateExpiryMetric = "glance_webhook_serving_certificate_expiry_timestamp_seconds"
)

// serverMetrics are the collectors of the process: its servers share them.
type serverMetrics struct {
	mu                sync.Mutex
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

var verdicts = []string{VerdictAllowed, VerdictDenied, VerdictError, VerdictThrottled}

// processMetrics registers the collectors once per process.
var processMetrics = sync.OnceValue(func() *serverMetrics {
	m := &serverMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: RequestsMetric,
			Help: "Admission reviews served, by webhook path and verdict (allowed, denied, error, throttled).",
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
	crmetrics.Registry.MustRegister(m.requests, m.duration, m.inFlight, m.certificateExpiry)
	return m
})

// RegisterMetrics registers the webhook's collectors in controller-runtime's
// registry, once per process: RunServer does, and so does the test that holds
// the dashboard and the alerts to the metrics the binaries register.
func RegisterMetrics() { processMetrics() }

// forPath resolves the series of a webhook, creating every one of them on
// registration so that rate() over a verdict that has not happened yet is
// 0 rather than absent.
func (m *serverMetrics) forPath(path string) *pathMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pm, ok := m.byPath[path]; ok {
		return pm
	}
	pm := &pathMetrics{
		requests: map[string]prometheus.Counter{},
		duration: map[string]prometheus.Observer{},
		inFlight: m.inFlight.WithLabelValues(path),
	}
	for _, v := range verdicts {
		pm.requests[v] = m.requests.WithLabelValues(path, v)
		pm.duration[v] = m.duration.WithLabelValues(path, v)
	}
	m.byPath[path] = pm
	return pm
}
