package render

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// WebDownloadMethod is the import method that fetches image data from a
// URL.
const WebDownloadMethod = "web-download"

// WebDownloadOffered reports whether web-download is an import method of
// the Glance: with a stated source policy, or without a NetworkPolicy,
// which would let no fetch out and leave every import to time out.
func WebDownloadOffered(s *v1alpha1.GlanceSpec) bool {
	return s.WebDownload != nil || s.NetworkPolicy == nil
}

// WebDownloadPorts are the ports an image URL may name: webDownload.ports,
// else 80 and 443; ascending, each once.
func WebDownloadPorts(w *v1alpha1.WebDownloadSpec) []int32 {
	ports := []int32{v1alpha1.DefaultWebDownloadHTTPPort, v1alpha1.DefaultWebDownloadHTTPSPort}
	if len(w.Ports) > 0 {
		ports = slices.Clone(w.Ports)
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// WebDownloadHostProblem says why host cannot be a webDownload.hosts
// entry, or returns "" when it can. Glance compares the entry with the
// URL's host as Python's URL parser gives it (lower case, IPv6 without
// brackets) after normalising IP addresses, and refuses shorthand IPv4
// such as 127.1; a canonical spelling is the one that matches.
func WebDownloadHostProblem(host string) string {
	if strings.Trim(host, "[]") != host {
		return "is an IPv6 address in brackets: give it without them"
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		if addr.Is4In6() {
			return fmt.Sprintf("is an IPv4-mapped IPv6 address: give the IPv4 address %s", addr.Unmap())
		}
		if addr.Zone() != "" {
			return "is an IP address with a zone, which a URL cannot name"
		}
		if c := addr.String(); c != host {
			return fmt.Sprintf("is an IP address not in its canonical form: write it as %s", c)
		}
		return ""
	}
	if strings.Trim(host, "0123456789.") == "" {
		return "is neither an IP address nor a host name (Glance refuses shorthand IPv4 addresses)"
	}
	if msgs := validation.IsDNS1123Subdomain(host); len(msgs) > 0 {
		return "is neither an IP address nor a lower-case host name: " + strings.Join(msgs, "; ")
	}
	return ""
}

// WebDownloadCIDRProblem says why cidr cannot be a webDownload.cidrs
// entry, or returns "" when it can.
func WebDownloadCIDRProblem(cidr string) string {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return "is not a CIDR such as 203.0.113.0/24 or 2001:db8::/32"
	}
	if m := p.Masked(); m.String() != cidr {
		return fmt.Sprintf("has host bits set or is not canonical: write it as %s", m)
	}
	return ""
}

// WebDownloadNames are the host names (not IP addresses) of hosts.
func WebDownloadNames(hosts []string) []string {
	var names []string
	for _, h := range hosts {
		if _, err := netip.ParseAddr(h); err != nil {
			names = append(names, h)
		}
	}
	return names
}

// webDownloadFilter sets [import_filtering_opts] from the source policy:
// the hosts and ports a URL may name. Schemes stay Glance's (http, https).
func webDownloadFilter(f *INI, w *v1alpha1.WebDownloadSpec) error {
	for i, h := range w.Hosts {
		if problem := WebDownloadHostProblem(h); problem != "" {
			return fmt.Errorf("spec.webDownload.hosts[%d] %q %s", i, h, problem)
		}
	}
	hosts := slices.Sorted(slices.Values(w.Hosts))
	ports := WebDownloadPorts(w)
	portList := make([]string, len(ports))
	for i, p := range ports {
		portList[i] = strconv.Itoa(int(p))
	}
	// Both are oslo.config bracketed lists.
	f.Set("import_filtering_opts", "allowed_hosts", "["+strings.Join(slices.Compact(hosts), ",")+"]")
	f.Set("import_filtering_opts", "allowed_ports", "["+strings.Join(portList, ",")+"]")
	return nil
}

// webDownloadEgress is the NetworkPolicy's egress for web-download: the
// cidrs and the IP addresses among hosts, on the ports a URL may name and
// the schemes' default ports. A host name with no cidrs is an error: no
// rule could reach it.
func webDownloadEgress(w *v1alpha1.WebDownloadSpec) (networkingv1.NetworkPolicyEgressRule, error) {
	if names := WebDownloadNames(w.Hosts); len(names) > 0 && len(w.CIDRs) == 0 {
		return networkingv1.NetworkPolicyEgressRule{}, fmt.Errorf("spec.webDownload.cidrs is empty: with spec.networkPolicy the host names %s need the ranges they resolve to", strings.Join(names, ", "))
	}
	var blocks []string
	for i, c := range w.CIDRs {
		if problem := WebDownloadCIDRProblem(c); problem != "" {
			return networkingv1.NetworkPolicyEgressRule{}, fmt.Errorf("spec.webDownload.cidrs[%d] %q %s", i, c, problem)
		}
		blocks = append(blocks, c)
	}
	for i, h := range w.Hosts {
		if problem := WebDownloadHostProblem(h); problem != "" {
			return networkingv1.NetworkPolicyEgressRule{}, fmt.Errorf("spec.webDownload.hosts[%d] %q %s", i, h, problem)
		}
		if addr, err := netip.ParseAddr(h); err == nil {
			blocks = append(blocks, netip.PrefixFrom(addr, addr.BitLen()).String())
		}
	}
	slices.Sort(blocks)
	rule := networkingv1.NetworkPolicyEgressRule{
		Ports: netpolTCPPorts(append(WebDownloadPorts(w), v1alpha1.DefaultWebDownloadHTTPPort, v1alpha1.DefaultWebDownloadHTTPSPort)),
	}
	for _, b := range slices.Compact(blocks) {
		rule.To = append(rule.To, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: b}})
	}
	return rule, nil
}
