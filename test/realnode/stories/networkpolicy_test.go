package stories

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/controlplane"
)

// TestNetworkPolicyEnforced: the node enforces NetworkPolicy. In a
// namespace of its own, a server admits one client's label alone: that
// client connects, the other times out. An egress policy on the admitted
// client lets it reach the server alone: a second server, which the other
// client still reaches, times out for it. The node's own requests (the
// kubelet's probes, this suite's) still reach the isolated server.
func TestNetworkPolicyEnforced(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	server := env.WebServer(t, ns, "server")
	second := env.WebServer(t, ns, "second")
	// The clients run for the whole story, and each request is made in
	// them: a pod started for one request could send it before the
	// enforcer knows the pod's address, and go unjudged.
	env.WebServer(t, ns, "allowed")
	env.WebServer(t, ns, "denied")
	fetch := func(client, ip string) (string, error) {
		return controlplane.Kubectl(t, env.Cluster.Config, "", "exec", "-n", ns, client, "--",
			"/netprobe", "http", "-url", "http://"+ip+"/", "-timeout", "3s")
	}
	for _, client := range []string{"allowed", "denied"} {
		if out, err := fetch(client, server); err != nil {
			t.Fatalf("before any policy, %s to the server: %v\n%s", client, err, out)
		}
	}

	isolated := time.Now().Add(-time.Second) // conditions have second resolution
	policies := []*networkingv1.NetworkPolicy{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "server-from-allowed"},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "allowed"}}}},
				}},
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "allowed-to-server"},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "allowed"}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress: []networkingv1.NetworkPolicyEgressRule{{
					To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}}}},
					Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(8080))}},
				}},
			},
		},
	}
	for _, p := range policies {
		if _, err := env.CS.NetworkingV1().NetworkPolicies(ns).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The enforcer learns of the policies through a watch: the first
	// dropped request says it has them.
	start := time.Now()
	var out string
	if err := wait.PollUntilContextTimeout(t.Context(), time.Second, 30*time.Second, true, func(context.Context) (bool, error) {
		var err error
		out, err = fetch("denied", server)
		return err != nil && strings.Contains(out, "deadline exceeded"), nil
	}); err != nil {
		t.Fatalf("denied to the server: not dropped 30 s after the policies (%v), want the policy to drop it; last answer:\n%s", err, out)
	}
	t.Logf("the enforcer dropped the denied client's request %s after the policies were created", time.Since(start).Round(100*time.Millisecond))

	for _, tc := range []struct {
		client, to, ip string
		connects       bool
	}{
		{"allowed", "server", server, true},
		{"allowed", "second", second, false},
		{"denied", "second", second, true},
	} {
		out, err := fetch(tc.client, tc.ip)
		switch {
		case tc.connects && err != nil:
			t.Errorf("%s to %s: %v, want a response\n%s", tc.client, tc.to, err, out)
		case !tc.connects && err == nil:
			t.Errorf("%s to %s: a response, want the policy to drop it\n%s", tc.client, tc.to, out)
		case !tc.connects && !strings.Contains(out, "deadline exceeded"):
			t.Errorf("%s to %s failed otherwise than by a timeout (a dropped packet):\n%s", tc.client, tc.to, out)
		}
	}

	// This process is root on the node, as the kubelet is.
	resp, err := (&http.Client{Timeout: 3 * time.Second}).Get("http://" + server + "/")
	if err != nil {
		t.Errorf("the node to the isolated server: %v", err)
	} else {
		_ = resp.Body.Close()
	}
	pod, err := env.CS.CoreV1().Pods(ns).Get(t.Context(), "server", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && (c.Status != corev1.ConditionTrue || c.LastTransitionTime.After(isolated)) {
			t.Errorf("the isolated server's Ready condition is %s since %s, the policies came at %s: the kubelet's probes were dropped",
				c.Status, c.LastTransitionTime.UTC().Format(time.TimeOnly), isolated.UTC().Format(time.TimeOnly))
		}
	}
}

// TestNetworkPolicyScene: a 2026.1 Glance with its own NetworkPolicy in
// force gets Ready and serves uploads (the rendered egress reaches
// Keystone, S3, MariaDB and DNS), a pod the policy does not admit gets no
// answer, and web-download fetches within its stated policy and is refused
// outside it.
func TestNetworkPolicyScene(t *testing.T) {
	t.Parallel()
	s := newScene(t, "2026.1", func(g *v1alpha1.Glance) {
		withNetworkPolicy(g)
		withWebDownload(g)
	})
	tell(t, story{"serve", s.serve}, story{"outside-refused", s.outsideRefused}, story{"web-download", s.webDownload})
}

// withNetworkPolicy gives a Glance one replica and its own NetworkPolicy,
// which admits the pods of its namespace.
func withNetworkPolicy(g *v1alpha1.Glance) {
	g.Spec.Deployment.Replicas = ptr.To[int32](1)
	g.Spec.NetworkPolicy = &v1alpha1.NetworkPolicySpec{
		Ingress: []v1alpha1.NetworkPolicySource{{PodSelector: &metav1.LabelSelector{}}},
	}
}

// outsideRefused: a pod of another namespace, which the Glance's
// NetworkPolicy does not admit, gets no answer from the API.
func (s *scene) outsideRefused(t *testing.T) {
	other := env.Namespace(t)
	phase, log := env.RunPod(t, other, env.ProbePod("outside", "http", "-url", s.APIURL()+"/healthcheck", "-timeout", "3s"))
	if phase != corev1.PodFailed || !strings.Contains(log, "deadline exceeded") {
		t.Errorf("GET %s/healthcheck from namespace %s: %s, want a timeout; log:\n%s", s.APIURL(), other, phase, log)
	}
}
