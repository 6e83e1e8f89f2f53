package database

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/database"
	"github.com/c5c3/glance-operator/pkg/render"
)

// newRun waits for a db-sync Job other than old, not being deleted.
func (s *scene) newRun(name string, old *batchv1.Job, within time.Duration) *batchv1.Job {
	s.t.Helper()
	var j batchv1.Job
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		err := cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: name}, &j)
		if err == nil && j.UID != old.UID && j.DeletionTimestamp == nil {
			return &j
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.t.Fatalf("no new %s Job within %v", name, within)
	return nil
}

// retryState waits for status.schemaJobRetry to count failures.
func (s *scene) retryState(failures int32) *v1alpha1.SchemaJobRetry {
	s.t.Helper()
	var r *v1alpha1.SchemaJobRetry
	s.Eventually(fmt.Sprintf("schemaJobRetry with %d failures", failures), func() bool {
		r = s.ReadGlance().Status.SchemaJobRetry
		return r != nil && r.Failures == failures
	}, func() string { return fmt.Sprintf("got %+v", r) })
	return r
}

// TestFailedSyncRetriesWithBackoff: a failed db-sync runs again on its own,
// after 1, then 2 minutes, with the attempt in the condition and one
// Warning per failed run; new database credentials retry it at once; its
// success ends the backoff.
func TestFailedSyncRetriesWithBackoff(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	first := s.failedSync()
	c := s.ConditionSaying(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonDBSyncFailed, "attempt 2 at ")
	if !strings.Contains(c.Message, "(attempt 1: BackoffLimitExceeded)") {
		t.Errorf("DBSyncFailed message %q does not give the attempt and the Job controller's reason", c.Message)
	}
	r := s.retryState(1)
	// Ready says why, in pipeline order, with the attempt.
	ready := s.ConditionSaying(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAllReady, "DatabaseReady: DBSyncFailed (attempt 1, next at ")
	if !strings.HasPrefix(ready.Message, "DatabaseReady: ") {
		t.Errorf("Ready message %q does not start with the first sub-condition that is not True", ready.Message)
	}
	if r.Job != "db-sync" || r.LastFailedJob != first.UID {
		t.Errorf("schemaJobRetry %+v", r)
	}
	if wait := r.NextAttemptTime.Sub(first.Status.Conditions[1].LastTransitionTime.Time); wait < database.Backoff(1) || wait > database.Backoff(1)+time.Second {
		t.Errorf("the first retry is due %v after the failure, want %v", wait, database.Backoff(1))
	}
	// Nothing runs before the backoff has passed.
	s.sameJob("glance-db-sync", first)

	second := s.newRun("glance-db-sync", first, database.Backoff(1)+15*time.Second)
	s.ConditionSaying(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonDBSyncInProgress, "(attempt 2)")
	s.FinishJob("glance-db-sync", false)
	r = s.retryState(2)
	if wait := time.Until(r.NextAttemptTime.Time); wait < database.Backoff(2)-10*time.Second {
		t.Errorf("the second retry is due in %v, want about %v", wait, database.Backoff(2))
	}
	s.ConditionSaying(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonDBSyncFailed, "(attempt 2: BackoffLimitExceeded)")
	if n := len(s.warningsOf(v1alpha1.ReasonDBSyncFailed)); n != 2 {
		t.Errorf("%d DBSyncFailed Warnings after two failed runs, want one each", n)
	}

	// Fixed credentials do not wait for the backoff.
	sec := &corev1.Secret{}
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: "glance-db"}, sec); err != nil {
		t.Fatal(err)
	}
	sec.Data["password"] = []byte("fixed")
	if err := cl.Update(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
	// The new password makes the other database user; the Job runs as it
	// once it is Ready.
	s.provisionUser("glance.b")
	third := s.newRun("glance-db-sync", second, 15*time.Second)
	if third.Annotations[render.AnnotationDBConnectionHash] == second.Annotations[render.AnnotationDBConnectionHash] {
		t.Errorf("the retry after the rotation carries the old credentials' digest")
	}
	s.FinishJob("glance-db-sync", true)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionTrue, v1alpha1.ReasonDatabaseSynced)
	s.Eventually("schemaJobRetry cleared", func() bool { return s.ReadGlance().Status.SchemaJobRetry == nil }, nil)
	if n := len(s.warningsOf(v1alpha1.ReasonDBSyncFailed)); n != 2 {
		t.Errorf("%d DBSyncFailed Warnings, want 2", n)
	}
}

// TestSecondUpgradeRunsItsOwnPhaseJobs: an image tag reused across releases
// (no release in it) gives every upgrade the same phase Job templates; the
// second upgrade still runs its own expand, migrate and contract, and the
// first one's Jobs are gone once it completes.
func TestSecondUpgradeRunsItsOwnPhaseJobs(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	latest := func(rel string) func(*v1alpha1.Glance) {
		return func(g *v1alpha1.Glance) { g.Spec.OpenStackRelease, g.Spec.Image.Tag = rel, "latest" }
	}
	s.install(latest("2025.2"))
	for _, step := range []struct{ from, to string }{{"2025.2", "2026.1"}, {"2026.1", "2026.2"}} {
		s.UpdateGlance(latest(step.to))
		s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonExpandInProgress)
		for _, name := range []string{"glance-db-expand", "glance-db-migrate"} {
			if got := s.Job(name).Labels[render.LabelUpgrade]; got != render.UpgradeKey(step.from, step.to) {
				t.Errorf("%s belongs to upgrade %q, want %q", name, got, render.UpgradeKey(step.from, step.to))
			}
			s.FinishJob(name, true)
		}
		s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonUpgradeRollingUpdate)
		// The Deployment rolls if the release changed its pod template;
		// the scene rolls out whatever generation it has.
		s.Eventually("ContractInProgress", func() bool {
			c := meta.FindStatusCondition(s.ReadGlance().Status.Conditions, v1alpha1.ConditionDatabaseReady)
			if c != nil && c.Reason == v1alpha1.ReasonContractInProgress {
				return true
			}
			s.RollOut()
			return false
		}, nil)
		if got := s.Job("glance-db-contract").Labels[render.LabelUpgrade]; got != render.UpgradeKey(step.from, step.to) {
			t.Errorf("glance-db-contract belongs to upgrade %q, want %q", got, render.UpgradeKey(step.from, step.to))
		}
		s.FinishJob("glance-db-contract", true)
		// db-sync runs again if its template changed with the release;
		// the scene plays it to success.
		s.Eventually("DatabaseSynced at "+step.to, func() bool {
			g := s.ReadGlance()
			if c := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionDatabaseReady); c != nil &&
				c.Reason == v1alpha1.ReasonDatabaseSynced && g.Status.InstalledRelease == step.to {
				return true
			}
			var j batchv1.Job
			if err := cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: "glance-db-sync"}, &j); err == nil && !jobDone(&j) && j.DeletionTimestamp == nil {
				s.FinishJob("glance-db-sync", true)
			}
			return false
		}, nil)
		s.Eventually("the phase Jobs of "+step.to+" deleted", func() bool {
			var list batchv1.JobList
			if err := cl.List(context.Background(), &list, client.InNamespace(s.NS)); err != nil {
				return false
			}
			for _, j := range list.Items {
				if j.Labels[render.LabelUpgrade] != "" && j.DeletionTimestamp == nil {
					return false
				}
			}
			return true
		}, nil)
	}
}

func jobDone(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// TestPurgeKeepsTheInstalledImageDuringAnUpgrade: the purge CronJob runs the
// installed release's image until the upgrade completes, contract included.
func TestPurgeKeepsTheInstalledImageDuringAnUpgrade(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.upgrade()
	purgeImage := func() string {
		cj := &batchv1.CronJob{}
		if err := cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: "glance-db-purge"}, cj); err != nil {
			t.Fatal(err)
		}
		return cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image
	}
	s.FinishJob("glance-db-expand", true)
	s.FinishJob("glance-db-migrate", true)
	s.rollOutRelease("2026.1")
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonContractInProgress)
	// The parallel group runs while contract does; give it a pass.
	s.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReady)
	time.Sleep(time.Second)
	if img := purgeImage(); !strings.HasSuffix(img, ":2025.2") {
		t.Errorf("the purge CronJob runs %s during Contracting, want the installed 2025.2", img)
	}
	s.FinishJob("glance-db-contract", true)
	s.resync("2026.1")
	s.Eventually("the purge CronJob on the new image", func() bool { return strings.HasSuffix(purgeImage(), ":2026.1") }, nil)
}
