package glance

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/metrics"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/pkg/render"
)

// reconcileDBPurge projects the {name}-db-purge CronJob and reports the
// newest terminal run it spawned.
func reconcileDBPurge(ctx context.Context, g *v1alpha1.Glance, p *pass) (ctrl.Result, error) {
	facts := p.workloadFacts()
	cj := &batchv1.CronJob{}
	if g.Status.TargetRelease != "" {
		// While an upgrade runs, the purge keeps the image it had: the
		// installed release's, until installedRelease moves.
		err := p.cluster.Client.Get(ctx, client.ObjectKey{Namespace: g.Namespace, Name: render.DBPurgeCronJobName(g.Name)}, cj)
		switch {
		case err == nil && len(cj.Spec.JobTemplate.Spec.Template.Spec.Containers) > 0:
			facts.PurgeImage = cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image
		case err != nil && !apierrors.IsNotFound(err):
			return ctrl.Result{}, fmt.Errorf("get CronJob %s: %w", render.DBPurgeCronJobName(g.Name), err)
		}
	}
	desired, err := render.DBPurgeCronJob(g, facts)
	if err != nil {
		return ctrl.Result{}, reconcile.TerminalError(errors.New("cannot render the db-purge CronJob: " + err.Error()))
	}
	if err := applySpec(ctx, p, g, desired, &desired.Spec, cj, &cj.Spec, nil); err != nil {
		return ctrl.Result{}, err
	}

	runs, err := purgeRuns(ctx, p, g, cj)
	if err != nil {
		return ctrl.Result{}, err
	}
	observePurgeRuns(ctx, p, g, runs)
	if t, ok := lastPurgeSuccess(cj, runs); ok {
		p.r.Metrics.DBPurge.Succeeded(g.Namespace, g.Name, t)
	}
	var newest *batchv1.Job
	for i := len(runs) - 1; i >= 0 && newest == nil; i-- {
		if runs[i].state != "" {
			newest = runs[i].job
		}
	}
	// Suspension comes first: a pause is a posture, not a failure, whatever
	// the last run before it did.
	switch {
	case cj.Spec.Suspend != nil && *cj.Spec.Suspend:
		pipeline.SetCondition(g, v1alpha1.ConditionDBPurgeReady, metav1.ConditionTrue, v1alpha1.ReasonDBPurgeSuspended,
			"spec.dbPurge.suspend is set: no purge runs, and soft-deleted rows accumulate")
	case newest != nil && jobCondition(newest, batchv1.JobFailed):
		pipeline.SetCondition(g, v1alpha1.ConditionDBPurgeReady, metav1.ConditionFalse, v1alpha1.ReasonDBPurgeJobFailed,
			fmt.Sprintf("the newest db-purge run, Job %s, failed; see its logs", newest.Name))
	default:
		msg := fmt.Sprintf("CronJob %s runs on %q", cj.Name, cj.Spec.Schedule)
		if newest != nil {
			msg += "; the newest run, Job " + newest.Name + ", succeeded"
		}
		pipeline.SetCondition(g, v1alpha1.ConditionDBPurgeReady, metav1.ConditionTrue, v1alpha1.ReasonDBPurgeScheduled, msg)
	}
	return ctrl.Result{}, nil
}

// purgeRun is a Job the CronJob spawned; state is the metrics result when
// it is terminal, empty while it runs.
type purgeRun struct {
	job   *batchv1.Job
	state string
}

// purgeRuns lists the Jobs with the Glance's db-purge labels that the
// CronJob controls, oldest first.
func purgeRuns(ctx context.Context, p *pass, g *v1alpha1.Glance, cj *batchv1.CronJob) ([]purgeRun, error) {
	var list batchv1.JobList
	if err := p.cluster.Client.List(ctx, &list, client.InNamespace(g.Namespace), client.MatchingFields{v1alpha1.IndexChildComponent: render.ChildComponent(g.Name, render.ComponentDBPurge)}); err != nil {
		return nil, fmt.Errorf("list db-purge Jobs: %w", err)
	}
	var runs []purgeRun
	for i := range list.Items {
		j := &list.Items[i]
		if ref := metav1.GetControllerOf(j); ref == nil || ref.UID != cj.UID {
			continue
		}
		r := purgeRun{job: j}
		switch {
		case jobCondition(j, batchv1.JobComplete):
			r.state = metrics.ResultSucceeded
		case jobCondition(j, batchv1.JobFailed):
			r.state = metrics.ResultFailed
		}
		runs = append(runs, r)
	}
	sort.Slice(runs, func(a, b int) bool { return runKey(runs[a].job) < runKey(runs[b].job) })
	return runs, nil
}

// runKey orders runs by the time the CronJob scheduled them (its
// annotation), then creation, then name: creation timestamps have a
// one-second grain.
func runKey(j *batchv1.Job) string {
	scheduled := j.Annotations[batchv1.CronJobScheduledTimestampAnnotation]
	if t, err := time.Parse(time.RFC3339, scheduled); err == nil {
		scheduled = t.UTC().Format(time.RFC3339)
	} else {
		scheduled = j.CreationTimestamp.UTC().Format(time.RFC3339)
	}
	return scheduled + "/" + j.CreationTimestamp.UTC().Format(time.RFC3339) + "/" + j.Name
}

// observePurgeRuns feeds every terminal run not yet counted into the metrics
// and raises a Warning event for each failed one: once per Job UID, whatever
// the order in which runs finish. status.dbPurgeCountedJobs records the
// counted runs that still exist, and the counting happens once that status
// is stored, so a run is at worst missed, never counted twice.
func observePurgeRuns(ctx context.Context, p *pass, g *v1alpha1.Glance, runs []purgeRun) {
	counted := sets.New(g.Status.DBPurgeCountedJobs...)
	var fresh []purgeRun
	var stillCounted []types.UID
	for _, r := range runs {
		if r.state == "" {
			continue
		}
		stillCounted = append(stillCounted, r.job.UID)
		if !counted.Has(r.job.UID) {
			fresh = append(fresh, r)
		}
	}
	g.Status.DBPurgeCountedJobs = stillCounted
	if len(fresh) == 0 {
		return
	}
	namespace, name := g.Namespace, g.Name
	pipeline.AfterStatusWrite(ctx, func() {
		for _, r := range fresh {
			p.r.Metrics.DBPurge.Observe(namespace, name, r.state, jobDuration(r.job))
		}
	})
	for _, r := range fresh {
		if r.state == metrics.ResultFailed {
			announce(ctx, p, g, r.job, corev1.EventTypeWarning, v1alpha1.ReasonDBPurgeJobFailed, "Purge", "db-purge Job %s failed", r.job.Name)
		}
	}
}

// lastPurgeSuccess is when the newest successful run completed: the
// CronJob's own record, or a later run it controls (the CronJob controller
// does not record a run created from it by hand).
func lastPurgeSuccess(cj *batchv1.CronJob, runs []purgeRun) (time.Time, bool) {
	var last time.Time
	if cj.Status.LastSuccessfulTime != nil {
		last = cj.Status.LastSuccessfulTime.Time
	}
	for _, r := range runs {
		if r.state == metrics.ResultSucceeded && r.job.Status.CompletionTime != nil && r.job.Status.CompletionTime.After(last) {
			last = r.job.Status.CompletionTime.Time
		}
	}
	return last, !last.IsZero()
}

// mergeDBPurgeStatus carries the DBPurge member's counted runs onto the
// Glance the pass writes.
func mergeDBPurgeStatus(dst, src *v1alpha1.Glance) {
	dst.Status.DBPurgeCountedJobs = src.Status.DBPurgeCountedJobs
}
