package glance

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/c5c3/glance-operator/pkg/database"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
	"github.com/c5c3/glance-operator/test/fixtures"
)

const (
	// The upgrades a phase Job can belong to (render.UpgradeKey).
	lastUpgrade = "2024.2-to-2025.1"
	thisUpgrade = "2025.1-to-2025.2"
)

// schemaJob is the Job glance-db-sync with a pod template hash and image,
// and the conditions given, each True.
func schemaJob(hash, upgrade string, conditions ...batchv1.JobConditionType) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "openstack", Name: "glance-db-sync", UID: "job-uid",
			Labels:      map[string]string{render.LabelUpgrade: upgrade},
			Annotations: map[string]string{render.AnnotationPodTemplateHash: hash, render.AnnotationDBConnectionHash: "dsn-1"},
		},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "glance-manage", Image: "registry.example.com/openstack/glance:latest"}},
		}}},
	}
	for _, c := range conditions {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue})
	}
	return j
}

// schemaKey sets a db-sync Job's render.AnnotationSchemaKey.
func schemaKey(key string) func(*batchv1.Job) {
	return func(j *batchv1.Job) { j.Annotations[render.AnnotationSchemaKey] = key }
}

func withJob(j *batchv1.Job, edit func(*batchv1.Job)) *batchv1.Job {
	edit(j)
	return j
}

// jobPass is a pass on a fake management cluster holding objs, whose writes
// are counted.
func jobPass(t *testing.T, w *writeCounter, funcs interceptor.Funcs, objs ...client.Object) (*pass, client.Client) {
	t.Helper()
	scheme := testScheme(t)
	server := withIndexes(fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...)).Build()
	c := interceptor.NewClient(interceptor.NewClient(server.(client.WithWatch), funcs), w.funcs())
	return &pass{cluster: &targetcluster.Cluster{Client: c, Reader: server, Scheme: scheme}}, server
}

func TestJobFinished(t *testing.T) {
	for _, tt := range []struct {
		name       string
		conditions []batchv1.JobCondition
		finished   bool
	}{
		{"no condition", nil, false},
		{"complete", []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}, true},
		{"failed", []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue}}, true},
		{"complete false", []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionFalse}}, false},
		{"failed unknown", []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionUnknown}}, false},
		{"suspended", []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue}}, false},
		// The Job controller sets these before the terminal condition,
		// while pods may still run.
		{"failure target", []batchv1.JobCondition{{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue}}, false},
		{"success criteria met", []batchv1.JobCondition{{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue}}, false},
		{"resumed, then complete", []batchv1.JobCondition{
			{Type: batchv1.JobSuspended, Status: corev1.ConditionFalse},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue},
		}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j := &batchv1.Job{Status: batchv1.JobStatus{Conditions: tt.conditions}}
			if got := jobFinished(j); got != tt.finished {
				t.Errorf("jobFinished = %v, want %v", got, tt.finished)
			}
		})
	}
}

// TestObserveJob: the state of a schema Job comes from its terminal
// conditions, its pod template hash and credentials and, for a phase Job,
// the upgrade it ran for.
func TestObserveJob(t *testing.T) {
	desired := withJob(schemaJob("current", thisUpgrade), schemaKey("k1"))
	deleting := func(j *batchv1.Job) {
		j.DeletionTimestamp = &metav1.Time{Time: time.Unix(1_800_000_000, 0)}
		j.Finalizers = []string{"batch.kubernetes.io/job-tracking"}
	}
	for _, tt := range []struct {
		name     string
		kind     database.JobKind
		existing *batchv1.Job
		want     database.JobState
	}{
		{"absent", database.Sync, nil, database.JobAbsent},
		{"running", database.Sync, schemaJob("current", thisUpgrade), database.JobRunning},
		// Another template is left to finish: a schema Job is never cut
		// short.
		{"running with another template", database.Sync, schemaJob("old", lastUpgrade), database.JobRunning},
		{"suspended", database.Sync, schemaJob("current", thisUpgrade, batchv1.JobSuspended), database.JobRunning},
		// The counters move before the terminal condition is set; only the
		// condition ends the Job.
		{"succeeded counter without Complete", database.Sync, withJob(schemaJob("current", thisUpgrade), func(j *batchv1.Job) {
			j.Status.Succeeded = 1
		}), database.JobRunning},
		{"failed counter without Failed", database.Sync, withJob(schemaJob("current", thisUpgrade), func(j *batchv1.Job) {
			j.Status.Failed = 7
		}), database.JobRunning},
		{"success criteria met, not complete yet", database.Sync, schemaJob("current", thisUpgrade, batchv1.JobSuccessCriteriaMet), database.JobRunning},
		{"complete", database.Sync, schemaJob("current", thisUpgrade, batchv1.JobComplete), database.JobSucceeded},
		{"complete with a zero counter", database.Sync, withJob(schemaJob("current", thisUpgrade, batchv1.JobComplete), func(j *batchv1.Job) {
			j.Status.Succeeded, j.Status.Failed = 0, 3
		}), database.JobSucceeded},
		{"failed", database.Sync, schemaJob("current", thisUpgrade, batchv1.JobFailed), database.JobFailed},
		// A db-sync that brought the schema wanted stays done whatever else
		// of its template changed (another operator version rendered it);
		// one of another image, release or database runs again. One from
		// before the schema key is judged by its image.
		{"db-sync complete with another template, same schema", database.Sync, withJob(schemaJob("old", thisUpgrade, batchv1.JobComplete), schemaKey("k1")), database.JobSucceeded},
		{"db-sync complete for another schema", database.Sync, withJob(schemaJob("current", thisUpgrade, batchv1.JobComplete), schemaKey("k0")), database.JobAbsent},
		{"db-sync complete before the schema key, same image", database.Sync, schemaJob("old", thisUpgrade, batchv1.JobComplete), database.JobSucceeded},
		{"db-sync complete before the schema key, another image", database.Sync, withJob(schemaJob("old", thisUpgrade, batchv1.JobComplete), func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers[0].Image = "registry.example.com/openstack/glance:older"
		}), database.JobAbsent},
		{"db-sync failed with another template", database.Sync, schemaJob("old", thisUpgrade, batchv1.JobFailed), database.JobAbsent},
		// A phase Job that succeeded for this upgrade stays done through a
		// config change; a failed one is retried with it. One of the last
		// upgrade is not this one's, even with the same template (a
		// reused image tag).
		{"phase complete with another template, same upgrade", database.Expand, schemaJob("old", thisUpgrade, batchv1.JobComplete), database.JobSucceeded},
		{"phase complete with another template and upgrade", database.Expand, schemaJob("old", lastUpgrade, batchv1.JobComplete), database.JobAbsent},
		{"phase complete for the last upgrade, same template", database.Migrate, schemaJob("current", lastUpgrade, batchv1.JobComplete), database.JobAbsent},
		{"phase complete with no upgrade label", database.Contract, withJob(schemaJob("old", thisUpgrade, batchv1.JobComplete), func(j *batchv1.Job) {
			j.Labels = nil
		}), database.JobAbsent},
		// Credentials: a failed run is retried at once with new ones; a
		// successful one is not run again for them.
		{"failed with other credentials", database.Sync, withJob(schemaJob("current", thisUpgrade, batchv1.JobFailed), func(j *batchv1.Job) {
			j.Annotations[render.AnnotationDBConnectionHash] = "dsn-0"
		}), database.JobAbsent},
		{"complete with other credentials", database.Sync, withJob(schemaJob("current", thisUpgrade, batchv1.JobComplete), func(j *batchv1.Job) {
			j.Annotations[render.AnnotationDBConnectionHash] = "dsn-0"
		}), database.JobSucceeded},
		{"phase complete with the current template", database.Contract, schemaJob("current", thisUpgrade, batchv1.JobComplete), database.JobSucceeded},
		{"phase failed with another template, same image", database.Migrate, schemaJob("old", thisUpgrade, batchv1.JobFailed), database.JobAbsent},
		{"phase failed with the current template", database.Migrate, schemaJob("current", thisUpgrade, batchv1.JobFailed), database.JobFailed},
		{"being deleted", database.Sync, withJob(schemaJob("current", thisUpgrade, batchv1.JobComplete), deleting), database.JobAbsent},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var objs []client.Object
			if tt.existing != nil {
				objs = append(objs, tt.existing)
			}
			p, _ := jobPass(t, &writeCounter{}, interceptor.Funcs{}, objs...)
			cur, state, err := observeJob(context.Background(), p, tt.kind, desired.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			if state != tt.want {
				t.Errorf("state %d, want %d", state, tt.want)
			}
			// The Job is handed back whenever it exists, for ensureJob and
			// deleteJob to act on.
			if (cur != nil) != (tt.existing != nil) {
				t.Errorf("Job handed back: %v, want %v", cur != nil, tt.existing != nil)
			}
		})
	}

	t.Run("unreadable", func(t *testing.T) {
		p, _ := jobPass(t, &writeCounter{}, interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "glance-db-sync", nil)
		}})
		if _, _, err := observeJob(context.Background(), p, database.Sync, desired.DeepCopy()); !apierrors.IsForbidden(err) {
			t.Errorf("observeJob returned %v, want the read's Forbidden", err)
		}
	})
}

// TestEnsureJob: a Job is created when absent, replaced (deleted first)
// when finished with another template, credentials or upgrade, and
// otherwise left alone.
func TestEnsureJob(t *testing.T) {
	desired := schemaJob("current", thisUpgrade)
	desired.UID = ""
	for _, tt := range []struct {
		name             string
		existing         *batchv1.Job
		creates, deletes int
	}{
		{"absent: created", nil, 1, 0},
		{"same template, running", schemaJob("current", thisUpgrade), 0, 0},
		{"same template, failed", schemaJob("current", thisUpgrade, batchv1.JobFailed), 0, 0},
		{"another template, running", schemaJob("old", lastUpgrade), 0, 0},
		{"another template, complete", schemaJob("old", lastUpgrade, batchv1.JobComplete), 0, 1},
		{"same template, the last upgrade's, complete", schemaJob("current", lastUpgrade, batchv1.JobComplete), 0, 1},
		{"same template, other credentials, failed", withJob(schemaJob("current", thisUpgrade, batchv1.JobFailed), func(j *batchv1.Job) {
			j.Annotations[render.AnnotationDBConnectionHash] = "dsn-0"
		}), 0, 1},
		{"another template, failed", schemaJob("old", lastUpgrade, batchv1.JobFailed), 0, 1},
		{"being deleted", withJob(schemaJob("old", lastUpgrade, batchv1.JobComplete), func(j *batchv1.Job) {
			j.DeletionTimestamp = &metav1.Time{Time: time.Unix(1_800_000_000, 0)}
			j.Finalizers = []string{"batch.kubernetes.io/job-tracking"}
		}), 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &writeCounter{}
			var objs []client.Object
			if tt.existing != nil {
				objs = append(objs, tt.existing)
			}
			p, server := jobPass(t, w, interceptor.Funcs{}, objs...)
			var cur *batchv1.Job
			if tt.existing != nil {
				cur = &batchv1.Job{}
				if err := server.Get(context.Background(), client.ObjectKeyFromObject(tt.existing), cur); err != nil {
					t.Fatal(err)
				}
			}
			g := fixtures.NewGlance("openstack", "glance", "2025.2")
			g.UID = "glance-uid"
			job := desired.DeepCopy()
			if err := ensureJob(context.Background(), p, g, job, cur); err != nil {
				t.Fatal(err)
			}
			if w.creates != tt.creates || w.deletes != tt.deletes || w.updates+w.patches != 0 {
				t.Errorf("%d creates, %d deletes, %d updates, %d patches; want %d creates, %d deletes", w.creates, w.deletes, w.updates, w.patches, tt.creates, tt.deletes)
			}
			if tt.creates == 1 {
				created := &batchv1.Job{}
				if err := server.Get(context.Background(), client.ObjectKeyFromObject(job), created); err != nil {
					t.Fatal(err)
				}
				if !metav1.IsControlledBy(created, g) || created.Annotations[render.AnnotationPodTemplateHash] != "current" {
					t.Errorf("created Job %v %v, want the current template controlled by the Glance", created.OwnerReferences, created.Annotations)
				}
			}
		})
	}

	t.Run("created meanwhile", func(t *testing.T) {
		w := &writeCounter{}
		p, _ := jobPass(t, w, interceptor.Funcs{}, schemaJob("current", thisUpgrade))
		// The cache had not seen the Job: the create answers AlreadyExists.
		g := fixtures.NewGlance("openstack", "glance", "2025.2")
		if err := ensureJob(context.Background(), p, g, desired.DeepCopy(), nil); err != nil {
			t.Errorf("ensureJob on AlreadyExists: %v", err)
		}
		if w.creates != 1 {
			t.Errorf("%d creates, want 1", w.creates)
		}
	})
}

// TestDeleteJob: only a finished Job is deleted, with its pods in the
// background; a Job already gone or replaced is no error.
func TestDeleteJob(t *testing.T) {
	for _, tt := range []struct {
		name    string
		job     *batchv1.Job
		stored  bool
		deletes int
	}{
		{"none", nil, false, 0},
		{"running", schemaJob("current", thisUpgrade), true, 0},
		{"suspended", schemaJob("current", thisUpgrade, batchv1.JobSuspended), true, 0},
		{"complete", schemaJob("current", thisUpgrade, batchv1.JobComplete), true, 1},
		{"failed", schemaJob("current", thisUpgrade, batchv1.JobFailed), true, 1},
		{"already gone", schemaJob("current", thisUpgrade, batchv1.JobFailed), false, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &writeCounter{}
			var objs []client.Object
			if tt.stored {
				objs = append(objs, tt.job.DeepCopy())
			}
			var propagation *metav1.DeletionPropagation
			p, server := jobPass(t, w, interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				o := client.DeleteOptions{}
				o.ApplyOptions(opts)
				propagation = o.PropagationPolicy
				return c.Delete(ctx, obj, opts...)
			}}, objs...)
			if err := deleteJob(context.Background(), p, tt.job); err != nil {
				t.Fatal(err)
			}
			if w.deletes != tt.deletes {
				t.Errorf("%d deletes, want %d", w.deletes, tt.deletes)
			}
			if tt.deletes > 0 && ptr.Deref(propagation, "") != metav1.DeletePropagationBackground {
				t.Errorf("deleted with propagation %v, want Background", ptr.Deref(propagation, ""))
			}
			if tt.stored {
				err := server.Get(context.Background(), client.ObjectKeyFromObject(tt.job), &batchv1.Job{})
				if gone := apierrors.IsNotFound(err); gone != (tt.deletes > 0) {
					t.Errorf("Job gone: %v, want %v", gone, tt.deletes > 0)
				}
			}
		})
	}

	t.Run("replaced meanwhile", func(t *testing.T) {
		// The UID precondition fails when another Job took the name.
		p, _ := jobPass(t, &writeCounter{}, interceptor.Funcs{Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
			return apierrors.NewConflict(schema.GroupResource{Group: "batch", Resource: "jobs"}, "glance-db-sync", nil)
		}})
		if err := deleteJob(context.Background(), p, schemaJob("current", thisUpgrade, batchv1.JobComplete)); err != nil {
			t.Errorf("deleteJob on a UID conflict: %v", err)
		}
	})
}

func TestJobDuration(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: start.Add(d)} }
	for _, tt := range []struct {
		name   string
		status batchv1.JobStatus
		want   time.Duration
	}{
		{"never started", batchv1.JobStatus{CompletionTime: at(time.Minute)}, 0},
		{"complete", batchv1.JobStatus{StartTime: at(0), CompletionTime: at(90 * time.Second)}, 90 * time.Second},
		// A failed Job has no completion time: it ended when it was marked
		// failed.
		{"failed", batchv1.JobStatus{StartTime: at(0), Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: start.Add(time.Minute)}},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: start.Add(2 * time.Minute)}},
		}}, 2 * time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := jobDuration(&batchv1.Job{Status: tt.status}); got != tt.want {
				t.Errorf("jobDuration = %s, want %s", got, tt.want)
			}
		})
	}
}
