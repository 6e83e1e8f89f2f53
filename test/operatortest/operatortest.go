// Package operatortest runs the operator's manager in a test process
// against a real API server, with a client that counts its writes and
// stand-ins for the health probe and the EndpointSlice controller, and gives
// each test a namespace (Env), or a namespace with a manager of its own
// (Scene), and helpers to set the scene and wait for conditions.
package operatortest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/controller/glance"
	"github.com/c5c3/glance-operator/pkg/metrics"
	"github.com/c5c3/glance-operator/pkg/operator"
	"github.com/c5c3/glance-operator/pkg/render"
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
// writes, until the returned stop is called. Its health probes go through
// Manager.Prober, its probe cache runs on Manager.Clock, and a stand-in of
// the EndpointSlice controller, which these API servers do not run, gives
// the API Service of every rolled-out Deployment its endpoints.
func StartManager(cfg *rest.Config, o operator.Options) (*Manager, error) {
	mgr := &Manager{}
	fallback := o.Prober
	if fallback == nil {
		fallback = glance.HTTPProber{Redirect: o.DevHealthcheckAddress}
	}
	mgr.Prober = &Prober{fallback: fallback, answers: map[string]glance.Prober{}, probes: map[string]int{}}
	mgr.Clock = &Clock{}
	o.Prober, o.Probes = mgr.Prober, glance.NewProbeCacheWithClock(mgr.Clock.Now)
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
	if o.CoalesceEvents == 0 {
		// As the binary runs.
		o.CoalesceEvents = operator.DefaultCoalesceEvents
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
				if fn := mgr.beforePatch.Load(); fn != nil {
					(*fn)(ctx, obj)
				}
				return c.Patch(ctx, obj, patch, opts...)
			},
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				count()
				return c.Delete(ctx, obj, opts...)
			},
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				count()
				return mgr.afterSubResourceWrite(sub, obj, c.SubResource(sub).Update(ctx, obj, opts...))
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				count()
				return mgr.afterSubResourceWrite(sub, obj, c.SubResource(sub).Patch(ctx, obj, patch, opts...))
			},
		}), nil
	}
	operatorConfig := rest.CopyConfig(cfg)
	operatorConfig.Wrap(mgr.Reads.wrap)
	m2, err := operator.New(ctx, operatorConfig, o)
	if err != nil {
		cancel()
		return nil, err
	}
	if err := mgr.startEndpointSlices(cfg, m2); err != nil {
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
	// Reads records what the operator reads from the API server.
	Reads APIReads
	// Metrics are the operator's collectors, in a registry of this
	// manager's own.
	Metrics *metrics.Metrics
	// Prober answers the operator's health probes.
	Prober *Prober
	// Clock is the time of the operator's probe cache.
	Clock *Clock
	// endpointSlices is the stand-in EndpointSlice controller.
	endpointSlices *endpointSliceStandIn
	beforePatch    atomic.Pointer[func(context.Context, client.Object)]
	afterStatus    atomic.Pointer[func(client.Object)]
	stop           func() error
}

// AfterStatusWrite makes fn run after each status write the operator sent
// and the API server took, on the object as the operator reads it back; nil
// stops it. fn may change that object: what the operator then believes it
// wrote, for a test to play an API server whose versions went back.
func (m *Manager) AfterStatusWrite(fn func(obj client.Object)) {
	if fn == nil {
		m.afterStatus.Store(nil)
		return
	}
	m.afterStatus.Store(&fn)
}

func (m *Manager) afterSubResourceWrite(sub string, obj client.Object, err error) error {
	if fn := m.afterStatus.Load(); fn != nil && err == nil && sub == "status" {
		(*fn)(obj)
	}
	return err
}

// BeforePatch makes fn run before each patch of an object (not of a
// subresource) the operator sends, for a test to play a writer that races
// it; nil stops it. fn sees the object as the operator is about to patch
// it, and must not change it.
func (m *Manager) BeforePatch(fn func(ctx context.Context, obj client.Object)) {
	if fn == nil {
		m.beforePatch.Store(nil)
		return
	}
	m.beforePatch.Store(&fn)
}

// Prober stands in for the operator's health prober: a URL a test gave an
// answer gets that answer, any other goes to the prober the manager would
// have used. Every probe is counted by URL.
type Prober struct {
	fallback glance.Prober
	mu       sync.Mutex
	answers  map[string]glance.Prober
	probes   map[string]int
}

// Answer sends the probes of url to answer.
func (p *Prober) Answer(url string, answer glance.Prober) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answers[url] = answer
}

// Probes counts the probes of url so far.
func (p *Prober) Probes(url string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.probes[url]
}

// Probe implements glance.Prober.
func (p *Prober) Probe(ctx context.Context, url string) (int, error) {
	p.mu.Lock()
	p.probes[url]++
	answer, ok := p.answers[url]
	p.mu.Unlock()
	if !ok {
		answer = p.fallback
	}
	return answer.Probe(ctx, url)
}

// Clock is the wall clock moved forward by what tests added, so that the
// probe cache's TTL passes without waiting for it.
type Clock struct{ ahead atomic.Int64 }

// Now is the clock's time.
func (c *Clock) Now() time.Time { return time.Now().Add(time.Duration(c.ahead.Load())) }

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) { c.ahead.Add(int64(d)) }

// ManualEndpointSlices stops the stand-in EndpointSlice controller in
// namespace: the test writes the slices there itself.
func (m *Manager) ManualEndpointSlices(namespace string) {
	m.endpointSlices.mu.Lock()
	defer m.endpointSlices.mu.Unlock()
	m.endpointSlices.manual[namespace] = true
}

// endpointSliceManager marks the slices tests write, in place of the
// EndpointSlice controller's name.
const endpointSliceManager = "operatortest.c5c3.io"

// endpointSliceStandIn plays the EndpointSlice controller for the API
// Services, from the Deployment status the tests write (there are no pods):
// one slice with an endpoint per replica, as many ready as the Deployment
// says. It writes with a client of its own, so the operator's write count
// stays the operator's.
type endpointSliceStandIn struct {
	cache  client.Reader
	writer client.Client
	mu     sync.Mutex
	manual map[string]bool
}

func (m *Manager) startEndpointSlices(cfg *rest.Config, mgr ctrl.Manager) error {
	writer, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	m.endpointSlices = &endpointSliceStandIn{cache: mgr.GetCache(), writer: writer, manual: map[string]bool{}}
	return ctrl.NewControllerManagedBy(mgr).
		Named("endpointslice-stand-in").
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
		For(&appsv1.Deployment{}).
		Complete(m.endpointSlices)
}

func (s *endpointSliceStandIn) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	s.mu.Lock()
	manual := s.manual[req.Namespace]
	s.mu.Unlock()
	if manual {
		return reconcile.Result{}, nil
	}
	d := &appsv1.Deployment{}
	if err := s.cache.Get(ctx, req.NamespacedName, d); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if d.Labels[render.LabelComponent] != render.ComponentAPI {
		return reconcile.Result{}, nil
	}
	svc := &corev1.Service{}
	if err := s.cache.Get(ctx, req.NamespacedName, svc); err != nil {
		if apierrors.IsNotFound(err) {
			// The operator writes the Service after the Deployment.
			return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
		}
		return reconcile.Result{}, err
	}
	want := APIEndpointSlice(svc, max(d.Status.Replicas, d.Status.ReadyReplicas), d.Status.ReadyReplicas)
	have := &discoveryv1.EndpointSlice{}
	err := s.writer.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case apierrors.IsNotFound(err):
		return reconcile.Result{}, s.writer.Create(ctx, want)
	case err != nil:
		return reconcile.Result{}, err
	case equality.Semantic.DeepEqual(have.Endpoints, want.Endpoints) && equality.Semantic.DeepEqual(have.Labels, want.Labels):
		return reconcile.Result{}, nil
	}
	have.Labels, have.Endpoints, have.Ports = want.Labels, want.Endpoints, want.Ports
	return reconcile.Result{}, s.writer.Update(ctx, have)
}

// APIEndpointSlice is an EndpointSlice of the API Service svc as the
// EndpointSlice controller writes it (the Service's labels, the service-name
// and managed-by labels, an owner reference to the Service), with endpoints
// endpoints of which the first ready are ready.
func APIEndpointSlice(svc *corev1.Service, endpoints, ready int32) *discoveryv1.EndpointSlice {
	labels := maps.Clone(svc.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[discoveryv1.LabelServiceName] = svc.Name
	labels[discoveryv1.LabelManagedBy] = endpointSliceManager
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: svc.Name + "-api", Namespace: svc.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID, Controller: ptr.To(true)}},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{
			Name: ptr.To(render.PortNameAPI), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(v1alpha1.APIPort)),
		}},
		Endpoints: []discoveryv1.Endpoint{},
	}
	for i := range endpoints {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.244.%d.%d", i/250, i%250+1)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(i < ready), Serving: ptr.To(i < ready), Terminating: ptr.To(false)},
		})
	}
	return s
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

// Create creates obj, failing the test on error.
func (e *Env) Create(obj client.Object) {
	e.t.Helper()
	if err := e.cl.Create(context.Background(), obj); err != nil {
		e.t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// SetStore creates or updates the env's ClusterSecretStore with a Ready
// condition of ready's status and message, as External Secrets would.
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

// Secret creates the Secret name in the env's namespace with data.
func (e *Env) Secret(name string, data map[string]string) *corev1.Secret {
	e.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.NS}, StringData: data}
	e.Create(s)
	return s
}

// Credentials creates the database and service-user Secrets, the database
// password being dbPassword.
func (e *Env) Credentials(dbPassword string) {
	e.Secret("glance-db", map[string]string{"username": "glance", "password": dbPassword})
	e.Secret("glance-service-user", map[string]string{"password": "service-password"})
}

// Glance creates the Glance "glance" of the env on the env's store, changed
// by muts.
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

// Condition waits until the Glance reports the condition with status and
// reason, and returns it.
func (e *Env) Condition(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	e.t.Helper()
	return e.waitCondition(&v1alpha1.Glance{}, "glance", "", typ, status, reason, "")
}

// ConditionSaying waits until the Glance reports the condition with status
// and reason and a message that contains fragment, and returns it: for a
// state that one reason covers on the way, such as backends projected while
// a sibling's credentials are still pending.
func (e *Env) ConditionSaying(typ string, status metav1.ConditionStatus, reason, fragment string) metav1.Condition {
	e.t.Helper()
	return e.waitCondition(&v1alpha1.Glance{}, "glance", "", typ, status, reason, fragment)
}

// BackendCondition waits until the GlanceBackend name reports the condition
// with status and reason, and returns it.
func (e *Env) BackendCondition(name, typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	e.t.Helper()
	return e.waitCondition(&v1alpha1.GlanceBackend{}, name, "backend "+name+" ", typ, status, reason, "")
}

// Conditioned is a CR with conditions: a Glance or a GlanceBackend.
type Conditioned interface {
	client.Object
	GetConditions() []metav1.Condition
}

// waitCondition waits until the CR name, of empty's kind, reports the
// condition with status and reason, and a message containing fragment, and
// returns it; what prefixes the wait's description.
func (e *Env) waitCondition(empty Conditioned, name, what, typ string, status metav1.ConditionStatus, reason, fragment string) metav1.Condition {
	e.t.Helper()
	var last *metav1.Condition
	desc := fmt.Sprintf("%s%s=%s/%s", what, typ, status, reason)
	if fragment != "" {
		desc += fmt.Sprintf(" saying %q", fragment)
	}
	e.Eventually(desc, func() bool {
		obj := empty.DeepCopyObject().(Conditioned)
		if err := e.cl.Get(context.Background(), e.key(name), obj); err != nil {
			return false
		}
		last = meta.FindStatusCondition(obj.GetConditions(), typ)
		return last != nil && last.Status == status && last.Reason == reason && strings.Contains(last.Message, fragment)
	}, func() string { return fmt.Sprintf("last %s: %+v", typ, last) })
	return *last
}

// Eventually is the package's Eventually for a condition that holds or
// not; detail, when given, says what was seen last.
func (e *Env) Eventually(what string, cond func() bool, detail func() string) {
	e.t.Helper()
	Eventually(e.t, what, func() error {
		switch {
		case cond():
			return nil
		case detail != nil:
			return errors.New(detail())
		}
		return errors.New("not yet")
	})
}

// Consistently fails the test unless cond holds, polled, for the whole of d.
func (e *Env) Consistently(what string, d time.Duration, cond func() bool) {
	e.t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if !cond() {
			e.t.Fatalf("%s: it did not hold", what)
		}
	}
}

// Names lists the names of the operator's children of a component in the
// env's namespace, read into list.
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
