package glance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/pkg/render"
)

// RouteAcceptancePollInterval is how often a route's acceptance is polled.
const RouteAcceptancePollInterval = 10 * time.Second

var httpRouteGVK = gatewayv1.SchemeGroupVersion.WithKind("HTTPRoute")

// reconcileHTTPRoute runs the spec.gateway lifecycle: the route exists while
// spec.gateway does, and reflects its Gateway's Accepted condition. Without
// the Gateway API the manager runs on and says so.
func reconcileHTTPRoute(ctx context.Context, g *v1alpha1.Glance, p *pass) (ctrl.Result, error) {
	installed := p.r.GatewayAPI
	if !p.cluster.IsManagement() {
		var err error
		if installed, err = p.cluster.Serves(httpRouteGVK); err != nil {
			pipeline.SetCondition(g, v1alpha1.ConditionHTTPRouteReady, metav1.ConditionFalse, v1alpha1.ReasonCapabilityProbeFailed,
				"cannot tell whether the target cluster serves the Gateway API: "+err.Error())
			return ctrl.Result{RequeueAfter: RouteAcceptancePollInterval}, nil
		}
	}
	if g.Spec.Gateway == nil {
		var route client.Object // none to delete where the kind is not served
		if installed {
			route = &gatewayv1.HTTPRoute{}
		}
		return childNotRequired(ctx, p, g, route, v1alpha1.ConditionHTTPRouteReady, v1alpha1.ReasonHTTPRouteNotRequired, "spec.gateway")
	}
	if !installed {
		pipeline.SetCondition(g, v1alpha1.ConditionHTTPRouteReady, metav1.ConditionFalse, v1alpha1.ReasonGatewayAPINotInstalled,
			fmt.Sprintf("spec.gateway is set but the cluster does not serve %s %s", httpRouteGVK.GroupVersion(), httpRouteGVK.Kind))
		return ctrl.Result{}, nil
	}
	desired, err := render.HTTPRoute(g)
	if err != nil {
		return ctrl.Result{}, reconcile.TerminalError(errors.New("cannot render the HTTPRoute: " + err.Error()))
	}
	route := &gatewayv1.HTTPRoute{}
	if err := applySpec(ctx, p, g, desired, &desired.Spec, route, &route.Spec, nil); err != nil {
		return ctrl.Result{}, err
	}
	accepted, msg := routeAccepted(route, desired.Spec.ParentRefs[0])
	if !accepted {
		pipeline.SetCondition(g, v1alpha1.ConditionHTTPRouteReady, metav1.ConditionFalse, v1alpha1.ReasonHTTPRouteNotAccepted, msg)
		return ctrl.Result{RequeueAfter: RouteAcceptancePollInterval}, nil
	}
	pipeline.SetCondition(g, v1alpha1.ConditionHTTPRouteReady, metav1.ConditionTrue, v1alpha1.ReasonHTTPRouteAccepted, msg)
	return ctrl.Result{}, nil
}

// routeAccepted reads the Accepted condition the Gateway's controller wrote
// for the route's parent.
func routeAccepted(route *gatewayv1.HTTPRoute, parent gatewayv1.ParentReference) (bool, string) {
	for _, ps := range route.Status.Parents {
		if ps.ParentRef.Name != parent.Name || ptr.Deref(ps.ParentRef.Namespace, "") != ptr.Deref(parent.Namespace, "") ||
			ptr.Deref(ps.ParentRef.SectionName, "") != ptr.Deref(parent.SectionName, "") {
			continue
		}
		c := meta.FindStatusCondition(ps.Conditions, string(gatewayv1.RouteConditionAccepted))
		if c == nil {
			continue
		}
		if c.Status == metav1.ConditionTrue {
			return true, fmt.Sprintf("Gateway %s accepted HTTPRoute %s", parent.Name, route.Name)
		}
		return false, fmt.Sprintf("Gateway %s did not accept HTTPRoute %s: %s: %s", parent.Name, route.Name, c.Reason, c.Message)
	}
	return false, fmt.Sprintf("Gateway %s has not reported on HTTPRoute %s yet", parent.Name, route.Name)
}
