// Package manager runs both controllers in a real manager against a real
// kube-apiserver and checks the Secrets, DBConnectionSecret, Backends and
// Config steps and the GlanceBackend controller as users see them: through
// conditions, events and the objects the operator writes.
package manager

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
	"github.com/c5c3/glance-operator/test/controlplane"
)

var (
	cl     client.Client
	writes atomic.Int64 // API writes by the operator's client
)

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunTests(m, controlplane.APIServerOptions{
		CRDs: controlplane.CRDs{Glance: true, MariaDB: true, ExternalSecrets: true, GatewayAPI: true},
	}, func(srv *controlplane.APIServer) (func(), error) {
		var err error
		if cl, err = newClient(srv.Config); err != nil {
			return nil, err
		}
		return startManager(srv.Config, &writes)
	}))
}

func newClient(cfg *rest.Config) (client.Client, error) {
	scheme, err := operator.NewScheme()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// startManager runs the operator in-process with a client that counts its
// writes, until the returned stop is called.
func startManager(cfg *rest.Config, counter *atomic.Int64) (func(), error) {
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		return nil, err
	}
	count := func() { counter.Add(1) }
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := operator.New(ctx, cfg, operator.Options{
		MetricsAddress: "0", HealthAddress: "0", MaxConcurrentReconciles: 2, Metrics: m,
		GracefulShutdownTimeout: 10 * time.Second,
		NewClient: func(cfg *rest.Config, opts client.Options) (client.Client, error) {
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
		},
	})
	if err != nil {
		cancel()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}, nil
}

// env is one test's namespace with a ready secret store.
type env struct {
	t     *testing.T
	ns    string
	store string
}

// newEnv creates a namespace and a Ready ClusterSecretStore of its own.
func newEnv(t *testing.T) *env {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-")
	e := &env{t: t, ns: name, store: name}
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	e.setStore(true, "")
	return e
}

func (e *env) create(obj client.Object) {
	e.t.Helper()
	if err := cl.Create(context.Background(), obj); err != nil {
		e.t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// setStore creates or updates the env's ClusterSecretStore with a Ready
// condition.
func (e *env) setStore(ready bool, message string) {
	e.t.Helper()
	ctx := context.Background()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("external-secrets.io/v1")
	u.SetKind("ClusterSecretStore")
	u.SetName(e.store)
	if err := cl.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
		u.Object["spec"] = map[string]any{"provider": map[string]any{}}
		if err := cl.Create(ctx, u); err != nil {
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
	if err := cl.Status().Update(ctx, u); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) secret(name string, data map[string]string) *corev1.Secret {
	e.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}, StringData: data}
	e.create(s)
	return s
}

// credentials creates the database and service-user Secrets.
func (e *env) credentials(dbPassword string) {
	e.secret("glance-db", map[string]string{"username": "glance", "password": dbPassword})
	e.secret("glance-service-user", map[string]string{"password": "service-password"})
}

func (e *env) glance(muts ...func(*v1alpha1.Glance)) *v1alpha1.Glance {
	e.t.Helper()
	g := &v1alpha1.Glance{
		ObjectMeta: metav1.ObjectMeta{Name: "glance", Namespace: e.ns},
		Spec: v1alpha1.GlanceSpec{
			OpenStackRelease: "2025.2",
			Image:            v1alpha1.ImageSpec{Repository: "registry.example.com/openstack/glance", Tag: "2025.2"},
			Database: v1alpha1.DatabaseSpec{
				ClusterRef: &v1alpha1.LocalObjectReference{Name: "mariadb"},
				Database:   "glance",
				SecretRef:  v1alpha1.SecretKeySelector{Name: "glance-db"},
			},
			KeystoneEndpoint: "http://keystone:5000/v3",
			ServiceUser:      v1alpha1.ServiceUserSpec{SecretRef: v1alpha1.SecretKeySelector{Name: "glance-service-user"}},
			SecretStoreRef:   &v1alpha1.SecretStoreReference{Kind: v1alpha1.ClusterSecretStoreKind, Name: e.store},
		},
	}
	for _, m := range muts {
		m(g)
	}
	e.create(g)
	return g
}

func (e *env) backend(name string, isDefault bool, secret string) *v1alpha1.GlanceBackend {
	e.t.Helper()
	b := &v1alpha1.GlanceBackend{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: v1alpha1.GlanceBackendSpec{
			GlanceRef: v1alpha1.LocalObjectReference{Name: "glance"},
			Type:      v1alpha1.BackendTypeS3,
			IsDefault: isDefault,
			S3:        &v1alpha1.S3BackendSpec{Host: "http://s3:9000", Bucket: "images-" + name, CredentialsSecretRef: v1alpha1.LocalObjectReference{Name: secret}},
		},
	}
	e.create(b)
	return b
}

// condition waits until the Glance's condition has the status and reason and
// returns it.
func (e *env) condition(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	e.t.Helper()
	var last *metav1.Condition
	e.eventually(fmt.Sprintf("%s=%s/%s", typ, status, reason), func() bool {
		g := &v1alpha1.Glance{}
		if err := cl.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "glance"}, g); err != nil {
			return false
		}
		last = meta.FindStatusCondition(g.Status.Conditions, typ)
		return last != nil && last.Status == status && last.Reason == reason
	}, func() string { return fmt.Sprintf("last %s: %+v", typ, last) })
	return *last
}

// backendCondition waits for a GlanceBackend condition.
func (e *env) backendCondition(name, typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	e.t.Helper()
	var last *metav1.Condition
	e.eventually(fmt.Sprintf("backend %s %s=%s/%s", name, typ, status, reason), func() bool {
		b := &v1alpha1.GlanceBackend{}
		if err := cl.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, b); err != nil {
			return false
		}
		last = meta.FindStatusCondition(b.Status.Conditions, typ)
		return last != nil && last.Status == status && last.Reason == reason
	}, func() string { return fmt.Sprintf("last %s: %+v", typ, last) })
	return *last
}

// eventually polls cond for 30 seconds; no step of these tests waits on a
// periodic requeue longer than 15 seconds.
func (e *env) eventually(what string, cond func() bool, detail func() string) {
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
func (e *env) names(list client.ObjectList, component string) []string {
	e.t.Helper()
	if err := cl.List(context.Background(), list, client.InNamespace(e.ns), client.MatchingLabels{"app.kubernetes.io/component": component}); err != nil {
		e.t.Fatal(err)
	}
	var out []string
	switch l := list.(type) {
	case *corev1.ConfigMapList:
		for _, i := range l.Items {
			out = append(out, i.Name)
		}
	case *corev1.SecretList:
		for _, i := range l.Items {
			out = append(out, i.Name)
		}
	}
	return out
}
