package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/metrics"
)

func stateGlance(namespace, name, release string, status v1alpha1.GlanceStatus) *v1alpha1.Glance {
	return &v1alpha1.Glance{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       v1alpha1.GlanceSpec{OpenStackRelease: release},
		Status:     status,
	}
}

func condition(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: "free text never exported", LastTransitionTime: metav1.Now()}
}

func TestGlanceStateExportsConditionsAndInfo(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		stateGlance("openstack", "glance", "2026.1", v1alpha1.GlanceStatus{
			InstalledRelease: "2025.2", TargetRelease: "2026.1", UpgradePhase: v1alpha1.UpgradePhaseExpanding,
			Conditions: []metav1.Condition{
				condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAllReady),
				condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonExpandInProgress),
				// Not the operator's: not exported.
				condition("example.com/Custom", metav1.ConditionTrue, "Whatever"),
			},
		}),
		stateGlance("other", "glance", "2025.2", v1alpha1.GlanceStatus{}),
	).Build()
	leader := true
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.RegisterLeaderMetrics(reader, func() bool { return leader }); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP glance_operator_glance_condition The current status and reason of each condition of each Glance: 1 for each (type, status, reason) it has now.
# TYPE glance_operator_glance_condition gauge
glance_operator_glance_condition{glance="glance",namespace="openstack",reason="ExpandInProgress",status="False",type="DatabaseReady"} 1
glance_operator_glance_condition{glance="glance",namespace="openstack",reason="NotAllReady",status="False",type="Ready"} 1
# HELP glance_operator_glance_info Each Glance's releases, upgrade phase and launch mode (always 1).
# TYPE glance_operator_glance_info gauge
glance_operator_glance_info{glance="glance",installed_release="2025.2",launch_mode="uwsgi",namespace="openstack",target_release="2026.1",upgrade_phase="Expanding"} 1
glance_operator_glance_info{glance="glance",installed_release="",launch_mode="eventlet",namespace="other",target_release="",upgrade_phase=""} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "glance_operator_glance_condition", "glance_operator_glance_info"); err != nil {
		t.Fatal(err)
	}

	// The other Glance is paused.
	paused := stateGlance("other", "glance", "2025.2", v1alpha1.GlanceStatus{})
	if err := reader.Get(t.Context(), client.ObjectKeyFromObject(paused), paused); err != nil {
		t.Fatal(err)
	}
	paused.Annotations = map[string]string{v1alpha1.AnnotationPaused: "true"}
	if err := reader.Update(t.Context(), paused); err != nil {
		t.Fatal(err)
	}
	wantPaused := `
# HELP glance_operator_glance_paused 1 while the annotation glance.openstack.c5c3.io/paused is "true" on the Glance, so that the operator changes nothing of it; else 0.
# TYPE glance_operator_glance_paused gauge
glance_operator_glance_paused{glance="glance",namespace="openstack"} 0
glance_operator_glance_paused{glance="glance",namespace="other"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantPaused), "glance_operator_glance_paused"); err != nil {
		t.Fatal(err)
	}

	m.TargetClusters.Set("region-a", false)
	if n, err := testutil.GatherAndCount(reg, "glance_operator_target_clusters"); err != nil || n != 1 {
		t.Errorf("the leader exports %d target cluster series (%v), want 1", n, err)
	}

	leader = false
	if n, err := testutil.GatherAndCount(reg, "glance_operator_glance_condition", "glance_operator_glance_info", "glance_operator_glance_paused", "glance_operator_target_clusters"); err != nil || n != 0 {
		t.Errorf("a standby exports %d state series (%v), want none", n, err)
	}
}

func TestRegisterLeaderMetricsTwiceFails(t *testing.T) {
	m, _ := newMetrics(t)
	reader := fake.NewClientBuilder().Build()
	if err := m.RegisterLeaderMetrics(reader, func() bool { return true }); err != nil {
		t.Fatal(err)
	}
	if err := m.RegisterLeaderMetrics(reader, func() bool { return true }); err == nil {
		t.Error("a second state collector registered beside the first")
	}
}

func TestLastSuccessIsAUnixTime(t *testing.T) {
	m, reg := newMetrics(t)
	m.DBPurge.Succeeded("openstack", "glance", time.Unix(1_700_000_000, 500_000_000))
	want := `
# HELP glance_operator_db_purge_last_success_timestamp_seconds Unix time the newest successful one of the db-purge CronJob runs completed, by Glance.
# TYPE glance_operator_db_purge_last_success_timestamp_seconds gauge
glance_operator_db_purge_last_success_timestamp_seconds{glance="glance",namespace="openstack"} 1.7000000005e+09
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "glance_operator_db_purge_last_success_timestamp_seconds"); err != nil {
		t.Fatal(err)
	}
}

func TestGlanceStateExportsCreationAndPurgeInterval(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	created := metav1.NewTime(time.Unix(1_750_000_000, 0))
	daily := stateGlance("openstack", "daily", "2026.1", v1alpha1.GlanceStatus{})
	hourly := stateGlance("openstack", "hourly", "2026.1", v1alpha1.GlanceStatus{})
	hourly.Spec.DBPurge = &v1alpha1.DBPurgeSpec{Schedule: "15 * * * *"}
	suspended := stateGlance("openstack", "suspended", "2026.1", v1alpha1.GlanceStatus{})
	suspended.Spec.DBPurge = &v1alpha1.DBPurgeSpec{Suspend: ptr.To(true)}
	broken := stateGlance("openstack", "broken", "2026.1", v1alpha1.GlanceStatus{})
	broken.Spec.DBPurge = &v1alpha1.DBPurgeSpec{Schedule: "every day"}
	var objs []client.Object
	for _, g := range []*v1alpha1.Glance{daily, hourly, suspended, broken} {
		g.CreationTimestamp = created
		objs = append(objs, g)
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	m, reg := newMetrics(t)
	if err := m.RegisterLeaderMetrics(reader, func() bool { return true }); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP glance_operator_glance_created_timestamp_seconds Unix time each Glance was created: the start of the wait for a first successful purge.
# TYPE glance_operator_glance_created_timestamp_seconds gauge
glance_operator_glance_created_timestamp_seconds{glance="broken",namespace="openstack"} 1.75e+09
glance_operator_glance_created_timestamp_seconds{glance="daily",namespace="openstack"} 1.75e+09
glance_operator_glance_created_timestamp_seconds{glance="hourly",namespace="openstack"} 1.75e+09
glance_operator_glance_created_timestamp_seconds{glance="suspended",namespace="openstack"} 1.75e+09
# HELP glance_operator_db_purge_interval_seconds The longest gap between two runs of each Glance's db-purge schedule; absent while the purge is suspended.
# TYPE glance_operator_db_purge_interval_seconds gauge
glance_operator_db_purge_interval_seconds{glance="daily",namespace="openstack"} 86400
glance_operator_db_purge_interval_seconds{glance="hourly",namespace="openstack"} 3600
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "glance_operator_db_purge_interval_seconds", "glance_operator_glance_created_timestamp_seconds"); err != nil {
		t.Fatal(err)
	}
}

func TestTrackGlanceStartsCountersAtZero(t *testing.T) {
	m, reg := newMetrics(t)
	m.TrackGlance("openstack", "glance")
	want := `
# HELP glance_operator_image_cache_evictions_total Glance pods the kubelet evicted because their image-cache emptyDir exceeded its size limit, by Glance.
# TYPE glance_operator_image_cache_evictions_total counter
glance_operator_image_cache_evictions_total{glance="glance",namespace="openstack"} 0
# HELP glance_operator_db_sync_total Terminal glance-manage db sync runs, by Glance and result.
# TYPE glance_operator_db_sync_total counter
glance_operator_db_sync_total{glance="glance",namespace="openstack",result="failed"} 0
glance_operator_db_sync_total{glance="glance",namespace="openstack",result="succeeded"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "glance_operator_image_cache_evictions_total", "glance_operator_db_sync_total"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "glance_operator_db_purge_total"); err != nil || n != 2 {
		t.Errorf("db_purge_total series: %d (%v), want 2", n, err)
	}
	m.ForgetGlance("openstack", "glance")
	if n, err := testutil.GatherAndCount(reg, "glance_operator_image_cache_evictions_total", "glance_operator_db_sync_total", "glance_operator_db_purge_total"); err != nil || n != 0 {
		t.Errorf("%d series left after ForgetGlance (%v)", n, err)
	}
}
