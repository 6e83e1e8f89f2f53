package glance

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"syscall"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/pkg/render"
)

// Health check timing: a passing probe is reused for ProbeTTL; a failing
// one is retried after HealthRetryInterval; a healthy API is looked at again
// after HealthRecheckInterval.
const (
	ProbeTTL              = 30 * time.Second
	HealthRetryInterval   = 10 * time.Second
	HealthRecheckInterval = 5 * time.Minute
	probeTimeout          = 5 * time.Second
)

// Prober gets the health check URL and returns the HTTP status. In-cluster
// it is a direct HTTP client; for a target cluster it goes through the API
// server's service proxy.
type Prober interface {
	Probe(ctx context.Context, url string) (int, error)
}

// HTTPProber probes directly. Redirect, when set, sends every probe to that
// host:port instead of the Service: a development-only stand-in for a
// manager that runs outside the cluster (make run).
type HTTPProber struct {
	Client   *http.Client
	Redirect string
}

// Probe implements Prober.
func (h HTTPProber) Probe(ctx context.Context, target string) (int, error) {
	if h.Redirect != "" {
		u, err := url.Parse(target)
		if err != nil {
			return 0, err
		}
		u.Host = h.Redirect
		target = u.String()
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, err
	}
	c := h.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// ProbeCache remembers passing probes by CR UID and URL for ProbeTTL.
type ProbeCache struct {
	mu      sync.Mutex
	passing map[probeKey]time.Time
	now     func() time.Time
}

type probeKey struct {
	uid types.UID
	url string
}

// NewProbeCache returns an empty cache on the wall clock.
func NewProbeCache() *ProbeCache { return NewProbeCacheWithClock(time.Now) }

// NewProbeCacheWithClock returns an empty cache that reads the time from now,
// so a test can move past ProbeTTL without waiting for it.
func NewProbeCacheWithClock(now func() time.Time) *ProbeCache {
	return &ProbeCache{passing: map[probeKey]time.Time{}, now: now}
}

func (c *ProbeCache) fresh(k probeKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.passing[k]
	return ok && c.now().Sub(at) < ProbeTTL
}

func (c *ProbeCache) pass(k probeKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.passing[k] = c.now()
}

// Forget drops every entry of a CR, when it is deleted.
func (c *ProbeCache) Forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.passing {
		if k.uid == uid {
			delete(c.passing, k)
		}
	}
}

// HealthcheckURL is the cluster-local health check of a Glance, its
// Service's name in clusterDomain.
func HealthcheckURL(g *v1alpha1.Glance, clusterDomain string) string {
	return fmt.Sprintf("http://%s.%s.svc.%s:%d%s", g.Name, g.Namespace, clusterDomain, v1alpha1.APIPort, render.HealthcheckPath)
}

// reconcileHealthCheck gets /healthcheck of the cluster-local Service (on a
// target cluster, through its API server's service proxy), through the TTL
// cache of passing probes. A Service without a ready
// endpoint is not probed: nothing is there to answer.
func reconcileHealthCheck(ctx context.Context, g *v1alpha1.Glance, p *pass) (ctrl.Result, error) {
	notReady, err := endpointsNotReady(ctx, g, p)
	if err != nil {
		return ctrl.Result{}, err
	}
	if notReady != "" {
		// A pass from before says nothing about the pods that come back.
		p.r.Probes.Forget(g.UID)
		pipeline.SetCondition(g, v1alpha1.ConditionGlanceAPIReady, metav1.ConditionFalse, v1alpha1.ReasonEndpointNotReady, notReady)
		return ctrl.Result{RequeueAfter: HealthRetryInterval}, nil
	}
	target := HealthcheckURL(g, p.r.clusterDomain())
	probe := func() (int, error) { return p.r.Prober.Probe(ctx, target) }
	if proxy := p.cluster.ServiceProxy; proxy != nil {
		// The operator is not on a target's pod network: its API server
		// proxies the probe.
		target = proxy.URL(g.Namespace, render.Service(g).Name, v1alpha1.APIPort, render.HealthcheckPath)
		probe = func() (int, error) {
			ctx, cancel := context.WithTimeout(ctx, probeTimeout)
			defer cancel()
			return proxy.Get(ctx, g.Namespace, render.Service(g).Name, v1alpha1.APIPort, render.HealthcheckPath)
		}
	}
	key := probeKey{uid: g.UID, url: target}
	if p.r.Probes.fresh(key) {
		pipeline.SetCondition(g, v1alpha1.ConditionGlanceAPIReady, metav1.ConditionTrue, v1alpha1.ReasonAPIHealthy, target+" answered 200")
		return ctrl.Result{RequeueAfter: HealthRecheckInterval}, nil
	}
	code, err := probe()
	reason, msg := v1alpha1.ReasonAPIHealthy, target+" answered 200"
	switch {
	case err != nil:
		reason, msg = probeFailure(target, err)
	case code != http.StatusOK:
		reason, msg = v1alpha1.ReasonAPIUnhealthy, fmt.Sprintf("%s answered %d", target, code)
	}
	if reason != v1alpha1.ReasonAPIHealthy {
		pipeline.SetCondition(g, v1alpha1.ConditionGlanceAPIReady, metav1.ConditionFalse, reason, msg)
		return ctrl.Result{RequeueAfter: HealthRetryInterval}, nil
	}
	p.r.Probes.pass(key)
	pipeline.SetCondition(g, v1alpha1.ConditionGlanceAPIReady, metav1.ConditionTrue, reason, msg)
	return ctrl.Result{RequeueAfter: HealthRecheckInterval}, nil
}

// endpointsNotReady says why the API Service has no ready endpoint, from the
// EndpointSlices in the cache; empty when it has one.
func endpointsNotReady(ctx context.Context, g *v1alpha1.Glance, p *pass) (string, error) {
	service := render.Service(g).Name
	var slices discoveryv1.EndpointSliceList
	if err := p.cluster.Client.List(ctx, &slices, client.InNamespace(g.Namespace), client.MatchingFields{v1alpha1.IndexEndpointSliceService: service}); err != nil {
		return "", fmt.Errorf("list the EndpointSlices of Service %s: %w", service, err)
	}
	endpoints := 0
	for i := range slices.Items {
		if readyEndpoints(&slices.Items[i]) > 0 {
			return "", nil
		}
		endpoints += len(slices.Items[i].Endpoints)
	}
	if endpoints == 0 {
		return fmt.Sprintf("Service %q has no endpoint yet; not probing it", service), nil
	}
	return fmt.Sprintf("Service %q has no ready endpoint (%d not ready); not probing it", service, endpoints), nil
}

// readyEndpoints counts the endpoints of a slice that take traffic.
func readyEndpoints(s *discoveryv1.EndpointSlice) int {
	n := 0
	for _, ep := range s.Endpoints {
		// The API reads an unset ready as true.
		if ptr.Deref(ep.Conditions.Ready, true) {
			n++
		}
	}
	return n
}

// probeFailure classifies a probe that got no answer.
func probeFailure(target string, err error) (string, string) {
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
		return v1alpha1.ReasonHealthCheckTimeout, fmt.Sprintf("%s did not answer within %s", target, probeTimeout)
	case errors.As(err, &dnsErr):
		return v1alpha1.ReasonEndpointNotReady, fmt.Sprintf("%s does not resolve yet: %v", target, err)
	case errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET):
		return v1alpha1.ReasonConnectionFailed, fmt.Sprintf("%s refused the connection: %v", target, err)
	default:
		return v1alpha1.ReasonHealthCheckFailed, fmt.Sprintf("probing %s failed: %v", target, err)
	}
}
