package glance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/database"
	"github.com/c5c3/glance-operator/pkg/metrics"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/pkg/render"
)

// reconcileDatabase provisions the schema: the managed database objects,
// then db-sync, or the expand-migrate-contract flow of a release upgrade.
func reconcileDatabase(ctx context.Context, g *v1alpha1.Glance, p *pass) (ctrl.Result, error) {
	wait := ctrl.Result{RequeueAfter: DatabasePollInterval}
	if g.Spec.Database.ClusterRef != nil {
		done, err := ensureManagedDatabase(ctx, g, p)
		if result, conflict := databaseConflict(ctx, g, p, err); conflict {
			return result, nil
		}
		if err != nil || !done {
			return wait, err
		}
	}
	if p.configMapName == "" || p.backends.secretName == "" {
		pipeline.SetCondition(g, v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForBackends,
			"no ready default backend has produced a rendered config to run the schema Jobs against yet")
		// The pass ends here, before the Deployment step: say for it that
		// it waits for the same thing.
		setDeploymentWaitingForBackends(g)
		return wait, nil
	}

	image := render.ImageRef(g)
	facts := p.workloadFacts()
	facts.Upgrade = render.UpgradeKey(g.Status.InstalledRelease, cmp.Or(g.Status.TargetRelease, g.Spec.OpenStackRelease))
	desired := map[database.JobKind]*batchv1.Job{}
	existing := map[database.JobKind]*batchv1.Job{}
	states := map[database.JobKind]database.JobState{}
	for _, kind := range []database.JobKind{database.Sync, database.Expand, database.Migrate, database.Contract} {
		job, err := render.DatabaseJob(g, facts, render.DatabaseJobKind(kind), image)
		if err != nil {
			msg := fmt.Sprintf("cannot render the %s Job: %v", kind, err)
			pipeline.SetCondition(g, v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonDBSyncFailed, msg)
			return ctrl.Result{}, errors.New(msg)
		}
		desired[kind] = job
		cur, state, err := observeJob(ctx, p, kind, job)
		if err != nil {
			return ctrl.Result{}, err
		}
		existing[kind], states[kind] = cur, state
	}

	previous := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionDatabaseReady)
	d := database.Decide(database.Observation{
		Release: g.Spec.OpenStackRelease, ImageTag: g.Spec.Image.Tag,
		Installed: g.Status.InstalledRelease, Target: g.Status.TargetRelease, Phase: g.Status.UpgradePhase,
		Jobs: states,
	})
	for _, ev := range d.Events {
		// A refused spec is retried with backoff; say so once, not on
		// every retry.
		if ev.Type == corev1.EventTypeWarning && previous != nil && previous.Reason == ev.Reason {
			continue
		}
		announce(ctx, p, g, nil, ev.Type, ev.Reason, "Upgrade", "%s", ev.Message)
	}
	for _, kind := range d.Delete {
		if err := deleteJob(ctx, p, existing[kind]); err != nil {
			return ctrl.Result{}, err
		}
	}
	if d.Run != "" {
		if err := ensureJob(ctx, p, g, desired[d.Run], existing[d.Run]); err != nil {
			return ctrl.Result{}, err
		}
	}
	observeSyncMetrics(ctx, p, g, existing[database.Sync], states[database.Sync])

	g.Status.InstalledRelease, g.Status.TargetRelease, g.Status.UpgradePhase = d.Installed, d.Target, d.Phase
	result, err := retrySchemaJob(ctx, p, g, &d, existing, states)
	if err != nil {
		return ctrl.Result{}, err
	}
	status := metav1.ConditionFalse
	if d.Ready {
		status = metav1.ConditionTrue
	}
	if d.Ready && p.rotationWait != "" {
		// The schema serves, and the steps after this one go on; what a
		// rotation waits for is said here, not left to a log line.
		status, d.Reason, d.Message = metav1.ConditionFalse, v1alpha1.ReasonDatabaseUserRotating, p.rotationWait
		if previous == nil || previous.Reason != v1alpha1.ReasonDatabaseUserRotating {
			announce(ctx, p, g, nil, corev1.EventTypeNormal, v1alpha1.ReasonDatabaseUserRotating, "Rotate", "%s", p.rotationWait)
		}
	}
	pipeline.SetCondition(g, v1alpha1.ConditionDatabaseReady, status, d.Reason, d.Message)
	switch {
	case d.Invalid:
		return ctrl.Result{}, errors.New(d.Message)
	case !d.Pass && !result.IsZero():
		return result, nil
	case !d.Pass:
		return wait, nil
	}
	// The schema serves the spec's image (a contract that fails is retried
	// while the new pods serve): the steps after this one go on, and the
	// retry comes back at its time.
	p.recheckAfter(result.RequeueAfter)
	return ctrl.Result{}, nil
}

// retrySchemaJob keeps status.schemaJobRetry: it counts each failed run of
// the Job that holds the schema back once, with a Warning event, and
// deletes the failed Job once its backoff has passed, so that the next
// pass runs it again. It says so in d's message, and returns when to come
// back while the backoff runs. A change of the Job's image, config or
// credentials needs no backoff: the failed Job is no longer current, so it
// runs again at once (observeJob).
func retrySchemaJob(ctx context.Context, p *pass, g *v1alpha1.Glance, d *database.Decision, existing map[database.JobKind]*batchv1.Job, states map[database.JobKind]database.JobState) (ctrl.Result, error) {
	retry := g.Status.SchemaJobRetry
	if d.Failed == "" {
		switch {
		case retry == nil:
		case states[database.JobKind(retry.Job)] == database.JobSucceeded,
			retry.Job != string(database.Sync) && d.Phase == "":
			// It succeeded, or the upgrade it belonged to is over.
			g.Status.SchemaJobRetry = nil
		case d.Run == database.JobKind(retry.Job):
			d.Message += fmt.Sprintf(" (attempt %d)", retry.Failures+1)
		}
		return ctrl.Result{}, nil
	}
	j := existing[d.Failed]
	failedAt, why := jobFailure(p, j)
	next, counted := database.CountFailure(retry, d.Failed, j.UID, failedAt)
	g.Status.SchemaJobRetry = next
	if counted {
		announce(ctx, p, g, j, corev1.EventTypeWarning, d.Reason, "Retry",
			"Job %s failed (attempt %d: %s); it runs again at %s, or at once when its image, config or credentials change",
			j.Name, next.Failures, why, next.NextAttemptTime.UTC().Format(time.RFC3339))
	}
	d.Message += fmt.Sprintf(" (attempt %d: %s)", next.Failures, why)
	wait := time.Until(next.NextAttemptTime.Time)
	if wait > 0 {
		d.Message += fmt.Sprintf("; attempt %d at %s, or at once when its image, config or credentials change",
			next.Failures+1, next.NextAttemptTime.UTC().Format(time.RFC3339))
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	d.Message += fmt.Sprintf("; starting attempt %d", next.Failures+1)
	if err := deleteJob(ctx, p, j); err != nil {
		return ctrl.Result{}, err
	}
	// The deletion wakes the Glance, whose next pass creates the Job anew.
	return ctrl.Result{RequeueAfter: DatabasePollInterval}, nil
}

// jobFailure is when a failed Job failed and why, in the Job controller's
// words, or why it never started (stuckSchemaJob).
func jobFailure(p *pass, j *batchv1.Job) (time.Time, string) {
	if why := p.stuckJobs[j.UID]; why != "" {
		return time.Now(), "it never started: " + why
	}
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			why := cmp.Or(c.Reason, "failed")
			if c.Message != "" {
				why += ": " + c.Message
			}
			at := c.LastTransitionTime.Time
			if at.IsZero() {
				at = time.Now()
			}
			return at, why
		}
	}
	return time.Now(), "failed"
}

func (p *pass) workloadFacts() render.WorkloadFacts {
	return render.WorkloadFacts{
		ConfigMapName:      p.configMapName,
		BackendsSecretName: p.backends.secretName,
		AuthtokenHash:      p.credentials.authtokenHash,
		DBConnectionHash:   p.dbConnectionHash,
	}
}

// observeJob returns the Job of that name and what it has come to. A Job
// being deleted counts as absent. One with another pod template counts as
// running while it runs (a schema Job is never cut short), and as absent,
// to be re-created, once it has finished; a phase Job that succeeded keeps
// counting as succeeded (see database.JobState).
func observeJob(ctx context.Context, p *pass, kind database.JobKind, desired *batchv1.Job) (*batchv1.Job, database.JobState, error) {
	cur := &batchv1.Job{}
	err := p.cluster.Client.Get(ctx, client.ObjectKeyFromObject(desired), cur)
	if apierrors.IsNotFound(err) {
		return nil, database.JobAbsent, nil
	}
	if err != nil {
		return nil, database.JobAbsent, fmt.Errorf("get Job %s: %w", desired.Name, err)
	}
	if cur.DeletionTimestamp != nil {
		return cur, database.JobAbsent, nil
	}
	current := sameTemplate(cur, desired)
	// A db-sync's success holds while the schema it brought is the one
	// wanted (sameSchema): a new env var or config key rendered by another
	// operator version runs none. A phase Job's success is pinned to the
	// upgrade it ran for: a config change mid-phase does not run it again,
	// and the next upgrade runs its own, whatever the template (an image tag
	// may be reused).
	done := sameSchema(cur, desired)
	if kind != database.Sync {
		done = cur.Labels[render.LabelUpgrade] == desired.Labels[render.LabelUpgrade]
	}
	if !jobFinished(cur) {
		why, err := stuckSchemaJob(ctx, p, cur)
		if err != nil || why == "" {
			return cur, database.JobRunning, err
		}
		if p.stuckJobs == nil {
			p.stuckJobs = map[types.UID]string{}
		}
		p.stuckJobs[cur.UID] = why
	}
	switch {
	case jobCondition(cur, batchv1.JobComplete) && done:
		return cur, database.JobSucceeded, nil
	case (jobCondition(cur, batchv1.JobFailed) || p.stuckJobs[cur.UID] != "") && current && sameCredentials(cur, desired):
		return cur, database.JobFailed, nil
	}
	return cur, database.JobAbsent, nil
}

// sameTemplate reports whether a Job runs the pod template desired has.
func sameTemplate(cur, desired *batchv1.Job) bool {
	return cur.Annotations[render.AnnotationPodTemplateHash] == desired.Annotations[render.AnnotationPodTemplateHash]
}

// sameSchema reports whether a db-sync Job synced the schema desired
// would: the same render.SchemaKey. A Job from before the key counts as the
// same when it ran the same image.
func sameSchema(cur, desired *batchv1.Job) bool {
	if key, ok := cur.Annotations[render.AnnotationSchemaKey]; ok {
		return key == desired.Annotations[render.AnnotationSchemaKey]
	}
	c, d := cur.Spec.Template.Spec.Containers, desired.Spec.Template.Spec.Containers
	return len(c) > 0 && len(d) > 0 && c[0].Image == d[0].Image
}

// sameCredentials reports whether a Job ran with the database credentials
// desired has: a run that failed with others is tried again at once.
func sameCredentials(cur, desired *batchv1.Job) bool {
	return cur.Annotations[render.AnnotationDBConnectionHash] == desired.Annotations[render.AnnotationDBConnectionHash]
}

// ended reports whether a Job may be deleted without cutting a run short:
// it finished, or it never started (stuckSchemaJob).
func ended(p *pass, j *batchv1.Job) bool {
	return jobFinished(j) || p.stuckJobs[j.UID] != ""
}

// schemaPodStartGrace is how long a schema Job's pod may go without
// starting a container before the Job counts as failed: room for a slow
// image pull or a scheduler catching up, and far less than a migration on a
// big table may take, which no deadline cuts short.
const schemaPodStartGrace = 5 * time.Minute

// stuckSchemaJob says why a schema Job that has not finished never started:
// it has run for schemaPodStartGrace, no pod of it ever ran a container,
// init containers included, and each has waited that long. Such a Job ran no
// DDL, so ending it interrupts nothing. Empty when a pod started or may
// still start. Its pods are read from the API server (the cache holds the
// API pods only), and only once the Job is that old.
func stuckSchemaJob(ctx context.Context, p *pass, j *batchv1.Job) (string, error) {
	if j.Status.StartTime == nil || time.Since(j.Status.StartTime.Time) < schemaPodStartGrace || j.Status.Succeeded+j.Status.Failed > 0 {
		return "", nil
	}
	var pods corev1.PodList
	if err := p.cluster.Reader.List(ctx, &pods, client.InNamespace(j.Namespace), client.MatchingLabels{batchv1.ControllerUidLabel: string(j.UID)}); err != nil {
		return "", fmt.Errorf("list the pods of Job %s: %w", j.Name, err)
	}
	if len(pods.Items) == 0 {
		return fmt.Sprintf("no pod was made for it in %s (a quota or an admission refusing the pod, say: kubectl describe job %s shows why)", schemaPodStartGrace, j.Name), nil
	}
	var why string
	for i := range pods.Items {
		pod := &pods.Items[i]
		reason, waiting := podNeverStarted(pod)
		if !waiting || time.Since(podWaitingSince(pod)) < schemaPodStartGrace {
			return "", nil
		}
		if why == "" {
			why = fmt.Sprintf("pod %s, for %s: %s", pod.Name, schemaPodStartGrace, reason)
		}
	}
	return why, nil
}

// podNeverStarted says why a pod has run no container yet, init containers
// included; waiting is false once one ran.
func podNeverStarted(pod *corev1.Pod) (reason string, waiting bool) {
	if pod.Status.Phase != corev1.PodPending {
		return "", false
	}
	statuses := append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...)
	for _, st := range statuses {
		if st.State.Running != nil || st.State.Terminated != nil || st.LastTerminationState.Terminated != nil {
			return "", false
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return strings.TrimSuffix(fmt.Sprintf("not scheduled: %s: %s", c.Reason, c.Message), ": "), true
		}
	}
	for _, st := range statuses {
		if w := st.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			return strings.TrimSuffix(fmt.Sprintf("container %s waits: %s: %s", st.Name, w.Reason, w.Message), ": "), true
		}
	}
	return fmt.Sprintf("its containers were never created (a volume that does not mount, say: kubectl describe pod %s shows why)", pod.Name), true
}

// podWaitingSince is when a pod that never started began waiting: when the
// kubelet took it, or when the scheduler first found no node for it.
func podWaitingSince(pod *corev1.Pod) time.Time {
	if pod.Status.StartTime != nil {
		return pod.Status.StartTime.Time
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	return pod.CreationTimestamp.Time
}

// jobFinished reports whether the Job has come to an end, either way.
func jobFinished(j *batchv1.Job) bool {
	return jobCondition(j, batchv1.JobComplete) || jobCondition(j, batchv1.JobFailed)
}

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// ensureJob creates the Job, deleting first a finished Job of the same name
// with another pod template, credentials or upgrade: a changed image, config
// or credentials re-runs the Job, also after a failure, and each upgrade
// runs its own phase Jobs. A Job still running is
// left to finish. Jobs are never TTL-deleted.
func ensureJob(ctx context.Context, p *pass, g *v1alpha1.Glance, desired, cur *batchv1.Job) error {
	if cur != nil {
		same := sameTemplate(cur, desired) && sameSchema(cur, desired) && sameCredentials(cur, desired) && cur.Labels[render.LabelUpgrade] == desired.Labels[render.LabelUpgrade]
		if cur.DeletionTimestamp == nil && (same || !ended(p, cur)) {
			return nil
		}
		// The old Job's pods go with it; the new one is created once the
		// name is free.
		return deleteJob(ctx, p, cur)
	}
	if err := p.cluster.SetOwner(g, desired); err != nil {
		return err
	}
	if err := p.cluster.Client.Create(ctx, desired); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Job %s: %w", desired.Name, err)
	}
	return nil
}

// deleteJob deletes a finished Job, or one that never started; a running
// one is never cut short.
func deleteJob(ctx context.Context, p *pass, j *batchv1.Job) error {
	if j == nil || j.DeletionTimestamp != nil || !ended(p, j) {
		return nil
	}
	err := p.cluster.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &j.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete Job %s: %w", j.Name, err)
	}
	return nil
}

// observeSyncMetrics feeds a finished db-sync Job into the metrics once per
// Job UID: status.dbSyncCountedJob records it, and the metric is observed
// once that status is stored, so a run is at worst missed, never counted
// twice. The time of the last success is set on every pass that sees it.
func observeSyncMetrics(ctx context.Context, p *pass, g *v1alpha1.Glance, j *batchv1.Job, state database.JobState) {
	if j != nil && state == database.JobSucceeded && j.Status.CompletionTime != nil {
		p.r.Metrics.DBSync.Succeeded(g.Namespace, g.Name, j.Status.CompletionTime.Time)
	}
	if j == nil || (state != database.JobSucceeded && state != database.JobFailed) || g.Status.DBSyncCountedJob == j.UID {
		return
	}
	result := metrics.ResultSucceeded
	if state == database.JobFailed {
		result = metrics.ResultFailed
	}
	g.Status.DBSyncCountedJob = j.UID
	namespace, name, took := g.Namespace, g.Name, jobDuration(j)
	pipeline.AfterStatusWrite(ctx, func() { p.r.Metrics.DBSync.Observe(namespace, name, result, took) })
}

// jobDuration is how long a finished Job ran.
func jobDuration(j *batchv1.Job) time.Duration {
	if j.Status.StartTime == nil {
		return 0
	}
	end := time.Now()
	if j.Status.CompletionTime != nil {
		end = j.Status.CompletionTime.Time
	} else {
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				end = c.LastTransitionTime.Time
			}
		}
	}
	return end.Sub(j.Status.StartTime.Time)
}
