package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Label names of the target clusters gauge.
const (
	LabelCluster   = "cluster"
	LabelConnected = "connected"
)

// TargetClusters is the gauge of registered target clusters: one series of
// value 1 per kubeconfig Secret, connected "true" while its API server
// answers and its caches have synced, "false" otherwise (refused
// kubeconfigs included).
//
// It is a collector of its own: once RegisterLeaderMetrics gives it a
// leading func, a standby replica exports nothing, so one standby that
// cannot reach a target does not report it disconnected.
type TargetClusters struct {
	Gauge *prometheus.GaugeVec
	// leading, when set, gates Collect.
	leading func() bool
}

// Describe implements prometheus.Collector.
func (t *TargetClusters) Describe(ch chan<- *prometheus.Desc) { t.Gauge.Describe(ch) }

// Collect implements prometheus.Collector.
func (t *TargetClusters) Collect(ch chan<- prometheus.Metric) {
	if t.leading == nil || t.leading() {
		t.Gauge.Collect(ch)
	}
}

func newTargetClusters() *TargetClusters {
	return &TargetClusters{Gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "target_clusters",
		Help:      "Registered target clusters (1 each), by whether the operator is connected to them.",
	}, []string{LabelCluster, LabelConnected})}
}

// Set records cluster as registered and connected or not, dropping its
// series of the other state. A nil TargetClusters records nothing.
func (t *TargetClusters) Set(cluster string, connected bool) {
	if t == nil {
		return
	}
	t.Gauge.WithLabelValues(cluster, strconv.FormatBool(connected)).Set(1)
	t.Gauge.DeleteLabelValues(cluster, strconv.FormatBool(!connected))
}

// Forget drops the series of a cluster that is no longer registered.
func (t *TargetClusters) Forget(cluster string) {
	if t == nil {
		return
	}
	t.Gauge.DeletePartialMatch(prometheus.Labels{LabelCluster: cluster})
}
