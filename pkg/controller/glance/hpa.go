package glance

import (
	"context"
	"errors"
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/pkg/render"
)

// reconcileHPA creates, updates or deletes the HorizontalPodAutoscaler with
// spec.autoscaling. Errors propagate: HPAReady has no False reason.
func reconcileHPA(ctx context.Context, g *v1alpha1.Glance, p *pass) (ctrl.Result, error) {
	if g.Spec.Autoscaling == nil {
		return childNotRequired(ctx, p, g, &autoscalingv2.HorizontalPodAutoscaler{}, v1alpha1.ConditionHPAReady, v1alpha1.ReasonHPANotRequired, "spec.autoscaling")
	}
	desired, err := render.HorizontalPodAutoscaler(g)
	if err != nil {
		return ctrl.Result{}, reconcile.TerminalError(errors.New("cannot render the HorizontalPodAutoscaler: " + err.Error()))
	}
	current := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := applySpec(ctx, p, g, desired, &desired.Spec, current, &current.Spec, nil); err != nil {
		return ctrl.Result{}, err
	}
	pipeline.SetCondition(g, v1alpha1.ConditionHPAReady, metav1.ConditionTrue, v1alpha1.ReasonHPAReady,
		fmt.Sprintf("HorizontalPodAutoscaler %s scales between %d and %d replicas", desired.Name, *desired.Spec.MinReplicas, desired.Spec.MaxReplicas))
	return ctrl.Result{}, nil
}
