package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/test/operatortest"
)

// failNamespaceStage fails the pods of one namespace, the way the e2e suite
// fails a Job on purpose.
var failNamespaceStage = FailingPodStage("fail-namespace", `{key: .metadata.namespace, operator: In, values: ["doomed"]}`)

// auditedUser is whose requests the second cluster's audit log records:
// the scheduler's, which binds every pod exercise creates.
const auditedUser = "system:kube-scheduler"

// TestTwoClustersSideBySide starts two full local clusters at once and runs
// pod lifecycles through kwok on each: Deployments reach Running, Jobs
// complete, a labelled pod fails, an extra stage fails a namespace's Jobs,
// and the garbage collector removes what a deleted Deployment owned. The
// second cluster keeps an audit log of the scheduler's requests.
func TestTwoClustersSideBySide(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)

	stage := filepath.Join(t.TempDir(), "fail-namespace.yaml")
	if err := os.WriteFile(stage, []byte(failNamespaceStage), 0o644); err != nil {
		t.Fatal(err)
	}
	clusters := make([]*Cluster, 2)
	errs := make(chan error, 2)
	t.Cleanup(func() {
		for _, c := range clusters {
			if c == nil {
				continue
			}
			pids := c.pids()
			if err := c.Stop(); err != nil {
				t.Errorf("stop: %v", err)
			}
			for _, pid := range pids {
				if syscall.Kill(pid, 0) == nil {
					t.Errorf("process %d still running after Stop", pid)
				}
			}
			if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
				t.Errorf("temporary state directory %s left behind", c.Dir)
			}
		}
	})

	for i := range clusters {
		go func() {
			opts := ClusterOptions{Nodes: 2, KwokStages: []string{stage}}
			if i == 1 {
				opts.AuditUsers = []string{auditedUser}
			}
			c, err := StartCluster(ctx, opts)
			clusters[i] = c
			errs <- err
		}()
	}
	var startErrs []error
	for range clusters {
		if err := <-errs; err != nil {
			startErrs = append(startErrs, err)
		}
	}
	if len(startErrs) > 0 {
		t.Fatal(errors.Join(startErrs...))
	}
	if clusters[0].Config.Host == clusters[1].Config.Host {
		t.Fatalf("both clusters serve at %s", clusters[0].Config.Host)
	}
	for i, c := range clusters {
		t.Run(fmt.Sprintf("cluster-%d", i), func(t *testing.T) {
			t.Parallel()
			exercise(ctx, t, c)
			checkAuditLog(t, c, i == 1)
		})
	}
}

func (c *Cluster) pids() []int {
	var pids []int
	for _, p := range c.procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	return pids
}

func exercise(ctx context.Context, t *testing.T, c *Cluster) {
	cs := kubernetes.NewForConfigOrDie(c.Config)
	for _, ns := range []string{"work", "doomed"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "default ServiceAccount in "+ns, func() bool {
			_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err == nil
		})
	}

	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "work"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:1"}}},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments("work").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Deployment available with 3 ready replicas", func() bool {
		d, err := cs.AppsV1().Deployments("work").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas == 3 && d.Status.AvailableReplicas == 3
	})

	job := func(ns, name string, podLabels map[string]string) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: batchv1.JobSpec{
				BackoffLimit: ptr.To[int32](0),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
					Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						Containers:    []corev1.Container{{Name: "run", Image: "tool:1"}},
					},
				},
			},
		}
	}
	for _, j := range []*batchv1.Job{
		job("work", "succeeds", nil),
		job("work", "fails-by-label", map[string]string{"pod-container-running-failed.stage.kwok.x-k8s.io": "true"}),
		job("doomed", "fails-by-namespace", nil),
	} {
		if _, err := cs.BatchV1().Jobs(j.Namespace).Create(ctx, j, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	jobCondition := func(ns, name string, want batchv1.JobConditionType) func() bool {
		return func() bool {
			j, err := cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			for _, cond := range j.Status.Conditions {
				if cond.Type == want && cond.Status == corev1.ConditionTrue {
					return true
				}
			}
			return false
		}
	}
	waitFor(t, "Job succeeds Complete", jobCondition("work", "succeeds", batchv1.JobComplete))
	waitFor(t, "Job fails-by-label Failed", jobCondition("work", "fails-by-label", batchv1.JobFailed))
	waitFor(t, "Job fails-by-namespace Failed", jobCondition("doomed", "fails-by-namespace", batchv1.JobFailed))

	// Garbage collection: the ReplicaSet goes with its Deployment.
	rsList, err := cs.AppsV1().ReplicaSets("work").List(ctx, metav1.ListOptions{})
	if err != nil || len(rsList.Items) != 1 {
		t.Fatalf("want one ReplicaSet, got %v (%v)", rsList, err)
	}
	rsName := rsList.Items[0].Name
	if err := cs.AppsV1().Deployments("work").Delete(ctx, "web", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "ReplicaSet garbage-collected", func() bool {
		_, err := cs.AppsV1().ReplicaSets("work").Get(ctx, rsName, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// waitFor waits for what kwok and the cluster's controllers do.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	operatortest.Eventually(t, what, func() error {
		if !cond() {
			return errors.New("not yet")
		}
		return nil
	}, operatortest.Within(90*time.Second), operatortest.Every(250*time.Millisecond))
}

// checkAuditLog checks that a cluster asked for an audit log has one with
// the audited user's requests only, one event per request (none at
// RequestReceived), among them the scheduler's pod bindings; and that a
// cluster not asked for one has none.
func checkAuditLog(t *testing.T, c *Cluster, audited bool) {
	t.Helper()
	if !audited {
		if c.AuditLog != "" {
			t.Errorf("audit log %s without AuditUsers", c.AuditLog)
		}
		if _, err := os.Stat(filepath.Join(c.Dir, auditLogFile)); !os.IsNotExist(err) {
			t.Errorf("%s written without AuditUsers (%v)", auditLogFile, err)
		}
		return
	}
	data, err := os.ReadFile(c.AuditLog)
	if err != nil {
		t.Fatal(err)
	}
	// The scheduler is still at work: its last event may be half written.
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	bindings := 0
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	for _, line := range lines {
		var ev auditv1.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("%s: %v: %s", c.AuditLog, err, line)
		}
		if ev.User.Username != auditedUser {
			t.Errorf("audit event of %s, want %s only", ev.User.Username, auditedUser)
		}
		if ev.Stage == auditv1.StageRequestReceived {
			t.Errorf("audit event at %s: %s", ev.Stage, line)
		}
		if ev.Stage == auditv1.StageResponseComplete && ev.Verb == "create" && ev.ObjectRef != nil &&
			ev.ObjectRef.Resource == "pods" && ev.ObjectRef.Subresource == "binding" {
			bindings++
		}
	}
	// A Deployment of 3 and 3 Jobs: every pod was bound.
	if bindings < 6 {
		t.Errorf("%d pod bindings in %d audit events, want at least 6", bindings, len(lines))
	}
}
