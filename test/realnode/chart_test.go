package realnode

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/hack/images/ociimage"
	"github.com/c5c3/glance-operator/pkg/operator"
	"github.com/c5c3/glance-operator/test/chart"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/fixtures"
	"github.com/c5c3/glance-operator/test/operatortest"
)

// operatorNamespace is where the suite installs the chart.
const operatorNamespace = "glance-system"

// The chart's Deployments, for release chart.ReleaseName.
const (
	managerDeployment = chart.ReleaseName + "-manager"
	webhookDeployment = chart.ReleaseName + "-webhook"
)

// productImages are the chart's images, as `make images` builds them,
// pushed to the registry: the reference by digest of each binary.
type productImages struct{ operator, webhook string }

// pushProductImages builds both images with `make images`' builder and
// pushes them under their published repository names.
func pushProductImages(ctx context.Context, dir string) (productImages, error) {
	results, err := ociimage.Build(ctx, ociimage.Options{OutDir: filepath.Join(dir, "images", "product")})
	if err != nil {
		return productImages{}, err
	}
	var imgs productImages
	for i, r := range results {
		repo, tag, _ := strings.Cut(r.Reference, ":")
		_, repo, _ = strings.Cut(repo, "/") // without the registry host
		ref, err := cluster.Registry.Push(ctx, r.Path, repo, tag)
		if err != nil {
			return productImages{}, err
		}
		if !strings.HasSuffix(ref, "@"+r.Digest.String()) {
			return productImages{}, fmt.Errorf("%s pushed as %s, but make images printed %s", r.Path, ref, r.Digest)
		}
		switch ociimage.Images[i].Name {
		case "glance-operator":
			imgs.operator = ref
		case "glance-webhook":
			imgs.webhook = ref
		}
	}
	return imgs, nil
}

// imageValues points a component's image at a reference by digest.
func imageValues(ref string) map[string]any {
	repo, digest, _ := strings.Cut(ref, "@")
	return map[string]any{"image": map[string]any{"repository": repo, "digest": digest}}
}

// installChart runs `helm install` of the chart with its default values
// but the images, and waits for both Deployments to be available.
func installChart(ctx context.Context, imgs productImages) (time.Duration, error) {
	start := time.Now()
	values := map[string]any{
		"manager": imageValues(imgs.operator),
		"webhook": imageValues(imgs.webhook),
	}
	if _, err := chart.InstallRelease(cluster.Kubeconfig, operatorNamespace, values); err != nil {
		return 0, err
	}
	for _, name := range []string{managerDeployment, webhookDeployment} {
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
			d, err := cs.AppsV1().Deployments(operatorNamespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			return d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == *d.Spec.Replicas && d.Status.UpdatedReplicas == *d.Spec.Replicas, nil
		}); err != nil {
			return 0, fmt.Errorf("the chart's %s Deployment did not become available: %w%s", name, err, deploymentPods(ctx, name))
		}
	}
	return time.Since(start), nil
}

// deploymentPods describes the pods of a Deployment of the chart, for a
// failure message.
func deploymentPods(ctx context.Context, name string) string {
	pods, err := cs.CoreV1().Pods(operatorNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "\n(pods: " + err.Error() + ")"
	}
	var b strings.Builder
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Name, name+"-") {
			continue
		}
		fmt.Fprintf(&b, "\n  pod %s: %s", p.Name, p.Status.Phase)
		for _, s := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, " ready=%v restarts=%d", s.Ready, s.RestartCount)
			if w := s.State.Waiting; w != nil {
				fmt.Fprintf(&b, " waiting %s: %s", w.Reason, w.Message)
			}
		}
		b.WriteString(podEvents(ctx, operatorNamespace, p.Name))
	}
	return b.String()
}

// TestChartOnRealNode: `helm install` of the chart, default values but the
// images: the manager and the webhook run the chart's images on the node
// under the restricted security context and the chart's probes,
// cert-manager (a pod) issues the webhook's certificate and cainjector
// injects its CA, the API server calls the webhook through its Service, one
// of the two managers leads, and a new leader takes over when the leading
// pod is deleted.
func TestChartOnRealNode(t *testing.T) {
	ctx := t.Context()
	took, err := installChart(ctx, images)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("helm install to both Deployments available: %s", took.Round(100*time.Millisecond))

	t.Run("pods-run-the-pushed-images", func(t *testing.T) {
		for name, ref := range map[string]string{managerDeployment: images.operator, webhookDeployment: images.webhook} {
			pods := chartPods(t, name)
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
		cfg := rest.CopyConfig(cluster.Config)
		cfg.WarningHandler = warnings
		scheme, err := operator.NewScheme()
		if err != nil {
			t.Fatal(err)
		}
		cl, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		ns := namespace(t)
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
		leader := leaseHolder(t, "")
		pods := chartPods(t, managerDeployment)
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
		if err := cs.CoreV1().Pods(operatorNamespace).Delete(ctx, leaderPod, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The deleted leader releases the lease on SIGTERM; the standby or
		// the ReplicaSet's replacement, whichever asks first, takes it.
		next := leaseHolder(t, leader)
		if strings.HasPrefix(next, leaderPod+"_") {
			t.Errorf("after deleting %s it still holds the lease (%q)", leaderPod, next)
		}
		nextPod, _, _ := strings.Cut(next, "_")
		if _, err := cs.CoreV1().Pods(operatorNamespace).Get(ctx, nextPod, metav1.GetOptions{}); err != nil {
			t.Errorf("the lease went to %q, not a pod of the chart: %v", next, err)
		}
		t.Logf("failover: %s deleted, %s leads %s later (the standby was %s)", leaderPod, nextPod, time.Since(start).Round(100*time.Millisecond), standby)
	})
}

// chartPods lists the running pods of one of the chart's Deployments.
func chartPods(t *testing.T, name string) []corev1.Pod {
	t.Helper()
	d, err := cs.AppsV1().Deployments(operatorNamespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.CoreV1().Pods(operatorNamespace).List(t.Context(), metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		t.Fatal(err)
	}
	var running []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			running = append(running, p)
		}
	}
	return running
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

// leaseHolder waits for the manager's leader lease to be held by someone
// other than not, and returns the holder.
func leaseHolder(t *testing.T, not string) string {
	t.Helper()
	var holder string
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var lease *coordinationv1.Lease
		lease, err := cs.CoordinationV1().Leases(operatorNamespace).Get(ctx, operator.LeaderElectionID, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if lease.Spec.HolderIdentity == nil {
			return false, nil
		}
		holder = *lease.Spec.HolderIdentity
		return holder != "" && holder != not, nil
	}); err != nil {
		t.Fatalf("lease %s/%s held by %q (waiting for a holder other than %q): %v", operatorNamespace, operator.LeaderElectionID, holder, not, err)
	}
	return holder
}
