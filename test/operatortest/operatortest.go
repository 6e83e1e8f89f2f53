// Package operatortest runs the operator's manager in a test process
// against a real API server, with a client that counts its writes, and gives
// each test a namespace and helpers to set the scene and wait for conditions.
package operatortest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/metrics"
	"github.com/c5c3/glance-operator/pkg/operator"
	"github.com/c5c3/glance-operator/test/fixtures"
)

// NewClient returns a client that knows the operator's kinds.
func NewClient(cfg *rest.Config) (client.Client, error) {
	scheme, err := operator.NewScheme()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// StartManager runs the operator in-process with a client that counts its
// writes, until the returned stop is called.
func StartManager(cfg *rest.Config, o operator.Options) (*Manager, error) {
	mgr := &Manager{}
	counter := &mgr.Writes
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		return nil, err
	}
	count := func() { counter.Add(1) }
	ctx, cancel := context.WithCancel(context.Background())
	o.MetricsAddress, o.HealthAddress, o.Metrics = "0", "0", m
	mgr.Metrics = m
	if o.MaxConcurrentReconciles == 0 {
		o.MaxConcurrentReconciles = 2
	}
	if o.GracefulShutdownTimeout == 0 {
		o.GracefulShutdownTimeout = 10 * time.Second
	}
	o.SkipNameValidation = true
	o.NewClient = func(cfg *rest.Config, opts client.Options) (client.Client, error) {
		c, err := client.NewWithWatch(cfg, opts)
		if err != nil {
			return nil, err
		}
		return interceptor.NewClient(c, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				count()
				return c.Create(ctx, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				count()
				return c.Update(ctx, obj, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				count()
				return c.Patch(ctx, obj, patch, opts...)
			},
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				count()
				return c.Delete(ctx, obj, opts...)
			},
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				count()
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				count()
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}), nil
	}
	m2, err := operator.New(ctx, cfg, o)
	if err != nil {
		cancel()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- m2.Start(ctx) }()
	mgr.stop = func() error {
		cancel()
		return <-done
	}
	return mgr, nil
}

// Manager is an operator manager running in the test process.
type Manager struct {
	// Writes counts the API writes of the operator's client.
	Writes atomic.Int64
	// Metrics are the operator's collectors, in a registry of this
	// manager's own.
	Metrics *metrics.Metrics
	stop    func() error
}

// Stop stops the manager and waits for it.
func (m *Manager) Stop() error { return m.stop() }

// Env is one test's namespace with a ready secret store.
type Env struct {
	t     testing.TB
	cl    client.Client
	NS    string
	Store string
}

// NewEnv creates a namespace named after the test and a Ready
// ClusterSecretStore of its own.
func NewEnv(t testing.TB, cl client.Client) *Env {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-")
	e := &Env{t: t, cl: cl, NS: name, Store: name}
	e.Create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	e.SetStore(true, "")
	return e
}

func (e *Env) Create(obj client.Object) {
	e.t.Helper()
	if err := e.cl.Create(context.Background(), obj); err != nil {
		e.t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// setStore creates or updates the env's ClusterSecretStore with a Ready
// condition.
func (e *Env) SetStore(ready bool, message string) {
	e.t.Helper()
	ctx := context.Background()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("external-secrets.io/v1")
	u.SetKind("ClusterSecretStore")
	u.SetName(e.Store)
	if err := e.cl.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
		u.Object["spec"] = map[string]any{"provider": map[string]any{}}
		if err := e.cl.Create(ctx, u); err != nil {
			e.t.Fatal(err)
		}
	}
	status := "False"
	if ready {
		status = "True"
	}
	u.Object["status"] = map[string]any{"conditions": []any{map[string]any{
		"type": "Ready", "status": status, "reason": "Test", "message": message,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}}}
	if err := e.cl.Status().Update(ctx, u); err != nil {
		e.t.Fatal(err)
	}
}

func (e *Env) Secret(name string, data map[string]string) *corev1.Secret {
	e.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.NS}, StringData: data}
	e.Create(s)
	return s
}

// credentials creates the database and service-user Secrets.
func (e *Env) Credentials(dbPassword string) {
	e.Secret("glance-db", map[string]string{"username": "glance", "password": dbPassword})
	e.Secret("glance-service-user", map[string]string{"password": "service-password"})
}

func (e *Env) Glance(muts ...func(*v1alpha1.Glance)) *v1alpha1.Glance {
	e.t.Helper()
	g := fixtures.NewGlance(e.NS, "glance", "2025.2")
	g.Spec.SecretStoreRef = &v1alpha1.SecretStoreReference{Kind: v1alpha1.ClusterSecretStoreKind, Name: e.Store}
	for _, m := range muts {
		m(g)
	}
	e.Create(g)
	return g
}

// Backend creates an S3 GlanceBackend of the Glance, with a bucket of its
// own, whose credentials are in secret.
func (e *Env) Backend(name string, isDefault bool, secret string) *v1alpha1.GlanceBackend {
	e.t.Helper()
	b := fixtures.NewBackend(e.NS, name, "glance", isDefault, secret)
	b.Spec.S3.Bucket = "images-" + name
	e.Create(b)
	return b
}

func (e *Env) Condition(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	e.t.Helper()
	var last *metav1.Condition
	e.Eventually(fmt.Sprintf("%s=%s/%s", typ, status, reason), func() bool {
		g := &v1alpha1.Glance{}
		if err := e.cl.Get(context.Background(), client.ObjectKey{Namespace: e.NS, Name: "glance"}, g); err != nil {
			return false
		}
		last = meta.FindStatusCondition(g.Status.Conditions, typ)
		return last != nil && last.Status == status && last.Reason == reason
	}, func() string { return fmt.Sprintf("last %s: %+v", typ, last) })
	return *last
}

// backendCondition waits for a GlanceBackend condition.
func (e *Env) BackendCondition(name, typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	e.t.Helper()
	var last *metav1.Condition
	e.Eventually(fmt.Sprintf("backend %s %s=%s/%s", name, typ, status, reason), func() bool {
		b := &v1alpha1.GlanceBackend{}
		if err := e.cl.Get(context.Background(), client.ObjectKey{Namespace: e.NS, Name: name}, b); err != nil {
			return false
		}
		last = meta.FindStatusCondition(b.Status.Conditions, typ)
		return last != nil && last.Status == status && last.Reason == reason
	}, func() string { return fmt.Sprintf("last %s: %+v", typ, last) })
	return *last
}

// eventually polls cond for 30 seconds; no step of these tests waits on a
// periodic requeue longer than 15 seconds.
func (e *Env) Eventually(what string, cond func() bool, detail func() string) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		msg := ""
		if detail != nil {
			msg = detail()
		}
		e.t.Fatalf("waiting for %s: %v; %s", what, err, msg)
	}
}

// names lists the operator's children of a component in the namespace.
func (e *Env) Names(list client.ObjectList, component string) []string {
	e.t.Helper()
	if err := e.cl.List(context.Background(), list, client.InNamespace(e.NS), client.MatchingLabels{"app.kubernetes.io/component": component}); err != nil {
		e.t.Fatal(err)
	}
	var out []string
	if err := meta.EachListItem(list, func(o runtime.Object) error {
		out = append(out, o.(client.Object).GetName())
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	return out
}
