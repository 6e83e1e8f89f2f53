package glance

import (
	"context"
	"errors"
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/equality"
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
		if err := deleteChild(ctx, p, g, &autoscalingv2.HorizontalPodAutoscaler{}); err != nil {
			return ctrl.Result{}, err
		}
		pipeline.SetCondition(g, v1alpha1.ConditionHPAReady, metav1.ConditionTrue, v1alpha1.ReasonHPANotRequired, "spec.autoscaling is not set")
		return ctrl.Result{}, nil
	}
	desired, err := render.HorizontalPodAutoscaler(g)
	if err != nil {
		return ctrl.Result{}, reconcile.TerminalError(errors.New("cannot render the HorizontalPodAutoscaler: " + err.Error()))
	}
	current := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := applyChild(ctx, p, g, desired, current, func() bool {
		return equality.Semantic.DeepDerivative(desired.Spec, current.Spec)
	}, func() { current.Spec = desired.Spec }); err != nil {
		return ctrl.Result{}, err
	}
	pipeline.SetCondition(g, v1alpha1.ConditionHPAReady, metav1.ConditionTrue, v1alpha1.ReasonHPAReady,
		fmt.Sprintf("HorizontalPodAutoscaler %s scales between %d and %d replicas", desired.Name, *desired.Spec.MinReplicas, desired.Spec.MaxReplicas))
	return ctrl.Result{}, nil
}
