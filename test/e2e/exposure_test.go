package e2e

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/stack"
)

// NetworkPolicy: created with spec.networkPolicy (admitting the listed
// sources, the operator's namespace and the Glance's own pods on 9292),
// updated with it, and removed with it.
func TestNetworkPolicyLifecycle(t *testing.T) {
	t.Parallel()
	s := newScene(t, "e2e-netpol")
	s.install()
	compute := v1alpha1.NetworkPolicySource{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "compute"}}}
	s.update(func(g *v1alpha1.Glance) {
		g.Spec.NetworkPolicy = &v1alpha1.NetworkPolicySpec{Ingress: []v1alpha1.NetworkPolicySource{compute}}
	})
	s.ready(map[string]string{v1alpha1.ConditionNetworkPolicyReady: v1alpha1.ReasonNetworkPolicyReady})

	np := &networkingv1.NetworkPolicy{}
	peers := func() []networkingv1.NetworkPolicyPeer {
		if !s.get("glance", np) || len(np.Spec.Ingress) == 0 {
			return nil
		}
		return np.Spec.Ingress[0].From
	}
	from := peers()
	if len(from) != 3 {
		t.Fatalf("ingress peers %+v, want the source, the operator's namespace and the Glance's own pods", from)
	}
	operatorPeer := slices.ContainsFunc(from, func(p networkingv1.NetworkPolicyPeer) bool {
		return p.NamespaceSelector != nil && p.NamespaceSelector.MatchLabels[render.LabelNamespaceName] == stack.OperatorNamespace
	})
	if !operatorPeer {
		t.Errorf("no ingress peer for the operator's namespace %s: %+v", stack.OperatorNamespace, from)
	}
	// A replica hands a glance-direct import to the one that staged it.
	ownPods := func(p networkingv1.NetworkPolicyPeer) bool {
		return p.NamespaceSelector == nil && p.PodSelector != nil && maps.Equal(p.PodSelector.MatchLabels, np.Spec.PodSelector.MatchLabels)
	}
	if !slices.ContainsFunc(from, ownPods) || !slices.ContainsFunc(np.Spec.Egress, func(r networkingv1.NetworkPolicyEgressRule) bool {
		return slices.ContainsFunc(r.To, ownPods) && len(r.Ports) == 1 && r.Ports[0].Port.IntValue() == 9292
	}) {
		t.Errorf("the policy does not admit the Glance's pods to each other on 9292: ingress %+v, egress %+v", from, np.Spec.Egress)
	}
	if port := np.Spec.Ingress[0].Ports; len(port) != 1 || port[0].Port.IntValue() != 9292 {
		t.Errorf("ingress ports %+v, want 9292", port)
	}
	if np.Spec.PodSelector.MatchLabels[render.LabelComponent] != render.ComponentAPI {
		t.Errorf("the policy selects %v, not the glance-api pods", np.Spec.PodSelector.MatchLabels)
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) || len(np.Spec.Egress) == 0 {
		t.Errorf("policy types %v with %d egress rules, want egress isolation", np.Spec.PolicyTypes, len(np.Spec.Egress))
	}

	nova := v1alpha1.NetworkPolicySource{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nova"}}}
	s.update(func(g *v1alpha1.Glance) { g.Spec.NetworkPolicy.Ingress = append(g.Spec.NetworkPolicy.Ingress, nova) })
	s.eventually("a fourth ingress peer", func() (bool, string) {
		from := peers()
		return len(from) == 4, fmt.Sprintf("%+v", from)
	})
	s.ready(map[string]string{v1alpha1.ConditionNetworkPolicyReady: v1alpha1.ReasonNetworkPolicyReady})

	s.update(func(g *v1alpha1.Glance) { g.Spec.NetworkPolicy = nil })
	s.gone("the NetworkPolicy", "glance", &networkingv1.NetworkPolicy{})
	s.ready()
}

// HTTPRoute: with spec.gateway the operator creates the route and reflects
// its parent's Accepted condition — not accepted while the Gateway does not
// exist, accepted once it does — and removes the route with spec.gateway.
func TestHTTPRouteLifecycle(t *testing.T) {
	t.Parallel()
	s := newScene(t, "e2e-route")
	s.install()
	s.update(func(g *v1alpha1.Glance) {
		g.Spec.Gateway = &v1alpha1.GatewaySpec{
			ParentRef: v1alpha1.GatewayParentReference{Name: "public"},
			Hostname:  "images.example.com",
		}
	})
	// The message carries the Gateway controller's reason.
	s.conditionSaying(v1alpha1.ConditionHTTPRouteReady, metav1.ConditionFalse, v1alpha1.ReasonHTTPRouteNotAccepted,
		string(gatewayv1.RouteReasonNoMatchingParent))
	s.condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAllReady)
	if g := s.glanceObj(); g.Status.Endpoint != "https://images.example.com/" {
		t.Errorf("endpoint %q with a gateway", g.Status.Endpoint)
	}
	route := &gatewayv1.HTTPRoute{}
	if !s.get("glance", route) {
		t.Fatal("no HTTPRoute glance")
	}
	if len(route.Spec.Hostnames) != 1 || route.Spec.Hostnames[0] != "images.example.com" || len(route.Spec.Rules) != 1 {
		t.Fatalf("HTTPRoute spec %+v", route.Spec)
	}
	rule := route.Spec.Rules[0]
	if len(rule.BackendRefs) != 1 || rule.BackendRefs[0].Name != "glance" || *rule.BackendRefs[0].Port != 9292 {
		t.Errorf("backendRefs %+v, want glance:9292", rule.BackendRefs)
	}
	if rule.Timeouts == nil || rule.Timeouts.Request == nil || *rule.Timeouts.Request != "4h" {
		t.Errorf("timeouts %+v, want request 4h", rule.Timeouts)
	}
	if len(rule.Matches) != 1 || *rule.Matches[0].Path.Type != gatewayv1.PathMatchPathPrefix || *rule.Matches[0].Path.Value != "/" {
		t.Errorf("matches %+v, want PathPrefix /", rule.Matches)
	}

	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "public", Namespace: s.ns},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: "stand-in",
			Listeners:        []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}},
		},
	}
	s.create(gw)
	s.conditionSaying(v1alpha1.ConditionHTTPRouteReady, metav1.ConditionTrue, v1alpha1.ReasonHTTPRouteAccepted,
		"Gateway public accepted HTTPRoute glance")
	s.ready(map[string]string{v1alpha1.ConditionHTTPRouteReady: v1alpha1.ReasonHTTPRouteAccepted})

	s.update(func(g *v1alpha1.Glance) { g.Spec.Gateway = nil })
	s.gone("the HTTPRoute", "glance", &gatewayv1.HTTPRoute{})
	g := s.ready()
	if want := "http://glance." + s.ns + ".svc.cluster.local:9292/"; g.Status.Endpoint != want {
		t.Errorf("endpoint %q without a gateway, want %q", g.Status.Endpoint, want)
	}
}
