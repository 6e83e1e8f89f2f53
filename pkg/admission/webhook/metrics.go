package webhook

import (
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metric names. They live in a registry of their own (see RunServer).
const (
	RequestsMetric          = "glance_webhook_requests_total"
	RequestDurationMetric   = "glance_webhook_request_duration_seconds"
	RequestsInFlightMetric  = "glance_webhook_requests_in_flight"
	CertificateExpiryMetric = "glance_webhook_serving_certificate_expiry_timestamp_seconds"
)

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
