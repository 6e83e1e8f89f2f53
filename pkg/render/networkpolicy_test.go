package render

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

const testOperatorNamespace = "glance-operator-system"

// managedNetworkPolicyGlance isolates minimalGlance (managed database) with a
// memcached cluster, a Gateway in another namespace, two ingress sources and
// one additional egress rule.
func managedNetworkPolicyGlance() *v1alpha1.Glance {
	g := minimalGlance()
	g.Spec.Cache = &v1alpha1.CacheSpec{ClusterRef: &v1alpha1.LocalObjectReference{Name: "memcached"}}
	g.Spec.Gateway = &v1alpha1.GatewaySpec{
		ParentRef: v1alpha1.GatewayParentReference{Name: "public", Namespace: "gateways"},
		Hostname:  "image.example.com",
	}
	g.Spec.NetworkPolicy = &v1alpha1.NetworkPolicySpec{
		Ingress: []v1alpha1.NetworkPolicySource{
			{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelNamespaceName: "nova"}}},
			{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "horizon"}}},
		},
		AdditionalEgress: []networkingv1.NetworkPolicyEgressRule{{
			To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.20.0.0/16"}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(8443))}},
		}},
	}
	return g
}

func managedNetworkPolicyFacts() NetworkPolicyFacts {
	return NetworkPolicyFacts{
		OperatorNamespace: testOperatorNamespace,
		S3Endpoints:       []string{"https://s3.example.com", "http://minio.storage.svc:9000", "https://s3.eu.example.com:443"},
	}
}

// brownfieldNetworkPolicyGlance isolates fullGlance (memcached servers, an
// https public Keystone) moved to a brownfield database on port 3307, without
// a gateway.
func brownfieldNetworkPolicyGlance() *v1alpha1.Glance {
	g := fullGlance()
	g.Spec.Database.ClusterRef = nil
	g.Spec.Database.Host = "db.example.com"
	g.Spec.Database.Port = 3307
	g.Spec.NetworkPolicy = &v1alpha1.NetworkPolicySpec{
		Ingress: []v1alpha1.NetworkPolicySource{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "cloud"}},
			PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"nova-api", "cinder-volume"}},
			}},
		}},
	}
	return g
}

func brownfieldNetworkPolicyFacts() NetworkPolicyFacts {
	return NetworkPolicyFacts{OperatorNamespace: testOperatorNamespace, S3Endpoints: []string{"http://rgw.example.com"}}
}

// describePeers and describePorts reduce rules to one comparable line each:
// "peer|peer -> TCP/80,TCP/443", "*" standing for any peer.
func describePeers(peers []networkingv1.NetworkPolicyPeer) string {
	if len(peers) == 0 {
		return "*"
	}
	out := make([]string, 0, len(peers))
	for _, p := range peers {
		var parts []string
		if p.NamespaceSelector != nil {
			parts = append(parts, "ns("+metav1.FormatLabelSelector(p.NamespaceSelector)+")")
		}
		if p.PodSelector != nil {
			parts = append(parts, "pod("+metav1.FormatLabelSelector(p.PodSelector)+")")
		}
		if p.IPBlock != nil {
			parts = append(parts, "ip("+p.IPBlock.CIDR+")")
		}
		out = append(out, strings.Join(parts, " "))
	}
	return strings.Join(out, "|")
}

func describePorts(ports []networkingv1.NetworkPolicyPort) string {
	out := make([]string, 0, len(ports))
	for _, p := range ports {
		out = append(out, fmt.Sprintf("%s/%s", ptr.Deref(p.Protocol, ""), p.Port.String()))
	}
	return strings.Join(out, ",")
}

func describeIngress(rules []networkingv1.NetworkPolicyIngressRule) []string {
	var out []string
	for _, r := range rules {
		out = append(out, describePeers(r.From)+" -> "+describePorts(r.Ports))
	}
	return out
}

func describeEgress(rules []networkingv1.NetworkPolicyEgressRule) []string {
	var out []string
	for _, r := range rules {
		out = append(out, describePeers(r.To)+" -> "+describePorts(r.Ports))
	}
	return out
}

// podAPI selects the Glance's own API pods (in its namespace): a replica
// proxies a glance-direct import to the one that staged it.
const (
	podAPI            = "pod(app.kubernetes.io/component=api,app.kubernetes.io/instance=glance,app.kubernetes.io/managed-by=glance-operator,app.kubernetes.io/name=glance)"
	wantAPIPodsEgress = podAPI + " -> TCP/9292"
)

const (
	wantDNSEgress      = "ns(kubernetes.io/metadata.name=kube-system) pod(k8s-app=kube-dns) -> UDP/53,TCP/53,UDP/dns,TCP/dns-tcp"
	wantExtraEgress    = "ip(10.20.0.0/16) -> TCP/8443"
	nsNova             = "ns(kubernetes.io/metadata.name=nova)"
	podHorizon         = "pod(app=horizon)"
	nsGateways         = "ns(kubernetes.io/metadata.name=gateways)"
	nsOpenstack        = "ns(kubernetes.io/metadata.name=openstack)"
	nsOperator         = "ns(kubernetes.io/metadata.name=" + testOperatorNamespace + ")"
	managedAPIIngress  = nsNova + "|" + podHorizon + "|" + nsGateways + "|" + nsOperator + "|" + podAPI + " -> TCP/9292"
	managedAnyEgress   = "* -> TCP/443,TCP/5000,TCP/9000"
	managedLocalEgress = nsOpenstack + " -> TCP/3306,TCP/11211"
)

func TestNetworkPolicy(t *testing.T) {
	cases := []struct {
		name        string
		glance      func() *v1alpha1.Glance // default managedNetworkPolicyGlance
		mutate      func(g *v1alpha1.Glance, f *NetworkPolicyFacts)
		wantErr     string
		wantIngress []string
		wantEgress  []string
	}{
		{
			name:        "managed database, memcached cluster, gateway",
			wantIngress: []string{managedAPIIngress},
			wantEgress:  []string{wantDNSEgress, wantAPIPodsEgress, managedLocalEgress, managedAnyEgress, wantExtraEgress},
		},
		{
			name:        "brownfield database, memcached servers, public Keystone",
			glance:      brownfieldNetworkPolicyGlance,
			mutate:      func(_ *v1alpha1.Glance, f *NetworkPolicyFacts) { *f = brownfieldNetworkPolicyFacts() },
			wantIngress: []string{"ns(tenant=cloud) pod(app in (cinder-volume,nova-api))" + "|" + nsOperator + "|" + podAPI + " -> TCP/9292"},
			// 11211 once for both servers; 80 from S3, 443 from the public
			// Keystone, 5000 from the internal one, 3307 from the host.
			wantEgress: []string{wantDNSEgress, wantAPIPodsEgress, "* -> TCP/80,TCP/443,TCP/3307,TCP/5000,TCP/11211"},
		},
		{
			name: "brownfield database with a memcached cluster",
			mutate: func(g *v1alpha1.Glance, _ *NetworkPolicyFacts) {
				g.Spec.Database.ClusterRef = nil
				g.Spec.Database.Host = "10.0.0.5"
			},
			wantIngress: []string{managedAPIIngress},
			wantEgress:  []string{wantDNSEgress, wantAPIPodsEgress, nsOpenstack + " -> TCP/11211", "* -> TCP/443,TCP/3306,TCP/5000,TCP/9000", wantExtraEgress},
		},
		{
			name: "managed database on another port, no cache, no S3, no additional egress",
			mutate: func(g *v1alpha1.Glance, f *NetworkPolicyFacts) {
				g.Spec.Database.Port = 3307
				g.Spec.Cache = nil
				g.Spec.NetworkPolicy.AdditionalEgress = nil
				f.S3Endpoints = nil
			},
			wantIngress: []string{managedAPIIngress},
			// Keystone is always reached.
			wantEgress: []string{wantDNSEgress, wantAPIPodsEgress, nsOpenstack + " -> TCP/3307", "* -> TCP/5000"},
		},
		{
			name: "cache servers: IPv6, duplicate ports, sorted",
			mutate: func(g *v1alpha1.Glance, _ *NetworkPolicyFacts) {
				g.Spec.Cache = &v1alpha1.CacheSpec{Servers: []string{"mc-b:11212", "[fd00::1]:11211", "mc-a:11212"}}
			},
			wantIngress: []string{managedAPIIngress},
			wantEgress:  []string{wantDNSEgress, wantAPIPodsEgress, nsOpenstack + " -> TCP/3306", "* -> TCP/443,TCP/5000,TCP/9000,TCP/11211,TCP/11212", wantExtraEgress},
		},
		{
			name: "Keystone ports: explicit https port, public endpoint default port",
			mutate: func(g *v1alpha1.Glance, f *NetworkPolicyFacts) {
				g.Spec.KeystoneEndpoint = "https://keystone.openstack.svc:8443/v3"
				g.Spec.KeystonePublicEndpoint = "http://keystone.example.com/v3"
				f.S3Endpoints = nil
			},
			wantIngress: []string{managedAPIIngress},
			wantEgress:  []string{wantDNSEgress, wantAPIPodsEgress, managedLocalEgress, "* -> TCP/80,TCP/8443", wantExtraEgress},
		},
		{
			name:        "no gateway: only the sources and the operator",
			mutate:      func(g *v1alpha1.Glance, _ *NetworkPolicyFacts) { g.Spec.Gateway = nil },
			wantIngress: []string{nsNova + "|" + podHorizon + "|" + nsOperator + "|" + podAPI + " -> TCP/9292"},
			wantEgress:  []string{wantDNSEgress, wantAPIPodsEgress, managedLocalEgress, managedAnyEgress, wantExtraEgress},
		},
		{
			name:        "gateway namespace defaults to the Glance's",
			mutate:      func(g *v1alpha1.Glance, _ *NetworkPolicyFacts) { g.Spec.Gateway.ParentRef.Namespace = "" },
			wantIngress: []string{nsNova + "|" + podHorizon + "|" + nsOpenstack + "|" + nsOperator + "|" + podAPI + " -> TCP/9292"},
			wantEgress:  []string{wantDNSEgress, wantAPIPodsEgress, managedLocalEgress, managedAnyEgress, wantExtraEgress},
		},
		{
			name: "gateway in the operator's namespace is admitted once",
			mutate: func(g *v1alpha1.Glance, _ *NetworkPolicyFacts) {
				g.Spec.Gateway.ParentRef.Namespace = testOperatorNamespace
			},
			wantIngress: []string{nsNova + "|" + podHorizon + "|" + nsOperator + "|" + podAPI + " -> TCP/9292"},
			wantEgress:  []string{wantDNSEgress, wantAPIPodsEgress, managedLocalEgress, managedAnyEgress, wantExtraEgress},
		},

		{name: "no networkPolicy", mutate: func(g *v1alpha1.Glance, _ *NetworkPolicyFacts) { g.Spec.NetworkPolicy = nil }, wantErr: "spec.networkPolicy is not set"},
		{name: "no namespace", mutate: func(g *v1alpha1.Glance, _ *NetworkPolicyFacts) { g.Namespace = "" }, wantErr: "namespace"},
		{name: "nil ingress", mutate: func(g *v1alpha1.Glance, _ *NetworkPolicyFacts) { g.Spec.NetworkPolicy.Ingress = nil }, wantErr: "spec.networkPolicy.ingress is empty"},
		{
			name: "empty ingress",
			mutate: func(g *v1alpha1.Glance, _ *NetworkPolicyFacts) {
				g.Spec.NetworkPolicy.Ingress = []v1alpha1.NetworkPolicySource{}
			},
			wantErr: "spec.networkPolicy.ingress is empty",
		},
		{
			name: "source without selectors",
			mutate: func(g *v1alpha1.Glance, _ *NetworkPolicyFacts) {
				g.Spec.NetworkPolicy.Ingress = append(g.Spec.NetworkPolicy.Ingress, v1alpha1.NetworkPolicySource{})
			},
			wantErr: "spec.networkPolicy.ingress[2] needs a namespaceSelector, a podSelector or both",
		},
		{
			name: "invalid selector",
			mutate: func(g *v1alpha1.Glance, _ *NetworkPolicyFacts) {
				g.Spec.NetworkPolicy.Ingress[1].PodSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
			},
			wantErr: "spec.networkPolicy.ingress[1].podSelector",
		},
		{name: "unknown operator namespace", mutate: func(_ *v1alpha1.Glance, f *NetworkPolicyFacts) { f.OperatorNamespace = "" }, wantErr: "operator's namespace"},
		{name: "S3 scheme", mutate: func(_ *v1alpha1.Glance, f *NetworkPolicyFacts) { f.S3Endpoints = []string{"ftp://s3.example.com"} }, wantErr: `spec.s3.host "ftp://s3.example.com"`},
		{name: "S3 without host", mutate: func(_ *v1alpha1.Glance, f *NetworkPolicyFacts) { f.S3Endpoints = []string{"https:///bucket"} }, wantErr: "spec.s3.host"},
		{name: "S3 not a URL", mutate: func(_ *v1alpha1.Glance, f *NetworkPolicyFacts) {
			f.S3Endpoints = []string{"https://s3.example.com:port"}
		}, wantErr: "spec.s3.host"},
		{name: "S3 port 0", mutate: func(_ *v1alpha1.Glance, f *NetworkPolicyFacts) { f.S3Endpoints = []string{"https://s3.example.com:0"} }, wantErr: "spec.s3.host"},
		{name: "S3 port too large", mutate: func(_ *v1alpha1.Glance, f *NetworkPolicyFacts) {
			f.S3Endpoints = []string{"http://s3.example.com:65536"}
		}, wantErr: "spec.s3.host"},
		{
			name: "cache server without port",
			mutate: func(g *v1alpha1.Glance, _ *NetworkPolicyFacts) {
				g.Spec.Cache = &v1alpha1.CacheSpec{Servers: []string{"mc:11211", "mc"}}
			},
			wantErr: `spec.cache.servers[1] "mc"`,
		},
		{
			name: "cache server port 0",
			mutate: func(g *v1alpha1.Glance, _ *NetworkPolicyFacts) {
				g.Spec.Cache = &v1alpha1.CacheSpec{Servers: []string{"mc:0"}}
			},
			wantErr: "spec.cache.servers[0]",
		},
		{
			name: "cache server without host",
			mutate: func(g *v1alpha1.Glance, _ *NetworkPolicyFacts) {
				g.Spec.Cache = &v1alpha1.CacheSpec{Servers: []string{":11211"}}
			},
			wantErr: "spec.cache.servers[0]",
		},
		{name: "cache with neither", mutate: func(g *v1alpha1.Glance, _ *NetworkPolicyFacts) { g.Spec.Cache = &v1alpha1.CacheSpec{} }, wantErr: "spec.cache needs clusterRef or servers"},
		{name: "no Keystone", mutate: func(g *v1alpha1.Glance, _ *NetworkPolicyFacts) { g.Spec.KeystoneEndpoint = "" }, wantErr: "spec.keystoneEndpoint is empty"},
		{name: "Keystone without scheme", mutate: func(g *v1alpha1.Glance, _ *NetworkPolicyFacts) { g.Spec.KeystoneEndpoint = "keystone:5000" }, wantErr: "spec.keystoneEndpoint"},
		{
			name: "public Keystone bad port",
			mutate: func(g *v1alpha1.Glance, _ *NetworkPolicyFacts) {
				g.Spec.KeystonePublicEndpoint = "https://keystone.example.com:99999/v3"
			},
			wantErr: "spec.keystonePublicEndpoint",
		},
		{name: "database port out of range", mutate: func(g *v1alpha1.Glance, _ *NetworkPolicyFacts) { g.Spec.Database.Port = 70000 }, wantErr: "spec.database.port"},
		{
			name:    "database with neither",
			mutate:  func(g *v1alpha1.Glance, _ *NetworkPolicyFacts) { g.Spec.Database.ClusterRef = nil },
			wantErr: "spec.database needs clusterRef or host",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			newGlance := c.glance
			if newGlance == nil {
				newGlance = managedNetworkPolicyGlance
			}
			g, f := newGlance(), managedNetworkPolicyFacts()
			if c.mutate != nil {
				c.mutate(g, &f)
			}
			np, err := NetworkPolicy(g, f)
			if !renderedAsWanted(t, err, c.wantErr) {
				return
			}
			if np.Name != g.Name || np.Namespace != g.Namespace || np.Labels[LabelInstance] != g.Name {
				t.Errorf("object = %s/%s labels %v", np.Namespace, np.Name, np.Labels)
			}
			if got := metav1.FormatLabelSelector(&np.Spec.PodSelector); got != metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: APIPodLabels(g.Name)}) {
				t.Errorf("podSelector = %s, want the API pod labels", got)
			}
			if want := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}; !slices.Equal(np.Spec.PolicyTypes, want) {
				t.Errorf("policyTypes = %v, want %v", np.Spec.PolicyTypes, want)
			}
			for _, r := range np.Spec.Ingress {
				if len(r.From) == 0 {
					t.Errorf("ingress rule %+v admits every source", r)
				}
			}
			if got := describeIngress(np.Spec.Ingress); !slices.Equal(got, c.wantIngress) {
				t.Errorf("ingress:\n got %q\nwant %q", got, c.wantIngress)
			}
			if got := describeEgress(np.Spec.Egress); !slices.Equal(got, c.wantEgress) {
				t.Errorf("egress:\n got %q\nwant %q", got, c.wantEgress)
			}
		})
	}
}

func TestNetworkPolicyDoesNotAliasSpec(t *testing.T) {
	g := managedNetworkPolicyGlance()
	np, err := NetworkPolicy(g, managedNetworkPolicyFacts())
	if err != nil {
		t.Fatal(err)
	}
	np.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels["tampered"] = "yes"
	np.Spec.Egress[len(np.Spec.Egress)-1].To[0].IPBlock.CIDR = "0.0.0.0/0"
	if _, ok := g.Spec.NetworkPolicy.Ingress[0].NamespaceSelector.MatchLabels["tampered"]; ok {
		t.Error("changing the policy's ingress changed spec.networkPolicy.ingress")
	}
	if g.Spec.NetworkPolicy.AdditionalEgress[0].To[0].IPBlock.CIDR != "10.20.0.0/16" {
		t.Error("changing the policy's egress changed spec.networkPolicy.additionalEgress")
	}
}

// The rendered ports must not depend on the order of the backends or the
// cache servers, so that reordering them does not rewrite the policy.
func TestNetworkPolicyIgnoresInputOrder(t *testing.T) {
	g := brownfieldNetworkPolicyGlance()
	f := NetworkPolicyFacts{OperatorNamespace: testOperatorNamespace, S3Endpoints: []string{"http://a:9000", "https://b", "http://c"}}
	first, err := NetworkPolicy(g, f)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(g.Spec.Cache.Servers)
	slices.Reverse(f.S3Endpoints)
	second, err := NetworkPolicy(g, f)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := describeEgress(first.Spec.Egress), describeEgress(second.Spec.Egress); !slices.Equal(a, b) {
		t.Errorf("egress depends on input order:\n%q\n%q", a, b)
	}
}

func TestNetworkPolicyGolden(t *testing.T) {
	for _, c := range []struct {
		dir    string
		glance *v1alpha1.Glance
		facts  NetworkPolicyFacts
	}{
		{"network-policy-managed", managedNetworkPolicyGlance(), managedNetworkPolicyFacts()},
		{"network-policy-brownfield", brownfieldNetworkPolicyGlance(), brownfieldNetworkPolicyFacts()},
	} {
		t.Run(c.dir, func(t *testing.T) {
			np, err := NetworkPolicy(c.glance, c.facts)
			if err != nil {
				t.Fatal(err)
			}
			checkGoldenObject(t, c.dir, "networkpolicy.yaml", np)
		})
	}
}
