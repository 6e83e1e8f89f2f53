package render

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

func testFacts() WorkloadFacts {
	return WorkloadFacts{
		ConfigMapName:      "glance-config-0123456789",
		BackendsSecretName: "glance-backends-abcdef0123",
		AuthtokenHash:      "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8",
		DBConnectionHash:   "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b",
	}
}

// uwsgiEveryKnobGlance is a 2026.1 Glance with every Deployment and uWSGI
// knob set away from its default.
func uwsgiEveryKnobGlance() *v1alpha1.Glance {
	g := uwsgiGlance()
	g.Spec.APIServer.UWSGI = &v1alpha1.UWSGISpec{
		Processes:            ptr.To[int32](4),
		Threads:              ptr.To[int32](8),
		HTTPKeepAlive:        ptr.To(true),
		HTTPKeepAliveTimeout: ptr.To[int32](15),
		Harakiri:             ptr.To[int32](40),
	}
	g.Spec.Deployment = &v1alpha1.GlanceDeploymentSpec{
		Replicas: ptr.To[int32](5),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
		},
		TerminationGracePeriodSeconds: ptr.To[int64](60),
		PreStopSleepSeconds:           ptr.To[int64](10),
		Strategy: &appsv1.DeploymentStrategy{
			Type:          appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromString("50%"))},
		},
		TopologySpreadConstraints: &[]corev1.TopologySpreadConstraint{{
			MaxSkew:           2,
			TopologyKey:       TopologyKeyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{LabelInstance: "glance", LabelComponent: ComponentAPI}},
		}},
		PriorityClassName: ptr.To("openstack-critical"),
	}
	g.Spec.Staging = &v1alpha1.StagingSpec{SizeLimit: ptr.To(resource.MustParse("100Gi"))}
	return g
}

func unboundedStagingGlance() *v1alpha1.Glance {
	g := minimalGlance()
	g.Spec.Staging = &v1alpha1.StagingSpec{Unbounded: true}
	return g
}

func mustDeployment(t *testing.T, g *v1alpha1.Glance, f WorkloadFacts) *appsv1.Deployment {
	t.Helper()
	d, err := Deployment(g, f)
	if err != nil {
		t.Fatalf("Deployment: %v", err)
	}
	return d
}

func container(t *testing.T, containers []corev1.Container, name string) *corev1.Container {
	t.Helper()
	for i := range containers {
		if containers[i].Name == name {
			return &containers[i]
		}
	}
	t.Fatalf("no container %q", name)
	return nil
}

func volume(vols []corev1.Volume, name string) *corev1.Volume {
	for i := range vols {
		if vols[i].Name == name {
			return &vols[i]
		}
	}
	return nil
}

func mount(c *corev1.Container, name string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].Name == name {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func volumeNames(vols []corev1.Volume) []string {
	var names []string
	for _, v := range vols {
		names = append(names, v.Name)
	}
	return names
}

func mountNames(c *corev1.Container) []string {
	var names []string
	for _, m := range c.VolumeMounts {
		names = append(names, m.Name)
	}
	return names
}

// allContainers are the init and main containers of a pod spec.
func allContainers(p *corev1.PodSpec) []corev1.Container {
	return append(append([]corev1.Container{}, p.InitContainers...), p.Containers...)
}

// envWithoutSelfReference is c's env without the API pod's own address,
// which only glance-api has.
func envWithoutSelfReference(c *corev1.Container) []corev1.EnvVar {
	var env []corev1.EnvVar
	for _, e := range c.Env {
		if e.Name != EnvPodIP && e.Name != EnvWorkerSelfReferenceURL {
			env = append(env, e)
		}
	}
	return env
}
