package chart

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestPlatformOverrides: an air-gapped mirror replaces both images'
// registry and its pull Secret reaches both components, extra volumes, mounts and envFrom reach the manager, and a
// host-network webhook resolves cluster names.
func TestPlatformOverrides(t *testing.T) {
	r := render(t, "platform-overrides")
	manager := decode[appsv1.Deployment](t, mustGet(t, r, "Deployment", managerName)).Spec.Template.Spec
	webhook := decode[appsv1.Deployment](t, mustGet(t, r, "Deployment", webhookName)).Spec.Template.Spec
	pullSecrets := func(pod corev1.PodSpec) (names []string) {
		for _, s := range pod.ImagePullSecrets {
			names = append(names, s.Name)
		}
		return names
	}

	if got := manager.Containers[0].Image; got != "mirror.example.com/ghcr/c5c3/glance-operator:0.1.0" {
		t.Errorf("manager image %s", got)
	}
	if got := webhook.Containers[0].Image; got != "mirror.example.com/ghcr/c5c3/glance-webhook:0.1.0" {
		t.Errorf("webhook image %s", got)
	}
	if got := pullSecrets(manager); !slices.Equal(got, []string{"mirror-pull", "manager-pull"}) {
		t.Errorf("manager pull Secrets %v", got)
	}
	if got := pullSecrets(webhook); !slices.Equal(got, []string{"mirror-pull"}) {
		t.Errorf("webhook pull Secrets %v", got)
	}

	c := manager.Containers[0]
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef == nil || c.EnvFrom[0].ConfigMapRef.Name != "proxy-env" {
		t.Errorf("manager envFrom %+v", c.EnvFrom)
	}
	if !slices.ContainsFunc(manager.Volumes, func(v corev1.Volume) bool { return v.Name == "ca" && v.ConfigMap != nil }) ||
		!slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "ca" && m.MountPath == "/etc/ssl/corporate" }) {
		t.Errorf("manager volumes %+v, mounts %+v", manager.Volumes, c.VolumeMounts)
	}

	if !webhook.HostNetwork || webhook.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("webhook hostNetwork %v, dnsPolicy %q", webhook.HostNetwork, webhook.DNSPolicy)
	}
	if !slices.Contains(webhook.Containers[0].Args, "--port=10260") {
		t.Errorf("webhook args %v", webhook.Containers[0].Args)
	}

	// The defaults render none of it.
	d := decode[appsv1.Deployment](t, mustGet(t, render(t, "defaults"), "Deployment", webhookName)).Spec.Template.Spec
	if d.HostNetwork || d.DNSPolicy != "" || len(d.ImagePullSecrets) != 0 {
		t.Errorf("default webhook pod: hostNetwork %v, dnsPolicy %q, pull Secrets %v", d.HostNetwork, d.DNSPolicy, d.ImagePullSecrets)
	}

	// extraObjects render, a string through tpl.
	if ca := mustGet(t, r, "ConfigMap", "corporate-ca"); ca.GetNamespace() != Namespace {
		t.Errorf("extraObjects object's namespace %q, want it through tpl", ca.GetNamespace())
	}
	if cm := mustGet(t, r, "ConfigMap", ReleaseName+"-proxy-env"); cm.Object["data"].(map[string]any)["HTTPS_PROXY"] != "http://proxy.example.com:3128" {
		t.Errorf("extraObjects string rendered %v", cm.Object)
	}
}

// TestServiceMonitorKnobs: the ServiceMonitors carry the annotations and
// each endpoint the scrape timeout and both relabelings.
func TestServiceMonitorKnobs(t *testing.T) {
	r := render(t, "monitoring")
	monitors := r.Select("ServiceMonitor")
	if len(monitors) != 2 {
		t.Fatalf("%d ServiceMonitors", len(monitors))
	}
	for _, sm := range monitors {
		if sm.GetAnnotations()["example.com/owner"] != "storage" {
			t.Errorf("ServiceMonitor %s annotations %v", sm.GetName(), sm.GetAnnotations())
		}
		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		if len(endpoints) != 1 {
			t.Fatalf("ServiceMonitor %s endpoints %v", sm.GetName(), endpoints)
		}
		ep := endpoints[0].(map[string]any)
		relabelings, _ := ep["relabelings"].([]any)
		metricRelabelings, _ := ep["metricRelabelings"].([]any)
		if ep["scrapeTimeout"] != "10s" || len(relabelings) != 1 || len(metricRelabelings) != 1 {
			t.Errorf("ServiceMonitor %s endpoint %v", sm.GetName(), ep)
		}
	}
	for _, sm := range render(t, "defaults").Select("ServiceMonitor") {
		t.Errorf("defaults render ServiceMonitor %s", sm.GetName())
	}
}
