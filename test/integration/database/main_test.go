// Package database runs the manager against a real kube-apiserver and walks
// the Database and Deployment steps: provisioning, db-sync, the
// expand-migrate-contract upgrade with its abort and refusals, restarts,
// rotation and deletion. There is no kubelet or controller manager: the test
// plays the mariadb-operator, the Job controller and the Deployment
// controller by writing their status.
package database

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/operator"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/operatortest"
)

var (
	cfg *rest.Config
	cl  client.Client
	// healthy stands in for glance-api's /healthcheck: the managers run
	// outside any cluster network, so their probes go here.
	healthy = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthcheck" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("OK"))
	}))
)

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunTests(m, controlplane.APIServerOptions{
		CRDs: controlplane.CRDs{Glance: true, MariaDB: true, ExternalSecrets: true},
	}, func(srv *controlplane.APIServer) (func(), error) {
		cfg = srv.Config
		var err error
		cl, err = operatortest.NewClient(cfg)
		return nil, err
	}))
}

// scene is one test: its namespace, and a manager watching only it, so that
// a test can stop and restart its manager.
type scene struct {
	*operatortest.Env
	t   *testing.T
	mgr *operatortest.Manager
}

func newScene(t *testing.T) *scene {
	t.Helper()
	s := &scene{Env: operatortest.NewEnv(t, cl), t: t}
	s.start()
	t.Cleanup(func() { s.stop() })
	return s
}

func (s *scene) start() {
	s.t.Helper()
	mgr, err := startManagerProbing(s.NS, strings.TrimPrefix(healthy.URL, "http://"))
	if err != nil {
		s.t.Fatal(err)
	}
	s.mgr = mgr
}

// startManagerProbing starts a manager of the namespace whose health probes
// go to address.
func startManagerProbing(namespace, address string) (*operatortest.Manager, error) {
	return operatortest.StartManager(cfg, operator.Options{
		WatchNamespaces: []string{namespace}, OperatorNamespace: "glance-system", DevHealthcheckAddress: address,
	})
}

func (s *scene) stop() {
	if s.mgr == nil {
		return
	}
	if err := s.mgr.Stop(); err != nil {
		s.t.Errorf("stop manager: %v", err)
	}
	s.mgr = nil
}

var (
	mariaDBGVK = schema.GroupVersionKind{Group: "k8s.mariadb.com", Version: "v1alpha1", Kind: "MariaDB"}
	dbKinds    = []string{"Database", "User", "Grant"}
)

// setReady writes a Ready condition on an object of an external API, as its
// operator would.
func (s *scene) setReady(gvk schema.GroupVersionKind, name string) {
	s.t.Helper()
	ctx := context.Background()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: name}, u); err != nil {
		s.t.Fatal(err)
	}
	u.Object["status"] = map[string]any{"conditions": []any{map[string]any{
		"type": "Ready", "status": "True", "reason": "Ready", "message": "ok", "lastTransitionTime": "2026-01-01T00:00:00Z",
	}}}
	if err := cl.Status().Update(ctx, u); err != nil {
		s.t.Fatal(err)
	}
}

// ready builds a managed Glance's world: credentials, a default backend and
// a Ready MariaDB.
func (s *scene) ready(brownfield bool) {
	s.t.Helper()
	s.Credentials("pw")
	s.Secret("s3", map[string]string{"access-key-id": "ak", "secret-access-key": "sk"})
	s.Backend("primary", true, "s3")
	if brownfield {
		return
	}
	mdb := &unstructured.Unstructured{}
	mdb.SetGroupVersionKind(mariaDBGVK)
	mdb.SetNamespace(s.NS)
	mdb.SetName("mariadb")
	mdb.Object["spec"] = map[string]any{"replicas": int64(1)}
	s.Create(mdb)
	s.setReady(mariaDBGVK, "mariadb")
}

// provision plays the mariadb-operator: once the Database, User and Grant
// exist, they turn Ready.
func (s *scene) provision() {
	s.t.Helper()
	for _, kind := range dbKinds {
		gvk := mariaDBGVK.GroupVersion().WithKind(kind)
		s.Eventually(kind+" glance", func() bool {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			return cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: "glance"}, u) == nil
		}, nil)
		s.setReady(gvk, "glance")
	}
}

// job waits for a Job and returns it.
func (s *scene) job(kind string) *batchv1.Job {
	s.t.Helper()
	j := &batchv1.Job{}
	s.Eventually("Job glance-"+kind, func() bool {
		return cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: "glance-" + kind}, j) == nil && j.DeletionTimestamp == nil
	}, nil)
	return j
}

// finishJob plays the Job controller.
func (s *scene) finishJob(kind string, succeeded bool) *batchv1.Job {
	s.t.Helper()
	j := s.job(kind)
	now := metav1.Now()
	start := metav1.NewTime(now.Add(-42 * time.Second))
	j.Status.StartTime = &start
	if succeeded {
		j.Status.Succeeded = 1
		j.Status.CompletionTime = &now
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
	} else {
		j.Status.Failed = 1
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: "BackoffLimitExceeded"},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: "BackoffLimitExceeded"},
		}
	}
	if err := cl.Status().Update(context.Background(), j); err != nil {
		s.t.Fatalf("finish Job %s: %v", j.Name, err)
	}
	return j
}

// deployment waits for the Deployment to match and returns it.
func (s *scene) deployment(match func(*appsv1.Deployment) bool) *appsv1.Deployment {
	s.t.Helper()
	d := &appsv1.Deployment{}
	s.Eventually("the Deployment", func() bool {
		return cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: "glance"}, d) == nil && (match == nil || match(d))
	}, func() string { return fmt.Sprintf("containers %+v", d.Spec.Template.Spec.Containers) })
	return d
}

// rollOut plays the Deployment controller: every replica runs the current
// template and is available.
func (s *scene) rollOut() {
	s.t.Helper()
	d := s.deployment(nil)
	n := ptr.Deref(d.Spec.Replicas, 1)
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"}},
	}
	if err := cl.Status().Update(context.Background(), d); err != nil {
		s.t.Fatal(err)
	}
}

// rollOutChange waits until the operator changed the Deployment's spec,
// then rolls it out.
func (s *scene) rollOutChange() {
	s.t.Helper()
	s.deployment(func(d *appsv1.Deployment) bool { return d.Generation > d.Status.ObservedGeneration })
	s.rollOut()
}

func (s *scene) glanceObj() *v1alpha1.Glance {
	s.t.Helper()
	g := &v1alpha1.Glance{}
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: "glance"}, g); err != nil {
		s.t.Fatal(err)
	}
	return g
}

// update changes the Glance's spec, retrying on conflicts.
func (s *scene) update(mutate func(*v1alpha1.Glance)) {
	s.t.Helper()
	for range 10 {
		g := s.glanceObj()
		mutate(g)
		err := cl.Update(context.Background(), g)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			s.t.Fatal(err)
		}
	}
	s.t.Fatal("too many conflicts updating the Glance")
}

func release(rel string) func(*v1alpha1.Glance) {
	return func(g *v1alpha1.Glance) { g.Spec.OpenStackRelease, g.Spec.Image.Tag = rel, rel }
}

// events waits until the Glance's events include every reason, in order of
// first appearance.
func (s *scene) events(reasons ...string) {
	s.t.Helper()
	var got []string
	s.Eventually("events "+strings.Join(reasons, ", "), func() bool {
		var list eventsv1.EventList
		if err := cl.List(context.Background(), &list, client.InNamespace(s.NS)); err != nil {
			return false
		}
		slices.SortFunc(list.Items, func(a, b eventsv1.Event) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
		got = nil
		for _, e := range list.Items {
			if e.Regarding.Kind == "Glance" && !slices.Contains(got, e.Reason) {
				got = append(got, e.Reason)
			}
		}
		i := 0
		for _, r := range got {
			if i < len(reasons) && r == reasons[i] {
				i++
			}
		}
		return i == len(reasons)
	}, func() string { return "got " + strings.Join(got, ", ") })
}

// eventsOnce checks that each of the transition events was emitted exactly
// once on the Glance: one Event object, never repeated into a series.
func (s *scene) eventsOnce(reasons ...string) {
	s.t.Helper()
	var list eventsv1.EventList
	if err := cl.List(context.Background(), &list, client.InNamespace(s.NS)); err != nil {
		s.t.Fatal(err)
	}
	for _, reason := range reasons {
		n := 0
		for _, e := range list.Items {
			if e.Regarding.Kind != "Glance" || e.Reason != reason {
				continue
			}
			n++
			if e.Series != nil && e.Series.Count > 1 {
				n += int(e.Series.Count) - 1
			}
		}
		if n != 1 {
			s.t.Errorf("event %s emitted %d times, want once", reason, n)
		}
	}
}

// syncRuns waits until the db-sync counter of the Glance with that result
// reaches n, and checks it stays there for a moment.
func (s *scene) syncRuns(result string, n float64) {
	s.t.Helper()
	c := s.mgr.Metrics.DBSync.Total.WithLabelValues("glance", s.NS, result)
	s.Eventually(fmt.Sprintf("glance_operator_db_sync_total{result=%q} = %v", result, n), func() bool {
		return testutil.ToFloat64(c) == n
	}, func() string { return fmt.Sprint(testutil.ToFloat64(c)) })
	time.Sleep(500 * time.Millisecond)
	if got := testutil.ToFloat64(c); got != n {
		s.t.Errorf("glance_operator_db_sync_total{result=%q} = %v, want %v", result, got, n)
	}
}

// install takes a fresh managed Glance to DatabaseSynced and
// DeploymentReady.
func (s *scene) install(muts ...func(*v1alpha1.Glance)) {
	s.t.Helper()
	s.ready(false)
	s.Glance(muts...)
	s.provision()
	s.finishJob("db-sync", true)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionTrue, v1alpha1.ReasonDatabaseSynced)
	s.rollOut()
	s.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReady)
}
