package render

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// ComponentRoute is the component label of the HTTPRoute.
const ComponentRoute = "route"

// HTTPRouteRequestTimeout is the route's timeouts.request. Gateways default to
// far shorter request timeouts, which would cut off a multi-gigabyte image
// upload or download; a bound still exists so that a stalled transfer
// eventually releases its glance-api worker.
const HTTPRouteRequestTimeout gatewayv1.Duration = "4h"

// The CRD's patterns for spec.gateway, re-checked because a CR may have
// bypassed admission.
var (
	gatewayHostnamePattern = regexp.MustCompile(`^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	gatewayPathPattern     = regexp.MustCompile(`^/[A-Za-z0-9/_.~%!$&'()*+,;=:@-]*$`)
)

// HTTPRoute is the route exposing the API of g through spec.gateway: every
// request under spec.gateway.path for spec.gateway.hostname goes to the
// {name} Service on APIPort.
//
// The fields the Gateway API CRD defaults (parent group and kind, backend
// group, kind and weight, path match type) are set explicitly, so the live
// object equals the rendered one and the reconciler sees no spurious drift.
func HTTPRoute(g *v1alpha1.Glance) (*gatewayv1.HTTPRoute, error) {
	gw := g.Spec.Gateway
	if gw == nil {
		return nil, fmt.Errorf("spec.gateway is not set: there is no HTTPRoute to render")
	}
	switch {
	case g.Name == "" || g.Namespace == "":
		return nil, fmt.Errorf("the Glance needs a name and a namespace to render its HTTPRoute")
	case gw.ParentRef.Name == "":
		return nil, fmt.Errorf("spec.gateway.parentRef.name is empty")
	case len(gw.Hostname) > 253 || !gatewayHostnamePattern.MatchString(gw.Hostname):
		return nil, fmt.Errorf("spec.gateway.hostname %q is not a DNS host name", gw.Hostname)
	}
	path := cmp.Or(gw.Path, v1alpha1.DefaultGatewayPath)
	if len(path) > 1024 || !gatewayPathPattern.MatchString(path) {
		return nil, fmt.Errorf("spec.gateway.path %q must be an absolute URL path", path)
	}

	parent := gatewayv1.ParentReference{
		Group: ptr.To(gatewayv1.Group(gatewayv1.GroupName)),
		Kind:  ptr.To(gatewayv1.Kind("Gateway")),
		Name:  gatewayv1.ObjectName(gw.ParentRef.Name),
	}
	if gw.ParentRef.Namespace != "" {
		parent.Namespace = ptr.To(gatewayv1.Namespace(gw.ParentRef.Namespace))
	}
	if gw.ParentRef.SectionName != "" {
		parent.SectionName = ptr.To(gatewayv1.SectionName(gw.ParentRef.SectionName))
	}

	return &gatewayv1.HTTPRoute{
		TypeMeta: metav1.TypeMeta{APIVersion: gatewayv1.GroupVersion.String(), Kind: "HTTPRoute"},
		ObjectMeta: metav1.ObjectMeta{
			Name: g.Name, Namespace: g.Namespace, Labels: ChildLabels(g.Name, ComponentRoute), Annotations: maps.Clone(gw.Annotations),
		},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{parent}},
			Hostnames:       []gatewayv1.Hostname{gatewayv1.Hostname(gw.Hostname)},
			Rules: []gatewayv1.HTTPRouteRule{{
				Matches: []gatewayv1.HTTPRouteMatch{{
					Path: &gatewayv1.HTTPPathMatch{
						Type:  ptr.To(gatewayv1.PathMatchPathPrefix),
						Value: ptr.To(path),
					},
				}},
				BackendRefs: []gatewayv1.HTTPBackendRef{{
					BackendRef: gatewayv1.BackendRef{
						BackendObjectReference: gatewayv1.BackendObjectReference{
							Group: ptr.To(gatewayv1.Group("")),
							Kind:  ptr.To(gatewayv1.Kind("Service")),
							Name:  gatewayv1.ObjectName(g.Name),
							Port:  ptr.To(gatewayv1.PortNumber(v1alpha1.APIPort)),
						},
						Weight: ptr.To[int32](1),
					},
				}},
				Timeouts: &gatewayv1.HTTPRouteTimeouts{Request: ptr.To(HTTPRouteRequestTimeout)},
			}},
		},
	}, nil
}
