package chart

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// httpProbe is the chart's probe of path on the health port, with timings.
func httpProbe(path string, timings corev1.Probe) *corev1.Probe {
	timings.HTTPGet = &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("health")}
	return &timings
}

// TestDeploymentOverrides: both Deployments take their strategy, revision
// history, probe timings, sidecars and priority class from values; a
// component's priority class wins over the global one, and probe timings
// merge into the chart's defaults.
func TestDeploymentOverrides(t *testing.T) {
	r := render(t, "deployment-overrides")
	for _, want := range []struct {
		name, container, sidecar, priorityClass string
		strategy                                appsv1.DeploymentStrategy
		history                                 int32
		liveness, readiness                     *corev1.Probe
	}{
		{
			name: managerName, container: "manager", sidecar: "log-shipper", priorityClass: "platform-critical",
			strategy: appsv1.DeploymentStrategy{RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			}},
			history:   3,
			liveness:  httpProbe("/healthz", corev1.Probe{InitialDelaySeconds: 15, PeriodSeconds: 20, TimeoutSeconds: 5, FailureThreshold: 6}),
			readiness: httpProbe("/readyz", corev1.Probe{PeriodSeconds: 15, SuccessThreshold: 2}),
		},
		{
			name: webhookName, container: "webhook", sidecar: "cert-watcher", priorityClass: "webhook-critical",
			strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromString("0%")),
			}},
			// 0 is a limit, not unset.
			history:   0,
			liveness:  httpProbe("/healthz", corev1.Probe{InitialDelaySeconds: 5, PeriodSeconds: 20, TimeoutSeconds: 3}),
			readiness: httpProbe("/readyz", corev1.Probe{PeriodSeconds: 5, FailureThreshold: 2}),
		},
	} {
		d := decode[appsv1.Deployment](t, mustGet(t, r, "Deployment", want.name))
		if !reflect.DeepEqual(d.Spec.Strategy, want.strategy) {
			t.Errorf("%s strategy = %s, want %s", want.name, toJSON(d.Spec.Strategy), toJSON(want.strategy))
		}
		if h := d.Spec.RevisionHistoryLimit; h == nil || *h != want.history {
			t.Errorf("%s revisionHistoryLimit = %v, want %d", want.name, h, want.history)
		}
		pod := d.Spec.Template.Spec
		if pod.PriorityClassName != want.priorityClass {
			t.Errorf("%s priorityClassName = %q, want %q", want.name, pod.PriorityClassName, want.priorityClass)
		}
		if len(pod.Containers) != 2 || pod.Containers[0].Name != want.container || pod.Containers[1].Name != want.sidecar {
			t.Fatalf("%s containers = %s, want %s then the sidecar %s", want.name, toJSON(pod.Containers), want.container, want.sidecar)
		}
		if img := pod.Containers[1].Image; img != "registry.example.com/"+want.sidecar+":1.0" {
			t.Errorf("%s sidecar image = %q", want.name, img)
		}
		c := pod.Containers[0]
		if !reflect.DeepEqual(c.LivenessProbe, want.liveness) {
			t.Errorf("%s liveness probe = %s, want %s", want.name, toJSON(c.LivenessProbe), toJSON(want.liveness))
		}
		if !reflect.DeepEqual(c.ReadinessProbe, want.readiness) {
			t.Errorf("%s readiness probe = %s, want %s", want.name, toJSON(c.ReadinessProbe), toJSON(want.readiness))
		}
	}

	// Recreate is not in the matrix: the API server suite applies the
	// matrix's installs over one another server-side, which keeps the
	// rollingUpdate the API server defaulted before, and Recreate forbids
	// one. null takes a default timing away, as values.yaml says.
	r, err := Render(map[string]any{"manager": map[string]any{
		"strategy":      map[string]any{"type": "Recreate"},
		"livenessProbe": map[string]any{"initialDelaySeconds": nil},
	}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := decode[appsv1.Deployment](t, mustGet(t, r, "Deployment", managerName))
	if want := (appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}); !reflect.DeepEqual(d.Spec.Strategy, want) {
		t.Errorf("strategy = %s, want %s", toJSON(d.Spec.Strategy), toJSON(want))
	}
	got := d.Spec.Template.Spec.Containers[0].LivenessProbe
	if want := httpProbe("/healthz", corev1.Probe{PeriodSeconds: 20}); !reflect.DeepEqual(got, want) {
		t.Errorf("liveness probe without initialDelaySeconds = %s, want %s", toJSON(got), toJSON(want))
	}
}

// TestDefaultDeploymentsAddNothing: with the default values neither
// Deployment gains a field the strategy, revisionHistoryLimit,
// priorityClassName and extraContainers values can add, and the probes keep
// the timings the templates held before they were values: upgrading with
// the defaults rolls no pod.
func TestDefaultDeploymentsAddNothing(t *testing.T) {
	r := render(t, "defaults")
	for name, want := range map[string]struct{ liveness, readiness *corev1.Probe }{
		managerName: {httpProbe("/healthz", corev1.Probe{InitialDelaySeconds: 15, PeriodSeconds: 20}), httpProbe("/readyz", corev1.Probe{PeriodSeconds: 10})},
		webhookName: {httpProbe("/healthz", corev1.Probe{PeriodSeconds: 20}), httpProbe("/readyz", corev1.Probe{PeriodSeconds: 5})},
	} {
		d := decode[appsv1.Deployment](t, mustGet(t, r, "Deployment", name))
		if d.Spec.Strategy != (appsv1.DeploymentStrategy{}) || d.Spec.RevisionHistoryLimit != nil {
			t.Errorf("%s strategy = %s, revisionHistoryLimit = %v; want both left to the API server", name, toJSON(d.Spec.Strategy), d.Spec.RevisionHistoryLimit)
		}
		pod := d.Spec.Template.Spec
		if pod.PriorityClassName != "" || len(pod.Containers) != 1 {
			t.Errorf("%s pod: priorityClassName %q, %d containers; want none and one", name, pod.PriorityClassName, len(pod.Containers))
		}
		c := pod.Containers[0]
		if !reflect.DeepEqual(c.LivenessProbe, want.liveness) || !reflect.DeepEqual(c.ReadinessProbe, want.readiness) {
			t.Errorf("%s probes = %s and %s, want %s and %s", name, toJSON(c.LivenessProbe), toJSON(c.ReadinessProbe), toJSON(want.liveness), toJSON(want.readiness))
		}
	}
}
