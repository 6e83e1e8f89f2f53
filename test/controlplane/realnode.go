package controlplane

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// NodeBinaries are what a real node needs beside ClusterBinaries (but
// kwok): built by `make control-plane`.
var NodeBinaries = []string{"kubelet", "kube-proxy", "coredns", NetworkPolicyEnforcer}

// NetworkPolicyEnforcer names the real node's NetworkPolicy enforcer: its
// binary, its pod in kube-system, and the nftables table (family inet) it
// makes where the kernel lets it.
const NetworkPolicyEnforcer = "kube-network-policies"

// NodeHostTools are the Debian packages' programs a real node runs or
// calls: `.ci/run` installs them.
var NodeHostTools = []string{"containerd", "containerd-shim-runc-v2", "runc", "nft", "ip", "iptables"}

// cniPlugins are the CNI plugins the pod network uses (Debian package
// containernetworking-plugins).
const cniDir = "/usr/lib/cni"

// checkNodeHost fails, naming the package, when a program of the node is
// missing.
func checkNodeHost() error {
	var missing []string
	for _, t := range NodeHostTools {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniDir, p)); err != nil {
			missing = append(missing, filepath.Join(cniDir, p))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s; install the Debian packages containerd, runc, containernetworking-plugins, nftables, iptables and iproute2 (.ci/run does)", ErrBinariesMissing, strings.Join(missing, ", "))
	}
	return nil
}

// nodeImages builds the node's own images (the sandbox and CoreDNS) and
// pushes them to the registry, returning their references by digest.
func nodeImages(ctx context.Context, dir, bin string, reg *Registry) (pause, coredns string, err error) {
	images := filepath.Join(dir, "images")
	if pause, err = reg.BuildAndPush(ctx, images, "pause", "./test/controlplane/nodeimages/pause", "node/pause", "3.10"); err != nil {
		return "", "", err
	}
	if coredns, err = reg.PushBinary(ctx, images, "coredns", filepath.Join(bin, "coredns"), "node/coredns", "v1.15.0"); err != nil {
		return "", "", err
	}
	return pause, coredns, nil
}

// startContainerd writes containerd's configuration (its root, state and
// socket under dir; runc; the bridge CNI; the loopback registry over plain
// HTTP) and starts it.
func (c *Cluster) startContainerd(ctx context.Context, pauseImage string) error {
	base := filepath.Join(c.Dir, "containerd")
	for _, d := range []string{base, filepath.Join(base, "cni")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	cni := fmt.Sprintf(`{"cniVersion": "0.4.0", "name": "glance-node", "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": %q, "routes": [{"dst": "0.0.0.0/0"}],
            "ranges": [[{"subnet": %q, "gateway": %q, "rangeStart": "10.88.1.1", "rangeEnd": "10.88.255.254"}]]}}
]}
`, nodeBridge, filepath.Join(base, "ipam"), PodCIDR, NodeIP)
	if err := os.WriteFile(filepath.Join(base, "cni", "10-glance-node.conflist"), []byte(cni), 0o644); err != nil {
		return err
	}
	// restrict_oom_score_adj: this machine withholds CAP_SYS_RESOURCE, so
	// runc cannot lower a sandbox's oom_score_adj and every sandbox would
	// fail ("can't get final child's PID from pipe"). runc, not crun: crun
	// refuses the hybrid cgroup hierarchy. The netns mounts live under the
	// state directory, so a cleanup finds them there.
	config := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = %[3]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_cdi = false
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[6]q
    conf_dir = %[7]q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "runc"
        Root = %[8]q
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors.%[9]q]
    endpoint = ["http://%[9]s"]
`, filepath.Join(base, "root"), filepath.Join(base, "state"), c.containerdSocket(), filepath.Join(base, "opt"),
		pauseImage, cniDir, filepath.Join(base, "cni"), filepath.Join(base, "runc"), c.Registry.Host)
	configPath := filepath.Join(base, "config.toml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		return err
	}
	containerd, err := exec.LookPath("containerd")
	if err != nil {
		return err
	}
	p, err := startProcess(c.Dir, "containerd", containerd, "--config", configPath)
	if p != nil {
		c.procs = append(c.procs, p)
	}
	if err != nil {
		return err
	}
	return c.poll(ctx, "containerd's socket", func(context.Context) (bool, error) {
		_, err := os.Stat(c.containerdSocket())
		return err == nil, nil
	})
}

func (c *Cluster) containerdSocket() string {
	return filepath.Join(c.Dir, "containerd", "containerd.sock")
}

// startNode starts the kubelet on containerd and kube-proxy in nftables
// mode, waits for the Node to be Ready, and deploys CoreDNS and the
// NetworkPolicy enforcer.
func (c *Cluster) startNode(ctx context.Context, bin string, pk *pki, server string, cs kubernetes.Interface, corednsImage string) error {
	kubeletID := pkix.Name{CommonName: "system:node:" + NodeName, Organization: []string{"system:nodes"}}
	if err := pk.issue("kubelet", kubeletID); err != nil {
		return err
	}
	if err := pk.issue("kube-proxy", pkix.Name{CommonName: "system:kube-proxy"}); err != nil {
		return err
	}
	for _, name := range []string{"kubelet", "kube-proxy"} {
		if err := pk.kubeconfig(filepath.Join(c.Dir, name+".kubeconfig"), server, name); err != nil {
			return err
		}
	}
	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	kubeletPort, kubeletHealth, proxyHealth, proxyMetrics := ports[0], ports[1], ports[2], ports[3]

	// The kubelet authenticates kube-apiserver by its client certificate
	// and asks it whether a request is allowed, as on any node. No host
	// resolv.conf: the pods' DNS is the cluster's, which answers
	// cluster.local alone. The eviction thresholds are low, so the node
	// evicts for a pod's own limits (an emptyDir over its sizeLimit), not
	// for this machine's disk; volume usage is measured every 10s, not
	// every minute, so an emptyDir over its bound is seen in seconds. Pod
	// logs stay in the cluster's directory, not the machine's /var/log.
	kubeletConfig := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://%[1]s
address: %[2]s
port: %[3]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[4]d
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[5]s}
authorization: {mode: Webhook}
clusterDomain: %[6]s
clusterDNS: [%[7]s]
resolvConf: ""
failSwapOn: false
serializeImagePulls: false
evictionHard: {memory.available: 100Mi, nodefs.available: 1%%, imagefs.available: 1%%, nodefs.inodesFree: 1%%}
evictionPressureTransitionPeriod: 10s
volumeStatsAggPeriod: 10s
podLogsDir: %[8]s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
syncFrequency: 10s
fileCheckFrequency: 10s
`, c.containerdSocket(), NodeIP, kubeletPort, kubeletHealth, pk.path("ca.crt"), ClusterDomain, ClusterDNSIP, filepath.Join(c.Dir, "pod-logs"))
	kubeletConfigPath := filepath.Join(c.Dir, "kubelet.yaml")
	if err := os.WriteFile(kubeletConfigPath, []byte(kubeletConfig), 0o644); err != nil {
		return err
	}
	if err := c.start(bin, "kubelet",
		"--config="+kubeletConfigPath,
		"--kubeconfig="+filepath.Join(c.Dir, "kubelet.kubeconfig"),
		"--root-dir="+filepath.Join(c.Dir, "kubelet"),
		"--cert-dir="+filepath.Join(c.Dir, "kubelet", "pki"),
		"--hostname-override="+NodeName,
		"--node-ip="+NodeIP,
		"--node-labels=topology.kubernetes.io/zone=zone-a",
		"-v=2",
	); err != nil {
		return err
	}
	if err := c.poll(ctx, "the real node Ready", func(ctx context.Context) (bool, error) {
		node, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	}); err != nil {
		return err
	}

	// nftables mode, Services on the node's address only, and no conntrack
	// sysctls touched.
	if err := c.start(bin, "kube-proxy",
		"--kubeconfig="+filepath.Join(c.Dir, "kube-proxy.kubeconfig"),
		"--proxy-mode=nftables",
		"--hostname-override="+NodeName,
		"--cluster-cidr="+PodCIDR,
		"--nodeport-addresses="+NodeIP+"/32",
		fmt.Sprintf("--healthz-bind-address=127.0.0.1:%d", proxyHealth),
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", proxyMetrics),
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
	); err != nil {
		return err
	}
	if err := c.waitHTTP(ctx, "kube-proxy", fmt.Sprintf("http://127.0.0.1:%d/healthz", proxyHealth)); err != nil {
		return err
	}
	if err := c.deployCoreDNS(ctx, cs, corednsImage); err != nil {
		return err
	}
	return c.deployNetworkPolicies(ctx, cs, bin)
}

// networkPolicyQueue is the NFQUEUE the enforcer reads and networkPolicyChain
// the chain of the iptables mangle table that steers packets to it.
const (
	networkPolicyQueue = 100
	networkPolicyChain = "GLANCE-NETPOL"
)

// deployNetworkPolicies runs kube-network-policies as a pod on the node's
// network, as its own manifests do, and steers pod traffic to it. It reads
// the first packet of each connection from NFQUEUE and accepts or drops it
// by the NetworkPolicies of the pods at both ends; a pod no policy selects is
// not isolated. Without it a NetworkPolicy is an object nothing acts on.
//
// Its own nftables table cannot load here: this kernel has no nftables
// queue expression (CONFIG_NFT_QUEUE), and the table's first queue rule
// fails ("netlink receive: no such file or directory"), so the table is
// never created. The kernel has the xtables NFQUEUE target, so the node
// queues the same packets its table would, in a chain of iptables' mangle
// table at postrouting (after kube-proxy's DNAT): new connections from or to
// a pod, except those a root process of the node opens (the kubelet's
// probes, the suites), which its table lets through too. The enforcer's
// verdicts are its own.
func (c *Cluster) deployNetworkPolicies(ctx context.Context, cs kubernetes.Interface, bin string) error {
	const ns, name = "kube-system", NetworkPolicyEnforcer
	image, err := c.Registry.PushBinary(ctx, filepath.Join(c.Dir, "images"), name, filepath.Join(bin, name), "node/"+name, "v0.8.0")
	if err != nil {
		return err
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	objects := serviceAccountWithRole(ctx, cs, ns, name, name, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "namespaces", "nodes"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"get", "list", "watch"}},
	})
	pod := corev1.PodSpec{
		HostNetwork: true,
		DNSPolicy:   corev1.DNSDefault,
		// Root with NET_ADMIN alone: netlink and NFQUEUE need no more,
		// and this machine withholds some of what privileged asks for.
		SecurityContext: &corev1.PodSecurityContext{
			RunAsUser:      ptr.To[int64](0),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{{
			Name:  name,
			Image: image,
			// Its NRI hook finds no socket (containerd here serves none)
			// and gives up, whatever --disable-nri says: pod addresses
			// come from the API. The DNS workaround is for kernels before
			// 6.12; without it DNS is judged by the policies like any
			// traffic.
			Args: []string{
				"--hostname-override=" + NodeName,
				"--netfilter-bug-1766-fix=false",
				fmt.Sprintf("--nfqueue-id=%d", networkPolicyQueue),
				fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", ports[0]),
				"-v=2",
			},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("100m"),
				corev1.ResourceMemory: resource.MustParse("50Mi"),
			}},
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false),
				ReadOnlyRootFilesystem:   ptr.To(true),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_ADMIN"}},
			},
		}},
	}
	if err := c.deploy(ctx, cs, ns, name, map[string]string{"k8s-app": name}, objects, pod); err != nil {
		return err
	}
	// Steered before it listens, every pod's traffic would be dropped.
	if err := c.poll(ctx, fmt.Sprintf("kube-network-policies reading NFQUEUE %d", networkPolicyQueue), func(context.Context) (bool, error) {
		return nfqueueBound(networkPolicyQueue), nil
	}); err != nil {
		return err
	}
	queue := []string{"-j", "NFQUEUE", "--queue-num", strconv.Itoa(networkPolicyQueue)}
	for _, rule := range [][]string{
		{"-N", networkPolicyChain},
		{"-A", networkPolicyChain, "-m", "owner", "--uid-owner", "0", "-j", "RETURN"},
		{"-A", networkPolicyChain, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "RETURN"},
		append([]string{"-A", networkPolicyChain, "-s", PodCIDR}, queue...),
		append([]string{"-A", networkPolicyChain, "-d", PodCIDR}, queue...),
		{"-A", "POSTROUTING", "-j", networkPolicyChain},
	} {
		if err := run("iptables", append([]string{"-t", "mangle"}, rule...)...); err != nil {
			return err
		}
	}
	return nil
}

// nfqueueBound reports whether a process reads the NFQUEUE queue.
func nfqueueBound(queue int) bool {
	b, err := os.ReadFile("/proc/net/netfilter/nfnetlink_queue")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == strconv.Itoa(queue) {
			return true
		}
	}
	return false
}

// deployCoreDNS runs CoreDNS as a pod behind the kube-dns Service at
// ClusterDNSIP. It answers cluster.local and the reverse zones from the API
// and refuses every other name: it forwards nothing off the machine.
func (c *Cluster) deployCoreDNS(ctx context.Context, cs kubernetes.Interface, image string) error {
	const ns, name = "kube-system", "coredns"
	labels := DNSLabels
	corefile := fmt.Sprintf(`%s:1053 in-addr.arpa:1053 ip6.arpa:1053 {
    errors
    health :8080
    ready :8181
    kubernetes %s in-addr.arpa ip6.arpa {
        pods insecure
    }
    cache 30
    loadbalance
}
`, ClusterDomain, ClusterDomain)
	objects := append(serviceAccountWithRole(ctx, cs, ns, name, "system:coredns", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
	}),
		func() error {
			_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Data:       map[string]string{"Corefile": corefile},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Labels: labels},
				Spec: corev1.ServiceSpec{
					ClusterIP: ClusterDNSIP,
					Selector:  labels,
					Ports: []corev1.ServicePort{
						{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(1053)},
						{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(1053)},
					},
				},
			}, metav1.CreateOptions{})
			return err
		},
	)
	pod := corev1.PodSpec{
		// Its own resolv.conf would point at itself.
		DNSPolicy: corev1.DNSDefault,
		Containers: []corev1.Container{{
			Name:  name,
			Image: image,
			Args:  []string{"-conf", "/etc/coredns/Corefile"},
			Ports: []corev1.ContainerPort{
				{Name: "dns", ContainerPort: 1053, Protocol: corev1.ProtocolUDP},
				{Name: "dns-tcp", ContainerPort: 1053, Protocol: corev1.ProtocolTCP},
			},
			// A request, as CoreDNS's own manifests have: without one the
			// pod is BestEffort, and the kubelet gives BestEffort pods the
			// least CPU weight there is (cpu.shares 2 against a Glance
			// pod's 102), shared with every other BestEffort pod (MariaDB,
			// the stand-ins). On a busy machine CoreDNS then waited
			// seconds for a CPU: lookups timed out, and its probes too.
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("100m"),
				corev1.ResourceMemory: resource.MustParse("70Mi"),
			}},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8181)}},
				PeriodSeconds: 2,
			},
			// CoreDNS's own manifests' liveness probe: a restart cannot
			// make a slow machine faster, and restarting the node's only
			// DNS server fails every lookup until it is back. One second
			// was too tight: the kubelet killed CoreDNS because its
			// answers took longer on a loaded machine.
			LivenessProbe: &corev1.Probe{
				ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8080)}},
				InitialDelaySeconds: 60,
				TimeoutSeconds:      5,
				FailureThreshold:    5,
			},
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
		}},
		Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}},
		}}},
	}
	return c.deploy(ctx, cs, ns, name, labels, objects, pod)
}

// deployCertManager runs cert-manager (controller and cainjector, the
// binary `make control-plane` builds) as a pod of the real node, from the
// registry. Its RBAC is cluster-admin: it is a dependency of the suites,
// not the product, and its own chart is not what they test.
func (c *Cluster) deployCertManager(ctx context.Context, cs kubernetes.Interface, bin string) error {
	const ns, name = "cert-manager", "cert-manager"
	image, err := c.Registry.PushBinary(ctx, filepath.Join(c.Dir, "images"), name, filepath.Join(bin, "cert-manager"), "cert-manager/cert-manager", CertManagerVersion)
	if err != nil {
		return err
	}
	labels := map[string]string{"app.kubernetes.io/name": name}
	objects := []func() error{
		func() error {
			_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
				Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
			}, metav1.CreateOptions{})
			return err
		},
	}
	pod := corev1.PodSpec{
		Containers: []corev1.Container{{
			Name:  name,
			Image: image,
			Args: []string{
				"--cluster-resource-namespace=" + CertManagerClusterResourceNamespace,
				"--health-bind-address=:9403",
				"-v=2",
			},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(9403)}},
				PeriodSeconds: 2,
			},
		}},
	}
	return c.deploy(ctx, cs, ns, name, labels, objects, pod)
}

// serviceAccountWithRole are the creates of the ServiceAccount ns/name and
// of the ClusterRole role with rules bound to it, for deploy.
func serviceAccountWithRole(ctx context.Context, cs kubernetes.Interface, ns, name, role string, rules []rbacv1.PolicyRule) []func() error {
	return []func() error{
		func() error {
			_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: rules}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: role},
				RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
				Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
			}, metav1.CreateOptions{})
			return err
		},
	}
}

// deploy creates objects (each an idempotent create; one that exists is
// kept), then a Deployment ns/name of one replica of pod, run as the
// ServiceAccount name under the restricted security context unless pod
// states its own, and waits for it to be available.
func (c *Cluster) deploy(ctx context.Context, cs kubernetes.Interface, ns, name string, labels map[string]string, objects []func() error, pod corev1.PodSpec) error {
	pod.ServiceAccountName = name
	if pod.SecurityContext == nil {
		pod.SecurityContext = &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}
	}
	for i := range pod.Containers {
		if pod.Containers[i].SecurityContext != nil {
			continue
		}
		pod.Containers[i].SecurityContext = &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
	}
	objects = append(objects, func() error {
		_, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod},
			},
		}, metav1.CreateOptions{})
		return err
	})
	for _, create := range objects {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("deploy %s: %w", name, err)
		}
	}
	return c.poll(ctx, name+" available", func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return d.Status.AvailableReplicas >= 1, nil
	})
}

// stopNode puts the machine back after the node's processes stopped.
func (c *Cluster) stopNode() error {
	var errs []error
	if c.Registry != nil {
		errs = append(errs, c.Registry.stop())
		c.Registry = nil
	}
	errs = append(errs, CleanupHost())
	if c.unlockHost != nil {
		c.unlockHost()
		c.unlockHost = nil
	}
	return errors.Join(errs...)
}

// DNSLabels select the node's CoreDNS pods.
var DNSLabels = map[string]string{"k8s-app": "kube-dns"}

// DNSRestarts describes each CoreDNS container the kubelet restarted: its
// pod, its restart count and how its last run ended. Empty when CoreDNS ran
// throughout.
func DNSRestarts(ctx context.Context, cs kubernetes.Interface) ([]string, error) {
	pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: DNSLabels})})
	if err != nil {
		return nil, err
	}
	if len(pods.Items) == 0 {
		return nil, errors.New("no CoreDNS pod in kube-system")
	}
	var restarts []string
	for _, p := range pods.Items {
		for _, s := range p.Status.ContainerStatuses {
			if s.RestartCount == 0 {
				continue
			}
			last := "no record of its last run"
			if t := s.LastTerminationState.Terminated; t != nil {
				last = fmt.Sprintf("last run ended %s: %s, exit code %d", t.FinishedAt.UTC().Format(time.TimeOnly), t.Reason, t.ExitCode)
			}
			restarts = append(restarts, fmt.Sprintf("pod %s container %s: %d restarts; %s", p.Name, s.Name, s.RestartCount, last))
		}
	}
	return restarts, nil
}

// CPUWeights are the CPU weights the kernel gives the cgroup of the pod with
// uid on this machine and each of its parents below kubepods, the pod's
// first: cpu.shares under cgroup v1, cpu.weight under v2; least is the
// least weight there is (2 and 1). The kubelet sets them from the pod's
// requests; a BestEffort pod gets the least, and so does its QoS class's
// cgroup.
func CPUWeights(uid string) (weights []int, least int, err error) {
	for _, h := range []struct {
		root, file string
		least      int
	}{
		{"/sys/fs/cgroup/cpu/kubepods", "cpu.shares", 2},
		{"/sys/fs/cgroup/kubepods", "cpu.weight", 1},
	} {
		dirs, err := filepath.Glob(filepath.Join(h.root, "pod"+uid))
		if err != nil {
			return nil, 0, err
		}
		more, err := filepath.Glob(filepath.Join(h.root, "*", "pod"+uid))
		if err != nil {
			return nil, 0, err
		}
		if dirs = append(dirs, more...); len(dirs) == 0 {
			continue
		}
		for d := dirs[0]; d != h.root; d = filepath.Dir(d) {
			b, err := os.ReadFile(filepath.Join(d, h.file))
			if err != nil {
				return nil, 0, err
			}
			w, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				return nil, 0, fmt.Errorf("%s: %w", filepath.Join(d, h.file), err)
			}
			weights = append(weights, w)
		}
		return weights, h.least, nil
	}
	return nil, 0, fmt.Errorf("no cgroup of pod %s under /sys/fs/cgroup/cpu/kubepods or /sys/fs/cgroup/kubepods", uid)
}
