package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ClusterOptions configure a full local cluster.
type ClusterOptions struct {
	// Dir holds certificates, kubeconfigs, etcd data, logs and the PID file.
	// Empty means a new temporary directory, removed by Stop.
	Dir string
	// Nodes is the number of kwok fake nodes; 0 means 2.
	Nodes int
	// RealNode runs one real node instead of kwok's: a kubelet on
	// containerd and runc, the bridge CNI, kube-proxy (nftables), CoreDNS
	// and kube-network-policies enforcing NetworkPolicy, with images from a registry on loopback (Cluster.Registry).
	// kube-apiserver listens on NodeIP, where pods reach it. It needs root
	// and the Debian packages checkNodeHost names; one real node runs on a
	// machine at a time, and a later one waits for it.
	RealNode bool
	// CRDs to install before StartCluster returns.
	CRDs CRDs
	// KwokStages are extra kwok Stage files, applied after the default
	// stages (for example one that fails the Jobs of a namespace).
	KwokStages []string
	// CertManager runs the real cert-manager controller (issuers,
	// clusterissuers, certificates, the selfSigned and CA issuers, the
	// approver) and cainjector as one process (bin/k8s/<version>/cert-manager,
	// built by `make control-plane`), under its own cluster-admin identity,
	// once the CRDs are installed; StartCluster returns when its caches
	// have synced. On a real node it runs as a pod, its image from the
	// registry. It implies CRDs.CertManager. ClusterIssuers read their
	// Secrets from CertManagerClusterResourceNamespace.
	CertManager bool
	// AuditUsers, when set, give kube-apiserver an audit log
	// (Cluster.AuditLog, JSON lines of audit.k8s.io/v1 Events) of these
	// users' requests, at level Metadata, one event per request and one
	// more when a watch opens; nobody else's requests are logged.
	AuditUsers []string
}

// CertManagerClusterResourceNamespace is where the cluster's cert-manager
// looks for the Secrets of ClusterIssuers.
const CertManagerClusterResourceNamespace = "kube-system"

// Cluster is a full local cluster on loopback: etcd, kube-apiserver with RBAC,
// kube-controller-manager with all controllers, kube-scheduler, and kwok
// running pod lifecycles on fake nodes.
type Cluster struct {
	// Dir is the state directory.
	Dir string
	// Kubeconfig is the path of a cluster-admin kubeconfig.
	Kubeconfig string
	// Config is the cluster-admin REST config.
	Config *rest.Config
	// CertManagerMetrics is the URL of the cert-manager controller's
	// Prometheus metrics when ClusterOptions.CertManager started it.
	CertManagerMetrics string
	// AuditLog is the path of kube-apiserver's audit log when
	// ClusterOptions.AuditUsers asked for one; empty otherwise.
	AuditLog string

	// Registry serves the real node's images (ClusterOptions.RealNode).
	Registry *Registry

	procs      []*process
	tempDir    bool
	unlockHost func()
	// bin and args start a component again after it was stopped; starts
	// counts each one's runs, whose logs are files of their own.
	bin           string
	args          map[string][]string
	starts        map[string]int
	etcdHealth    string
	apiServerArgs []string
}

// FakeNodeAnnotation marks the nodes kwok manages.
const FakeNodeAnnotation = "kwok.x-k8s.io/node"

// StartCluster starts a full local cluster on free loopback ports. Two
// kwok clusters can run side by side. On error everything started is
// stopped.
func StartCluster(ctx context.Context, opts ClusterOptions) (_ *Cluster, err error) {
	binaries := slices.Clone(ClusterBinaries)
	if opts.CertManager {
		binaries = append(binaries, "cert-manager")
	}
	if opts.RealNode {
		binaries = append(slices.DeleteFunc(binaries, func(b string) bool { return b == "kwok" }), NodeBinaries...)
		if err := checkNodeHost(); err != nil {
			return nil, err
		}
	}
	bin, err := BinDir(binaries...)
	if err != nil {
		return nil, err
	}
	stages := filepath.Join(bin, "kwok-stages.yaml")
	if _, err := os.Stat(stages); err != nil && !opts.RealNode {
		return nil, fmt.Errorf("%w: kwok stages %s; run `make control-plane`", ErrBinariesMissing, stages)
	}
	c := &Cluster{Dir: opts.Dir}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "glance-cluster-"); err != nil {
			return nil, err
		}
		c.tempDir = true
	} else if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()

	ports, err := freePorts(7)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort, kcmPort, schedPort, kwokPort := ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]
	// The API server's address: loopback, or the real node's address,
	// which pods reach and the kubernetes Service's endpoint may be.
	apiHost := "127.0.0.1"
	var pauseImage, corednsImage string
	if opts.RealNode {
		apiHost = NodeIP
		if c.unlockHost, err = lockHost(ctx); err != nil {
			return nil, err
		}
		if err := prepareHost(c.Dir, c.containerdSocket()); err != nil {
			return nil, err
		}
		if c.Registry, err = startRegistry(filepath.Join(c.Dir, "registry")); err != nil {
			return nil, err
		}
		if pauseImage, corednsImage, err = nodeImages(ctx, c.Dir, bin, c.Registry); err != nil {
			return nil, err
		}
		if err := c.startContainerd(ctx, pauseImage); err != nil {
			return nil, err
		}
	}
	server := "https://" + apiHost + ":" + strconv.Itoa(apiPort)

	pk, err := newPKI(filepath.Join(c.Dir, "pki"))
	if err != nil {
		return nil, err
	}
	if err := pk.serviceAccountKey(); err != nil {
		return nil, err
	}
	type identity struct {
		name    string
		subject pkix.Name
		hosts   []string
	}
	identities := []identity{
		{"apiserver", pkix.Name{CommonName: "kube-apiserver"}, []string{apiHost, "localhost", "10.96.0.1", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}},
		{"admin", pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}}, nil},
		{"kube-controller-manager", pkix.Name{CommonName: "system:kube-controller-manager"}, nil},
		{"kube-scheduler", pkix.Name{CommonName: "system:kube-scheduler"}, nil},
	}
	if opts.CertManager {
		identities = append(identities, identity{"cert-manager", pkix.Name{CommonName: "cert-manager", Organization: []string{"system:masters"}}, nil})
	}
	for _, id := range identities {
		if err := pk.issue(id.name, id.subject, id.hosts...); err != nil {
			return nil, err
		}
		if id.name != "apiserver" {
			if err := pk.kubeconfig(filepath.Join(c.Dir, id.name+".kubeconfig"), server, id.name); err != nil {
				return nil, err
			}
		}
	}
	c.Kubeconfig = filepath.Join(c.Dir, "admin.kubeconfig")

	etcdArgs := []string{
		"--name=default",
		"--data-dir=" + c.etcdDataDir(),
		fmt.Sprintf("--listen-client-urls=http://127.0.0.1:%d", etcdClient),
		fmt.Sprintf("--advertise-client-urls=http://127.0.0.1:%d", etcdClient),
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", etcdPeer),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", etcdPeer),
		fmt.Sprintf("--initial-cluster=default=http://127.0.0.1:%d", etcdPeer),
		"--unsafe-no-fsync=true",
	}
	c.etcdHealth = fmt.Sprintf("http://127.0.0.1:%d/health", etcdClient)
	if err := c.start(bin, "etcd", etcdArgs...); err != nil {
		return nil, err
	}
	if err := c.waitHTTP(ctx, "etcd", c.etcdHealth); err != nil {
		return nil, err
	}

	c.bin = bin
	c.apiServerArgs = []string{
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdClient),
		"--bind-address=" + apiHost,
		"--advertise-address=" + apiHost,
		fmt.Sprintf("--secure-port=%d", apiPort),
		"--cert-dir=" + filepath.Join(c.Dir, "apiserver"),
		"--tls-cert-file=" + pk.path("apiserver.crt"),
		"--tls-private-key-file=" + pk.path("apiserver.key"),
		"--client-ca-file=" + pk.path("ca.crt"),
		"--service-account-key-file=" + pk.path("sa.pub"),
		"--service-account-signing-key-file=" + pk.path("sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--allow-privileged=true",
		// Without it a stop waits a minute for the clients' open watches.
		"--shutdown-watch-termination-grace-period=5s",
	}
	if opts.RealNode {
		if err := pk.issue("apiserver-kubelet-client", pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}}); err != nil {
			return nil, err
		}
		c.apiServerArgs = append(c.apiServerArgs,
			"--authorization-mode=Node,RBAC",
			"--enable-admission-plugins=NodeRestriction",
			"--kubelet-client-certificate="+pk.path("apiserver-kubelet-client.crt"),
			"--kubelet-client-key="+pk.path("apiserver-kubelet-client.key"),
			// The node's name resolves nowhere; its address does.
			"--kubelet-preferred-address-types=InternalIP,Hostname",
		)
	} else {
		c.apiServerArgs = append(c.apiServerArgs,
			"--authorization-mode=RBAC",
			// With a loopback advertise address the default lease
			// reconciler refuses to publish the kubernetes Service
			// endpoints.
			"--endpoint-reconciler-type=none",
			// No kube-proxy routes ClusterIPs here: the API server dials a
			// webhook Service through its EndpointSlices instead.
			"--enable-aggregator-routing=true",
		)
	}
	if len(opts.AuditUsers) > 0 {
		args, log, err := auditArgs(c.Dir, opts.AuditUsers)
		if err != nil {
			return nil, err
		}
		c.apiServerArgs = append(c.apiServerArgs, args...)
		c.AuditLog = log
	}
	if err := c.start(bin, "kube-apiserver", c.apiServerArgs...); err != nil {
		return nil, err
	}
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	if err := c.waitAPIServerReady(ctx, cs); err != nil {
		return nil, err
	}
	if err := checkServerVersion(c.Config, KubernetesVersion, "control-plane"); err != nil {
		return nil, err
	}

	component := func(name string, port int) []string {
		kc := filepath.Join(c.Dir, name+".kubeconfig")
		return []string{
			"--kubeconfig=" + kc,
			"--authentication-kubeconfig=" + kc,
			"--authorization-kubeconfig=" + kc,
			"--bind-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", port),
			"--cert-dir=" + filepath.Join(c.Dir, name),
			"--leader-elect=false",
		}
	}
	if err := c.start(bin, "kube-controller-manager", append(component("kube-controller-manager", kcmPort),
		"--controllers=*",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+pk.path("sa.key"),
		"--root-ca-file="+pk.path("ca.crt"),
		"--cluster-signing-cert-file="+pk.path("ca.crt"),
		"--cluster-signing-key-file="+pk.path("ca.key"),
	)...); err != nil {
		return nil, err
	}
	if err := c.start(bin, "kube-scheduler", component("kube-scheduler", schedPort)...); err != nil {
		return nil, err
	}
	for name, port := range map[string]int{"kube-controller-manager": kcmPort, "kube-scheduler": schedPort} {
		if err := c.waitHTTP(ctx, name, fmt.Sprintf("https://127.0.0.1:%d/healthz", port)); err != nil {
			return nil, err
		}
	}

	if opts.RealNode {
		if err := c.startNode(ctx, bin, pk, server, cs, corednsImage); err != nil {
			return nil, err
		}
		return c, c.finishCluster(ctx, cs, opts, bin)
	}

	kwokArgs := []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + FakeNodeAnnotation + "=fake",
		// Without leases the nodes miss their heartbeat and the controller
		// manager marks them, and every pod on them, NotReady.
		"--node-lease-duration-seconds=40",
		fmt.Sprintf("--server-address=127.0.0.1:%d", kwokPort),
		"--config=" + stages,
	}
	for _, s := range opts.KwokStages {
		kwokArgs = append(kwokArgs, "--config="+s)
	}
	if err := c.start(bin, "kwok", kwokArgs...); err != nil {
		return nil, err
	}
	nodes := opts.Nodes
	if nodes == 0 {
		nodes = 2
	}
	if err := c.createNodes(ctx, cs, nodes); err != nil {
		return nil, err
	}
	return c, c.finishCluster(ctx, cs, opts, bin)
}

// finishCluster waits for the default ServiceAccount, installs the CRDs
// and starts cert-manager when asked.
func (c *Cluster) finishCluster(ctx context.Context, cs kubernetes.Interface, opts ClusterOptions, bin string) error {
	// Pods need the default ServiceAccount, which the controller manager
	// creates shortly after start.
	if err := c.poll(ctx, "default ServiceAccount", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return err
	}

	crds := opts.CRDs
	if opts.CertManager {
		crds.CertManager = true
	}
	paths, err := crds.Paths()
	if err != nil {
		return err
	}
	if len(paths) > 0 {
		if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true}); err != nil {
			return fmt.Errorf("install CRDs: %w", err)
		}
	}
	switch {
	case opts.CertManager && opts.RealNode:
		return c.deployCertManager(ctx, cs, bin)
	case opts.CertManager:
		return c.startCertManager(ctx, bin)
	}
	return nil
}

// startCertManager starts cert-manager (controller and cainjector) and waits
// until it reports its caches synced.
func (c *Cluster) startCertManager(ctx context.Context, bin string) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	health, metrics := ports[0], ports[1]
	if err := c.start(bin, "cert-manager",
		"--kubeconfig="+filepath.Join(c.Dir, "cert-manager.kubeconfig"),
		"--cluster-resource-namespace="+CertManagerClusterResourceNamespace,
		fmt.Sprintf("--health-bind-address=127.0.0.1:%d", health),
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metrics),
		"-v=2",
	); err != nil {
		return err
	}
	if err := c.waitHTTP(ctx, "cert-manager", fmt.Sprintf("http://127.0.0.1:%d/readyz", health)); err != nil {
		return err
	}
	c.CertManagerMetrics = fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics)
	return nil
}

func (c *Cluster) waitAPIServerReady(ctx context.Context, cs kubernetes.Interface) error {
	return c.poll(ctx, "kube-apiserver ready", func(ctx context.Context) (bool, error) {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
}

// StopAPIServer stops kube-apiserver alone, the outage a client of the
// cluster sees when its API server goes away; etcd, the controllers and
// kwok keep running. StartAPIServer brings it back on the same address.
func (c *Cluster) StopAPIServer() error { return c.stopComponent("kube-apiserver") }

// StartAPIServer starts kube-apiserver again after StopAPIServer, with the
// same flags and certificates, and waits until it is ready. Each run logs
// to a file of its own.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	if err := c.startAgain("kube-apiserver"); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	return c.waitAPIServerReady(ctx, cs)
}

// BackupEtcd copies etcd's data directory to dst, as a file-level backup is
// taken: with etcd stopped for the copy, so that it is consistent.
// kube-apiserver rides out the seconds without etcd.
func (c *Cluster) BackupEtcd(ctx context.Context, dst string) error {
	if err := c.stopComponent("etcd"); err != nil {
		return err
	}
	copyErr := exec.Command("cp", "-a", c.etcdDataDir()+"/.", dst).Run()
	if err := c.startEtcd(ctx); err != nil {
		return err
	}
	if copyErr != nil {
		return fmt.Errorf("copy etcd's data: %w", copyErr)
	}
	return nil
}

// RestoreEtcd puts back what BackupEtcd copied to src, as a cluster's
// operators restore a backup: kube-apiserver and the controllers (the
// controller manager, the scheduler, kwok, cert-manager) stopped, etcd's
// data replaced, and all started again, the controllers afresh so that none
// waits on versions the restored etcd has not reached. Every object and
// resourceVersion goes back to the backup's; clients outside the cluster
// keep the versions they saw after it.
func (c *Cluster) RestoreEtcd(ctx context.Context, src string) error {
	var controllers []string
	for _, p := range slices.Clone(c.procs) {
		if slices.Contains([]string{"kube-controller-manager", "kube-scheduler", "kwok", "cert-manager"}, p.name) {
			controllers = append(controllers, p.name)
			if err := c.stopComponent(p.name); err != nil {
				return err
			}
		}
	}
	if err := c.StopAPIServer(); err != nil {
		return err
	}
	if err := c.stopComponent("etcd"); err != nil {
		return err
	}
	if err := os.RemoveAll(c.etcdDataDir()); err != nil {
		return err
	}
	if err := exec.Command("cp", "-a", src, c.etcdDataDir()).Run(); err != nil {
		return fmt.Errorf("restore etcd's data: %w", err)
	}
	if err := c.startEtcd(ctx); err != nil {
		return err
	}
	if err := c.StartAPIServer(ctx); err != nil {
		return err
	}
	for _, name := range controllers {
		if err := c.startAgain(name); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) etcdDataDir() string { return filepath.Join(c.Dir, "etcd") }

func (c *Cluster) startEtcd(ctx context.Context) error {
	if err := c.startAgain("etcd"); err != nil {
		return err
	}
	return c.waitHTTP(ctx, "etcd", c.etcdHealth)
}

// stopComponent stops one component, leaving the others running.
func (c *Cluster) stopComponent(name string) error {
	for i, p := range c.procs {
		if p.name == name {
			c.procs = slices.Delete(c.procs, i, i+1)
			return p.stop(15 * time.Second)
		}
	}
	return fmt.Errorf("%s is not running", name)
}

// startAgain starts a component that stopComponent stopped, with the
// arguments of its first run, logging to a file of its own.
func (c *Cluster) startAgain(name string) error {
	for _, p := range c.procs {
		if p.name == name {
			return fmt.Errorf("%s is already running", name)
		}
	}
	if c.starts == nil {
		c.starts = map[string]int{}
	}
	c.starts[name]++
	p, err := startProcessLogged(c.Dir, name, fmt.Sprintf("%s-%d", name, c.starts[name]+1), filepath.Join(c.bin, name), c.args[name]...)
	if p != nil {
		c.procs = append(c.procs, p)
	}
	return err
}

func (c *Cluster) start(bin, name string, args ...string) error {
	if c.args == nil {
		c.args = map[string][]string{}
	}
	c.args[name] = args
	p, err := startProcess(c.Dir, name, filepath.Join(bin, name), args...)
	if p != nil {
		c.procs = append(c.procs, p)
	}
	return err
}

// poll waits for cond, failing early when a component has died.
func (c *Cluster) poll(ctx context.Context, what string, cond wait.ConditionWithContextFunc) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, p := range c.procs {
			if err := p.exited(); err != nil {
				return false, err
			}
		}
		return cond(ctx)
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w (logs in %s)", what, err, filepath.Join(c.Dir, "logs"))
	}
	return nil
}

func (c *Cluster) waitHTTP(ctx context.Context, what, url string) error {
	// The components serve with self-signed certificates; only liveness is
	// checked here.
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback health probe
	return c.poll(ctx, what+" healthy", func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

func (c *Cluster) createNodes(ctx context.Context, cs kubernetes.Interface, n int) error {
	zones := []string{"zone-a", "zone-b", "zone-c"}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("32"),
		corev1.ResourceMemory:           resource.MustParse("256Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	}
	for i := range n {
		name := fmt.Sprintf("kwok-node-%d", i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{FakeNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
				Labels: map[string]string{
					"kubernetes.io/hostname":      name,
					"kubernetes.io/os":            "linux",
					"kubernetes.io/arch":          "amd64",
					"topology.kubernetes.io/zone": zones[i%len(zones)],
					"type":                        "kwok",
				},
			},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
		}
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create fake node %s: %w", name, err)
		}
	}
	return c.poll(ctx, fmt.Sprintf("%d kwok nodes Ready", n), func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, node := range list.Items {
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= n, nil
	})
}

// Stop stops every component, newest first, and removes a temporary state
// directory. It is safe to call more than once.
func (c *Cluster) Stop() error {
	var errs []error
	for i := len(c.procs) - 1; i >= 0; i-- {
		if err := c.procs[i].stop(15 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	c.procs = nil
	if err := os.Remove(filepath.Join(c.Dir, pidFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	if c.unlockHost != nil {
		errs = append(errs, c.stopNode())
	}
	if c.tempDir {
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, err)
		}
		c.tempDir = false
	}
	return errors.Join(errs...)
}
