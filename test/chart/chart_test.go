package chart

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/pkg/admission/webhook"
)

var (
	renders   = map[string]*Rendered{}
	rendersMu sync.Mutex
)

// render renders a matrix entry once per test binary.
func render(t *testing.T, name string) *Rendered {
	t.Helper()
	rendersMu.Lock()
	defer rendersMu.Unlock()
	if r, ok := renders[name]; ok {
		return r
	}
	values, ok := MatrixValues(name)
	if !ok {
		t.Fatalf("no matrix entry %q", name)
	}
	r, err := Render(values, Options{})
	if err != nil {
		t.Fatalf("render %s: %v", name, err)
	}
	renders[name] = r
	return r
}

// decode converts a rendered object into its typed form, failing on any
// field the type does not know: a misspelled field in a template fails here.
func decode[T any](t *testing.T, obj *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
	return out
}

func mustValues(t *testing.T, name string) map[string]any {
	t.Helper()
	v, ok := MatrixValues(name)
	if !ok {
		t.Fatalf("no matrix entry %q", name)
	}
	return v
}

func mustGet(t *testing.T, r *Rendered, kind, name string) *unstructured.Unstructured {
	t.Helper()
	obj := r.Get(kind, name)
	if obj == nil {
		var have []string
		for _, o := range r.Objects {
			have = append(have, o.GetKind()+"/"+o.GetName())
		}
		t.Fatalf("no %s %q rendered; have %v", kind, name, have)
	}
	return obj
}

const (
	managerName = "glance-operator-manager"
	webhookName = "glance-operator-webhook"
)

func TestDefaultsRenderTheWholeInstall(t *testing.T) {
	r := render(t, "defaults")
	for _, want := range []struct{ kind, name string }{
		{"Deployment", managerName}, {"Deployment", webhookName},
		{"PodDisruptionBudget", managerName}, {"PodDisruptionBudget", webhookName},
		{"Service", webhookName}, {"Service", webhookName + "-metrics"}, {"Service", managerName + "-metrics"},
		{"ServiceAccount", managerName}, {"ServiceAccount", webhookName},
		{"ClusterRole", managerName}, {"ClusterRoleBinding", managerName},
		{"ClusterRole", webhookName}, {"ClusterRoleBinding", webhookName},
		{"Role", managerName + "-leader-election"}, {"RoleBinding", managerName + "-leader-election"},
		{"ClusterRole", "glance-operator-view"}, {"ClusterRole", "glance-operator-edit"},
		{"MutatingWebhookConfiguration", "glance-operator"}, {"ValidatingWebhookConfiguration", "glance-operator"},
		{"Issuer", webhookName + "-selfsigned"}, {"Certificate", webhookName + "-ca"}, {"Issuer", webhookName + "-ca"},
		{"Certificate", webhookName + "-serving-cert"},
		{"CustomResourceDefinition", "glances.glance.openstack.c5c3.io"},
		{"CustomResourceDefinition", "glancebackends.glance.openstack.c5c3.io"},
	} {
		mustGet(t, r, want.kind, want.name)
	}
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule", "ConfigMap"} {
		if got := r.Select(kind); len(got) != 0 {
			t.Errorf("defaults render %d %s; monitoring is off by default", len(got), kind)
		}
	}
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		got := mustGet(t, r, kind, "glance-operator").GetAnnotations()["cert-manager.io/inject-ca-from"]
		if want := Namespace + "/" + webhookName + "-serving-cert"; got != want {
			t.Errorf("%s inject-ca-from = %q, want %q", kind, got, want)
		}
	}
	if !strings.Contains(r.Notes, webhookName+"."+Namespace+".svc") {
		t.Errorf("NOTES do not name the webhook Service:\n%s", r.Notes)
	}
}

func TestWorkloads(t *testing.T) {
	for _, m := range Matrix {
		name := m.Name
		t.Run(name, func(t *testing.T) {
			r := render(t, name)
			for _, component := range []string{managerName, webhookName} {
				d := decode[appsv1.Deployment](t, mustGet(t, r, "Deployment", component))
				pod := d.Spec.Template.Spec
				wantAccount, created := component, true
				if name == "service-accounts" {
					wantAccount, created = map[string]string{managerName: "platform-glance-operator", webhookName: "glance-admission"}[component], component == webhookName
				}
				if pod.ServiceAccountName != wantAccount {
					t.Errorf("%s runs as ServiceAccount %q, want %q", component, pod.ServiceAccountName, wantAccount)
				}
				if created {
					mustGet(t, r, "ServiceAccount", pod.ServiceAccountName)
				} else if r.Get("ServiceAccount", pod.ServiceAccountName) != nil {
					t.Errorf("%s's ServiceAccount %s rendered with serviceAccount.create false", component, pod.ServiceAccountName)
				}
				checkRestricted(t, component, pod)
				if len(pod.TopologySpreadConstraints) == 0 || pod.TopologySpreadConstraints[0].TopologyKey != "kubernetes.io/hostname" {
					t.Errorf("%s is not spread across nodes: %+v", component, pod.TopologySpreadConstraints)
				} else if sel := pod.TopologySpreadConstraints[0].LabelSelector; sel == nil || !reflect.DeepEqual(sel.MatchLabels, d.Spec.Selector.MatchLabels) {
					t.Errorf("%s spread selector %v does not select its pods %v", component, sel, d.Spec.Selector.MatchLabels)
				}
				c := pod.Containers[0]
				if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
					t.Errorf("%s readiness probe = %+v, want GET /readyz", component, c.ReadinessProbe)
				}
				if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
					t.Errorf("%s liveness probe = %+v, want GET /healthz", component, c.LivenessProbe)
				}
				if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
					t.Errorf("%s resources = %+v, want a CPU request and a memory limit", component, c.Resources)
				}
				if name == "disruption-budgets" {
					continue // TestDisruptionBudgets
				}
				pdb := decode[policyv1.PodDisruptionBudget](t, mustGet(t, r, "PodDisruptionBudget", component))
				if !reflect.DeepEqual(pdb.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels) {
					t.Errorf("%s PDB selects %v, the pods carry %v", component, pdb.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels)
				}
				replicas := *d.Spec.Replicas
				switch {
				case replicas > 1 && (pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1):
					t.Errorf("%s with %d replicas: PDB %+v, want minAvailable 1", component, replicas, pdb.Spec)
				case replicas == 1 && (pdb.Spec.MaxUnavailable == nil || pdb.Spec.MinAvailable != nil):
					t.Errorf("%s with 1 replica: PDB %+v, want maxUnavailable so that a drain never blocks", component, pdb.Spec)
				}
			}

			manager := decode[appsv1.Deployment](t, mustGet(t, r, "Deployment", managerName))
			args := manager.Spec.Template.Spec.Containers[0].Args
			timings := []string{"--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s"}
			if name == "leader-election-timings" {
				timings = []string{"--leader-elect-lease-duration=1m", "--leader-elect-renew-deadline=40s", "--leader-elect-retry-period=5s"}
			}
			for _, want := range append([]string{"--leader-elect=true", "--leader-election-namespace=" + Namespace, "--operator-namespace=" + Namespace, "--cluster-domain=cluster.local"}, timings...) {
				if !slices.Contains(args, want) {
					t.Errorf("manager args %v lack %s", args, want)
				}
			}
			registry := "ghcr.io"
			if name == "platform-overrides" {
				registry = "mirror.example.com/ghcr"
			}
			if img := manager.Spec.Template.Spec.Containers[0].Image; img != registry+"/c5c3/glance-operator:0.1.0" {
				t.Errorf("manager image = %q, want the repository at the chart's appVersion", img)
			}
			wantReplicas := int32(2)
			if name == "single-replica" {
				wantReplicas = 1
			}
			if *manager.Spec.Replicas != wantReplicas {
				t.Errorf("manager replicas = %d, want %d", *manager.Spec.Replicas, wantReplicas)
			}

			wh := decode[appsv1.Deployment](t, mustGet(t, r, "Deployment", webhookName))
			pod := wh.Spec.Template.Spec
			if img := pod.Containers[0].Image; img != registry+"/c5c3/glance-webhook:0.1.0" {
				t.Errorf("webhook image = %q", img)
			}
			certDir := ""
			for _, a := range pod.Containers[0].Args {
				if v, ok := strings.CutPrefix(a, "--cert-dir="); ok {
					certDir = v
				}
			}
			mounted := ""
			for _, m := range pod.Containers[0].VolumeMounts {
				if m.MountPath == certDir {
					mounted = m.Name
				}
			}
			wantSecret := webhookName + "-serving-cert"
			if name == "cert-manager-off" {
				wantSecret = "glance-webhook-tls"
			}
			var secret string
			for _, v := range pod.Volumes {
				if v.Name == mounted && v.Secret != nil {
					secret = v.Secret.SecretName
				}
			}
			if certDir == "" || secret != wantSecret {
				t.Errorf("webhook --cert-dir %q holds Secret %q, want %q", certDir, secret, wantSecret)
			}

			svc := decode[corev1.Service](t, mustGet(t, r, "Service", webhookName))
			if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.StrVal != "https" {
				t.Errorf("webhook Service ports = %+v, want 443 → https", svc.Spec.Ports)
			}
			if !reflect.DeepEqual(svc.Spec.Selector, wh.Spec.Selector.MatchLabels) {
				t.Errorf("webhook Service selects %v, the pods carry %v", svc.Spec.Selector, wh.Spec.Selector.MatchLabels)
			}
			var httpsPort int32
			for _, p := range pod.Containers[0].Ports {
				if p.Name == "https" {
					httpsPort = p.ContainerPort
				}
			}
			wantPort := int32(9443)
			if name == "platform-overrides" {
				wantPort = 10260
			}
			if httpsPort != wantPort || !slices.Contains(pod.Containers[0].Args, fmt.Sprintf("--port=%d", wantPort)) {
				t.Errorf("webhook listens on %d (args %v), want %d", httpsPort, pod.Containers[0].Args, wantPort)
			}
		})
	}
}

// checkRestricted holds a pod to the restricted Pod Security Standard.
func checkRestricted(t *testing.T, component string, pod corev1.PodSpec) {
	t.Helper()
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s pod security context = %+v, want non-root with RuntimeDefault seccomp", component, psc)
	}
	if psc != nil && (psc.RunAsUser == nil || *psc.RunAsUser != 65532) {
		t.Errorf("%s runs as user %v, want the images' 65532", component, psc.RunAsUser)
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		switch {
		case sc == nil:
			t.Errorf("%s container %s has no security context", component, c.Name)
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			t.Errorf("%s container %s allows privilege escalation", component, c.Name)
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			t.Errorf("%s container %s has a writable root filesystem", component, c.Name)
		case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
			t.Errorf("%s container %s capabilities = %+v, want drop ALL", component, c.Name, sc.Capabilities)
		}
	}
}

func TestWebhookConfigurationsAreTheCodes(t *testing.T) {
	cases := map[string]struct {
		values   map[string]any
		caBundle string
		selector *metav1.LabelSelector
		timeout  int32
	}{
		"defaults":         {values: mustValues(t, "defaults"), timeout: webhook.DefaultTimeoutSeconds},
		"cert-manager-off": {values: mustValues(t, "cert-manager-off"), caBundle: "CA bundle", timeout: webhook.DefaultTimeoutSeconds},
		"namespaced": {values: mustValues(t, "namespaced"), timeout: webhook.DefaultTimeoutSeconds, selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"openstack", "tenant-b"}}},
		}},
		"timeout and selector": {
			values: map[string]any{"webhook": map[string]any{
				"timeoutSeconds":    5,
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{"glance.example.com/managed": "true"}},
			}},
			timeout:  5,
			selector: &metav1.LabelSelector{MatchLabels: map[string]string{"glance.example.com/managed": "true"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r, err := Render(tc.values, Options{})
			if err != nil {
				t.Fatal(err)
			}
			// The code's configurations, reached through the chart's Service.
			wantMutating, wantValidating := webhook.Configurations(func(path string) admissionregistrationv1.WebhookClientConfig {
				return admissionregistrationv1.WebhookClientConfig{
					Service:  &admissionregistrationv1.ServiceReference{Namespace: Namespace, Name: webhookName, Path: ptr.To(path), Port: ptr.To[int32](443)},
					CABundle: []byte(tc.caBundle),
				}
			})
			if tc.caBundle == "" {
				for i := range wantMutating.Webhooks {
					wantMutating.Webhooks[i].ClientConfig.CABundle = nil
				}
				for i := range wantValidating.Webhooks {
					wantValidating.Webhooks[i].ClientConfig.CABundle = nil
				}
			}
			for i := range wantMutating.Webhooks {
				wantMutating.Webhooks[i].TimeoutSeconds = ptr.To(tc.timeout)
				wantMutating.Webhooks[i].NamespaceSelector = tc.selector
			}
			for i := range wantValidating.Webhooks {
				wantValidating.Webhooks[i].TimeoutSeconds = ptr.To(tc.timeout)
				wantValidating.Webhooks[i].NamespaceSelector = tc.selector
			}
			mutating := decode[admissionregistrationv1.MutatingWebhookConfiguration](t, mustGet(t, r, "MutatingWebhookConfiguration", "glance-operator"))
			validating := decode[admissionregistrationv1.ValidatingWebhookConfiguration](t, mustGet(t, r, "ValidatingWebhookConfiguration", "glance-operator"))
			if !reflect.DeepEqual(mutating.Webhooks, wantMutating.Webhooks) {
				t.Errorf("mutating webhooks differ from webhook.Configurations():\n got %s\nwant %s", toJSON(mutating.Webhooks), toJSON(wantMutating.Webhooks))
			}
			if !reflect.DeepEqual(validating.Webhooks, wantValidating.Webhooks) {
				t.Errorf("validating webhooks differ from webhook.Configurations():\n got %s\nwant %s", toJSON(validating.Webhooks), toJSON(wantValidating.Webhooks))
			}
		})
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestDisruptionBudgets: a component's budget can go, or take
// maxUnavailable and an eviction policy; minAvailable and maxUnavailable
// together are refused.
func TestDisruptionBudgets(t *testing.T) {
	r := render(t, "disruption-budgets")
	if r.Get("PodDisruptionBudget", managerName) != nil {
		t.Error("the manager's PodDisruptionBudget rendered with podDisruptionBudget.enabled false")
	}
	pdb := decode[policyv1.PodDisruptionBudget](t, mustGet(t, r, "PodDisruptionBudget", webhookName)).Spec
	if pdb.MinAvailable != nil || pdb.MaxUnavailable == nil || pdb.MaxUnavailable.String() != "50%" ||
		pdb.UnhealthyPodEvictionPolicy == nil || *pdb.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow {
		t.Errorf("webhook PDB %+v", pdb)
	}
	_, err := Render(map[string]any{"webhook": map[string]any{"podDisruptionBudget": map[string]any{"minAvailable": 1, "maxUnavailable": 1}}}, Options{})
	if err == nil || !strings.Contains(err.Error(), "webhook.podDisruptionBudget: set minAvailable or maxUnavailable, not both") {
		t.Errorf("both set: %v", err)
	}
}
