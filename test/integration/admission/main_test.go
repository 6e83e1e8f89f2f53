// Package admission runs the admission server against a real kube-apiserver
// that calls it over TLS: exact rejections and warnings as clients see them,
// kubectl's view of both, and the differential test holding the offline
// `glance-webhook check` to the cluster's verdicts.
package admission

import (
	"os"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/admission/webhook"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/operatortest"
	"github.com/c5c3/glance-operator/test/webhookserver"
)

var (
	cfg    *rest.Config
	scheme = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	mutating, validating := webhook.Configurations(func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Name: "glance-webhook", Namespace: "glance-system", Path: &path}}
	})
	os.Exit(controlplane.RunTests(m, controlplane.APIServerOptions{
		CRDs: controlplane.CRDs{Glance: true},
		Webhooks: webhookserver.InstallOptions(
			[]*admissionregistrationv1.MutatingWebhookConfiguration{mutating},
			[]*admissionregistrationv1.ValidatingWebhookConfiguration{validating}),
	}, func(srv *controlplane.APIServer) (func(), error) {
		cfg = srv.Config
		return webhookserver.Start(srv)
	}))
}

// newClient returns a client whose warnings land in the recorder.
func newClient(t testing.TB) (client.Client, *operatortest.WarningRecorder) {
	t.Helper()
	rec := &operatortest.WarningRecorder{}
	c := rest.CopyConfig(cfg)
	c.WarningHandler = rec
	cl, err := client.New(c, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl, rec
}
