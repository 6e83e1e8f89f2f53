package glance

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/pkg/render"
)

// reconcileNetworkPolicy creates, updates or deletes the NetworkPolicy with
// spec.networkPolicy. A policy that would admit no one (an empty ingress
// list) is refused, and the live policy is left as it is: fail closed.
func reconcileNetworkPolicy(ctx context.Context, g *v1alpha1.Glance, p *pass) (ctrl.Result, error) {
	if g.Spec.NetworkPolicy == nil {
		return childNotRequired(ctx, p, g, &networkingv1.NetworkPolicy{}, v1alpha1.ConditionNetworkPolicyReady, v1alpha1.ReasonNetworkPolicyNotRequired, "spec.networkPolicy")
	}
	desired, err := render.NetworkPolicy(g, render.NetworkPolicyFacts{OperatorNamespace: p.r.OperatorNamespace, S3Endpoints: p.backends.endpoints})
	if err != nil {
		msg := "refusing the NetworkPolicy: " + err.Error()
		// The condition carries the refusal: announce it when it starts,
		// not on every pass that repeats it.
		if c := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionNetworkPolicyReady); c == nil || c.Message != msg {
			announce(ctx, p, g, nil, corev1.EventTypeWarning, v1alpha1.EventNetworkPolicyRefused, "Project", "%s", msg)
		}
		return ctrl.Result{}, reconcile.TerminalError(errors.New(msg))
	}
	current := &networkingv1.NetworkPolicy{}
	if err := applySpec(ctx, p, g, desired, &desired.Spec, current, &current.Spec, nil); err != nil {
		return ctrl.Result{}, err
	}
	pipeline.SetCondition(g, v1alpha1.ConditionNetworkPolicyReady, metav1.ConditionTrue, v1alpha1.ReasonNetworkPolicyReady,
		"NetworkPolicy "+desired.Name+" isolates the API pods")
	return ctrl.Result{}, nil
}
