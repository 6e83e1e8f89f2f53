package glance

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
	"github.com/c5c3/glance-operator/test/fixtures"
)

// countingProber answers every probe with code and err, and counts them.
type countingProber struct {
	code   int
	err    error
	probes int
}

func (c *countingProber) Probe(context.Context, string) (int, error) {
	c.probes++
	return c.code, c.err
}

// apiSlice is a slice of the Glance's API Service as the EndpointSlice
// controller writes it, with one endpoint per entry of ready (nil: unset).
func apiSlice(name, service string, ready ...*bool) *discoveryv1.EndpointSlice {
	labels := render.APIPodLabels(service)
	labels[discoveryv1.LabelServiceName] = service
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "openstack", Name: name, Labels: labels},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for i, r := range ready {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{fmt.Sprintf("10.0.0.%d", i+1)}, Conditions: discoveryv1.EndpointConditions{Ready: r},
		})
	}
	return s
}

// healthScene is one HealthCheck step on a fake cluster with a clock the
// test moves.
type healthScene struct {
	t      *testing.T
	g      *v1alpha1.Glance
	c      client.Client
	prober *countingProber
	now    time.Time
	p      *pass
}

func newHealthScene(t *testing.T, objs ...client.Object) *healthScene {
	t.Helper()
	scheme := testScheme(t)
	s := &healthScene{t: t, g: fixtures.NewGlance("openstack", "glance", "2025.2"), prober: &countingProber{code: http.StatusOK}, now: time.Unix(1_800_000_000, 0)}
	s.g.UID = "uid-1"
	s.c = withIndexes(fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...)).Build()
	s.p = &pass{
		r:       &Reconciler{Prober: s.prober, Probes: NewProbeCacheWithClock(func() time.Time { return s.now })},
		cluster: &targetcluster.Cluster{Client: s.c, Reader: s.c, Scheme: scheme},
	}
	return s
}

// run runs the step and returns its result and GlanceAPIReady.
func (s *healthScene) run() (ctrl.Result, metav1.Condition) {
	s.t.Helper()
	res, err := reconcileHealthCheck(context.Background(), s.g, s.p)
	if err != nil {
		s.t.Fatal(err)
	}
	c := meta.FindStatusCondition(s.g.Status.Conditions, v1alpha1.ConditionGlanceAPIReady)
	if c == nil {
		s.t.Fatal("no GlanceAPIReady")
	}
	return res, *c
}

func (s *healthScene) expect(res ctrl.Result, c metav1.Condition, status metav1.ConditionStatus, reason string, requeue time.Duration, probes int) {
	s.t.Helper()
	if c.Status != status || c.Reason != reason {
		s.t.Errorf("GlanceAPIReady %s/%s (%s), want %s/%s", c.Status, c.Reason, c.Message, status, reason)
	}
	if res.RequeueAfter != requeue {
		s.t.Errorf("requeue after %s, want %s", res.RequeueAfter, requeue)
	}
	if s.prober.probes != probes {
		s.t.Errorf("%d probes, want %d", s.prober.probes, probes)
	}
}

func TestHealthCheckWithoutReadyEndpointDoesNotProbe(t *testing.T) {
	for _, tt := range []struct {
		name    string
		objs    []client.Object
		message string
	}{
		{"no slice", nil, `Service "glance" has no endpoint yet; not probing it`},
		{"no endpoint", []client.Object{apiSlice("glance-a", "glance")}, `Service "glance" has no endpoint yet; not probing it`},
		{"none ready", []client.Object{apiSlice("glance-a", "glance", ptr.To(false)), apiSlice("glance-b", "glance", ptr.To(false))},
			`Service "glance" has no ready endpoint (2 not ready); not probing it`},
		{"another Service's ready slice", []client.Object{apiSlice("other-a", "other", ptr.To(true))}, `Service "glance" has no endpoint yet; not probing it`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newHealthScene(t, tt.objs...)
			res, c := s.run()
			s.expect(res, c, metav1.ConditionFalse, v1alpha1.ReasonEndpointNotReady, HealthRetryInterval, 0)
			if c.Message != tt.message {
				t.Errorf("message %q, want %q", c.Message, tt.message)
			}
		})
	}
}

func TestHealthCheckProbesAReadyEndpoint(t *testing.T) {
	target := "http://glance.openstack.svc.cluster.local:9292/healthcheck"
	for _, tt := range []struct {
		name    string
		ready   *bool
		code    int
		err     error
		status  metav1.ConditionStatus
		reason  string
		requeue time.Duration
		message string
	}{
		{"healthy", ptr.To(true), http.StatusOK, nil, metav1.ConditionTrue, v1alpha1.ReasonAPIHealthy, HealthRecheckInterval, target + " answered 200"},
		// The API reads an unset ready as ready.
		{"ready unset", nil, http.StatusOK, nil, metav1.ConditionTrue, v1alpha1.ReasonAPIHealthy, HealthRecheckInterval, target + " answered 200"},
		{"unhealthy", ptr.To(true), http.StatusServiceUnavailable, nil, metav1.ConditionFalse, v1alpha1.ReasonAPIUnhealthy, HealthRetryInterval, target + " answered 503"},
		{"timeout", ptr.To(true), 0, &url.Error{Op: "Get", URL: target, Err: context.DeadlineExceeded}, metav1.ConditionFalse, v1alpha1.ReasonHealthCheckTimeout, HealthRetryInterval,
			target + " did not answer within 5s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newHealthScene(t, apiSlice("glance-a", "glance", ptr.To(false), tt.ready))
			s.prober.code, s.prober.err = tt.code, tt.err
			res, c := s.run()
			s.expect(res, c, tt.status, tt.reason, tt.requeue, 1)
			if c.Message != tt.message {
				t.Errorf("message %q, want %q", c.Message, tt.message)
			}
		})
	}
}

// TestProbeCacheTTL: a passing probe is reused within ProbeTTL and made
// again after it; a failing one is never reused; losing the endpoints drops
// the pass.
func TestProbeCacheTTL(t *testing.T) {
	s := newHealthScene(t, apiSlice("glance-a", "glance", ptr.To(true)))
	res, c := s.run()
	s.expect(res, c, metav1.ConditionTrue, v1alpha1.ReasonAPIHealthy, HealthRecheckInterval, 1)

	s.now = s.now.Add(ProbeTTL - time.Second)
	res, c = s.run()
	s.expect(res, c, metav1.ConditionTrue, v1alpha1.ReasonAPIHealthy, HealthRecheckInterval, 1)

	s.now = s.now.Add(time.Second)
	s.prober.code = http.StatusInternalServerError
	res, c = s.run()
	s.expect(res, c, metav1.ConditionFalse, v1alpha1.ReasonAPIUnhealthy, HealthRetryInterval, 2)
	res, c = s.run()
	s.expect(res, c, metav1.ConditionFalse, v1alpha1.ReasonAPIUnhealthy, HealthRetryInterval, 3)

	s.prober.code = http.StatusOK
	res, c = s.run()
	s.expect(res, c, metav1.ConditionTrue, v1alpha1.ReasonAPIHealthy, HealthRecheckInterval, 4)

	// The endpoints go and come back within the TTL: the pods are probed
	// again.
	slice := &discoveryv1.EndpointSlice{}
	if err := s.c.Get(context.Background(), client.ObjectKey{Namespace: "openstack", Name: "glance-a"}, slice); err != nil {
		t.Fatal(err)
	}
	slice.Endpoints[0].Conditions.Ready = ptr.To(false)
	if err := s.c.Update(context.Background(), slice); err != nil {
		t.Fatal(err)
	}
	res, c = s.run()
	s.expect(res, c, metav1.ConditionFalse, v1alpha1.ReasonEndpointNotReady, HealthRetryInterval, 4)
	slice.Endpoints[0].Conditions.Ready = ptr.To(true)
	if err := s.c.Update(context.Background(), slice); err != nil {
		t.Fatal(err)
	}
	res, c = s.run()
	s.expect(res, c, metav1.ConditionTrue, v1alpha1.ReasonAPIHealthy, HealthRecheckInterval, 5)
}

func TestProbeFailureReasons(t *testing.T) {
	const target = "http://glance.openstack.svc.cluster.local:9292/healthcheck"
	wrap := func(err error) error { return &url.Error{Op: "Get", URL: target, Err: err} }
	dial := func(errno syscall.Errno) error {
		return wrap(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)})
	}
	for _, tt := range []struct {
		err    error
		reason string
		says   string
	}{
		{wrap(context.DeadlineExceeded), v1alpha1.ReasonHealthCheckTimeout, "did not answer within 5s"},
		{wrap(&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}), v1alpha1.ReasonHealthCheckTimeout, "did not answer within 5s"},
		{wrap(&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "glance.openstack.svc.cluster.local", IsNotFound: true}}),
			v1alpha1.ReasonEndpointNotReady, "does not resolve yet"},
		{dial(syscall.ECONNREFUSED), v1alpha1.ReasonConnectionFailed, "refused the connection"},
		{dial(syscall.ECONNRESET), v1alpha1.ReasonConnectionFailed, "refused the connection"},
		{wrap(errors.New(`net/http: HTTP/1.x transport connection broken: malformed HTTP response "garbage"`)), v1alpha1.ReasonHealthCheckFailed, "probing " + target + " failed"},
	} {
		reason, msg := probeFailure(target, tt.err)
		if reason != tt.reason || !strings.Contains(msg, tt.says) {
			t.Errorf("%v: %s %q, want %s saying %q", tt.err, reason, msg, tt.reason, tt.says)
		}
	}
}

func TestEndpointSliceWakesItsGlance(t *testing.T) {
	if got := apiChildToGlance(context.Background(), apiSlice("glance-a", "glance")); len(got) != 1 ||
		got[0].NamespacedName != (client.ObjectKey{Namespace: "openstack", Name: "glance"}) {
		t.Errorf("the API Service's slice maps to %v", got)
	}
	other := apiSlice("x-a", "x")
	other.Labels[render.LabelComponent] = "metrics"
	if got := apiChildToGlance(context.Background(), other); len(got) != 0 {
		t.Errorf("another component's slice maps to %v", got)
	}

	update := func(old, cur *discoveryv1.EndpointSlice) bool {
		return endpointReadinessChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: cur})
	}
	none, one, two := apiSlice("a", "glance", ptr.To(false)), apiSlice("a", "glance", ptr.To(true), ptr.To(false)), apiSlice("a", "glance", ptr.To(true), ptr.To(true))
	for _, tt := range []struct {
		name     string
		old, cur *discoveryv1.EndpointSlice
		want     bool
	}{
		{"first ready endpoint", none, one, true},
		{"last ready endpoint gone", one, none, true},
		{"another ready endpoint", one, two, false},
		{"still none ready", none, apiSlice("a", "glance", ptr.To(false), ptr.To(false)), false},
	} {
		if got := update(tt.old, tt.cur); got != tt.want {
			t.Errorf("%s: the update passes %v, want %v", tt.name, got, tt.want)
		}
	}
	if !endpointReadinessChanged.Create(event.CreateEvent{Object: none}) || !endpointReadinessChanged.Delete(event.DeleteEvent{Object: two}) {
		t.Error("a slice appearing or going does not pass")
	}
}
