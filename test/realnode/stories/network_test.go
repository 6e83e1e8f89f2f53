package stories

import (
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/testhost"
)

// TestServicesAndClusterDNS: kube-proxy routes ClusterIPs from pods and
// from the node's own network, and CoreDNS resolves Services by name and
// answers nothing outside the cluster domain.
func TestServicesAndClusterDNS(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ip := env.WebServer(t, ns, "web")

	cases := []struct {
		name        string
		args        []string
		hostNetwork bool
		succeed     bool
		logHas      string
	}{
		{"by-clusterip", []string{"http", "-url", "http://" + ip + "/"}, false, true, "netprobe web"},
		{"by-fqdn", []string{"http", "-url", "http://web." + ns + ".svc." + controlplane.ClusterDomain + "/"}, false, true, "netprobe web"},
		{"by-short-name", []string{"http", "-url", "http://web/"}, false, true, "netprobe web"},
		{"api-server-name", []string{"dns", "-name", "kubernetes.default.svc." + controlplane.ClusterDomain}, false, true, "[10.96.0.1]"},
		{"host-network-by-name", []string{"http", "-url", "http://web." + ns + ".svc." + controlplane.ClusterDomain + "/"}, true, true, "netprobe web"},
		// The cluster's DNS forwards nothing: a name outside it fails.
		{"outside-name", []string{"dns", "-name", "example.com", "-timeout", "3s"}, false, false, "error:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := env.ProbePod(tc.name, tc.args...)
			if tc.hostNetwork {
				pod.Spec.HostNetwork = true
				pod.Spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
			}
			phase, log := env.RunPod(t, ns, pod)
			if want := map[bool]corev1.PodPhase{true: corev1.PodSucceeded, false: corev1.PodFailed}[tc.succeed]; phase != want {
				t.Errorf("pod %s, want %s; log:\n%s", phase, want, log)
			}
			if !strings.Contains(log, tc.logHas) {
				t.Errorf("log lacks %q:\n%s", tc.logHas, log)
			}
		})
	}
}

// TestNetworkGuard: no packet of a pod, a hostNetwork pod or to a Service
// address leaves through another interface. The other interface is a test
// host of the suite's own: a network namespace that listens on the
// addresses dialled and routes its replies back, so a guard that failed
// would show as a connection, never as traffic off the machine.
func TestNetworkGuard(t *testing.T) {
	t.Parallel()
	host, err := testhost.New("glguard", netip.MustParsePrefix("10.244.252.0/30"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Close() })
	if _, err := host.Listen(8080); err != nil {
		t.Fatal(err)
	}
	if err := host.RouteBack(netip.MustParsePrefix(controlplane.PodCIDR)); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	hostPod := func(name string, args ...string) *corev1.Pod {
		p := env.ProbePod(name, args...)
		p.Spec.HostNetwork = true
		return p
	}

	t.Run("unassigned-clusterip-stays-local", func(t *testing.T) {
		// The service range is routed to the node's bridge, so the
		// machine's default route never sees it.
		phase, log := env.RunPod(t, ns, hostPod("unassigned", "dial", "-addr", "10.96.255.253:80", "-timeout", "4s"))
		if phase != corev1.PodFailed || !strings.Contains(log, "error:") {
			t.Errorf("a hostNetwork pod reached an unassigned ClusterIP: %s\n%s", phase, log)
		}
	})

	t.Run("output-towards-another-interface-dropped", func(t *testing.T) {
		// A route that sends one address of the pod range (below the
		// range pods get theirs from) out through the test host's link,
		// which holds it: the guard drops each SYN before it leaves, and
		// the dial times out. A service address would not tell: kube-proxy
		// rejects the unassigned ones itself.
		const addr = "10.88.0.254"
		if err := host.AddAddress(netip.MustParseAddr(addr), netip.MustParsePrefix(controlplane.NodeIP+"/32")); err != nil {
			t.Fatal(err)
		}
		if _, err := host.ListenOn(netip.MustParseAddr(addr), 8080); err != nil {
			t.Fatal(err)
		}
		route := []string{"route", "add", addr + "/32", "dev", host.Name + "-h"}
		if out, err := exec.Command("ip", route...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(route, " "), err, out)
		}
		t.Cleanup(func() { _ = exec.Command("ip", "route", "del", addr+"/32").Run() })
		_, before, err := controlplane.GuardCounters()
		if err != nil {
			t.Fatal(err)
		}
		phase, log := env.RunPod(t, ns, hostPod("output", "dial", "-addr", addr+":8080", "-timeout", "4s"))
		_, after, err := controlplane.GuardCounters()
		if err != nil {
			t.Fatal(err)
		}
		if phase != corev1.PodFailed || strings.Contains(log, "connected") {
			t.Errorf("a hostNetwork pod reached a pod-range address through another interface: %s\n%s", phase, log)
		}
		if after <= before {
			t.Errorf("the guard's output counter stayed at %d", after)
		}
		t.Logf("output guard dropped %d packets", after-before)
	})

	t.Run("pod-forwarding-dropped", func(t *testing.T) {
		before, _, err := controlplane.GuardCounters()
		if err != nil {
			t.Fatal(err)
		}
		phase, log := env.RunPod(t, ns, env.ProbePod("forward", "dial", "-addr", host.Address.String()+":8080", "-timeout", "3s"))
		after, _, err := controlplane.GuardCounters()
		if err != nil {
			t.Fatal(err)
		}
		if phase != corev1.PodFailed || strings.Contains(log, "connected") {
			t.Errorf("a pod reached an address off its bridge: %s\n%s", phase, log)
		}
		if after <= before {
			t.Errorf("the guard's forward counter stayed at %d", after)
		}
		t.Logf("forward guard dropped %d packets", after-before)
	})
}

// TestClusterDNSHasItsShareOfCPU: the kernel gives the node's CoreDNS a
// CPU weight above the least, at every level of its cgroup. As a
// BestEffort pod it had the least (cpu.shares 2, its QoS class's cgroup
// too, against 102 for a Glance pod), and on a busy machine it waited
// seconds for a CPU: lookups timed out and the kubelet killed it for its
// probes.
func TestClusterDNSHasItsShareOfCPU(t *testing.T) {
	t.Parallel()
	pods, err := env.CS.CoreV1().Pods("kube-system").List(t.Context(), metav1.ListOptions{
		LabelSelector: metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: controlplane.DNSLabels}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatal("no CoreDNS pod")
	}
	for _, p := range pods.Items {
		if p.Status.QOSClass == corev1.PodQOSBestEffort {
			t.Errorf("pod %s is %s", p.Name, p.Status.QOSClass)
		}
		weights, least, err := controlplane.CPUWeights(string(p.UID))
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(weights, least) {
			t.Errorf("pod %s: CPU weights %v (its cgroup's first, then its parents' below kubepods): one is the least, %d", p.Name, weights, least)
		}
		t.Logf("pod %s (%s): CPU weights %v", p.Name, p.Status.QOSClass, weights)
	}
}
