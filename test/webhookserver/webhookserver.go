// Package webhookserver runs glance-webhook's admission server in-process
// behind an envtest API server that calls it over TLS, for the suites that
// check admission as clients see it (test/integration/admission,
// test/compat).
package webhookserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/c5c3/glance-operator/pkg/admission/webhook"
	"github.com/c5c3/glance-operator/test/controlplane"
)

// InstallOptions registers webhook configurations that call a Service with
// the API server envtest starts: envtest points each webhook at its own
// loopback address instead, joining host:port and the Service's path with
// a slash of its own, so the path's leading slash is dropped here. The
// configurations are copied, not changed.
func InstallOptions(mutating []*admissionregistrationv1.MutatingWebhookConfiguration, validating []*admissionregistrationv1.ValidatingWebhookConfiguration) envtest.WebhookInstallOptions {
	var opts envtest.WebhookInstallOptions
	for _, m := range mutating {
		m = m.DeepCopy()
		for i := range m.Webhooks {
			trimServicePath(&m.Webhooks[i].ClientConfig)
		}
		opts.MutatingWebhooks = append(opts.MutatingWebhooks, m)
	}
	for _, v := range validating {
		v = v.DeepCopy()
		for i := range v.Webhooks {
			trimServicePath(&v.Webhooks[i].ClientConfig)
		}
		opts.ValidatingWebhooks = append(opts.ValidatingWebhooks, v)
	}
	return opts
}

func trimServicePath(cc *admissionregistrationv1.WebhookClientConfig) {
	if cc.Service != nil && cc.Service.Path != nil {
		p := strings.TrimPrefix(*cc.Service.Path, "/")
		cc.Service.Path = &p
	}
}

// Start runs the admission server on the address and with the
// certificates envtest registered with srv, and returns once it is ready;
// stop stops it.
func Start(srv *controlplane.APIServer) (stop func(), err error) {
	wio := srv.Env.WebhookInstallOptions
	ports, err := controlplane.FreePorts(1)
	if err != nil {
		return nil, err
	}
	healthAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- webhook.RunServer(ctx, srv.Config, webhook.ServerOptions{
			BindAddress:    wio.LocalServingHost,
			Port:           wio.LocalServingPort,
			CertDir:        wio.LocalServingCertDir,
			HealthAddress:  healthAddr,
			MetricsAddress: webhook.DisabledAddress,
		}, logr.Discard())
	}()
	stop = func() {
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
