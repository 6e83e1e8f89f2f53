// Package admission runs the admission server against a real kube-apiserver
// that calls it over TLS: exact rejections and warnings as clients see them,
// kubectl's view of both, and the differential test holding the offline
// `glance-webhook check` to the cluster's verdicts.
package admission

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/go-logr/logr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/admission/webhook"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/operatortest"
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
	// envtest joins host:port and the service path with a slash of its own.
	mutating, validating := webhook.Configurations(func(path string) admissionregistrationv1.WebhookClientConfig {
		p := strings.TrimPrefix(path, "/")
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Name: "glance-webhook", Namespace: "glance-system", Path: &p}}
	})
	os.Exit(controlplane.RunTests(m, controlplane.APIServerOptions{
		CRDs: controlplane.CRDs{Glance: true},
		Webhooks: envtest.WebhookInstallOptions{
			MutatingWebhooks:   []*admissionregistrationv1.MutatingWebhookConfiguration{mutating},
			ValidatingWebhooks: []*admissionregistrationv1.ValidatingWebhookConfiguration{validating},
		},
	}, startWebhookServer))
}

// startWebhookServer runs the admission server on the address and with the
// certificates envtest registered, until cleanup.
func startWebhookServer(srv *controlplane.APIServer) (func(), error) {
	cfg = srv.Config
	wio := srv.Env.WebhookInstallOptions
	ports, err := controlplane.FreePorts(1)
	if err != nil {
		return nil, err
	}
	healthAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- webhook.RunServer(ctx, cfg, webhook.ServerOptions{
			BindAddress:    wio.LocalServingHost,
			Port:           wio.LocalServingPort,
			CertDir:        wio.LocalServingCertDir,
			HealthAddress:  healthAddr,
			MetricsAddress: webhook.DisabledAddress,
		}, logr.Discard())
	}()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "webhook server:", err)
		}
	}
	if err := waitReady(ctx, "http://"+healthAddr+"/readyz", done); err != nil {
		cancel()
		return nil, fmt.Errorf("webhook server: %w", err)
	}
	return stop, nil
}

func waitReady(ctx context.Context, url string, done <-chan error) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-done:
			return false, fmt.Errorf("exited: %v", err)
		default:
		}
		resp, err := http.Get(url) //nolint:noctx // loopback readiness poll
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
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
