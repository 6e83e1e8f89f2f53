package manager

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/controller/glance"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/operatortest"
)

// The HealthCheck against the real API server. Nothing here runs a
// controller manager: the test plays the Job and Deployment controllers by
// writing their status, and operatortest's stand-in, or the test itself,
// writes the API Service's EndpointSlices.

// healthScene is one test's namespace with a brownfield Glance.
type healthScene struct {
	*operatortest.Env
	t *testing.T
}

func newHealthScene(t *testing.T) *healthScene { return &healthScene{Env: newEnv(t), t: t} }

// url is what the operator probes for the scene's Glance.
func (e *healthScene) url() string {
	return "http://glance." + e.NS + ".svc." + render.DefaultClusterDomain + ":9292/healthcheck"
}

// answer serves the probes of the scene's Glance from handler, through the
// operator's real HTTP prober.
func (e *healthScene) answer(handler http.HandlerFunc) {
	srv := httptest.NewServer(handler)
	e.t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	mgr.Prober.Answer(e.url(), glance.HTTPProber{Redirect: srv.Listener.Addr().String()})
}

func answerOK(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("OK")) }

// rollOut takes a brownfield Glance to DeploymentReady: the db-sync Job
// succeeds and every replica of the Deployment is available.
func (e *healthScene) rollOut() {
	e.t.Helper()
	e.InstallBrownfield()
	e.RollOut()
	e.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReady)
}

func TestHealthCheckAPIHealthy(t *testing.T) {
	t.Parallel()
	e := newHealthScene(t)
	e.answer(answerOK)
	e.rollOut()
	c := e.Condition(v1alpha1.ConditionGlanceAPIReady, metav1.ConditionTrue, v1alpha1.ReasonAPIHealthy)
	if want := e.url() + " answered 200"; c.Message != want {
		t.Errorf("message %q, want %q", c.Message, want)
	}
}

// TestHealthCheckAPIUnhealthy: /healthcheck answering 503 DOWN (what
// oslo.middleware's healthcheck says when disabled) is APIUnhealthy, retried
// until it answers 200.
func TestHealthCheckAPIUnhealthy(t *testing.T) {
	t.Parallel()
	e := newHealthScene(t)
	e.answer(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("DOWN"))
	})
	e.rollOut()
	c := e.Condition(v1alpha1.ConditionGlanceAPIReady, metav1.ConditionFalse, v1alpha1.ReasonAPIUnhealthy)
	if want := e.url() + " answered 503"; c.Message != want {
		t.Errorf("message %q, want %q", c.Message, want)
	}
	e.Condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAllReady)

	e.answer(answerOK)
	e.Condition(v1alpha1.ConditionGlanceAPIReady, metav1.ConditionTrue, v1alpha1.ReasonAPIHealthy)
}

// TestHealthCheckTimeout: an API that never answers times out after the
// probe's 5 seconds.
func TestHealthCheckTimeout(t *testing.T) {
	t.Parallel()
	e := newHealthScene(t)
	e.answer(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	e.rollOut()
	c := e.Condition(v1alpha1.ConditionGlanceAPIReady, metav1.ConditionFalse, v1alpha1.ReasonHealthCheckTimeout)
	if want := e.url() + " did not answer within 5s"; c.Message != want {
		t.Errorf("message %q, want %q", c.Message, want)
	}
}

// TestHealthCheckFailed: an answer that is not HTTP is HealthCheckFailed.
func TestHealthCheckFailed(t *testing.T) {
	t.Parallel()
	e := newHealthScene(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = bufio.NewReader(conn).ReadString('\n')
			_, _ = conn.Write([]byte("garbage\r\n\r\n"))
			_ = conn.Close()
		}
	}()
	mgr.Prober.Answer(e.url(), glance.HTTPProber{Redirect: l.Addr().String()})
	e.rollOut()
	c := e.Condition(v1alpha1.ConditionGlanceAPIReady, metav1.ConditionFalse, v1alpha1.ReasonHealthCheckFailed)
	if !strings.HasPrefix(c.Message, "probing "+e.url()+" failed: ") || !strings.Contains(c.Message, "malformed HTTP") {
		t.Errorf("message %q", c.Message)
	}
}

func TestHealthCheckConnectionFailed(t *testing.T) {
	t.Parallel()
	e := newHealthScene(t)
	// Nothing listens on port 1.
	mgr.Prober.Answer(e.url(), glance.HTTPProber{Redirect: "127.0.0.1:1"})
	e.rollOut()
	c := e.Condition(v1alpha1.ConditionGlanceAPIReady, metav1.ConditionFalse, v1alpha1.ReasonConnectionFailed)
	if !strings.HasPrefix(c.Message, e.url()+" refused the connection: ") {
		t.Errorf("message %q", c.Message)
	}
}

// TestHealthCheckEndpointNotReady: with no ready endpoint behind the
// Service nothing is probed; the EndpointSlice watch, not the 10 s retry,
// brings the Glance back when one turns ready.
func TestHealthCheckEndpointNotReady(t *testing.T) {
	t.Parallel()
	e := newHealthScene(t)
	ctx := context.Background()
	mgr.ManualEndpointSlices(e.NS)
	e.answer(answerOK)
	e.rollOut()
	c := e.Condition(v1alpha1.ConditionGlanceAPIReady, metav1.ConditionFalse, v1alpha1.ReasonEndpointNotReady)
	if want := `Service "glance" has no endpoint yet; not probing it`; c.Message != want {
		t.Errorf("message %q, want %q", c.Message, want)
	}
	e.Condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAllReady)

	svc := &corev1.Service{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: e.NS, Name: "glance"}, svc); err != nil {
		t.Fatal(err)
	}
	slice := operatortest.APIEndpointSlice(svc, 1, 0)
	e.Create(slice)
	e.apiReadyWithin("the not-ready endpoint reported", func(c metav1.Condition) bool {
		return c.Reason == v1alpha1.ReasonEndpointNotReady && c.Message == `Service "glance" has no ready endpoint (1 not ready); not probing it`
	})
	if n := mgr.Prober.Probes(e.url()); n != 0 {
		t.Errorf("%d probes of a Service without a ready endpoint, want 0", n)
	}

	slice.Endpoints[0].Conditions.Ready = ptr.To(true)
	if err := cl.Update(ctx, slice); err != nil {
		t.Fatal(err)
	}
	e.apiReadyWithin("APIHealthy", func(c metav1.Condition) bool { return c.Reason == v1alpha1.ReasonAPIHealthy })
	if n := mgr.Prober.Probes(e.url()); n == 0 {
		t.Error("APIHealthy without a probe")
	}
}

// apiReadyWithin waits for GlanceAPIReady to match, for half the
// HealthRetryInterval: every pass that waits for endpoints requeues after
// the full interval, so a change seen sooner was woken by the watch.
func (e *healthScene) apiReadyWithin(what string, match func(metav1.Condition) bool) {
	t := e.t
	t.Helper()
	operatortest.Eventually(t, what+" after the EndpointSlice change", func() error {
		g := &v1alpha1.Glance{}
		if err := cl.Get(context.Background(), client.ObjectKey{Namespace: e.NS, Name: "glance"}, g); err != nil {
			return err
		}
		last := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionGlanceAPIReady)
		if last != nil && match(*last) {
			return nil
		}
		return fmt.Errorf("last GlanceAPIReady %+v", last)
	}, operatortest.Within(glance.HealthRetryInterval/2))
}

// TestHealthCheckProbeTTL: a passing probe is reused by the passes within
// ProbeTTL, and made again by the first pass after it. DBPurgeReady shows
// that a pass ran: it runs in the same parallel group as the HealthCheck.
func TestHealthCheckProbeTTL(t *testing.T) {
	t.Parallel()
	e := newHealthScene(t)
	e.answer(answerOK)
	e.rollOut()
	e.Condition(v1alpha1.ConditionGlanceAPIReady, metav1.ConditionTrue, v1alpha1.ReasonAPIHealthy)
	e.Condition(v1alpha1.ConditionDBPurgeReady, metav1.ConditionTrue, v1alpha1.ReasonDBPurgeScheduled)
	probes := mgr.Prober.Probes(e.url())
	if probes != 1 {
		t.Errorf("%d probes to the first APIHealthy, want 1", probes)
	}

	e.UpdateGlance(func(g *v1alpha1.Glance) { g.Spec.DBPurge = &v1alpha1.DBPurgeSpec{Suspend: ptr.To(true)} })
	e.Condition(v1alpha1.ConditionDBPurgeReady, metav1.ConditionTrue, v1alpha1.ReasonDBPurgeSuspended)
	e.Condition(v1alpha1.ConditionGlanceAPIReady, metav1.ConditionTrue, v1alpha1.ReasonAPIHealthy)
	if n := mgr.Prober.Probes(e.url()); n != probes {
		t.Errorf("a pass within the TTL probed again: %d probes, want %d", n, probes)
	}

	mgr.Clock.Advance(glance.ProbeTTL)
	e.UpdateGlance(func(g *v1alpha1.Glance) { g.Spec.DBPurge.Suspend = ptr.To(false) })
	e.Condition(v1alpha1.ConditionDBPurgeReady, metav1.ConditionTrue, v1alpha1.ReasonDBPurgeScheduled)
	e.Condition(v1alpha1.ConditionGlanceAPIReady, metav1.ConditionTrue, v1alpha1.ReasonAPIHealthy)
	if n := mgr.Prober.Probes(e.url()); n != probes+1 {
		t.Errorf("after the TTL: %d probes, want %d", n, probes+1)
	}
}

// TestEndpointSliceCacheScope: the operator's cache holds the slices of its
// API Services and no others; a slice without the Service's labels is not
// seen (the EndpointSlice controller always copies them).
func TestEndpointSliceCacheScope(t *testing.T) {
	t.Parallel()
	e := newHealthScene(t)
	mgr.ManualEndpointSlices(e.NS)
	e.answer(answerOK)
	e.rollOut()
	e.Condition(v1alpha1.ConditionGlanceAPIReady, metav1.ConditionFalse, v1alpha1.ReasonEndpointNotReady)
	bare := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: e.NS, Name: "glance-unlabelled", Labels: map[string]string{discoveryv1.LabelServiceName: "glance"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
	e.Create(bare)
	// Nothing wakes the Glance for it; wait out one retry.
	time.Sleep(glance.HealthRetryInterval + 2*time.Second)
	e.Condition(v1alpha1.ConditionGlanceAPIReady, metav1.ConditionFalse, v1alpha1.ReasonEndpointNotReady)
	if n := mgr.Prober.Probes(e.url()); n != 0 {
		t.Errorf("%d probes, want 0: the operator saw a slice outside its cache scope", n)
	}
}
