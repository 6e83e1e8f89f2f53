package glance

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestRouteAccepted(t *testing.T) {
	const ours, theirs = gatewayv1.GatewayController("example.com/gateway"), gatewayv1.GatewayController("example.net/other")
	// parent is what render.HTTPRoute writes for spec.gateway.parentRef
	// {name: public, namespace: gateways, sectionName: https}.
	parent := gatewayv1.ParentReference{
		Group:       ptr.To(gatewayv1.Group(gatewayv1.GroupName)),
		Kind:        ptr.To(gatewayv1.Kind("Gateway")),
		Name:        "public",
		Namespace:   ptr.To(gatewayv1.Namespace("gateways")),
		SectionName: ptr.To(gatewayv1.SectionName("https")),
	}
	ref := func(name, namespace, section string) gatewayv1.ParentReference {
		r := gatewayv1.ParentReference{Name: gatewayv1.ObjectName(name)}
		if namespace != "" {
			r.Namespace = ptr.To(gatewayv1.Namespace(namespace))
		}
		if section != "" {
			r.SectionName = ptr.To(gatewayv1.SectionName(section))
		}
		return r
	}
	accepted := func(status metav1.ConditionStatus, reason, message string) metav1.Condition {
		return metav1.Condition{Type: string(gatewayv1.RouteConditionAccepted), Status: status, Reason: reason, Message: message}
	}
	resolved := metav1.Condition{Type: string(gatewayv1.RouteConditionResolvedRefs), Status: metav1.ConditionTrue, Reason: "ResolvedRefs"}
	status := func(controller gatewayv1.GatewayController, r gatewayv1.ParentReference, conds ...metav1.Condition) gatewayv1.RouteParentStatus {
		return gatewayv1.RouteParentStatus{ParentRef: r, ControllerName: controller, Conditions: conds}
	}
	const (
		isAccepted  = "Gateway public accepted HTTPRoute glance"
		notReported = "Gateway public has not reported on HTTPRoute glance yet"
	)
	for _, tt := range []struct {
		name    string
		parent  gatewayv1.ParentReference
		parents []gatewayv1.RouteParentStatus
		want    bool
		message string
	}{
		{"no status yet", parent, nil, false, notReported},
		{"accepted", parent, []gatewayv1.RouteParentStatus{
			status(ours, ref("public", "gateways", "https"), resolved, accepted(metav1.ConditionTrue, "Accepted", "")),
		}, true, isAccepted},
		{"not accepted", parent, []gatewayv1.RouteParentStatus{
			status(ours, ref("public", "gateways", "https"), accepted(metav1.ConditionFalse, "NotAllowedByListeners", "hostname does not match")),
		}, false, "Gateway public did not accept HTTPRoute glance: NotAllowedByListeners: hostname does not match"},
		{"acceptance unknown", parent, []gatewayv1.RouteParentStatus{
			status(ours, ref("public", "gateways", "https"), accepted(metav1.ConditionUnknown, "Pending", "waiting")),
		}, false, "Gateway public did not accept HTTPRoute glance: Pending: waiting"},
		{"the parent reports other conditions only", parent, []gatewayv1.RouteParentStatus{
			status(ours, ref("public", "gateways", "https"), resolved),
		}, false, notReported},
		// Group, kind and port are not compared: the Gateway's controller
		// may echo the reference without them.
		{"group and kind left out of the echoed reference", parent, []gatewayv1.RouteParentStatus{
			status(ours, gatewayv1.ParentReference{Name: "public", Namespace: parent.Namespace, SectionName: parent.SectionName, Port: ptr.To(gatewayv1.PortNumber(443))},
				accepted(metav1.ConditionTrue, "Accepted", "")),
		}, true, isAccepted},
		{"another Gateway's name", parent, []gatewayv1.RouteParentStatus{
			status(ours, ref("private", "gateways", "https"), accepted(metav1.ConditionTrue, "Accepted", "")),
		}, false, notReported},
		{"another namespace", parent, []gatewayv1.RouteParentStatus{
			status(ours, ref("public", "other", "https"), accepted(metav1.ConditionTrue, "Accepted", "")),
		}, false, notReported},
		{"namespace left out of the echoed reference", parent, []gatewayv1.RouteParentStatus{
			status(ours, ref("public", "", "https"), accepted(metav1.ConditionTrue, "Accepted", "")),
		}, false, notReported},
		{"another listener", parent, []gatewayv1.RouteParentStatus{
			status(ours, ref("public", "gateways", "http"), accepted(metav1.ConditionTrue, "Accepted", "")),
		}, false, notReported},
		{"section left out of the echoed reference", parent, []gatewayv1.RouteParentStatus{
			status(ours, ref("public", "gateways", ""), accepted(metav1.ConditionTrue, "Accepted", "")),
		}, false, notReported},
		// A parent without namespace or section matches a status without
		// them: nil and empty are the same reference.
		{"bare parent", ref("public", "", ""), []gatewayv1.RouteParentStatus{
			status(ours, gatewayv1.ParentReference{Name: "public", Namespace: ptr.To(gatewayv1.Namespace("")), SectionName: ptr.To(gatewayv1.SectionName(""))},
				accepted(metav1.ConditionTrue, "Accepted", "")),
		}, true, isAccepted},
		{"our parent among others", parent, []gatewayv1.RouteParentStatus{
			status(theirs, ref("private", "gateways", "https"), accepted(metav1.ConditionFalse, "NoMatchingParent", "")),
			status(ours, ref("public", "gateways", "https"), accepted(metav1.ConditionTrue, "Accepted", "")),
		}, true, isAccepted},
		// The entry is chosen by parent reference, not by controller name:
		// whichever controller reports on the parent first is believed.
		{"another controller on the same parent, first", parent, []gatewayv1.RouteParentStatus{
			status(theirs, ref("public", "gateways", "https"), accepted(metav1.ConditionFalse, "NotAllowed", "not mine")),
			status(ours, ref("public", "gateways", "https"), accepted(metav1.ConditionTrue, "Accepted", "")),
		}, false, "Gateway public did not accept HTTPRoute glance: NotAllowed: not mine"},
		{"another controller on the same parent without Accepted", parent, []gatewayv1.RouteParentStatus{
			status(theirs, ref("public", "gateways", "https"), resolved),
			status(ours, ref("public", "gateways", "https"), accepted(metav1.ConditionTrue, "Accepted", "")),
		}, true, isAccepted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			route := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "glance"}}
			route.Status.Parents = tt.parents
			got, msg := routeAccepted(route, tt.parent)
			if got != tt.want || msg != tt.message {
				t.Errorf("routeAccepted = %v %q, want %v %q", got, msg, tt.want, tt.message)
			}
		})
	}
}
