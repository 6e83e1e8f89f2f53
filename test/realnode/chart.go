package realnode

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/c5c3/glance-operator/hack/images/ociimage"
	"github.com/c5c3/glance-operator/hack/release/publish"
	"github.com/c5c3/glance-operator/pkg/operator"
	"github.com/c5c3/glance-operator/test/chart"
	"github.com/c5c3/glance-operator/test/controlplane"
)

// OperatorNamespace is where the suites install the chart.
const OperatorNamespace = "glance-system"

// The chart's Deployments, for release chart.ReleaseName.
const (
	ManagerDeployment = chart.ReleaseName + "-manager"
	WebhookDeployment = chart.ReleaseName + "-webhook"
)

// ProductImages are the chart's images as `make release` publishes them to
// the registry: each an image index, by digest.
type ProductImages struct{ Operator, Webhook string }

// PublishRelease runs `make release ARCHES=<the node's>` to the registry,
// building into dir: both images, then the chart with their digests pinned.
// The node's architecture alone: hack/release/publish holds the release of
// both, and a second architecture's build here would only slow the suite.
func PublishRelease(ctx context.Context, reg *controlplane.Registry, dir string) (publish.Release, error) {
	return publish.Publish(ctx, publish.Options{
		Registry:       reg.Host + "/c5c3",
		PlainHTTP:      true,
		RegistryConfig: filepath.Join(dir, "registry-config.json"),
		Arches:         []string{runtime.GOARCH},
		Images:         ociimage.Options{OutDir: dir},
		// The suite installs the tree it tests, committed or not.
		UncommittedTree: true,
	})
}

// ReleaseImages are rel's images by the chart's component.
func ReleaseImages(rel publish.Release) ProductImages {
	var imgs ProductImages
	for _, img := range rel.Images {
		switch img.Name {
		case "glance-operator":
			imgs.Operator = img.Reference
		case "glance-webhook":
			imgs.Webhook = img.Reference
		}
	}
	return imgs
}

// InstallChart runs `helm install oci://…` of the released chart with its
// default values, which pull the released images by digest, and waits for
// both Deployments to be available.
func (e *Env) InstallChart(ctx context.Context) (time.Duration, error) {
	return e.InstallRelease(ctx, e.Release)
}

// InstallRelease runs `helm install oci://…` of rel's chart with its
// default values and waits until both Deployments run rel's images and are
// available.
func (e *Env) InstallRelease(ctx context.Context, rel publish.Release) (time.Duration, error) {
	start := time.Now()
	if _, err := chart.InstallFromRegistry(e.Cluster.Kubeconfig, OperatorNamespace, rel.Chart, rel.ChartVersion, true, nil); err != nil {
		return 0, err
	}
	if err := e.waitRolledOut(ctx, ReleaseImages(rel)); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// UpgradeChart runs `helm upgrade --reset-then-reuse-values` of the
// installed chart to rel's and waits until both Deployments run rel's
// images alone, the pods of the release before gone, and are available.
func (e *Env) UpgradeChart(ctx context.Context, rel publish.Release) (time.Duration, error) {
	start := time.Now()
	if _, err := chart.UpgradeFromRegistry(e.Cluster.Kubeconfig, OperatorNamespace, rel.Chart, rel.ChartVersion, true); err != nil {
		return 0, err
	}
	if err := e.waitRolledOut(ctx, ReleaseImages(rel)); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// waitRolledOut waits until the manager and webhook Deployments are
// available at their generation with every pod running imgs' image: no pod
// of an earlier release is left, not even a terminating one.
func (e *Env) waitRolledOut(ctx context.Context, imgs ProductImages) error {
	for name, image := range map[string]string{ManagerDeployment: imgs.Operator, WebhookDeployment: imgs.Webhook} {
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
			d, err := e.CS.AppsV1().Deployments(OperatorNamespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			want := *d.Spec.Replicas
			if d.Status.ObservedGeneration != d.Generation || d.Status.AvailableReplicas != want || d.Status.UpdatedReplicas != want || d.Status.Replicas != want {
				return false, nil
			}
			selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
			if err != nil {
				return false, err
			}
			pods, err := e.CS.CoreV1().Pods(OperatorNamespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
			if err != nil {
				return false, nil
			}
			for _, p := range pods.Items {
				if p.Spec.Containers[0].Image != image {
					return false, nil
				}
			}
			return true, nil
		}); err != nil {
			return fmt.Errorf("the chart's %s Deployment did not roll out to %s: %w%s", name, image, err, e.DeploymentPods(ctx, OperatorNamespace, name))
		}
	}
	return nil
}

// DeploymentPods describes the pods of a Deployment, by the name prefix
// its ReplicaSets give them, for a failure message.
func (e *Env) DeploymentPods(ctx context.Context, ns, name string) string {
	pods, err := e.CS.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
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
			fmt.Fprintf(&b, " %s ready=%v restarts=%d", s.Name, s.Ready, s.RestartCount)
			if w := s.State.Waiting; w != nil {
				fmt.Fprintf(&b, " waiting %s: %s", w.Reason, w.Message)
			}
			if term := s.LastTerminationState.Terminated; term != nil {
				fmt.Fprintf(&b, " last exit %d %s", term.ExitCode, term.Reason)
			}
		}
		b.WriteString(e.PodEvents(ctx, ns, p.Name))
	}
	return b.String()
}

// RunningPods lists the running pods of a Deployment.
func (e *Env) RunningPods(t *testing.T, ns, name string) []corev1.Pod {
	t.Helper()
	d, err := e.CS.AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	list, err := e.CS.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: selector.String()})
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

// LeaseHolder waits for the manager's leader lease to be held by someone
// other than not, and returns the holder.
func (e *Env) LeaseHolder(t *testing.T, not string) string {
	t.Helper()
	var holder string
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var lease *coordinationv1.Lease
		lease, err := e.CS.CoordinationV1().Leases(OperatorNamespace).Get(ctx, operator.LeaderElectionID, metav1.GetOptions{})
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
		t.Fatalf("lease %s/%s held by %q (waiting for a holder other than %q): %v", OperatorNamespace, operator.LeaderElectionID, holder, not, err)
	}
	return holder
}
