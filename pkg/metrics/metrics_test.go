package metrics_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/c5c3/glance-operator/pkg/metrics"
)

func newMetrics(t *testing.T) (*metrics.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m, reg
}

func TestReconcileVectorsExposition(t *testing.T) {
	m, reg := newMetrics(t)
	m.Reconcile.Duration.WithLabelValues("Database").Observe(0.2)
	m.Reconcile.Errors.WithLabelValues("Config", "SecretsReady").Inc()

	want := `
# HELP glance_operator_reconcile_duration_seconds Duration of each reconcile pipeline step, by sub-reconciler.
# TYPE glance_operator_reconcile_duration_seconds histogram
glance_operator_reconcile_duration_seconds_bucket{sub_reconciler="Database",le="0.01"} 0
glance_operator_reconcile_duration_seconds_bucket{sub_reconciler="Database",le="0.05"} 0
glance_operator_reconcile_duration_seconds_bucket{sub_reconciler="Database",le="0.1"} 0
glance_operator_reconcile_duration_seconds_bucket{sub_reconciler="Database",le="0.25"} 1
glance_operator_reconcile_duration_seconds_bucket{sub_reconciler="Database",le="0.5"} 1
glance_operator_reconcile_duration_seconds_bucket{sub_reconciler="Database",le="1"} 1
glance_operator_reconcile_duration_seconds_bucket{sub_reconciler="Database",le="2.5"} 1
glance_operator_reconcile_duration_seconds_bucket{sub_reconciler="Database",le="5"} 1
glance_operator_reconcile_duration_seconds_bucket{sub_reconciler="Database",le="10"} 1
glance_operator_reconcile_duration_seconds_bucket{sub_reconciler="Database",le="30"} 1
glance_operator_reconcile_duration_seconds_bucket{sub_reconciler="Database",le="+Inf"} 1
glance_operator_reconcile_duration_seconds_sum{sub_reconciler="Database"} 0.2
glance_operator_reconcile_duration_seconds_count{sub_reconciler="Database"} 1
# HELP glance_operator_reconcile_errors_total Errors (recovered panics included) of each reconcile pipeline step, by sub-reconciler and the condition type it reports.
# TYPE glance_operator_reconcile_errors_total counter
glance_operator_reconcile_errors_total{condition_type="SecretsReady",sub_reconciler="Config"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"glance_operator_reconcile_duration_seconds", "glance_operator_reconcile_errors_total"); err != nil {
		t.Fatal(err)
	}
}

func TestJobRunVectorsLabels(t *testing.T) {
	m, reg := newMetrics(t)
	m.DBSync.Observe("openstack", "glance", metrics.ResultSucceeded, 42*time.Second)
	m.DBPurge.Observe("openstack", "glance", metrics.ResultFailed, 3*time.Second)
	m.ImageCacheEvictions.WithLabelValues("glance", "openstack").Inc()

	for _, tc := range []struct {
		vec    string
		labels string
	}{
		{"glance_operator_db_sync_total", `{glance="glance",namespace="openstack",result="succeeded"} 1`},
		{"glance_operator_db_sync_duration_seconds_count", `{glance="glance",namespace="openstack"} 1`},
		{"glance_operator_db_sync_duration_seconds_sum", `{glance="glance",namespace="openstack"} 42`},
		{"glance_operator_db_purge_total", `{glance="glance",namespace="openstack",result="failed"} 1`},
		{"glance_operator_db_purge_duration_seconds_sum", `{glance="glance",namespace="openstack"} 3`},
		{"glance_operator_image_cache_evictions_total", `{glance="glance",namespace="openstack"} 1`},
	} {
		if got := exposition(t, reg); !strings.Contains(got, tc.vec+tc.labels+"\n") {
			t.Errorf("exposition lacks %s%s:\n%s", tc.vec, tc.labels, got)
		}
	}
}

func TestForgetGlanceDropsOnlyThatCR(t *testing.T) {
	m, reg := newMetrics(t)
	for _, cr := range [][2]string{{"a", "glance"}, {"a", "other"}, {"b", "glance"}} {
		m.DBSync.Observe(cr[0], cr[1], metrics.ResultSucceeded, time.Second)
		m.DBSync.Observe(cr[0], cr[1], metrics.ResultFailed, time.Second)
		m.DBPurge.Observe(cr[0], cr[1], metrics.ResultSucceeded, time.Second)
		m.DBSync.Succeeded(cr[0], cr[1], time.Unix(1000, 0))
		m.DBPurge.Succeeded(cr[0], cr[1], time.Unix(2000, 0))
		m.ImageCacheEvictions.WithLabelValues(cr[1], cr[0]).Inc()
	}
	m.Reconcile.Errors.WithLabelValues("Database", "DatabaseReady").Inc()

	m.ForgetGlance("a", "glance")

	for vec, want := range map[string]int{
		"glance_operator_db_sync_total":                           4, // 2 CRs x 2 results
		"glance_operator_db_sync_duration_seconds":                2,
		"glance_operator_db_purge_total":                          2,
		"glance_operator_db_purge_duration_seconds":               2,
		"glance_operator_db_sync_last_success_timestamp_seconds":  2,
		"glance_operator_db_purge_last_success_timestamp_seconds": 2,
		"glance_operator_image_cache_evictions_total":             2,
		"glance_operator_reconcile_errors_total":                  1,
		"glance_operator_reconcile_duration_seconds":              0,
	} {
		got, err := testutil.GatherAndCount(reg, vec)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: %d series after ForgetGlance, want %d", vec, got, want)
		}
	}
	if got := exposition(t, reg); strings.Contains(got, `glance="glance",namespace="a"`) {
		t.Errorf("series of a/glance survived ForgetGlance:\n%s", got)
	}
}

func TestNewFailsOnDuplicateRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := metrics.New(reg); err != nil {
		t.Fatalf("first New: %v", err)
	}
	if _, err := metrics.New(reg); err == nil {
		t.Fatal("second New on the same registry succeeded, want an already-registered error")
	}
}

func exposition(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			ls := "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.GetCounter() != nil:
				b.WriteString(mf.GetName() + ls + " " + formatFloat(m.GetCounter().GetValue()) + "\n")
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				b.WriteString(mf.GetName() + "_count" + ls + " " + formatFloat(float64(h.GetSampleCount())) + "\n")
				b.WriteString(mf.GetName() + "_sum" + ls + " " + formatFloat(h.GetSampleSum()) + "\n")
			}
		}
	}
	return b.String()
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
