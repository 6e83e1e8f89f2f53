package render

import (
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// HorizontalPodAutoscaler is the autoscaler of the {name} Deployment from
// spec.autoscaling: CPU and/or memory utilisation targets, in that order.
// minReplicas defaults to the effective deployment.replicas, so enabling
// autoscaling never scales a running Glance below what it was asked to run.
func HorizontalPodAutoscaler(g *v1alpha1.Glance) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	a := g.Spec.Autoscaling
	if a == nil {
		return nil, fmt.Errorf("spec.autoscaling is not set: there is no HorizontalPodAutoscaler to render")
	}
	if g.Name == "" || g.Namespace == "" {
		return nil, fmt.Errorf("the Glance needs a name and a namespace to render its HorizontalPodAutoscaler")
	}

	minReplicas, minField := hpaMinReplicas(g)
	switch {
	case minReplicas < 1:
		return nil, fmt.Errorf("%s must be at least 1, is %d", minField, minReplicas)
	case a.MaxReplicas < 1:
		return nil, fmt.Errorf("spec.autoscaling.maxReplicas must be at least 1, is %d", a.MaxReplicas)
	case minReplicas > a.MaxReplicas:
		return nil, fmt.Errorf("%s (%d) exceeds spec.autoscaling.maxReplicas (%d)", minField, minReplicas, a.MaxReplicas)
	}

	var metrics []autoscalingv2.MetricSpec
	for _, t := range []struct {
		field    string
		resource corev1.ResourceName
		percent  *int32
	}{
		{"spec.autoscaling.targetCPUUtilization", corev1.ResourceCPU, a.TargetCPUUtilization},
		{"spec.autoscaling.targetMemoryUtilization", corev1.ResourceMemory, a.TargetMemoryUtilization},
	} {
		if t.percent == nil {
			continue
		}
		if *t.percent < 1 || *t.percent > 100 {
			return nil, fmt.Errorf("%s must be between 1 and 100 percent, is %d", t.field, *t.percent)
		}
		metrics = append(metrics, autoscalingv2.MetricSpec{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{
				Name: t.resource,
				Target: autoscalingv2.MetricTarget{
					Type:               autoscalingv2.UtilizationMetricType,
					AverageUtilization: ptr.To(*t.percent),
				},
			},
		})
	}
	if len(metrics) == 0 {
		// Without a metric the HPA would fall back to its own default
		// (80% CPU) — a target nobody chose.
		return nil, fmt.Errorf("spec.autoscaling needs targetCPUUtilization, targetMemoryUtilization or both")
	}

	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: autoscalingv2.SchemeGroupVersion.String(), Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: apiObjectMeta(g),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{
				APIVersion: "apps/v1",
				Kind:       "Deployment",
				Name:       g.Name,
			},
			MinReplicas: ptr.To(minReplicas),
			MaxReplicas: a.MaxReplicas,
			Metrics:     metrics,
		},
	}, nil
}

// hpaMinReplicas is the effective minReplicas and the field it came from, for
// error messages.
func hpaMinReplicas(g *v1alpha1.Glance) (int32, string) {
	if m := g.Spec.Autoscaling.MinReplicas; m != nil {
		return *m, "spec.autoscaling.minReplicas"
	}
	if d := g.Spec.Deployment; d != nil && d.Replicas != nil {
		return *d.Replicas, "spec.deployment.replicas (the default of spec.autoscaling.minReplicas)"
	}
	return v1alpha1.DefaultReplicas, "the default replica count (the default of spec.autoscaling.minReplicas)"
}
