package chart

import (
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestWebhookNetworkPolicy holds the webhook's NetworkPolicy to its promise:
// it selects the webhook's pods alone, admits the API server's CIDRs to the
// HTTPS port and the configured scrapers to the metrics port, and nothing
// else. Enforcing it needs a network plugin, which the local cluster has
// not; the integration chart suite applies it to a real API server.
func TestWebhookNetworkPolicy(t *testing.T) {
	if got := render(t, "defaults").Select("NetworkPolicy"); len(got) != 0 {
		t.Errorf("defaults render %d NetworkPolicies; the policy is opt-in", len(got))
	}
	r := render(t, "webhook-network-policy")
	np := decode[networkingv1.NetworkPolicy](t, mustGet(t, r, "NetworkPolicy", webhookName))
	selector := labels.SelectorFromSet(np.Spec.PodSelector.MatchLabels)
	containerPorts := map[string]int32{}
	for _, name := range []string{webhookName, managerName} {
		d := decode[appsv1.Deployment](t, mustGet(t, r, "Deployment", name))
		if selects := selector.Matches(labels.Set(d.Spec.Template.Labels)); selects != (name == webhookName) {
			t.Errorf("the policy selects the pods of %s: %v", name, selects)
		}
		if name == webhookName {
			for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
				containerPorts[p.Name] = p.ContainerPort
			}
		}
	}
	if !reflect.DeepEqual(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("policyTypes %v, want Ingress alone", np.Spec.PolicyTypes)
	}
	values := mustValues(t, "webhook-network-policy")["webhook"].(map[string]any)["networkPolicy"].(map[string]any)
	var wantCIDRs []string
	for _, c := range values["apiServerCIDRs"].([]any) {
		wantCIDRs = append(wantCIDRs, c.(string))
	}
	if len(np.Spec.Ingress) != 2 {
		t.Fatalf("%d ingress rules, want the API server's and the scrapers'", len(np.Spec.Ingress))
	}
	apiServer, scrapers := np.Spec.Ingress[0], np.Spec.Ingress[1]
	var gotCIDRs []string
	for _, peer := range apiServer.From {
		if peer.IPBlock == nil || peer.PodSelector != nil || peer.NamespaceSelector != nil {
			t.Errorf("an API-server peer that is not an ipBlock: %+v", peer)
			continue
		}
		gotCIDRs = append(gotCIDRs, peer.IPBlock.CIDR)
	}
	if !reflect.DeepEqual(gotCIDRs, wantCIDRs) {
		t.Errorf("the HTTPS port admits %v, want %v", gotCIDRs, wantCIDRs)
	}
	checkPorts(t, "API server", apiServer.Ports, "https", containerPorts)
	if len(scrapers.From) != 1 || scrapers.From[0].NamespaceSelector == nil ||
		scrapers.From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" {
		t.Errorf("the metrics port admits %+v, want the monitoring namespace", scrapers.From)
	}
	checkPorts(t, "scrapers", scrapers.Ports, "metrics", containerPorts)

	// Without scrapers, only the API server is admitted.
	noScrapers := map[string]any{"webhook": map[string]any{"networkPolicy": map[string]any{"enabled": true, "apiServerCIDRs": []any{"10.0.0.0/24"}}}}
	r2, err := Render(noScrapers, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if np := decode[networkingv1.NetworkPolicy](t, mustGet(t, r2, "NetworkPolicy", webhookName)); len(np.Spec.Ingress) != 1 {
		t.Errorf("without metricsFrom, %d ingress rules, want the API server's alone", len(np.Spec.Ingress))
	}
	for name, c := range map[string]struct {
		values map[string]any
		want   string
	}{
		"no CIDRs":  {map[string]any{"enabled": true}, "webhook.networkPolicy.apiServerCIDRs is required"},
		"bad CIDR":  {map[string]any{"enabled": true, "apiServerCIDRs": []any{"10.0.0.1"}}, "/webhook/networkPolicy/apiServerCIDRs/0"},
		"bad peers": {map[string]any{"enabled": true, "apiServerCIDRs": []any{"10.0.0.0/8"}, "metricsFrom": "all"}, "/webhook/networkPolicy/metricsFrom"},
	} {
		_, err := Render(map[string]any{"webhook": map[string]any{"networkPolicy": c.values}}, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: render error = %v, want one naming %q", name, err, c.want)
		}
	}
}

// checkPorts wants exactly one TCP port, named name, that the webhook's
// container declares.
func checkPorts(t *testing.T, rule string, ports []networkingv1.NetworkPolicyPort, name string, declared map[string]int32) {
	t.Helper()
	if len(ports) != 1 || ports[0].Port == nil || *ports[0].Port != intstr.FromString(name) ||
		ports[0].Protocol == nil || *ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("the %s rule's ports %+v, want TCP %s alone", rule, ports, name)
		return
	}
	if _, ok := declared[name]; !ok {
		t.Errorf("the %s rule names port %q, which the webhook's container does not declare (%v)", rule, name, declared)
	}
}

// TestManagerNetworkPolicy: the manager's policy selects its pods alone and
// admits the configured scrapers to the metrics port and nothing else;
// without scrapers it admits nothing.
func TestManagerNetworkPolicy(t *testing.T) {
	r := render(t, "manager-network-policy")
	np := decode[networkingv1.NetworkPolicy](t, mustGet(t, r, "NetworkPolicy", managerName))
	selector := labels.SelectorFromSet(np.Spec.PodSelector.MatchLabels)
	for _, name := range []string{webhookName, managerName} {
		d := decode[appsv1.Deployment](t, mustGet(t, r, "Deployment", name))
		if selects := selector.Matches(labels.Set(d.Spec.Template.Labels)); selects != (name == managerName) {
			t.Errorf("the policy selects the pods of %s: %v", name, selects)
		}
	}
	if !reflect.DeepEqual(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("policyTypes %v, want Ingress alone", np.Spec.PolicyTypes)
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 1 || np.Spec.Ingress[0].Ports[0].Port.String() != "metrics" ||
		len(np.Spec.Ingress[0].From) != 1 || np.Spec.Ingress[0].From[0].NamespaceSelector == nil {
		t.Errorf("ingress %+v, want the monitoring namespace to the metrics port alone", np.Spec.Ingress)
	}

	closed, err := Render(map[string]any{"manager": map[string]any{"networkPolicy": map[string]any{"enabled": true}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if np := decode[networkingv1.NetworkPolicy](t, mustGet(t, closed, "NetworkPolicy", managerName)); len(np.Spec.Ingress) != 0 {
		t.Errorf("without scrapers the policy admits %+v", np.Spec.Ingress)
	}
}
