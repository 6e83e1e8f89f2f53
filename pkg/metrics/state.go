package metrics

import (
	"context"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/release"
	"github.com/c5c3/glance-operator/pkg/render"
)

// Label names of the state metrics.
const (
	LabelType             = "type"
	LabelStatus           = "status"
	LabelReason           = "reason"
	LabelInstalledRelease = "installed_release"
	LabelTargetRelease    = "target_release"
	LabelUpgradePhase     = "upgrade_phase"
	LabelLaunchMode       = "launch_mode"
)

// stateListTimeout bounds the cache read of one scrape.
const stateListTimeout = 5 * time.Second

// exportedConditions are the condition types the state metrics export:
// Ready and the nine it aggregates. Any other type in a status is not the
// operator's and would let whoever wrote it grow the label set.
var exportedConditions = append([]string{v1alpha1.ConditionReady}, v1alpha1.SubConditions...)

// GlanceState exports the state of every Glance, as kube-state-metrics does
// for built-in kinds: it reads the manager's cache at each scrape, so a
// deleted Glance's series go with it, a restarted manager exports at once,
// and nothing is written. Every label takes values of a bounded set: the
// operator's condition types and reasons, releases of the YYYY.N pattern,
// the four upgrade phases and the two launch modes.
type GlanceState struct {
	reader client.Reader
	// leading reports whether this replica is the leader: only the leader
	// exports, so two replicas never export one Glance twice.
	leading       func() bool
	condition     *prometheus.Desc
	info          *prometheus.Desc
	created       *prometheus.Desc
	purgeInterval *prometheus.Desc
	paused        *prometheus.Desc
	// intervals memoizes purgeInterval by schedule: a scrape reads every
	// Glance, and most share a schedule.
	intervals scheduleIntervals
}

// NewGlanceState reads the Glances from reader, exporting while leading
// reports true.
func NewGlanceState(reader client.Reader, leading func() bool) *GlanceState {
	return &GlanceState{
		reader:  reader,
		leading: leading,
		condition: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "glance_condition"),
			"The current status and reason of each condition of each Glance: 1 for each (type, status, reason) it has now.",
			[]string{LabelNamespace, LabelGlance, LabelType, LabelStatus, LabelReason}, nil),
		info: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "glance_info"),
			"Each Glance's releases, upgrade phase and launch mode (always 1).",
			[]string{LabelNamespace, LabelGlance, LabelInstalledRelease, LabelTargetRelease, LabelUpgradePhase, LabelLaunchMode}, nil),
		created: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "glance_created_timestamp_seconds"),
			"Unix time each Glance was created: the start of the wait for a first successful purge.",
			[]string{LabelNamespace, LabelGlance}, nil),
		purgeInterval: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "db_purge_interval_seconds"),
			"The longest gap between two runs of each Glance's db-purge schedule; absent while the purge is suspended.",
			[]string{LabelNamespace, LabelGlance}, nil),
		paused: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "glance_paused"),
			"1 while the annotation "+v1alpha1.AnnotationPaused+` is "true" on the Glance, so that the operator changes nothing of it; else 0.`,
			[]string{LabelNamespace, LabelGlance}, nil),
	}
}

// Describe implements prometheus.Collector.
func (s *GlanceState) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.condition
	ch <- s.info
	ch <- s.created
	ch <- s.purgeInterval
	ch <- s.paused
}

// Collect implements prometheus.Collector.
func (s *GlanceState) Collect(ch chan<- prometheus.Metric) {
	if !s.leading() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stateListTimeout)
	defer cancel()
	var list v1alpha1.GlanceList
	// Read-only: the cache's objects are not copied for a scrape.
	if err := s.reader.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		ch <- prometheus.NewInvalidMetric(s.info, err)
		return
	}
	for i := range list.Items {
		g := &list.Items[i]
		for _, c := range g.Status.Conditions {
			if slices.Contains(exportedConditions, c.Type) {
				ch <- prometheus.MustNewConstMetric(s.condition, prometheus.GaugeValue, 1, g.Namespace, g.Name, c.Type, string(c.Status), c.Reason)
			}
		}
		ch <- prometheus.MustNewConstMetric(s.info, prometheus.GaugeValue, 1, g.Namespace, g.Name,
			g.Status.InstalledRelease, g.Status.TargetRelease, string(g.Status.UpgradePhase), string(release.LaunchModeOf(g.Spec.OpenStackRelease)))
		ch <- prometheus.MustNewConstMetric(s.created, prometheus.GaugeValue, float64(g.CreationTimestamp.Unix()), g.Namespace, g.Name)
		paused := 0.0
		if g.Paused() {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(s.paused, prometheus.GaugeValue, paused, g.Namespace, g.Name)
		if schedule, suspended := render.DBPurgeSchedule(g); !suspended {
			if interval, ok := s.intervals.of(schedule); ok {
				ch <- prometheus.MustNewConstMetric(s.purgeInterval, prometheus.GaugeValue, interval.Seconds(), g.Namespace, g.Name)
			}
		}
	}
}
