package render

import (
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/iniparse"
)

// webDownloadGlance is minimalGlance with a web-download policy of a host
// name, an IPv4 and an IPv6 address, one range and one port, and, when
// isolated, a NetworkPolicy.
func webDownloadGlance(isolated bool) *v1alpha1.Glance {
	g := minimalGlance()
	g.Spec.WebDownload = &v1alpha1.WebDownloadSpec{
		Hosts: []string{"images.example.com", "198.51.100.7", "2001:db8::7"},
		CIDRs: []string{"203.0.113.0/24"},
		Ports: []int32{8080},
	}
	if isolated {
		g.Spec.NetworkPolicy = &v1alpha1.NetworkPolicySpec{Ingress: []v1alpha1.NetworkPolicySource{
			{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelNamespaceName: "nova"}}},
		}}
	}
	return g
}

func TestWebDownloadConfig(t *testing.T) {
	isolated := minimalGlance()
	isolated.Spec.NetworkPolicy = webDownloadGlance(true).Spec.NetworkPolicy
	defaultPorts := webDownloadGlance(false)
	defaultPorts.Spec.WebDownload.Ports = nil
	tests := []struct {
		name                     string
		g                        *v1alpha1.Glance
		methods, hosts, ap, note string
	}{
		{name: "no policy, no NetworkPolicy: Glance's own filter", g: minimalGlance(), methods: "[glance-direct,web-download]", hosts: absent, ap: absent},
		{name: "a NetworkPolicy and no policy: web-download not offered", g: isolated, methods: "[glance-direct]", hosts: absent, ap: absent},
		{name: "a policy", g: webDownloadGlance(false), methods: "[glance-direct,web-download]", hosts: "[198.51.100.7,2001:db8::7,images.example.com]", ap: "[8080]"},
		{name: "a policy under a NetworkPolicy", g: webDownloadGlance(true), methods: "[glance-direct,web-download]", hosts: "[198.51.100.7,2001:db8::7,images.example.com]", ap: "[8080]"},
		{name: "default ports", g: defaultPorts, methods: "[glance-direct,web-download]", hosts: "[198.51.100.7,2001:db8::7,images.example.com]", ap: "[80,443]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, err := GlanceAPIConf(tt.g, ConfigFacts{})
			if err != nil {
				t.Fatal(err)
			}
			ini := mustParseINI(t, text, iniparse.Oslo)
			for key, want := range map[[2]string]string{
				{"DEFAULT", "enabled_import_methods"}:         tt.methods,
				{"import_filtering_opts", "allowed_hosts"}:    tt.hosts,
				{"import_filtering_opts", "allowed_ports"}:    tt.ap,
				{"import_filtering_opts", "allowed_schemes"}:  absent,
				{"import_filtering_opts", "disallowed_hosts"}: absent,
			} {
				got, ok := ini[key[0]][key[1]]
				if !ok {
					got = absent
				}
				if got != want {
					t.Errorf("[%s] %s = %q, want %q", key[0], key[1], got, want)
				}
			}
		})
	}
}

func TestWebDownloadEgress(t *testing.T) {
	np, err := NetworkPolicy(webDownloadGlance(true), NetworkPolicyFacts{OperatorNamespace: testOperatorNamespace})
	if err != nil {
		t.Fatal(err)
	}
	var rule *networkingv1.NetworkPolicyEgressRule
	for i, r := range np.Spec.Egress {
		if len(r.To) > 0 && r.To[0].IPBlock != nil {
			if rule != nil {
				t.Fatalf("two egress rules by IP block: %v and %v", *rule, r)
			}
			rule = &np.Spec.Egress[i]
		}
	}
	if rule == nil {
		t.Fatalf("no egress rule for web-download in %v", np.Spec.Egress)
	}
	var blocks []string
	for _, peer := range rule.To {
		if peer.IPBlock == nil || len(peer.IPBlock.Except) > 0 || peer.PodSelector != nil || peer.NamespaceSelector != nil {
			t.Errorf("peer %v: want a plain IP block", peer)
			continue
		}
		blocks = append(blocks, peer.IPBlock.CIDR)
	}
	if want := []string{"198.51.100.7/32", "2001:db8::7/128", "203.0.113.0/24"}; !slices.Equal(blocks, want) {
		t.Errorf("blocks %v, want %v: the range and the IP hosts, not the host name", blocks, want)
	}
	var ports []string
	for _, p := range rule.Ports {
		ports = append(ports, string(*p.Protocol)+"/"+p.Port.String())
	}
	// 8080 is the policy's; 80 and 443 are where a URL naming no port goes.
	if want := []string{"TCP/80", "TCP/443", "TCP/8080"}; !slices.Equal(ports, want) {
		t.Errorf("ports %v, want %v", ports, want)
	}

	without, err := NetworkPolicy(managedNetworkPolicyGlance(), managedNetworkPolicyFacts())
	if err != nil {
		t.Fatal(err)
	}
	withPolicy := managedNetworkPolicyGlance()
	withPolicy.Spec.WebDownload = webDownloadGlance(true).Spec.WebDownload
	with, err := NetworkPolicy(withPolicy, managedNetworkPolicyFacts())
	if err != nil {
		t.Fatal(err)
	}
	// The rule goes before additionalEgress, the rest unchanged.
	n := len(without.Spec.Egress)
	if len(with.Spec.Egress) != n+1 || with.Spec.Egress[n-1].To[0].IPBlock == nil || with.Spec.Egress[n-1].To[0].IPBlock.CIDR != "198.51.100.7/32" {
		t.Fatalf("egress with a policy %v, want the %d rules without it and the web-download rule before the last", with.Spec.Egress, n)
	}
}

func TestWebDownloadErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(w *v1alpha1.WebDownloadSpec)
		want   string
	}{
		{"a host name without ranges", func(w *v1alpha1.WebDownloadSpec) { w.CIDRs = nil }, "spec.webDownload.cidrs is empty: with spec.networkPolicy the host names images.example.com need"},
		{"a range with host bits", func(w *v1alpha1.WebDownloadSpec) { w.CIDRs = []string{"203.0.113.9/24"} }, `spec.webDownload.cidrs[0] "203.0.113.9/24" has host bits set or is not canonical: write it as 203.0.113.0/24`},
		{"an IPv6 host in brackets", func(w *v1alpha1.WebDownloadSpec) { w.Hosts = []string{"[2001:db8::7]"} }, `spec.webDownload.hosts[0] "[2001:db8::7]" is an IPv6 address in brackets`},
		{"a long IPv6 host", func(w *v1alpha1.WebDownloadSpec) { w.Hosts = []string{"2001:db8:0:0:0:0:0:7"} }, "write it as 2001:db8::7"},
		{"shorthand IPv4", func(w *v1alpha1.WebDownloadSpec) { w.Hosts = []string{"127.1"} }, "Glance refuses shorthand IPv4 addresses"},
		{"an upper-case name", func(w *v1alpha1.WebDownloadSpec) { w.Hosts = []string{"Images.example.com"} }, "lower-case host name"},
		{"an IPv4-mapped address", func(w *v1alpha1.WebDownloadSpec) { w.Hosts = []string{"::ffff:198.51.100.7"} }, "give the IPv4 address 198.51.100.7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := webDownloadGlance(true)
			tt.mutate(g.Spec.WebDownload)
			_, confErr := GlanceAPIConf(g, ConfigFacts{})
			_, npErr := NetworkPolicy(g, NetworkPolicyFacts{OperatorNamespace: testOperatorNamespace})
			for what, err := range map[string]error{"glance-api.conf": confErr, "NetworkPolicy": npErr} {
				// A host name without ranges is only the NetworkPolicy's
				// concern.
				if err == nil && what == "glance-api.conf" && strings.HasPrefix(tt.want, "spec.webDownload.cidrs") {
					continue
				}
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("%s: error %v, want one containing %q", what, err, tt.want)
				}
			}
		})
	}
}
