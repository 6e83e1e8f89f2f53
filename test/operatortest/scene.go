package operatortest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/operator"
	"github.com/c5c3/glance-operator/pkg/render"
)

// Scene is one test's namespace and a manager of that namespace alone, so
// that the test can stop the manager and start it again (a restart, or a
// manager that must not see what the test does meanwhile).
type Scene struct {
	*Env
	// Manager is the running manager; nil while it is stopped.
	Manager *Manager
	cfg     *rest.Config
	options operator.Options
}

// NewScene creates the test's Env with cl and starts a manager of its
// namespace on cfg with o. The manager's health probes go to
// HealthyAddress unless o says where; the test's cleanup stops it.
func NewScene(t testing.TB, cfg *rest.Config, cl client.Client, o operator.Options) *Scene {
	t.Helper()
	s := &Scene{Env: NewEnv(t, cl), cfg: cfg, options: o}
	s.options.WatchNamespaces = []string{s.NS}
	if s.options.DevHealthcheckAddress == "" {
		s.options.DevHealthcheckAddress = HealthyAddress()
	}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Start starts a manager of the scene's namespace, with a fresh prober,
// clock and metrics, failing the test on error.
func (s *Scene) Start() {
	s.t.Helper()
	if s.Manager != nil {
		s.t.Fatal("the scene's manager is already running")
	}
	m, err := StartManager(s.cfg, s.options)
	if err != nil {
		s.t.Fatal(err)
	}
	s.Manager = m
}

// Stop stops the scene's manager and waits for it; it does nothing when
// the manager is stopped already.
func (s *Scene) Stop() {
	s.t.Helper()
	if s.Manager == nil {
		return
	}
	if err := s.Manager.Stop(); err != nil {
		s.t.Errorf("stop manager: %v", err)
	}
	s.Manager = nil
}

// HealthyAddress is the host:port of a server that answers /healthcheck
// with 200 OK, as a healthy glance-api does. The test managers run outside
// any cluster network, so their probes are sent there
// (operator.Options.DevHealthcheckAddress).
var HealthyAddress = sync.OnceValue(func() string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthcheck" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("OK"))
	}))
	return strings.TrimPrefix(srv.URL, "http://")
})

// Brownfield points the Glance at an external database
// (spec.database.host) instead of a MariaDB of the mariadb-operator.
func Brownfield(g *v1alpha1.Glance) {
	g.Spec.Database.ClusterRef = nil
	g.Spec.Database.Host = "db.example.com"
}

// DefaultBackend creates the Secret "s3" with S3 credentials and the
// default GlanceBackend name of the Glance using them.
func (e *Env) DefaultBackend(name string) *v1alpha1.GlanceBackend {
	e.t.Helper()
	e.Secret("s3", map[string]string{"access-key-id": "ak", "secret-access-key": "sk"})
	return e.Backend(name, true, "s3")
}

// ReadGlance reads the Glance "glance".
func (e *Env) ReadGlance() *v1alpha1.Glance {
	e.t.Helper()
	g := &v1alpha1.Glance{}
	if err := e.cl.Get(context.Background(), e.key("glance"), g); err != nil {
		e.t.Fatal(err)
	}
	return g
}

// UpdateGlance changes the Glance "glance", retrying on conflicts with the
// operator's status writes.
func (e *Env) UpdateGlance(mutate func(*v1alpha1.Glance)) {
	e.t.Helper()
	for range 10 {
		g := e.ReadGlance()
		mutate(g)
		err := e.cl.Update(context.Background(), g)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			e.t.Fatal(err)
		}
	}
	e.t.Fatal("too many conflicts updating the Glance")
}

func (e *Env) key(name string) client.ObjectKey { return client.ObjectKey{Namespace: e.NS, Name: name} }

// SetReady writes a Ready=True condition on the object name of an external
// API (the mariadb-operator's, ...), as its operator would.
func (e *Env) SetReady(gvk schema.GroupVersionKind, name string) {
	e.t.Helper()
	e.setReadyCondition(gvk, name, "True", "Ready", "ok")
}

// SetNotReady writes a Ready=False condition with reason and message on
// the object name of an external API, as its operator would.
func (e *Env) SetNotReady(gvk schema.GroupVersionKind, name, reason, message string) {
	e.t.Helper()
	e.setReadyCondition(gvk, name, "False", reason, message)
}

func (e *Env) setReadyCondition(gvk schema.GroupVersionKind, name, status, reason, message string) {
	e.t.Helper()
	ctx := context.Background()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := e.cl.Get(ctx, e.key(name), u); err != nil {
		e.t.Fatal(err)
	}
	u.Object["status"] = map[string]any{"conditions": []any{map[string]any{
		"type": "Ready", "status": status, "reason": reason, "message": message,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}}}
	if err := e.cl.Status().Update(ctx, u); err != nil {
		e.t.Fatal(err)
	}
}

// MariaDB creates the MariaDB "mariadb" a managed Glance's clusterRef
// names, Ready, or not Ready as while it provisions.
func (e *Env) MariaDB(ready bool) {
	e.t.Helper()
	mdb := &unstructured.Unstructured{}
	mdb.SetGroupVersionKind(render.MariaDBGVK)
	mdb.SetNamespace(e.NS)
	mdb.SetName("mariadb")
	mdb.Object["spec"] = map[string]any{"replicas": int64(1)}
	e.Create(mdb)
	if ready {
		e.SetReady(render.MariaDBGVK, "mariadb")
	} else {
		e.SetNotReady(render.MariaDBGVK, "mariadb", "Provisioning", "test")
	}
}

// Job waits for the Job name, not being deleted, and returns it.
func (e *Env) Job(name string) *batchv1.Job {
	e.t.Helper()
	j := &batchv1.Job{}
	e.Eventually("Job "+name, func() bool {
		return e.cl.Get(context.Background(), e.key(name), j) == nil && j.DeletionTimestamp == nil
	}, nil)
	return j
}

// FinishJob plays the Job controller: the Job name, once there, has run
// for 42 seconds and succeeded, or failed past its backoff limit.
func (e *Env) FinishJob(name string, succeeded bool) *batchv1.Job {
	e.t.Helper()
	j := e.Job(name)
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
	if err := e.cl.Status().Update(context.Background(), j); err != nil {
		e.t.Fatalf("finish Job %s: %v", j.Name, err)
	}
	return j
}

// Deployment waits for the Glance's Deployment, not being deleted, to
// match (nil matches any), and returns it.
func (e *Env) Deployment(match func(*appsv1.Deployment) bool) *appsv1.Deployment {
	e.t.Helper()
	d := &appsv1.Deployment{}
	e.Eventually("the Deployment", func() bool {
		return e.cl.Get(context.Background(), e.key("glance"), d) == nil && d.DeletionTimestamp == nil && (match == nil || match(d))
	}, func() string { return fmt.Sprintf("containers %+v", d.Spec.Template.Spec.Containers) })
	return d
}

// SetPaused sets the Glance's pause annotation to value, or removes it when
// value is empty.
func (e *Env) SetPaused(value string) {
	e.t.Helper()
	e.UpdateGlance(func(g *v1alpha1.Glance) {
		if value == "" {
			delete(g.Annotations, v1alpha1.AnnotationPaused)
			return
		}
		metav1.SetMetaDataAnnotation(&g.ObjectMeta, v1alpha1.AnnotationPaused, value)
	})
}

// RollOut plays the Deployment controller: every replica of the Glance's
// Deployment runs the current template and is available, and no old one is
// terminating.
func (e *Env) RollOut() {
	e.t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, e.rollOut); err != nil {
		e.t.Fatal(err)
	}
}

// rollOut writes the rolled-out status over the Deployment as it is now; a
// conflict means the operator changed it meanwhile.
func (e *Env) rollOut() error {
	d := e.Deployment(nil)
	n := ptr.Deref(d.Spec.Replicas, 1)
	now := metav1.Now()
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
		TerminatingReplicas: ptr.To[int32](0),
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastUpdateTime: now, LastTransitionTime: now},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: now, LastTransitionTime: now},
		},
	}
	return e.cl.Status().Update(context.Background(), d)
}

// InstallBrownfield takes a brownfield Glance, changed by muts, with its
// credentials and a default backend "primary", through a successful
// db-sync to DatabaseReady.
func (e *Env) InstallBrownfield(muts ...func(*v1alpha1.Glance)) {
	e.t.Helper()
	e.Credentials("pw")
	e.DefaultBackend("primary")
	e.Glance(append([]func(*v1alpha1.Glance){Brownfield}, muts...)...)
	e.FinishJob("glance-db-sync", true)
	e.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionTrue, v1alpha1.ReasonDatabaseSynced)
}
