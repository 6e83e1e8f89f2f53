package admission

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
)

// validateWebDownload judges the web-download source policy: each host and
// range by the renderer's rules, and, under a NetworkPolicy, a range for the
// host names to resolve into. Its warnings name policies that work but not
// as one may think.
func validateWebDownload(g *v1alpha1.Glance, p *field.Path) (Warnings, field.ErrorList) {
	w := g.Spec.WebDownload
	if w == nil {
		return nil, nil
	}
	var errs field.ErrorList
	var warns Warnings
	for i, h := range w.Hosts {
		hp := p.Child("hosts").Index(i)
		if problem := render.WebDownloadHostProblem(h); problem != "" {
			errs = append(errs, field.Invalid(hp, h, problem))
			continue
		}
		if addr, err := netip.ParseAddr(h); err == nil {
			if addr.IsLoopback() || addr.IsLinkLocalUnicast() || addr.IsUnspecified() {
				warns = append(warns, fmt.Sprintf("%s: %s is a loopback, link-local or unspecified address, which Glance fetches from only because it is listed: image URLs can then reach the pod itself or a metadata service", hp, h))
			}
			continue
		}
		if !strings.Contains(h, ".") || strings.HasSuffix(h, ".svc") {
			warns = append(warns, fmt.Sprintf("%s: Glance resolves %s as an absolute name, so a short or search-path name never resolves; give the fully qualified name (a Service's is NAME.NAMESPACE.svc.cluster.local)", hp, h))
		}
	}
	for i, c := range w.CIDRs {
		if problem := render.WebDownloadCIDRProblem(c); problem != "" {
			errs = append(errs, field.Invalid(p.Child("cidrs").Index(i), c, problem))
		}
	}
	if names := render.WebDownloadNames(w.Hosts); g.Spec.NetworkPolicy != nil && len(names) > 0 && len(w.CIDRs) == 0 {
		errs = append(errs, field.Required(p.Child("cidrs"), fmt.Sprintf("spec.networkPolicy admits egress by address: give the ranges the host names %s resolve to", strings.Join(names, ", "))))
	}
	if len(w.CIDRs) > 0 && g.Spec.NetworkPolicy == nil {
		warns = append(warns, p.Child("cidrs").String()+" has no effect without spec.networkPolicy: Glance filters image URLs by host, not by address")
	}
	return warns, errs
}
