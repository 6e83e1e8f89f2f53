// Package compat runs what the product puts into a cluster on the oldest
// kube-apiserver the chart claims (Chart.yaml's kubeVersion,
// controlplane.OldestKubernetesVersion; `make control-plane-oldest`), where
// every other suite runs controlplane.KubernetesVersion: the CRDs install
// and are established as written, their CEL rules judge with their exact
// messages, the chart's webhook configurations install and the webhook,
// called over TLS, defaults, warns and rejects, and every object the
// chart's values matrix renders is accepted.
package compat

import (
	"context"
	"fmt"
	"os"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/chart"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/webhookserver"
)

// crdNamespace holds the CRD cases of test/crdcases, which are the API
// server's verdicts alone: the webhooks' namespaceSelector leaves it out.
const crdNamespace = "crd-rules"

var (
	cfg *rest.Config
	cl  client.Client
	// mutating and validating are the chart's webhook configurations as
	// rendered, before envtest pointed them at the in-process webhook.
	mutating   *admissionregistrationv1.MutatingWebhookConfiguration
	validating *admissionregistrationv1.ValidatingWebhookConfiguration
)

func TestMain(m *testing.M) {
	wio, err := chartWebhooks()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: the chart's webhook configurations:", err)
		os.Exit(1)
	}
	os.Exit(controlplane.RunTests(m, controlplane.APIServerOptions{
		Oldest: true,
		// The chart's objects name cert-manager's and prometheus-operator's
		// kinds.
		CRDs:     controlplane.CRDs{Glance: true, CertManager: true, PrometheusOperator: true},
		Webhooks: wio,
	}, func(srv *controlplane.APIServer) (func(), error) {
		cfg = srv.Config
		var err error
		if cl, err = newClient(nil); err != nil {
			return nil, err
		}
		if err := cl.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: crdNamespace}}); err != nil {
			return nil, err
		}
		return webhookserver.Start(srv)
	}))
}

// webhookRelease and webhookValues are the release and values of the render
// whose webhook configurations the API server calls the in-process webhook
// with: the defaults, but for a namespaceSelector leaving crdNamespace out.
// The release is not the one TestChartObjectsAccepted applies, whose
// configurations of the same names would take the Service, keeping the URL
// envtest set: an object with both is invalid.
const webhookRelease = "compat"

var webhookValues = map[string]any{"webhook": map[string]any{"namespaceSelector": map[string]any{
	"matchExpressions": []any{map[string]any{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": []any{crdNamespace}}},
}}}

// chartWebhooks renders the chart for the oldest version and returns the
// envtest options that register its two webhook configurations with the
// API server, their Service pointed at the in-process webhook.
func chartWebhooks() (envtest.WebhookInstallOptions, error) {
	r, err := chart.Render(webhookValues, chart.Options{ReleaseName: webhookRelease, KubeVersion: chart.OldestKubeVersion()})
	if err != nil {
		return envtest.WebhookInstallOptions{}, err
	}
	mutating, validating = &admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{}
	for _, c := range []struct {
		kind string
		into any
	}{{"MutatingWebhookConfiguration", mutating}, {"ValidatingWebhookConfiguration", validating}} {
		objs := r.Select(c.kind)
		if len(objs) != 1 {
			return envtest.WebhookInstallOptions{}, fmt.Errorf("the chart renders %d %ss, want 1", len(objs), c.kind)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, c.into); err != nil {
			return envtest.WebhookInstallOptions{}, fmt.Errorf("%s: %w", c.kind, err)
		}
	}
	return webhookserver.InstallOptions(
		[]*admissionregistrationv1.MutatingWebhookConfiguration{mutating},
		[]*admissionregistrationv1.ValidatingWebhookConfiguration{validating}), nil
}

// newClient returns a client of the API server that knows the built-in
// kinds, the CRDs and the operator's kinds, and hands the warnings it gets
// to warnings when not nil.
func newClient(warnings rest.WarningHandler) (client.Client, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	c := rest.CopyConfig(cfg)
	if warnings != nil {
		c.WarningHandler = warnings
	}
	return client.New(c, client.Options{Scheme: scheme})
}
