package realnode

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/operator"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/fixtures"
	"github.com/c5c3/glance-operator/test/operatortest"
)

// TestChartOnRealNode: `helm install` of the chart, default values but the
// images: the manager and the webhook run the chart's images on the node
// under the restricted security context and the chart's probes,
// cert-manager (a pod) issues the webhook's certificate and cainjector
// injects its CA, the API server calls the webhook through its Service, one
// of the two managers leads, and a new leader takes over when the leading
// pod is deleted.
func TestChartOnRealNode(t *testing.T) {
	ctx := t.Context()
	took, err := env.InstallChart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("helm install to both Deployments available: %s", took.Round(100*time.Millisecond))

	t.Run("pods-run-the-pushed-images", func(t *testing.T) {
		for name, ref := range map[string]string{ManagerDeployment: env.Images.Operator, WebhookDeployment: env.Images.Webhook} {
			pods := env.RunningPods(t, OperatorNamespace, name)
			if len(pods) != 2 {
				t.Errorf("%s has %d pods, want the chart's 2", name, len(pods))
			}
			_, digest, _ := strings.Cut(ref, "@")
			for _, p := range pods {
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
		// A warning comes only from the validating webhook: the API server
		// reached it through the chart's Service, over the certificate
		// cert-manager issued, trusting the CA cainjector injected.
		warnings := &operatortest.WarningRecorder{}
		cfg := rest.CopyConfig(env.Cluster.Config)
		cfg.WarningHandler = warnings
		scheme, err := operator.NewScheme()
		if err != nil {
			t.Fatal(err)
		}
		cl, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		ns := env.Namespace(t)
		g := fixtures.NewGlance(ns, "glance", "2025.2")
		g.Spec.APIServer = &v1alpha1.APIServerSpec{UWSGI: &v1alpha1.UWSGISpec{}}
		if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			err := cl.Create(ctx, g.DeepCopy(), client.DryRunAll)
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

	t.Run("leader-election-and-failover", func(t *testing.T) {
		leader := env.LeaseHolder(t, "")
		pods := env.RunningPods(t, OperatorNamespace, ManagerDeployment)
		var standby string
		for _, p := range pods {
			if !strings.HasPrefix(leader, p.Name+"_") {
				standby = p.Name
			}
		}
		if standby == "" || len(pods) != 2 {
			t.Fatalf("lease holder %q is not one of two manager pods %v", leader, podNames(pods))
		}
		leaderPod, _, _ := strings.Cut(leader, "_")
		start := time.Now()
		if err := env.CS.CoreV1().Pods(OperatorNamespace).Delete(ctx, leaderPod, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The deleted leader releases the lease on SIGTERM; the standby or
		// the ReplicaSet's replacement, whichever asks first, takes it.
		next := env.LeaseHolder(t, leader)
		if strings.HasPrefix(next, leaderPod+"_") {
			t.Errorf("after deleting %s it still holds the lease (%q)", leaderPod, next)
		}
		nextPod, _, _ := strings.Cut(next, "_")
		if _, err := env.CS.CoreV1().Pods(OperatorNamespace).Get(ctx, nextPod, metav1.GetOptions{}); err != nil {
			t.Errorf("the lease went to %q, not a pod of the chart: %v", next, err)
		}
		t.Logf("failover: %s deleted, %s leads %s later (the standby was %s)", leaderPod, nextPod, time.Since(start).Round(100*time.Millisecond), standby)
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

func podNames(pods []corev1.Pod) []string {
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}
