package install

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/chart"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/operatortest"
	"github.com/c5c3/glance-operator/test/stack"
)

const servingCertificate = "glance-operator-webhook-serving-cert"

// TestInstall: the Certificate turns Ready, its Secret exists, both webhook
// configurations carry the CA cainjector injected, `kubectl apply` prints
// the admission warnings, and the sample Glance turns Ready under the
// chart's RBAC.
func TestInstall(t *testing.T) {
	ctx := context.Background()
	cert := &unstructured.Unstructured{}
	cert.SetAPIVersion("cert-manager.io/v1")
	cert.SetKind("Certificate")
	if err := cl.Get(ctx, client.ObjectKey{Namespace: stack.OperatorNamespace, Name: servingCertificate}, cert); err != nil {
		t.Fatal(err)
	}
	if !certificateReady(cert) {
		t.Errorf("Certificate %s is not Ready: %v", servingCertificate, cert.Object["status"])
	}
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	var secret corev1.Secret
	if err := cl.Get(ctx, client.ObjectKey{Namespace: stack.OperatorNamespace, Name: secretName}, &secret); err != nil {
		t.Fatalf("the serving Secret %s: %v", secretName, err)
	}
	ca := secret.Data["ca.crt"]
	if len(ca) == 0 || len(secret.Data[corev1.TLSCertKey]) == 0 {
		t.Fatalf("the serving Secret holds %d bytes of CA and %d of certificate", len(ca), len(secret.Data[corev1.TLSCertKey]))
	}
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	for _, obj := range []client.Object{mutating, validating} {
		if err := cl.Get(ctx, client.ObjectKey{Name: chart.ReleaseName}, obj); err != nil {
			t.Fatal(err)
		}
	}
	var bundles [][]byte
	for _, w := range mutating.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
		if w.ClientConfig.Service == nil || w.ClientConfig.URL != nil {
			t.Errorf("mutating webhook %s is not reached through the chart's Service: %+v", w.Name, w.ClientConfig)
		}
	}
	for _, w := range validating.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
		if w.ClientConfig.Service == nil || w.ClientConfig.URL != nil {
			t.Errorf("validating webhook %s is not reached through the chart's Service: %+v", w.Name, w.ClientConfig)
		}
	}
	for i, b := range bundles {
		if !bytes.Equal(b, ca) {
			t.Errorf("webhook %d caBundle is not the serving certificate's CA (%d bytes, want %d)", i, len(b), len(ca))
		}
	}

	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := controlplane.ApplyFiles(ctx, stk.Config, filepath.Join(root, "test", "samples", "dependencies.yaml")); err != nil {
		t.Fatal(err)
	}
	sample, err := os.ReadFile(filepath.Join(root, "test", "samples", "glance.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// A warning only the webhook gives: a uWSGI knob on an eventlet release.
	manifest := strings.Replace(string(sample), "  deployment:\n    replicas: 2\n", "  deployment:\n    replicas: 2\n  apiServer:\n    uwsgi: {threads: 2}\n", 1)
	if manifest == string(sample) {
		t.Fatal("the sample Glance changed shape: no spec.deployment.replicas to add the uWSGI knob after")
	}
	start := time.Now()
	out, err := controlplane.Kubectl(t, stk.Config, manifest, "apply", "-f", "-")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "Warning: spec.apiServer.uwsgi has no effect on 2025.2") {
		t.Errorf("kubectl apply printed no admission warning:\n%s", out)
	}
	operatortest.Eventually(t, "the sample Glance to turn Ready under the chart's RBAC", func() error {
		var g v1alpha1.Glance
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "openstack", Name: "glance"}, &g); err != nil {
			return err
		}
		for _, c := range g.Status.Conditions {
			if c.Type == v1alpha1.ConditionReady && c.Status == metav1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", g.Status.Conditions)
	}, operatortest.Within(3*time.Minute), operatortest.Every(time.Second), operatortest.Unless(stk.Check))
	t.Logf("helm install to serving: %s; kubectl apply to Ready: %s", installed.Round(time.Second), time.Since(start).Round(time.Second))
}

func certificateReady(cert *unstructured.Unstructured) bool {
	conditions, _, _ := unstructured.NestedSlice(cert.Object, "status", "conditions")
	for _, raw := range conditions {
		c, _ := raw.(map[string]any)
		if c["type"] == "Ready" && c["status"] == "True" {
			return true
		}
	}
	return false
}
