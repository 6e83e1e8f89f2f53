package render

import (
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// autoscalingGlance scales minimalGlance on CPU and memory, with minReplicas
// left to default from deployment.replicas.
func autoscalingGlance() *v1alpha1.Glance {
	g := minimalGlance()
	g.Spec.Deployment = &v1alpha1.GlanceDeploymentSpec{Replicas: ptr.To[int32](2)}
	g.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{
		MaxReplicas:             10,
		TargetCPUUtilization:    ptr.To[int32](70),
		TargetMemoryUtilization: ptr.To[int32](85),
	}
	return g
}

// hpaTarget is one metric reduced to what the spec controls.
type hpaTarget struct {
	resource corev1.ResourceName
	percent  int32
}

func hpaTargets(t *testing.T, h *autoscalingv2.HorizontalPodAutoscaler) []hpaTarget {
	t.Helper()
	var out []hpaTarget
	for _, m := range h.Spec.Metrics {
		if m.Type != autoscalingv2.ResourceMetricSourceType || m.Resource == nil ||
			m.Resource.Target.Type != autoscalingv2.UtilizationMetricType || m.Resource.Target.AverageUtilization == nil {
			t.Fatalf("metric %+v is not a resource utilisation target", m)
		}
		out = append(out, hpaTarget{m.Resource.Name, *m.Resource.Target.AverageUtilization})
	}
	return out
}

func TestHorizontalPodAutoscaler(t *testing.T) {
	cpu70 := hpaTarget{corev1.ResourceCPU, 70}
	mem85 := hpaTarget{corev1.ResourceMemory, 85}
	cases := []struct {
		name        string
		mutate      func(g *v1alpha1.Glance)
		wantErr     string
		wantMin     int32
		wantTargets []hpaTarget
	}{
		{name: "minReplicas defaults to deployment.replicas", wantMin: 2, wantTargets: []hpaTarget{cpu70, mem85}},
		{
			name:        "explicit minReplicas wins over deployment.replicas",
			mutate:      func(g *v1alpha1.Glance) { g.Spec.Autoscaling.MinReplicas = ptr.To[int32](4) },
			wantMin:     4,
			wantTargets: []hpaTarget{cpu70, mem85},
		},
		{
			name:        "minReplicas defaults to 3 without deployment",
			mutate:      func(g *v1alpha1.Glance) { g.Spec.Deployment = nil },
			wantMin:     v1alpha1.DefaultReplicas,
			wantTargets: []hpaTarget{cpu70, mem85},
		},
		{
			name:        "minReplicas defaults to 3 without deployment.replicas",
			mutate:      func(g *v1alpha1.Glance) { g.Spec.Deployment.Replicas = nil },
			wantMin:     v1alpha1.DefaultReplicas,
			wantTargets: []hpaTarget{cpu70, mem85},
		},
		{
			name:        "CPU only",
			mutate:      func(g *v1alpha1.Glance) { g.Spec.Autoscaling.TargetMemoryUtilization = nil },
			wantMin:     2,
			wantTargets: []hpaTarget{cpu70},
		},
		{
			name:        "memory only",
			mutate:      func(g *v1alpha1.Glance) { g.Spec.Autoscaling.TargetCPUUtilization = nil },
			wantMin:     2,
			wantTargets: []hpaTarget{mem85},
		},
		{
			name: "minReplicas equal to maxReplicas",
			mutate: func(g *v1alpha1.Glance) {
				g.Spec.Autoscaling.MinReplicas = ptr.To[int32](10)
			},
			wantMin:     10,
			wantTargets: []hpaTarget{cpu70, mem85},
		},
		{name: "no autoscaling", mutate: func(g *v1alpha1.Glance) { g.Spec.Autoscaling = nil }, wantErr: "spec.autoscaling is not set"},
		{name: "no namespace", mutate: func(g *v1alpha1.Glance) { g.Namespace = "" }, wantErr: "namespace"},
		{
			name: "no target",
			mutate: func(g *v1alpha1.Glance) {
				g.Spec.Autoscaling.TargetCPUUtilization = nil
				g.Spec.Autoscaling.TargetMemoryUtilization = nil
			},
			wantErr: "spec.autoscaling needs targetCPUUtilization, targetMemoryUtilization or both",
		},
		{name: "CPU target 0", mutate: func(g *v1alpha1.Glance) { g.Spec.Autoscaling.TargetCPUUtilization = ptr.To[int32](0) }, wantErr: "spec.autoscaling.targetCPUUtilization"},
		{name: "memory target 101", mutate: func(g *v1alpha1.Glance) { g.Spec.Autoscaling.TargetMemoryUtilization = ptr.To[int32](101) }, wantErr: "spec.autoscaling.targetMemoryUtilization"},
		{name: "maxReplicas 0", mutate: func(g *v1alpha1.Glance) { g.Spec.Autoscaling.MaxReplicas = 0 }, wantErr: "spec.autoscaling.maxReplicas must be at least 1"},
		{name: "minReplicas 0", mutate: func(g *v1alpha1.Glance) { g.Spec.Autoscaling.MinReplicas = ptr.To[int32](0) }, wantErr: "spec.autoscaling.minReplicas must be at least 1"},
		{
			name:    "minReplicas above maxReplicas",
			mutate:  func(g *v1alpha1.Glance) { g.Spec.Autoscaling.MinReplicas = ptr.To[int32](11) },
			wantErr: "spec.autoscaling.minReplicas (11) exceeds spec.autoscaling.maxReplicas (10)",
		},
		{
			name:    "defaulted minReplicas above maxReplicas names deployment.replicas",
			mutate:  func(g *v1alpha1.Glance) { g.Spec.Autoscaling.MaxReplicas = 1 },
			wantErr: "spec.deployment.replicas",
		},
		{
			name: "default replica count above maxReplicas",
			mutate: func(g *v1alpha1.Glance) {
				g.Spec.Deployment = nil
				g.Spec.Autoscaling.MaxReplicas = 2
			},
			wantErr: "default replica count",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := autoscalingGlance()
			if c.mutate != nil {
				c.mutate(g)
			}
			h, err := HorizontalPodAutoscaler(g)
			if !renderedAsWanted(t, err, c.wantErr) {
				return
			}
			if h.Name != "glance" || h.Namespace != "openstack" || h.Labels[LabelInstance] != "glance" {
				t.Errorf("object = %s/%s labels %v", h.Namespace, h.Name, h.Labels)
			}
			if ref := h.Spec.ScaleTargetRef; ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.Name != "glance" {
				t.Errorf("scaleTargetRef = %+v", ref)
			}
			if got := ptr.Deref(h.Spec.MinReplicas, 0); got != c.wantMin {
				t.Errorf("minReplicas = %d, want %d", got, c.wantMin)
			}
			if h.Spec.MaxReplicas != g.Spec.Autoscaling.MaxReplicas {
				t.Errorf("maxReplicas = %d, want %d", h.Spec.MaxReplicas, g.Spec.Autoscaling.MaxReplicas)
			}
			got := hpaTargets(t, h)
			if len(got) != len(c.wantTargets) {
				t.Fatalf("targets = %v, want %v", got, c.wantTargets)
			}
			for i := range got {
				if got[i] != c.wantTargets[i] {
					t.Errorf("targets = %v, want %v", got, c.wantTargets)
				}
			}
		})
	}
}

func TestHorizontalPodAutoscalerGolden(t *testing.T) {
	h, err := HorizontalPodAutoscaler(autoscalingGlance())
	if err != nil {
		t.Fatal(err)
	}
	checkGoldenObject(t, "autoscaling", "hpa.yaml", h)
}
