package stories

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/c5c3/glance-operator/test/controlplane"
)

// TestNodeRunsPodsPulledByDigest: the node is a real kubelet on
// containerd, and a pod runs the image the suite pushed, pulled by digest
// from the loopback registry, under the restricted security context.
func TestNodeRunsPodsPulledByDigest(t *testing.T) {
	t.Parallel()
	t.Logf("cluster start (control plane, containerd, kubelet to Ready, kube-proxy, CoreDNS and kube-network-policies available): %s", env.Startup.Round(100*time.Millisecond))
	node, err := env.CS.CoreV1().Nodes().Get(t.Context(), controlplane.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	info := node.Status.NodeInfo
	if info.KubeletVersion != controlplane.KubernetesVersion {
		t.Errorf("kubelet version %q, want %q", info.KubeletVersion, controlplane.KubernetesVersion)
	}
	if !strings.HasPrefix(info.ContainerRuntimeVersion, "containerd://") {
		t.Errorf("container runtime %q, want containerd", info.ContainerRuntimeVersion)
	}
	if _, isFake := node.Annotations[controlplane.FakeNodeAnnotation]; isFake {
		t.Errorf("node %s is a kwok node", node.Name)
	}

	ns := env.Namespace(t)
	phase, log := env.RunPod(t, ns, env.ProbePod("hello", "dns", "-name", "kubernetes.default.svc.cluster.local"))
	if phase != corev1.PodSucceeded {
		t.Fatalf("pod %s, log:\n%s", phase, log)
	}
	pod, err := env.CS.CoreV1().Pods(ns).Get(t.Context(), "hello", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != controlplane.NodeName {
		t.Errorf("pod ran on %q, want %q", pod.Spec.NodeName, controlplane.NodeName)
	}
	status := pod.Status.ContainerStatuses[0]
	_, digest, _ := strings.Cut(env.Netprobe, "@")
	if !strings.HasSuffix(status.ImageID, "@"+digest) || !strings.HasPrefix(status.ImageID, env.Cluster.Registry.Host+"/") {
		t.Errorf("container ran image %q, want the registry's %s", status.ImageID, env.Netprobe)
	}
	if term := status.State.Terminated; term != nil {
		t.Logf("pod start: created %s, container started %s later", pod.CreationTimestamp.Format(time.TimeOnly), term.StartedAt.Sub(pod.CreationTimestamp.Time))
	}
}
