package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// The recurring purge: a run of the CronJob completes and is counted once;
// a run the CronJob controller schedules fails (the suite's kwok stage fails
// it), which the Glance reports with DBPurgeJobFailed and a Warning event; a
// later successful run flips it back; suspending reports DBPurgeSuspended.
func TestDBPurge(t *testing.T) {
	t.Parallel()
	s := newScene(t, dbPurgeNamespace)
	s.install()
	runs := func(result string) float64 {
		return metricValue(t, "glance_operator_db_purge_total", map[string]string{"glance": "glance", "namespace": s.ns, "result": result})
	}
	if got := runs("succeeded"); got != 0 {
		t.Fatalf("glance_operator_db_purge_total{result=succeeded} = %v before any run", got)
	}

	// A run created from the CronJob, as an operator would trigger one by
	// hand: the Job is controlled by the CronJob and kwok completes it.
	lastSuccess := func() float64 {
		return metricValue(t, "glance_operator_db_purge_last_success_timestamp_seconds", map[string]string{"glance": "glance", "namespace": s.ns})
	}
	if got := lastSuccess(); got != 0 {
		t.Fatalf("glance_operator_db_purge_last_success_timestamp_seconds = %v before any run", got)
	}
	first := s.purgeNow(manualPurgeRuns[0], batchv1.JobComplete)
	s.eventually("the run counted", func() (bool, string) {
		n := runs("succeeded")
		return n == 1, fmt.Sprint(n)
	})
	s.eventually("the time of the run's success exported", func() (bool, string) {
		got := lastSuccess()
		return got == float64(first.Status.CompletionTime.Unix()), fmt.Sprintf("%v, want %d", got, first.Status.CompletionTime.Unix())
	})
	c := s.condition(v1alpha1.ConditionDBPurgeReady, metav1.ConditionTrue, v1alpha1.ReasonDBPurgeScheduled)
	if !strings.Contains(c.Message, "Job "+manualPurgeRuns[0]+", succeeded") {
		t.Errorf("DBPurgeReady message %q does not name the run", c.Message)
	}
	// Later passes see the same run: it stays counted once.
	s.update(func(g *v1alpha1.Glance) { g.Labels = map[string]string{"nudge": "1"} })
	time.Sleep(2 * time.Second)
	if got := runs("succeeded"); got != 1 {
		t.Errorf("glance_operator_db_purge_total{result=succeeded} = %v after more passes, want 1", got)
	}

	// A scheduled run: every minute until the CronJob controller has
	// started one, then back to the nightly default.
	s.update(func(g *v1alpha1.Glance) { g.Spec.DBPurge = &v1alpha1.DBPurgeSpec{Schedule: "* * * * *"} })
	var scheduled batchv1.Job
	s.eventually("the CronJob controller to start a run", func() (bool, string) {
		var jobs batchv1.JobList
		if err := cl.List(context.Background(), &jobs, client.InNamespace(s.ns)); err != nil {
			return false, err.Error()
		}
		for _, j := range jobs.Items {
			if _, ok := j.Annotations[batchv1.CronJobScheduledTimestampAnnotation]; ok {
				scheduled = j
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d Jobs, none scheduled", len(jobs.Items))
	})
	s.update(func(g *v1alpha1.Glance) { g.Spec.DBPurge = nil })
	if ref := metav1.GetControllerOf(&scheduled); ref == nil || ref.Kind != "CronJob" || ref.Name != "glance-db-purge" {
		t.Errorf("the scheduled run %s is controlled by %+v", scheduled.Name, ref)
	}
	s.jobCondition(scheduled.Name, batchv1.JobFailed)
	c = s.condition(v1alpha1.ConditionDBPurgeReady, metav1.ConditionFalse, v1alpha1.ReasonDBPurgeJobFailed)
	if !strings.Contains(c.Message, scheduled.Name) {
		t.Errorf("DBPurgeReady message %q does not name the failed run %s", c.Message, scheduled.Name)
	}
	ev := s.event(corev1.EventTypeWarning, v1alpha1.ReasonDBPurgeJobFailed)
	if !strings.Contains(ev.Note, scheduled.Name) {
		t.Errorf("the %s event says %q, not naming %s", ev.Reason, ev.Note, scheduled.Name)
	}
	s.condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAllReady)
	s.eventually("the failed run counted", func() (bool, string) {
		n := runs("failed")
		return n == 1, fmt.Sprint(n)
	})
	// A failure is no success: the last success stays the first run's.
	if got := lastSuccess(); got != float64(first.Status.CompletionTime.Unix()) {
		t.Errorf("glance_operator_db_purge_last_success_timestamp_seconds = %v after a failed run, want %d", got, first.Status.CompletionTime.Unix())
	}

	// A newer successful run flips it back.
	s.purgeNow(manualPurgeRuns[1], batchv1.JobComplete)
	s.condition(v1alpha1.ConditionDBPurgeReady, metav1.ConditionTrue, v1alpha1.ReasonDBPurgeScheduled)
	s.eventually("two successful runs counted", func() (bool, string) {
		n := runs("succeeded")
		return n == 2, fmt.Sprint(n)
	})
	s.ready()
	if got := runs("failed"); got != 1 {
		t.Errorf("glance_operator_db_purge_total{result=failed} = %v, want 1", got)
	}

	s.update(func(g *v1alpha1.Glance) { g.Spec.DBPurge = &v1alpha1.DBPurgeSpec{Suspend: ptr.To(true)} })
	s.ready(map[string]string{v1alpha1.ConditionDBPurgeReady: v1alpha1.ReasonDBPurgeSuspended})
	var cj batchv1.CronJob
	if !s.get("glance-db-purge", &cj) || !ptr.Deref(cj.Spec.Suspend, false) {
		t.Errorf("the CronJob is not suspended: %+v", cj.Spec.Suspend)
	}
	if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("concurrencyPolicy %s, want Forbid", cj.Spec.ConcurrencyPolicy)
	}
}

// purgeNow creates a run from the db-purge CronJob the way `kubectl create
// job --from=cronjob/glance-db-purge` does, and waits for it to reach want.
func (s *scene) purgeNow(name string, want batchv1.JobConditionType) *batchv1.Job {
	s.t.Helper()
	kubectl(s.t, "-n", s.ns, "create", "job", name, "--from=cronjob/glance-db-purge")
	j := s.jobCondition(name, want)
	if ref := metav1.GetControllerOf(j); ref == nil || ref.Kind != "CronJob" || ref.Name != "glance-db-purge" {
		s.t.Errorf("Job %s is controlled by %+v, want the CronJob", name, ref)
	}
	return j
}
