// Package metrics holds the Prometheus collectors of the glance-operator
// manager: the per-step reconcile vectors the pipeline feeds, the per-CR
// db-sync and db-purge run vectors, and the state of each Glance.
//
// New builds the collectors and registers them with the Registerer it is
// given: the manager passes controller-runtime's registry
// (sigs.k8s.io/controller-runtime/pkg/metrics.Registry) so they are served on
// the manager's /metrics endpoint; tests pass a private
// prometheus.NewRegistry() so they neither collide nor share counts.
package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Namespace prefixes every metric of the operator.
const Namespace = "glance_operator"

// Label names.
const (
	LabelSubReconciler = "sub_reconciler"
	LabelConditionType = "condition_type"
	LabelGlance        = "glance"
	LabelNamespace     = "namespace"
	LabelResult        = "result"
)

// Values of the result label of the run counters.
const (
	ResultSucceeded = "succeeded"
	ResultFailed    = "failed"
)

// ReconcileDurationBuckets are the buckets of the per-step duration
// histogram: a step is an API round trip or a few, so they span 10ms to 30s.
var ReconcileDurationBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// JobDurationBuckets are the buckets of the db-sync and db-purge run
// durations: these are Kubernetes Jobs (pod scheduling, image pull, a
// migration or a bounded purge), so they span 5s to 2h.
var JobDurationBuckets = []float64{5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200}

// Reconcile holds the collectors of the reconcile pipeline.
type Reconcile struct {
	// Duration times each step and each parallel group member, labelled by
	// sub_reconciler (the step name).
	Duration *prometheus.HistogramVec
	// Errors counts the errors (recovered panics included) of each step,
	// labelled by sub_reconciler and the condition_type the step reports.
	Errors *prometheus.CounterVec
}

// JobRuns holds the collectors of one kind of per-CR Job run.
type JobRuns struct {
	// Total counts terminal runs, labelled by glance, namespace and result
	// (ResultSucceeded or ResultFailed).
	Total *prometheus.CounterVec
	// Duration times terminal runs, labelled by glance and namespace.
	Duration *prometheus.HistogramVec
	// LastSuccess is when the newest successful run completed, as a Unix
	// time, labelled by glance and namespace: an alert sees a run that
	// stopped happening.
	LastSuccess *prometheus.GaugeVec
}

// Observe records one terminal run of the Glance namespace/name.
func (j *JobRuns) Observe(namespace, name, result string, d time.Duration) {
	j.Total.WithLabelValues(name, namespace, result).Inc()
	j.Duration.WithLabelValues(name, namespace).Observe(d.Seconds())
}

// Succeeded records that the newest successful run of the Glance
// namespace/name completed at t. It is set on every pass that sees the run,
// so a restarted manager exports it again.
func (j *JobRuns) Succeeded(namespace, name string, t time.Time) {
	j.LastSuccess.WithLabelValues(name, namespace).Set(float64(t.UnixNano()) / 1e9)
}

// forget drops every series of the Glance namespace/name.
func (j *JobRuns) forget(namespace, name string) {
	labels := prometheus.Labels{LabelGlance: name, LabelNamespace: namespace}
	j.Total.DeletePartialMatch(labels)
	j.Duration.DeletePartialMatch(labels)
	j.LastSuccess.DeletePartialMatch(labels)
}

// Metrics are all collectors of the manager.
type Metrics struct {
	Reconcile *Reconcile
	// DBSync covers the glance-manage db sync Job of the schema migration.
	DBSync *JobRuns
	// DBPurge covers the runs of the recurring db-purge CronJob.
	DBPurge *JobRuns
	// TargetClusters are the registered target clusters.
	TargetClusters *TargetClusters
	// ImageCacheEvictions counts the Glance pods the kubelet evicted for
	// filling their image-cache emptyDir, each pod once, labelled by glance
	// and namespace: nothing else names that cause, and a pruner that never
	// runs shows as nothing but evictions.
	ImageCacheEvictions *prometheus.CounterVec
	// registerer is where New registered the collectors, for
	// RegisterLeaderMetrics.
	registerer prometheus.Registerer
}

// New builds the collectors and registers them with reg. It fails when any
// of them is already registered there, e.g. when New runs twice against
// controller-runtime's global registry.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Reconcile: &Reconcile{
			Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
				Namespace: Namespace,
				Name:      "reconcile_duration_seconds",
				Help:      "Duration of each reconcile pipeline step, by sub-reconciler.",
				Buckets:   ReconcileDurationBuckets,
			}, []string{LabelSubReconciler}),
			Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
				Namespace: Namespace,
				Name:      "reconcile_errors_total",
				Help:      "Errors (recovered panics included) of each reconcile pipeline step, by sub-reconciler and the condition type it reports.",
			}, []string{LabelSubReconciler, LabelConditionType}),
		},
		DBSync:         newJobRuns("db_sync", "glance-manage db sync runs"),
		DBPurge:        newJobRuns("db_purge", "db-purge CronJob runs"),
		TargetClusters: newTargetClusters(),
		ImageCacheEvictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace,
			Name:      "image_cache_evictions_total",
			Help:      "Glance pods the kubelet evicted because their image-cache emptyDir exceeded its size limit, by Glance.",
		}, []string{LabelGlance, LabelNamespace}),
		registerer: reg,
	}
	var errs []error
	for _, c := range m.collectors() {
		errs = append(errs, reg.Register(c))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

func newJobRuns(name, what string) *JobRuns {
	return &JobRuns{
		Total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace,
			Name:      name + "_total",
			Help:      "Terminal " + what + ", by Glance and result.",
		}, []string{LabelGlance, LabelNamespace, LabelResult}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace,
			Name:      name + "_duration_seconds",
			Help:      "Duration of terminal " + what + ", by Glance.",
			Buckets:   JobDurationBuckets,
		}, []string{LabelGlance, LabelNamespace}),
		LastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace,
			Name:      name + "_last_success_timestamp_seconds",
			Help:      "Unix time the newest successful one of the " + what + " completed, by Glance.",
		}, []string{LabelGlance, LabelNamespace}),
	}
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		m.Reconcile.Duration, m.Reconcile.Errors,
		m.DBSync.Total, m.DBSync.Duration, m.DBSync.LastSuccess,
		m.DBPurge.Total, m.DBPurge.Duration, m.DBPurge.LastSuccess,
		m.TargetClusters,
		m.ImageCacheEvictions,
	}
}

// RegisterLeaderMetrics registers the state metrics of the Glances reader
// holds (see GlanceState) beside the other collectors, and from then on
// exports them and the target clusters gauge only while leading reports
// true: every replica holds the same Glances and probes the same targets,
// and only the leader's view is acted on. Call it before the metrics are
// served.
func (m *Metrics) RegisterLeaderMetrics(reader client.Reader, leading func() bool) error {
	m.TargetClusters.leading = leading
	return m.registerer.Register(NewGlanceState(reader, leading))
}

// TrackGlance creates the counters of the Glance namespace/name at 0, so the
// first failed run or eviction is an increase from 0 that increase() sees,
// rather than a series born at 1 that it does not.
func (m *Metrics) TrackGlance(namespace, name string) {
	for _, j := range []*JobRuns{m.DBSync, m.DBPurge} {
		for _, result := range []string{ResultSucceeded, ResultFailed} {
			j.Total.WithLabelValues(name, namespace, result)
		}
	}
	m.ImageCacheEvictions.WithLabelValues(name, namespace)
}

// ForgetGlance drops every series of the Glance namespace/name, so a deleted
// CR does not keep exporting stale counts. The reconcile vectors carry no
// per-CR labels and are left alone.
func (m *Metrics) ForgetGlance(namespace, name string) {
	m.DBSync.forget(namespace, name)
	m.DBPurge.forget(namespace, name)
	m.ImageCacheEvictions.DeletePartialMatch(prometheus.Labels{LabelGlance: name, LabelNamespace: namespace})
}
