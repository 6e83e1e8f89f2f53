package stack

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/admission/webhook"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/operatortest"
)

// startWebhook issues a serving certificate for 127.0.0.1, runs
// glance-webhook serve as its ServiceAccount, registers both webhook
// configurations with the API server by URL (with the admin client cl), and
// returns once the API server calls the webhook.
func (s *Stack) startWebhook(ctx context.Context, bin string, cl client.Client) error {
	certDir := filepath.Join(s.Dir, "webhook-certs")
	caPEM, err := controlplane.WriteServingCertificate(certDir, "glance-webhook", "127.0.0.1", "localhost")
	if err != nil {
		return fmt.Errorf("webhook serving certificate: %w", err)
	}
	port, err := s.runWebhook(ctx, bin, []string{"serve"}, certDir, 0)
	if err != nil {
		return err
	}
	s.webhookPort, s.webhookCertDir = port, certDir
	mutating, validating := webhook.Configurations(func(path string) admissionregistrationv1.WebhookClientConfig {
		url := fmt.Sprintf("https://127.0.0.1:%d%s", port, path)
		return admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM}
	})
	for _, obj := range []client.Object{mutating, validating} {
		if err := cl.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("register %T: %w", obj, err)
		}
	}
	return s.waitWebhookCalled(ctx, cl)
}

// runWebhook runs glance-webhook with args (a chart Deployment's, or just
// "serve") as its ServiceAccount, serving the certificate in certDir on a
// free loopback port, or on port when it is not 0 (the port the webhook
// configurations name), and returns that port once /readyz passes.
func (s *Stack) runWebhook(ctx context.Context, bin string, args []string, certDir string, port int) (int, error) {
	ports, err := controlplane.FreePorts(3)
	if err != nil {
		return 0, err
	}
	health, metrics := ports[1], ports[2]
	if port == 0 {
		port = ports[0]
	}
	s.WebhookMetricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics)
	name := s.processName("glance-webhook")
	if s.webhookRestarts > 0 {
		name = fmt.Sprintf("%s-restart-%d", name, s.webhookRestarts)
	}
	webhook, err := controlplane.StartProcess(s.Dir, name, bin, append(withFlags(args,
		"--kubeconfig="+s.WebhookKubeconfig,
		"--cert-dir="+certDir,
		"--bind-address=127.0.0.1",
		"--port="+strconv.Itoa(port),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", health),
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metrics),
	), s.logLevelFlag...)...)
	s.mu.Lock()
	s.webhook = webhook
	s.mu.Unlock()
	if s.webhook != nil {
		s.WebhookLog = s.webhook.LogPath()
		s.binaryLogs = append(s.binaryLogs, s.WebhookLog)
	}
	if err != nil {
		return 0, err
	}
	return port, s.poll(ctx, "glance-webhook /readyz", time.Minute, func(ctx context.Context) (bool, error) {
		return getOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", health))
	})
}

// StopWebhook stops glance-webhook with SIGTERM, as an outage of every
// webhook pod would: the API server fails the calls its configurations
// make. Check no longer reports it; StartWebhook brings it back.
func (s *Stack) StopWebhook() error {
	if s.webhookPort == 0 {
		return errors.New("StopWebhook needs a stack that registers the webhook by URL, not a Helm install")
	}
	s.mu.Lock()
	webhook := s.webhook
	s.webhook = nil
	s.mu.Unlock()
	if webhook == nil {
		return errors.New("glance-webhook is not running")
	}
	return webhook.Stop(30 * time.Second)
}

// StartWebhook starts glance-webhook after StopWebhook, on the port the
// webhook configurations name, and returns once the API server calls it.
func (s *Stack) StartWebhook(ctx context.Context) error {
	cl, err := operatortest.NewClient(s.Config)
	if err != nil {
		return err
	}
	s.webhookRestarts++
	if _, err := s.runWebhook(ctx, s.bins.webhook, []string{"serve"}, s.webhookCertDir, s.webhookPort); err != nil {
		return err
	}
	return s.waitWebhookCalled(ctx, cl)
}

// waitWebhookCalled returns once the API server calls the webhook: it picks
// configurations up asynchronously.
func (s *Stack) waitWebhookCalled(ctx context.Context, cl client.Client) error {
	return s.poll(ctx, "the API server to call glance-webhook", time.Minute, func(ctx context.Context) (bool, error) {
		return true, DryRunThroughWebhooks(ctx, cl, OperatorNamespace, "webhook-probe")
	})
}

// DryRunThroughWebhooks creates a Glance with dry run: both webhooks judge
// it and nothing is stored. It comes back with a default only the mutating
// webhook sets, or the call did not reach the webhooks.
func DryRunThroughWebhooks(ctx context.Context, cl client.Client, namespace, name string) error {
	g := webhookProbe(namespace, name)
	if err := cl.Create(ctx, g, client.DryRunAll); err != nil {
		return err
	}
	if g.Spec.Deployment == nil || len(g.Spec.Deployment.Resources.Requests) == 0 {
		return fmt.Errorf("the dry-run Glance %s came back without the webhook's default resources", name)
	}
	return nil
}

// withFlags returns args with each --name=value of set replacing the flag
// of that name, or appended: a chart Deployment's arguments with the
// addresses and paths of a process on this machine.
func withFlags(args []string, set ...string) []string {
	names := map[string]bool{}
	for _, f := range set {
		name, _, _ := strings.Cut(f, "=")
		names[name] = true
	}
	var out []string
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if !names[name] {
			out = append(out, a)
		}
	}
	return append(out, set...)
}

// webhookProbe is a valid Glance without spec.deployment: the webhook, not
// the CRD schema, defaults spec.deployment.resources.
func webhookProbe(namespace, name string) *v1alpha1.Glance {
	return &v1alpha1.Glance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1alpha1.GlanceSpec{
			OpenStackRelease: "2025.2",
			Image:            v1alpha1.ImageSpec{Repository: "registry.example.com/openstack/glance", Tag: "2025.2"},
			Database: v1alpha1.DatabaseSpec{
				Host:      "db.example.com",
				Database:  "glance",
				SecretRef: v1alpha1.SecretKeySelector{Name: "glance-db"},
			},
			Cache:            &v1alpha1.CacheSpec{Servers: []string{"memcached:11211"}},
			KeystoneEndpoint: "http://keystone:5000/v3",
			ServiceUser:      v1alpha1.ServiceUserSpec{SecretRef: v1alpha1.SecretKeySelector{Name: "glance-service-user"}},
		},
	}
}
