package stories

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/operator"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/fixtures"
	"github.com/c5c3/glance-operator/test/operatortest"
	"github.com/c5c3/glance-operator/test/realnode"
)

// TestChartOnRealNode: the chart that setUp released to the registry with
// make release and upgraded to with helm from oci:// (from the release the
// operator upgrade starts from), default values: the
// manager and the webhook run the chart's
// images on the node under the restricted security context and the
// chart's probes, and the API server calls the webhook through its
// Service, over the certificate cert-manager (a pod) issued, trusting the
// CA cainjector injected. Not parallel: it sees the chart as upgraded,
// before the failover story deletes the leading manager.
func TestChartOnRealNode(t *testing.T) {
	ctx := t.Context()
	t.Logf("make release (both images, their SBOMs, the chart) to the registry: %s", env.Released.Round(100*time.Millisecond))
	t.Logf("helm install %s (the release the upgrade starts from) to both Deployments available: %s; helm upgrade to %s to both rolled out: %s",
		upgrade.previous.Chart, installed.Round(100*time.Millisecond), env.Release.Chart, upgrade.rolledOut.Round(100*time.Millisecond))

	t.Run("pods-run-the-pushed-images", func(t *testing.T) {
		for name, ref := range map[string]string{realnode.ManagerDeployment: env.Images.Operator, realnode.WebhookDeployment: env.Images.Webhook} {
			pods := env.RunningPods(t, realnode.OperatorNamespace, name)
			if len(pods) != 2 {
				t.Errorf("%s has %d pods, want the chart's 2", name, len(pods))
			}
			_, digest, _ := strings.Cut(ref, "@")
			for _, p := range pods {
				// The released chart's defaults: the image index by digest.
				if got := p.Spec.Containers[0].Image; got != ref {
					t.Errorf("pod %s runs %s, want the released %s", p.Name, got, ref)
				}
				if p.Spec.NodeName != controlplane.NodeName {
					t.Errorf("pod %s on node %q", p.Name, p.Spec.NodeName)
				}
				for _, s := range p.Status.ContainerStatuses {
					if !strings.HasSuffix(s.ImageID, "@"+digest) {
						t.Errorf("pod %s container %s ran %q, want %s", p.Name, s.Name, s.ImageID, ref)
					}
					if !s.Ready || s.RestartCount != 0 {
						t.Errorf("pod %s container %s: ready=%v restarts=%d", p.Name, s.Name, s.Ready, s.RestartCount)
					}
				}
			}
		}
	})

	t.Run("webhook-called-through-its-service", func(t *testing.T) {
		// A warning comes only from the validating webhook.
		warnings := &operatortest.WarningRecorder{}
		cfg := rest.CopyConfig(env.Cluster.Config)
		cfg.WarningHandler = warnings
		scheme, err := operator.NewScheme()
		if err != nil {
			t.Fatal(err)
		}
		wcl, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		ns := env.Namespace(t)
		g := fixtures.NewGlance(ns, "glance", "2025.2")
		g.Spec.APIServer = &v1alpha1.APIServerSpec{UWSGI: &v1alpha1.UWSGISpec{}}
		if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			err := wcl.Create(ctx, g.DeepCopy(), client.DryRunAll)
			if err != nil {
				t.Logf("dry-run create: %v", err)
			}
			return err == nil, nil
		}); err != nil {
			t.Fatalf("a dry-run create never passed the webhooks: %v", err)
		}
		if !hasPrefix(warnings.Texts(), "spec.apiServer.uwsgi has no effect on 2025.2") {
			t.Errorf("no admission warning from the webhook; warnings: %q", warnings.Texts())
		}
	})
}

func hasPrefix(texts []string, prefix string) bool {
	for _, t := range texts {
		if strings.HasPrefix(t, prefix) {
			return true
		}
	}
	return false
}
