package render

import (
	"cmp"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// NetworkPolicyFacts are what the NetworkPolicy needs beyond the spec,
// resolved by the reconciler.
type NetworkPolicyFacts struct {
	// OperatorNamespace is where the operator runs; its health probe of
	// /healthcheck comes from there, so the policy admits it.
	OperatorNamespace string
	// S3Endpoints are the s3.host URLs of the rendered backends.
	S3Endpoints []string
}

// Labels the policy selects peers by.
const (
	// LabelNamespaceName is the label the API server sets on every namespace
	// to its name, the one way to select a namespace by name.
	LabelNamespaceName = "kubernetes.io/metadata.name"
	// DNSNamespace and DNSPodLabel{Key,Value} select the cluster DNS pods
	// (CoreDNS keeps kube-dns's label for compatibility).
	DNSNamespace     = "kube-system"
	DNSPodLabelKey   = "k8s-app"
	DNSPodLabelValue = "kube-dns"
	// DNSPort is the cluster DNS port, open over UDP and TCP (large answers
	// fall back to TCP).
	DNSPort = 53
)

// NetworkPolicy isolates the glance-api pods of g (spec.networkPolicy).
//
// Ingress: TCP APIPort from each spec.networkPolicy.ingress source, the
// gateway's namespace (with spec.gateway), facts.OperatorNamespace and the
// Glance's own API pods.
//
// Egress, in this order:
//   - DNS, UDP and TCP 53, to the kube-dns pods in kube-system;
//   - TCP APIPort to the Glance's own API pods;
//   - to the Glance's namespace: the database port in managed mode (the
//     MariaDB cluster lives there) and 11211 for cache.clusterRef;
//   - port-only (any destination), since the host may be anywhere: the
//     database port of a brownfield host, the ports of cache.servers, of the
//     S3 endpoints and of keystoneEndpoint and keystonePublicEndpoint (the
//     authtoken middleware validates every request's token against Keystone);
//   - with spec.webDownload, its cidrs and IP hosts on the ports a URL may
//     name and the schemes' default ports (webDownloadEgress);
//   - spec.networkPolicy.additionalEgress, as given.
//
// Each derived rule lists its ports once, in ascending order, so reordering
// backends or cache servers does not change the policy. Policies evaluate
// the pod port after Service translation: a Service whose port differs from
// its targetPort needs an additionalEgress rule for the targetPort.
//
// An empty ingress list is an error: the policy would admit only the gateway
// and the operator, which is never what was meant (fail closed).
func NetworkPolicy(g *v1alpha1.Glance, f NetworkPolicyFacts) (*networkingv1.NetworkPolicy, error) {
	np := g.Spec.NetworkPolicy
	switch {
	case np == nil:
		return nil, fmt.Errorf("spec.networkPolicy is not set: there is no NetworkPolicy to render")
	case g.Name == "" || g.Namespace == "":
		return nil, fmt.Errorf("the Glance needs a name and a namespace to render its NetworkPolicy")
	case len(np.Ingress) == 0:
		return nil, fmt.Errorf("spec.networkPolicy.ingress is empty: refusing to render a NetworkPolicy that admits no client")
	case f.OperatorNamespace == "":
		return nil, fmt.Errorf("the operator's namespace is unknown: the NetworkPolicy would block its health probe")
	}

	ingress, err := netpolIngress(g, f)
	if err != nil {
		return nil, err
	}
	egress, err := netpolEgress(g, f)
	if err != nil {
		return nil, err
	}

	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "NetworkPolicy"},
		ObjectMeta: apiObjectMeta(g),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: APIPodLabels(g.Name)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     ingress,
			Egress:      egress,
		},
	}, nil
}

func netpolIngress(g *v1alpha1.Glance, f NetworkPolicyFacts) ([]networkingv1.NetworkPolicyIngressRule, error) {
	var from []networkingv1.NetworkPolicyPeer
	for i, src := range g.Spec.NetworkPolicy.Ingress {
		field := fmt.Sprintf("spec.networkPolicy.ingress[%d]", i)
		// A peer with neither selector is refused by the API server; one
		// that got this far must not become an allow-all.
		if src.NamespaceSelector == nil && src.PodSelector == nil {
			return nil, fmt.Errorf("%s needs a namespaceSelector, a podSelector or both", field)
		}
		if err := netpolCheckSelector(field+".namespaceSelector", src.NamespaceSelector); err != nil {
			return nil, err
		}
		if err := netpolCheckSelector(field+".podSelector", src.PodSelector); err != nil {
			return nil, err
		}
		from = append(from, networkingv1.NetworkPolicyPeer{
			NamespaceSelector: src.NamespaceSelector.DeepCopy(),
			PodSelector:       src.PodSelector.DeepCopy(),
		})
	}
	var namespaces []string
	if gw := g.Spec.Gateway; gw != nil {
		namespaces = append(namespaces, cmp.Or(gw.ParentRef.Namespace, g.Namespace))
	}
	namespaces = append(namespaces, f.OperatorNamespace)
	seen := map[string]bool{}
	for _, ns := range namespaces {
		if !seen[ns] {
			seen[ns] = true
			from = append(from, netpolNamespacePeer(ns))
		}
	}
	from = append(from, netpolAPIPodsPeer(g))
	return []networkingv1.NetworkPolicyIngressRule{{
		Ports: netpolTCPPorts([]int32{v1alpha1.APIPort}),
		From:  from,
	}}, nil
}

func netpolCheckSelector(field string, s *metav1.LabelSelector) error {
	if s == nil {
		return nil
	}
	if _, err := metav1.LabelSelectorAsSelector(s); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	return nil
}

func netpolEgress(g *v1alpha1.Glance, f NetworkPolicyFacts) ([]networkingv1.NetworkPolicyEgressRule, error) {
	s := &g.Spec
	// inNamespace go to the Glance's namespace, anywhere to any destination.
	var inNamespace, anywhere []int32

	dbPort := DatabasePort(g)
	if dbPort < 1 || dbPort > 65535 {
		return nil, fmt.Errorf("spec.database.port %d is not a TCP port", dbPort)
	}
	switch {
	case s.Database.ClusterRef != nil:
		inNamespace = append(inNamespace, dbPort)
	case s.Database.Host != "":
		anywhere = append(anywhere, dbPort)
	default:
		return nil, fmt.Errorf("spec.database needs clusterRef or host")
	}

	if c := s.Cache; c != nil {
		switch {
		case c.ClusterRef != nil:
			inNamespace = append(inNamespace, MemcachedPort)
		case len(c.Servers) > 0:
			for i, server := range c.Servers {
				port, err := netpolHostPortPort(server)
				if err != nil {
					return nil, fmt.Errorf("spec.cache.servers[%d] %q: %w", i, server, err)
				}
				anywhere = append(anywhere, port)
			}
		default:
			return nil, fmt.Errorf("spec.cache needs clusterRef or servers")
		}
	}

	for _, endpoint := range f.S3Endpoints {
		port, err := netpolURLPort(endpoint)
		if err != nil {
			return nil, fmt.Errorf("GlanceBackend spec.s3.host %q: %w", endpoint, err)
		}
		anywhere = append(anywhere, port)
	}

	if s.KeystoneEndpoint == "" {
		return nil, fmt.Errorf("spec.keystoneEndpoint is empty")
	}
	for _, k := range []struct{ field, url string }{
		{"spec.keystoneEndpoint", s.KeystoneEndpoint},
		{"spec.keystonePublicEndpoint", s.KeystonePublicEndpoint},
	} {
		if k.url == "" {
			continue
		}
		port, err := netpolURLPort(k.url)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", k.field, k.url, err)
		}
		anywhere = append(anywhere, port)
	}

	udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
	egress := []networkingv1.NetworkPolicyEgressRule{{
		Ports: []networkingv1.NetworkPolicyPort{
			{Protocol: &udp, Port: ptr.To(intstr.FromInt32(DNSPort))},
			{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(DNSPort))},
		},
		To: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelNamespaceName: DNSNamespace}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{DNSPodLabelKey: DNSPodLabelValue}},
		}},
	}}
	egress = append(egress, networkingv1.NetworkPolicyEgressRule{
		Ports: netpolTCPPorts([]int32{v1alpha1.APIPort}),
		To:    []networkingv1.NetworkPolicyPeer{netpolAPIPodsPeer(g)},
	})
	if len(inNamespace) > 0 {
		egress = append(egress, networkingv1.NetworkPolicyEgressRule{
			Ports: netpolTCPPorts(inNamespace),
			To:    []networkingv1.NetworkPolicyPeer{netpolNamespacePeer(g.Namespace)},
		})
	}
	if len(anywhere) > 0 {
		egress = append(egress, networkingv1.NetworkPolicyEgressRule{Ports: netpolTCPPorts(anywhere)})
	}
	if s.WebDownload != nil {
		rule, err := webDownloadEgress(s.WebDownload)
		if err != nil {
			return nil, err
		}
		egress = append(egress, rule)
	}
	for _, r := range s.NetworkPolicy.AdditionalEgress {
		egress = append(egress, *r.DeepCopy())
	}
	return egress, nil
}

// netpolNamespacePeer selects every pod of the namespace ns.
func netpolNamespacePeer(ns string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelNamespaceName: ns}},
	}
}

// netpolAPIPodsPeer selects the Glance's own API pods. A replica proxies
// the import of an image staged on another replica to that pod's address
// (worker_self_reference_url), so the pods must reach each other.
func netpolAPIPodsPeer(g *v1alpha1.Glance) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: APIPodLabels(g.Name)}}
}

// netpolTCPPorts lists ports as TCP, each once, ascending.
func netpolTCPPorts(ports []int32) []networkingv1.NetworkPolicyPort {
	ports = slices.Clone(ports)
	slices.Sort(ports)
	ports = slices.Compact(ports)
	out := make([]networkingv1.NetworkPolicyPort, 0, len(ports))
	for _, p := range ports {
		out = append(out, networkingv1.NetworkPolicyPort{
			Protocol: ptr.To(corev1.ProtocolTCP),
			Port:     ptr.To(intstr.FromInt32(p)),
		})
	}
	return out
}

// netpolURLPort is the TCP port an http(s) URL connects to.
func netpolURLPort(raw string) (int32, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return 0, fmt.Errorf("not a URL: %w", err)
	}
	if u.Hostname() == "" {
		return 0, fmt.Errorf("URL has no host")
	}
	var defaultPort int32
	switch u.Scheme {
	case "http":
		defaultPort = 80
	case "https":
		defaultPort = 443
	default:
		return 0, fmt.Errorf("URL scheme %q is neither http nor https", u.Scheme)
	}
	if u.Port() == "" {
		return defaultPort, nil
	}
	return netpolParsePort(u.Port())
}

// netpolHostPortPort is the port of a host:port address.
func netpolHostPortPort(hostPort string) (int32, error) {
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return 0, fmt.Errorf("not host:port: %w", err)
	}
	if host == "" {
		return 0, fmt.Errorf("no host")
	}
	return netpolParsePort(port)
}

func netpolParsePort(s string) (int32, error) {
	p, err := strconv.ParseUint(s, 10, 16)
	if err != nil || p == 0 {
		return 0, fmt.Errorf("port %q is not a TCP port (1-65535)", s)
	}
	return int32(p), nil
}
