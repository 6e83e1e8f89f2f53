package targetcluster

import (
	"context"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/c5c3/glance-operator/pkg/targetcluster"
)

// TestServiceProxyReachesTheTargetsProxy: the health probe of a Glance on a
// target goes through the target API server's service proxy. With no
// endpoint behind the Service the proxy itself answers 503, which shows the
// request reached the proxy path with the target's credentials (a wrong
// path answers 404, wrong credentials 401 or 403).
func TestServiceProxyReachesTheTargetsProxy(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "service-proxy"}}
	if err := target.client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "glance"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "api", Port: 9292}}},
	}
	if err := target.client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(target.config)
	if err != nil {
		t.Fatal(err)
	}
	proxy := targetcluster.ServiceProxy{Host: target.config.Host, Client: hc}
	for _, tc := range []struct {
		service string
		want    int
	}{
		{"glance", http.StatusServiceUnavailable},
		{"absent", http.StatusNotFound},
	} {
		code, err := proxy.Get(ctx, ns.Name, tc.service, 9292, "/healthcheck")
		if err != nil || code != tc.want {
			t.Errorf("GET %s: %d, %v; want %d from the proxy", proxy.URL(ns.Name, tc.service, 9292, "/healthcheck"), code, err, tc.want)
		}
	}
	anonymous := targetcluster.ServiceProxy{Host: target.config.Host, Client: &http.Client{Transport: anonymousTransport(t)}}
	if code, err := anonymous.Get(ctx, ns.Name, "glance", 9292, "/healthcheck"); err != nil || (code != http.StatusUnauthorized && code != http.StatusForbidden) {
		t.Errorf("without the target's credentials: %d, %v; want 401 or 403", code, err)
	}
}

// anonymousTransport reaches the target with its CA but no credentials.
func anonymousTransport(t *testing.T) http.RoundTripper {
	t.Helper()
	anon := rest.AnonymousClientConfig(target.config)
	rt, err := rest.TransportFor(anon)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}
