package stack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
	"github.com/c5c3/glance-operator/test/chart"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/operatortest"
	"github.com/c5c3/glance-operator/test/testhost"
)

// A target cluster of the stack is a second full local cluster (etcd,
// kube-apiserver, controllers, kwok) with its own stand-ins, where the
// manager's identity is a ServiceAccount bound to the chart's
// target-cluster ClusterRole. Its glance-api pods start at the address of a
// test host that serves /healthcheck, so the manager's probe through the
// target's service proxy reaches a real server: Deployment, pods, endpoints
// and proxy are all the cluster's own.

// TargetOptions configure a target cluster.
type TargetOptions struct {
	// Name is the target's name, and so its kubeconfig Secret's.
	Name string
	// HealthSubnet is the /30 of the test host its glance-api pods run at;
	// it must not overlap another test host's.
	HealthSubnet netip.Prefix
}

// Target is a target cluster started by StartTarget.
type Target struct {
	Name string
	// Cluster is the local cluster; Config is cluster-admin on it.
	Cluster *controlplane.Cluster
	Config  *rest.Config
	Client  client.Client
	// Kubeconfig is what its registration Secret carries: the target's
	// API server and CA, and a token of the manager's ServiceAccount there.
	Kubeconfig []byte
	// ManagerServiceAccount is the manager's identity on the target.
	ManagerServiceAccount types.NamespacedName

	stack    *Stack
	standIns *StandInManager
	health   *testhost.Host
	server   *http.Server
	probes   atomic.Int64
	front    *frontDoor
	// rbac are the manager's identity objects, to wait for their grants
	// after a restart.
	rbac []*unstructured.Unstructured
}

// HealthcheckRequests counts the /healthcheck requests the target's
// stand-in glance-api has answered.
func (t *Target) HealthcheckRequests() int64 { return t.probes.Load() }

// healthcheckBody is what the target's stand-in glance-api answers.
const healthcheckBody = "OK"

// StartTarget starts a target cluster with the CRDs a Glance's children
// need there (mariadb-operator, External Secrets, the Gateway API), the
// stand-ins, the default ClusterSecretStore, and the manager's identity
// under the chart's target-cluster RBAC. It does not register it; see
// Register.
func (s *Stack) StartTarget(ctx context.Context, opts TargetOptions) (_ *Target, err error) {
	t := &Target{Name: opts.Name, stack: s}
	defer func() {
		if err != nil {
			err = errors.Join(err, t.Stop())
		}
	}()
	if t.health, err = testhost.New("glt-"+opts.Name, opts.HealthSubnet); err != nil {
		return nil, err
	}
	l, err := t.health.Listen(v1alpha1.APIPort)
	if err != nil {
		return nil, err
	}
	t.server = serveHealthcheck(l, &t.probes)

	dir := filepath.Join(s.Dir, "targets", opts.Name)
	stages := filepath.Join(dir, "stages.yaml")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	stage := controlplane.ReadyPodStage("glance-api-at-test-host", t.health.Address.String(),
		fmt.Sprintf(`{key: '.metadata.labels["%s"]', operator: In, values: [%q]}`, render.LabelComponent, render.ComponentAPI))
	if err := os.WriteFile(stages, []byte(stage), 0o644); err != nil {
		return nil, err
	}
	t.Cluster, err = controlplane.StartCluster(ctx, controlplane.ClusterOptions{
		Dir: dir, CRDs: controlplane.CRDs{MariaDB: true, ExternalSecrets: true, GatewayAPI: true}, KwokStages: []string{stages},
	})
	if err != nil {
		return nil, err
	}
	t.Config = t.Cluster.Config
	if t.front, err = newFrontDoor(t.Config.Host); err != nil {
		return nil, err
	}
	if t.Client, err = operatortest.NewClient(t.Config); err != nil {
		return nil, err
	}
	if t.standIns, err = startStandIns(ctx, t.Config, filepath.Join(dir, "logs"), "stand-ins"); err != nil {
		return nil, err
	}
	store := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"provider": map[string]any{"vault": map[string]any{"server": "http://openbao.openbao.svc:8200"}}},
	}}
	store.SetAPIVersion("external-secrets.io/v1")
	store.SetKind("ClusterSecretStore")
	store.SetName("openbao-cluster-store")
	if err := t.Client.Create(ctx, store); err != nil {
		return nil, fmt.Errorf("create the target's ClusterSecretStore: %w", err)
	}
	if err := t.applyManagerIdentity(ctx); err != nil {
		return nil, err
	}
	s.targets = append(s.targets, t)
	return t, nil
}

// serveHealthcheck serves glance-api's /healthcheck on l, counting the
// requests.
func serveHealthcheck(l net.Listener, requests *atomic.Int64) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+render.HealthcheckPath, func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		_, _ = w.Write([]byte(healthcheckBody))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return srv
}

// applyManagerIdentity creates the manager's ServiceAccount on the target,
// binds it to the chart's target-cluster ClusterRole, waits until the
// target authorizes it, and writes Kubeconfig with a token of it.
func (t *Target) applyManagerIdentity(ctx context.Context) error {
	rendered, err := chart.Render(map[string]any{"targetCluster": map[string]any{"rbac": true}}, chart.Options{Namespace: OperatorNamespace})
	if err != nil {
		return fmt.Errorf("render the chart's target-cluster RBAC: %w", err)
	}
	plain, err := chart.Render(nil, chart.Options{Namespace: OperatorNamespace})
	if err != nil {
		return err
	}
	// The bundle is the one ClusterRole the option adds.
	var added []*unstructured.Unstructured
	for _, r := range rendered.Select("ClusterRole") {
		if plain.Get("ClusterRole", r.GetName()) == nil {
			added = append(added, r)
		}
	}
	if len(added) != 1 {
		return fmt.Errorf("targetCluster.rbac=true adds %d ClusterRoles to the chart, want 1", len(added))
	}
	role := added[0]
	t.ManagerServiceAccount = t.stack.ManagerServiceAccount
	sa := &unstructured.Unstructured{}
	sa.SetAPIVersion("v1")
	sa.SetKind("ServiceAccount")
	sa.SetNamespace(t.ManagerServiceAccount.Namespace)
	sa.SetName(t.ManagerServiceAccount.Name)
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(t.ManagerServiceAccount.Namespace)
	binding := &unstructured.Unstructured{Object: map[string]any{
		"roleRef":  map[string]any{"apiGroup": rbacv1.GroupName, "kind": "ClusterRole", "name": role.GetName()},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "namespace": sa.GetNamespace(), "name": sa.GetName()}},
	}}
	binding.SetAPIVersion("rbac.authorization.k8s.io/v1")
	binding.SetKind("ClusterRoleBinding")
	binding.SetName(role.GetName())
	objs := []*unstructured.Unstructured{ns, sa, role, binding}
	for _, obj := range objs {
		if err := t.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(controlplane.FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s on target %s: %w", obj.GetKind(), obj.GetName(), t.Name, err)
		}
	}
	cs, err := kubernetes.NewForConfig(t.Config)
	if err != nil {
		return err
	}
	t.rbac = objs
	if err := t.stack.waitAuthorized(ctx, cs, objs); err != nil {
		return err
	}
	token, err := serviceAccountToken(ctx, cs, t.ManagerServiceAccount)
	if err != nil {
		return err
	}
	ca := t.Config.CAData
	if len(ca) == 0 {
		if ca, err = os.ReadFile(t.Config.CAFile); err != nil {
			return err
		}
	}
	kc := clientcmdapi.NewConfig()
	// The manager reaches the target through its front door.
	kc.Clusters[t.Name] = &clientcmdapi.Cluster{Server: "https://" + t.front.address, CertificateAuthorityData: ca}
	kc.AuthInfos["glance-operator"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts[t.Name] = &clientcmdapi.Context{Cluster: t.Name, AuthInfo: "glance-operator"}
	kc.CurrentContext = t.Name
	t.Kubeconfig, err = clientcmd.Write(*kc)
	return err
}

// Register creates the target's kubeconfig Secret in the manager's
// clusters namespace on the management cluster, under name (the target's
// own name when empty); one target can be registered under several names.
func (t *Target) Register(ctx context.Context, name string) error {
	if name == "" {
		name = t.Name
	}
	return t.stack.RegisterKubeconfig(ctx, name, t.Kubeconfig)
}

// RegisterKubeconfig creates the kubeconfig Secret name in the manager's
// clusters namespace on the management cluster.
func (s *Stack) RegisterKubeconfig(ctx context.Context, name string, kubeconfig []byte) error {
	cl, err := operatortest.NewClient(s.Config)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: OperatorNamespace, Name: name, Labels: map[string]string{targetcluster.KubeconfigSecretLabel: "true"}},
		Data:       map[string][]byte{targetcluster.KubeconfigSecretKey: kubeconfig},
	}
	if err := cl.Create(ctx, secret); err != nil {
		return fmt.Errorf("register target cluster %s: %w", name, err)
	}
	return nil
}

// Deregister deletes the kubeconfig Secret name from the manager's
// clusters namespace.
func (s *Stack) Deregister(ctx context.Context, name string) error {
	cl, err := operatortest.NewClient(s.Config)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: OperatorNamespace, Name: name}}
	if err := cl.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deregister target cluster %s: %w", name, err)
	}
	return nil
}

// Server is the URL the manager reaches the target's API server at: its
// front door.
func (t *Target) Server() string { return "https://" + t.front.address }

// StopAPIServer takes the target's API server out of its front door,
// dropping every open connection, and stops it: an outage as the manager
// sees it.
func (t *Target) StopAPIServer() error {
	t.front.close()
	return t.Cluster.StopAPIServer()
}

// StartAPIServer starts the target's API server again and, once it is
// ready and its authorizer grants the manager's roles, puts it back behind
// its front door: as a load balancer that checks /readyz would, so the
// manager never sees a server still loading its RBAC.
func (t *Target) StartAPIServer(ctx context.Context) error {
	if err := t.Cluster.StartAPIServer(ctx); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(t.Config)
	if err != nil {
		return err
	}
	if err := t.stack.waitAuthorized(ctx, cs, t.rbac); err != nil {
		return err
	}
	return t.front.open()
}

// Stop stops the stand-ins, the cluster and the test host. It is safe to
// call more than once.
func (t *Target) Stop() error {
	var errs []error
	if t.front != nil {
		t.front.close()
		t.front = nil
	}
	if t.standIns != nil {
		errs = append(errs, t.standIns.Stop())
		t.standIns = nil
	}
	if t.Cluster != nil {
		errs = append(errs, t.Cluster.Stop())
		t.Cluster = nil
	}
	if t.server != nil {
		errs = append(errs, t.server.Close())
		t.server = nil
	}
	if t.health != nil {
		errs = append(errs, t.health.Close())
		t.health = nil
	}
	return errors.Join(errs...)
}

// frontDoor is an API server's load balancer: a TCP forwarder on
// a loopback address of its own. Closing it drops every connection through
// it; opening it again listens on the same address.
type frontDoor struct {
	address, backend string

	mu       sync.Mutex
	listener net.Listener
	conns    map[net.Conn]struct{}
}

func newFrontDoor(server string) (*frontDoor, error) {
	u, err := url.Parse(server)
	if err != nil {
		return nil, err
	}
	ports, err := controlplane.FreePorts(1)
	if err != nil {
		return nil, err
	}
	f := &frontDoor{address: fmt.Sprintf("127.0.0.1:%d", ports[0]), backend: u.Host, conns: map[net.Conn]struct{}{}}
	return f, f.open()
}

func (f *frontDoor) open() error {
	l, err := net.Listen("tcp", f.address)
	if err != nil {
		return fmt.Errorf("front door of the API server %s: %w", f.backend, err)
	}
	f.mu.Lock()
	f.listener = l
	f.mu.Unlock()
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", f.backend)
			if err != nil {
				in.Close()
				continue
			}
			if !f.track(in, out) {
				in.Close()
				out.Close()
				return
			}
			go func() {
				testhost.Splice(in, out)
				f.untrack(in, out)
			}()
		}
	}()
	return nil
}

// track records a forwarded pair; false when the door closed meanwhile.
func (f *frontDoor) track(conns ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listener == nil {
		return false
	}
	for _, c := range conns {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *frontDoor) untrack(conns ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(f.conns, c)
	}
}

// close stops listening and drops every open connection.
func (f *frontDoor) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listener != nil {
		f.listener.Close()
		f.listener = nil
	}
	for c := range f.conns {
		c.Close()
		delete(f.conns, c)
	}
}
