package glance

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/metrics"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/fixtures"
)

const purgeCronJobUID = types.UID("cronjob-uid")

// purgeJob is a Job of the Glance glance controlled by the controller UID,
// created at created, scheduled at scheduled (the CronJob's annotation;
// empty: none), with the conditions given, each True.
func purgeJob(name string, controller types.UID, scheduled string, created time.Time, conditions ...batchv1.JobConditionType) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
		Namespace: "openstack", Name: name, UID: types.UID(name + "-uid"),
		Labels:            render.ChildLabels("glance", render.ComponentDBPurge),
		CreationTimestamp: metav1.Time{Time: created},
	}}
	if controller != "" {
		j.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "batch/v1", Kind: "CronJob", Name: "glance-db-purge", UID: controller, Controller: ptr.To(true),
		}}
	}
	if scheduled != "" {
		j.Annotations = map[string]string{batchv1.CronJobScheduledTimestampAnnotation: scheduled}
	}
	for _, c := range conditions {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue})
	}
	return j
}

// TestPurgeRuns: the runs are the CronJob's own Jobs, oldest first by the
// time they were scheduled, then created, then by name.
func TestPurgeRuns(t *testing.T) {
	at := func(clock string) time.Time {
		tm, err := time.Parse(time.RFC3339, "2027-01-15T"+clock+"Z")
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	// Referring to the CronJob without it as controller.
	notOurs := purgeJob("glance-db-purge-shared", purgeCronJobUID, "", at("07:00:00"), batchv1.JobFailed)
	notOurs.OwnerReferences[0].Controller = nil
	s := newApplyScene(t, "",
		purgeJob("glance-db-purge-c", purgeCronJobUID, "2027-01-15T10:00:00Z", at("10:00:01"), batchv1.JobComplete),
		// Created late, say after a controller restart: its schedule
		// orders it, given in another zone.
		purgeJob("glance-db-purge-a", purgeCronJobUID, "2027-01-15T11:00:00+02:00", at("10:30:00"), batchv1.JobFailed),
		// Without the annotation the creation time stands in.
		purgeJob("glance-db-purge-b", purgeCronJobUID, "", at("10:15:00")),
		purgeJob("glance-db-purge-z", purgeCronJobUID, "soon", at("08:00:00"), batchv1.JobComplete),
		// Same schedule and creation: the name decides.
		purgeJob("glance-db-purge-e", purgeCronJobUID, "2027-01-15T12:00:00Z", at("12:00:00"), batchv1.JobSuspended),
		purgeJob("glance-db-purge-d", purgeCronJobUID, "2027-01-15T12:00:00Z", at("12:00:00"), batchv1.JobFailed),
		// Jobs with the Glance's labels that the CronJob does not control.
		purgeJob("glance-db-sync", "glance-uid", "", at("06:00:00"), batchv1.JobComplete),
		purgeJob("glance-orphan", "", "", at("06:00:00"), batchv1.JobFailed),
		notOurs,
	)
	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "glance-db-purge", UID: purgeCronJobUID}}
	runs, err := purgeRuns(context.Background(), s.p, s.g, cj)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range runs {
		got = append(got, r.job.Name+"="+r.state)
	}
	want := []string{
		"glance-db-purge-z=" + metrics.ResultSucceeded,
		"glance-db-purge-a=" + metrics.ResultFailed,
		"glance-db-purge-c=" + metrics.ResultSucceeded,
		"glance-db-purge-b=",
		"glance-db-purge-d=" + metrics.ResultFailed,
		"glance-db-purge-e=",
	}
	if !slices.Equal(got, want) {
		t.Errorf("runs\n %v\nwant\n %v", got, want)
	}
}

// TestDBPurgeReportsTheNewestTerminalRun: DBPurgeReady follows the newest
// run that finished; runs still going do not count, and a suspended
// CronJob is reported as such whatever its last run did.
func TestDBPurgeReportsTheNewestTerminalRun(t *testing.T) {
	epoch := time.Unix(1_800_000_000, 0)
	run := func(name string, hour int, conditions ...batchv1.JobConditionType) *batchv1.Job {
		when := epoch.Add(time.Duration(hour) * time.Hour)
		return purgeJob(name, purgeCronJobUID, when.UTC().Format(time.RFC3339), when, conditions...)
	}
	scheduled := `CronJob glance-db-purge runs on "` + v1alpha1.DefaultDBPurgeSchedule + `"`
	for _, tt := range []struct {
		name    string
		suspend bool
		jobs    []client.Object
		status  metav1.ConditionStatus
		reason  string
		message string
	}{
		{"no run yet", false, nil, metav1.ConditionTrue, v1alpha1.ReasonDBPurgeScheduled, scheduled},
		{"first run going", false, []client.Object{run("glance-db-purge-1", 1)},
			metav1.ConditionTrue, v1alpha1.ReasonDBPurgeScheduled, scheduled},
		{"newest succeeded after a failure", false, []client.Object{
			run("glance-db-purge-1", 1, batchv1.JobFailed), run("glance-db-purge-2", 2, batchv1.JobComplete),
		}, metav1.ConditionTrue, v1alpha1.ReasonDBPurgeScheduled, scheduled + "; the newest run, Job glance-db-purge-2, succeeded"},
		{"newest failed after a success", false, []client.Object{
			run("glance-db-purge-1", 1, batchv1.JobComplete), run("glance-db-purge-2", 2, batchv1.JobFailed),
		}, metav1.ConditionFalse, v1alpha1.ReasonDBPurgeJobFailed, "the newest db-purge run, Job glance-db-purge-2, failed; see its logs"},
		{"running after a failure", false, []client.Object{
			run("glance-db-purge-1", 1, batchv1.JobFailed), run("glance-db-purge-2", 2),
		}, metav1.ConditionFalse, v1alpha1.ReasonDBPurgeJobFailed, "the newest db-purge run, Job glance-db-purge-1, failed; see its logs"},
		{"running after a success", false, []client.Object{
			run("glance-db-purge-1", 1, batchv1.JobComplete), run("glance-db-purge-2", 2, batchv1.JobSuspended),
		}, metav1.ConditionTrue, v1alpha1.ReasonDBPurgeScheduled, scheduled + "; the newest run, Job glance-db-purge-1, succeeded"},
		// Listed newest first by name, ordered by schedule.
		{"names against the schedule", false, []client.Object{
			run("glance-db-purge-b", 1, batchv1.JobComplete), run("glance-db-purge-a", 2, batchv1.JobFailed),
		}, metav1.ConditionFalse, v1alpha1.ReasonDBPurgeJobFailed, "the newest db-purge run, Job glance-db-purge-a, failed; see its logs"},
		{"another owner's newer failure", false, []client.Object{
			run("glance-db-purge-1", 1, batchv1.JobComplete),
			purgeJob("glance-db-purge-x", "other-uid", "", epoch.Add(2*time.Hour), batchv1.JobFailed),
		}, metav1.ConditionTrue, v1alpha1.ReasonDBPurgeScheduled, scheduled + "; the newest run, Job glance-db-purge-1, succeeded"},
		{"suspended after a failure", true, []client.Object{run("glance-db-purge-1", 1, batchv1.JobFailed)},
			metav1.ConditionTrue, v1alpha1.ReasonDBPurgeSuspended, "spec.dbPurge.suspend is set: no purge runs, and soft-deleted rows accumulate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			objs := append([]client.Object{&batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{
				Namespace: "openstack", Name: "glance-db-purge", UID: purgeCronJobUID,
			}}}, tt.jobs...)
			s := newApplyScene(t, "", objs...)
			if tt.suspend {
				s.g.Spec.DBPurge = &v1alpha1.DBPurgeSpec{Suspend: ptr.To(true)}
			}
			m, err := metrics.New(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			s.p.r = &Reconciler{Recorder: events.NewFakeRecorder(10), Metrics: m}
			s.p.configMapName, s.p.backends.secretName = "glance-config-1", "glance-backends-1"
			if _, err := reconcileDBPurge(context.Background(), s.g, s.p); err != nil {
				t.Fatal(err)
			}
			c := meta.FindStatusCondition(s.g.Status.Conditions, v1alpha1.ConditionDBPurgeReady)
			if c == nil {
				t.Fatal("no DBPurgeReady")
			}
			if c.Status != tt.status || c.Reason != tt.reason || c.Message != tt.message {
				t.Errorf("DBPurgeReady %s/%s %q, want %s/%s %q", c.Status, c.Reason, c.Message, tt.status, tt.reason, tt.message)
			}
		})
	}
}

// TestObservePurgeRunsCountsEachRunOnce: a terminal run is counted, and a
// failed one announced, on the first pass that sees it; the counted list
// forgets runs that are gone.
func TestObservePurgeRunsCountsEachRunOnce(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	run := func(name, state string) purgeRun {
		j := purgeJob(name, purgeCronJobUID, "", start)
		j.Status.StartTime = &metav1.Time{Time: start}
		j.Status.CompletionTime = &metav1.Time{Time: start.Add(time.Minute)}
		return purgeRun{job: j, state: state}
	}
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	recorder := events.NewFakeRecorder(10)
	p := &pass{r: &Reconciler{Recorder: recorder, Metrics: m}}
	g := fixtures.NewGlance("openstack", "glance", "2025.2")
	// A run counted before that the CronJob has since deleted.
	g.Status.DBPurgeCountedJobs = []types.UID{"glance-db-purge-0-uid"}
	total := func(result string) float64 {
		return testutil.ToFloat64(m.DBPurge.Total.WithLabelValues("glance", "openstack", result))
	}

	first := []purgeRun{run("glance-db-purge-1", metrics.ResultSucceeded), run("glance-db-purge-2", metrics.ResultFailed), run("glance-db-purge-3", "")}
	observePurgeRuns(context.Background(), p, g, first)
	if got, want := g.Status.DBPurgeCountedJobs, []types.UID{"glance-db-purge-1-uid", "glance-db-purge-2-uid"}; !slices.Equal(got, want) {
		t.Errorf("counted %v, want %v", got, want)
	}
	if total(metrics.ResultSucceeded) != 1 || total(metrics.ResultFailed) != 1 {
		t.Errorf("%v succeeded, %v failed counted; want 1 each", total(metrics.ResultSucceeded), total(metrics.ResultFailed))
	}
	if evs := drainEvents(recorder); len(evs) != 1 || !strings.Contains(evs[0], v1alpha1.ReasonDBPurgeJobFailed) || !strings.Contains(evs[0], "glance-db-purge-2") {
		t.Errorf("events %q, want one DBPurgeJobFailed naming glance-db-purge-2", evs)
	}

	// The running run fails; the others are seen again.
	second := []purgeRun{first[0], first[1], run("glance-db-purge-3", metrics.ResultFailed)}
	observePurgeRuns(context.Background(), p, g, second)
	if got, want := g.Status.DBPurgeCountedJobs, []types.UID{"glance-db-purge-1-uid", "glance-db-purge-2-uid", "glance-db-purge-3-uid"}; !slices.Equal(got, want) {
		t.Errorf("counted %v, want %v", got, want)
	}
	if total(metrics.ResultSucceeded) != 1 || total(metrics.ResultFailed) != 2 {
		t.Errorf("%v succeeded, %v failed counted; want 1 and 2", total(metrics.ResultSucceeded), total(metrics.ResultFailed))
	}
	if evs := drainEvents(recorder); len(evs) != 1 || !strings.Contains(evs[0], "glance-db-purge-3") {
		t.Errorf("events %q, want one naming glance-db-purge-3", evs)
	}

	observePurgeRuns(context.Background(), p, g, second)
	if total(metrics.ResultSucceeded) != 1 || total(metrics.ResultFailed) != 2 {
		t.Errorf("a pass seeing nothing new counted again: %v succeeded, %v failed", total(metrics.ResultSucceeded), total(metrics.ResultFailed))
	}
	if evs := drainEvents(recorder); len(evs) != 0 {
		t.Errorf("a pass seeing nothing new announced %q", evs)
	}
}

// The last success is the later of the CronJob's record and the runs it
// controls that completed; a failed or unfinished run is no success.
func TestLastPurgeSuccess(t *testing.T) {
	at := func(sec int64) *metav1.Time { return &metav1.Time{Time: time.Unix(sec, 0)} }
	run := func(state string, completed *metav1.Time) purgeRun {
		j := &batchv1.Job{}
		j.Status.CompletionTime = completed
		return purgeRun{job: j, state: state}
	}
	for _, tc := range []struct {
		name     string
		recorded *metav1.Time
		runs     []purgeRun
		want     int64 // 0: none
	}{
		{"nothing yet", nil, []purgeRun{run("", nil)}, 0},
		{"only a failure", nil, []purgeRun{run(metrics.ResultFailed, at(50))}, 0},
		{"the CronJob's record", at(100), nil, 100},
		{"a later run by hand", at(100), []purgeRun{run(metrics.ResultSucceeded, at(150)), run(metrics.ResultFailed, at(200))}, 150},
		{"an older run", at(100), []purgeRun{run(metrics.ResultSucceeded, at(90))}, 100},
	} {
		cj := &batchv1.CronJob{}
		cj.Status.LastSuccessfulTime = tc.recorded
		got, ok := lastPurgeSuccess(cj, tc.runs)
		if ok != (tc.want != 0) || (ok && got.Unix() != tc.want) {
			t.Errorf("%s: %v, %v; want %d", tc.name, got, ok, tc.want)
		}
	}
}

// drainEvents takes the events a fake recorder holds now.
func drainEvents(recorder *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case ev := <-recorder.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}
