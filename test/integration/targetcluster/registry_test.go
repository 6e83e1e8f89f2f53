package targetcluster

import (
	"context"
	"encoding/base64"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/metrics"
	"github.com/c5c3/glance-operator/pkg/operator"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
	"github.com/c5c3/glance-operator/test/operatortest"
)

// harness is a manager on the management cluster running a Registry over a
// clusters namespace of its own, recording what the registry's listeners
// hear.
type harness struct {
	t         *testing.T
	registry  *targetcluster.Registry
	metrics   *prometheus.Registry
	namespace string

	started chan string
	stopped chan string
	// reach hears the names of started targets that stopped or started
	// answering.
	reach chan string
	// owners receives the owners, by their labels, of the ConfigMaps a
	// listener's watch on each target's cache sees: what the Glance
	// controller's watches on a target will do.
	owners chan client.ObjectKey

	mu      sync.Mutex
	targets map[string]*targetcluster.Target
	lives   map[string]context.Context
	counts  map[string][2]int // starts, stops
}

func startRegistry(t *testing.T) *harness {
	t.Helper()
	scheme, err := operator.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{
		t: t, metrics: prometheus.NewRegistry(), namespace: newNamespace(t, mgmtClient),
		started: make(chan string, 100), stopped: make(chan string, 100), reach: make(chan string, 100), owners: make(chan client.ObjectKey, 100),
		targets: map[string]*targetcluster.Target{}, lives: map[string]context.Context{}, counts: map[string][2]int{},
	}
	m, err := metrics.New(h.metrics)
	if err != nil {
		t.Fatal(err)
	}
	gauge := m.TargetClusters
	mgr, err := ctrl.NewManager(management.Config, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	h.registry, err = targetcluster.NewRegistry(mgr.GetConfig(), targetcluster.RegistryOptions{
		Namespace:  h.namespace,
		Management: &targetcluster.Cluster{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Scheme: scheme, RESTMapper: mgr.GetRESTMapper()},
		Scheme:     scheme,
		HTTPClient: mgr.GetHTTPClient(),
		Metrics:    gauge,
		// Fast enough that an outage shows within a second.
		ProbeInterval: 200 * time.Millisecond, ProbeTimeout: 2 * time.Second, ConnectTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.registry.OnStart(func(ctx context.Context, tg *targetcluster.Target) {
		h.mu.Lock()
		h.targets[tg.Name], h.lives[tg.Name] = tg, ctx
		n := h.counts[tg.Name]
		n[0]++
		h.counts[tg.Name] = n
		h.mu.Unlock()
		inf, err := tg.GetCache().GetInformer(ctx, &corev1.ConfigMap{})
		if err != nil {
			t.Errorf("watch the ConfigMaps of %s: %v", tg.Name, err)
		} else if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
			if owner, ok := targetcluster.OwnerOf(obj.(client.Object).GetLabels(), "Glance"); ok {
				h.owners <- owner
			}
		}}); err != nil {
			t.Errorf("watch the ConfigMaps of %s: %v", tg.Name, err)
		}
		h.started <- tg.Name
	})
	h.registry.OnStop(func(name string) {
		h.mu.Lock()
		n := h.counts[name]
		n[1]++
		h.counts[name] = n
		h.mu.Unlock()
		h.stopped <- name
	})
	h.registry.OnReachabilityChange(func(name string) { h.reach <- name })
	if err := mgr.Add(h.registry); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("manager: %v", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("the manager did not stop within a minute of its context ending")
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		for name, n := range h.counts {
			if n[0] != n[1] {
				t.Errorf("cluster %s: %d starts, %d stops after shutdown", name, n[0], n[1])
			}
		}
		for name, life := range h.lives {
			if life.Err() == nil {
				t.Errorf("cluster %s: its context outlives the registry", name)
			}
		}
		if got := h.gauge(); len(got) != 0 {
			t.Errorf("gauge after shutdown: %v", got)
		}
		noRegistryGoroutines(t)
	})
	return h
}

func newNamespace(t *testing.T, cl client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "tc-"}}
	if err := cl.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// kubeconfigOf is a kubeconfig of cfg's server and client certificate.
func kubeconfigOf(t *testing.T, cfg *rest.Config) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["target"] = &clientcmdapi.Cluster{Server: serverOf(cfg), CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["operator"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["target"] = &clientcmdapi.Context{Cluster: "target", AuthInfo: "operator"}
	kc.CurrentContext = "target"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func serverOf(cfg *rest.Config) string {
	if strings.Contains(cfg.Host, "://") {
		return cfg.Host
	}
	return "https://" + cfg.Host
}

func (h *harness) register(name string, data map[string][]byte) {
	h.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.namespace}}
	_, err := ctrl.CreateOrUpdate(h.t.Context(), mgmtClient, s, func() error {
		s.Labels = map[string]string{targetcluster.KubeconfigSecretLabel: "true"}
		s.Data = data
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

func kubeconfigData(data []byte) map[string][]byte {
	return map[string][]byte{targetcluster.KubeconfigSecretKey: data}
}

func (h *harness) resolve(name string) (*targetcluster.Cluster, error) {
	return h.registry.Resolve(h.t.Context(), &v1alpha1.TargetClusterReference{Name: name})
}

func (h *harness) resolved(name string, unlike *targetcluster.Cluster) *targetcluster.Cluster {
	h.t.Helper()
	var c *targetcluster.Cluster
	operatortest.Eventually(h.t, "resolve "+name, func() (err error) {
		if c, err = h.resolve(name); err == nil && c == unlike {
			err = fmt.Errorf("still the cluster of before")
		}
		return err
	})
	if c.Name != name || c.IsManagement() {
		h.t.Fatalf("resolved to cluster %q", c.Name)
	}
	return c
}

func (h *harness) resolveFails(name, want string) {
	h.t.Helper()
	operatortest.Eventually(h.t, "refuse "+name, func() error {
		_, err := h.resolve(name)
		if err == nil || !strings.Contains(err.Error(), want) {
			return fmt.Errorf("error %v, want one saying %q", err, want)
		}
		return nil
	})
}

func (h *harness) want(ch chan string, what, name string) {
	h.t.Helper()
	select {
	case got := <-ch:
		if got != name {
			h.t.Fatalf("%s %q, want %q", what, got, name)
		}
	case <-time.After(30 * time.Second):
		h.t.Fatalf("no %s of %q heard", what, name)
	}
}

func (h *harness) wantQuiet(d time.Duration) {
	h.t.Helper()
	select {
	case name := <-h.started:
		h.t.Fatalf("unexpected start of %q", name)
	case name := <-h.stopped:
		h.t.Fatalf("unexpected stop of %q", name)
	case name := <-h.reach:
		h.t.Fatalf("unexpected reachability change of %q", name)
	case <-time.After(d):
	}
}

// gauge is the target clusters gauge: the connected label of each cluster
// with a series of value 1.
func (h *harness) gauge() map[string]string {
	families, err := h.metrics.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range families {
		if f.GetName() != "glance_operator_target_clusters" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if m.GetGauge().GetValue() != 1 {
				h.t.Errorf("series %v has value %v, want 1", labels, m.GetGauge().GetValue())
			}
			if _, dup := got[labels["cluster"]]; dup {
				h.t.Errorf("cluster %s has two series", labels["cluster"])
			}
			got[labels["cluster"]] = labels["connected"]
		}
	}
	return got
}

func (h *harness) wantGauge(want map[string]string) {
	h.t.Helper()
	operatortest.Eventually(h.t, "gauge", func() error {
		if got := h.gauge(); !equalMaps(got, want) {
			return fmt.Errorf("gauge %v, want %v", got, want)
		}
		return nil
	})
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func whoAmI(t *testing.T, c *targetcluster.Cluster) string {
	t.Helper()
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Client.Create(t.Context(), review); err != nil {
		t.Fatalf("SelfSubjectReview: %v", err)
	}
	return review.Status.UserInfo.Username
}

// noRegistryGoroutines fails when a goroutine of the registry or an
// informer outlives the manager. The registry returns only once everything
// it started has returned, so nothing may be left even for a moment.
func noRegistryGoroutines(t *testing.T) {
	t.Helper()
	// A stopped informer's goroutines may still be writing their last log
	// line when the manager returns; only one that stays is a leak.
	var left []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		left = registryGoroutines()
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("%d goroutines outlive the registry by 10s:\n%s", len(left), strings.Join(left, "\n\n"))
	}
}

// registryGoroutines are the stacks of the goroutines that run the
// registry's code or an informer's reflector.
func registryGoroutines() []string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var left []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "glance-operator/pkg/targetcluster.") || strings.Contains(g, "tools/cache.(*Reflector)") {
			left = append(left, g)
		}
	}
	return left
}

// noneLogged fails when a log line carries any of the values.
func noneLogged(t *testing.T, values ...string) {
	t.Helper()
	out := logs.String()
	if !strings.Contains(out, "Target cluster registered") {
		t.Fatal("the registry's log is not captured; the check would be vacuous")
	}
	for _, v := range values {
		if v != "" && strings.Contains(out, v) {
			t.Errorf("a log line carries Secret contents %.20q…", v)
		}
	}
}

// keyMaterial is what of a kubeconfig must never be logged: its private
// key's PEM body and the kubeconfig as a Secret's data is encoded.
func keyMaterial(cfg *rest.Config, kubeconfig []byte) []string {
	lines := strings.Split(strings.TrimSpace(string(cfg.KeyData)), "\n")
	return []string{lines[1], base64.StdEncoding.EncodeToString(kubeconfig)}
}

func TestRegister(t *testing.T) {
	h := startRegistry(t)
	ns := newNamespace(t, target.client)
	// The same namespace on the management cluster, where nothing may land.
	if err := mgmtClient.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	managed := map[string]string{render.LabelManagedBy: render.ManagedBy}
	for _, obj := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "child", Namespace: ns, Labels: managed}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "user-config", Namespace: ns}},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "user-secret", Namespace: ns, Annotations: map[string]string{"note": "kept off the cache"}},
			StringData: map[string]string{"password": "hunter2"},
		},
	} {
		if err := target.client.Create(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := h.resolve("west"); err == nil || !strings.Contains(err.Error(), `target cluster "west" is not registered`) {
		t.Fatalf("before its Secret: %v, want not registered", err)
	}
	h.wantGauge(map[string]string{})

	kc := kubeconfigOf(t, target.config)
	h.register("west", kubeconfigData(kc))
	c := h.resolved("west", nil)
	h.want(h.started, "start", "west")
	h.wantGauge(map[string]string{"west": "true"})
	if who := whoAmI(t, c); who != "admin" {
		t.Errorf("the target's client is %q, want the kubeconfig's user admin", who)
	}

	// The cache holds the operator's children only.
	operatortest.Eventually(t, "cached ConfigMaps", func() error {
		var list corev1.ConfigMapList
		if err := c.Client.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		var names []string
		for _, cm := range list.Items {
			names = append(names, cm.Name)
		}
		if !slices.Equal(names, []string{"child"}) {
			return fmt.Errorf("cached ConfigMaps %v, want only the labelled child", names)
		}
		return nil
	}, operatortest.Within(10*time.Second))
	// The user's objects are read uncached.
	if err := c.Reader.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "user-config"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("uncached read of the user's ConfigMap: %v", err)
	}
	// The references caches hold the user's Secrets as bare metadata, of
	// the namespaces a pass has asked for only.
	unrelated := newNamespace(t, target.client)
	if err := target.client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: unrelated}}); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	tg := h.targets["west"]
	h.mu.Unlock()
	if err := c.WatchReferences(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	operatortest.Eventually(t, "references", func() error {
		secrets := &metav1.PartialObjectMetadataList{}
		secrets.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
		if err := tg.References.List(t.Context(), secrets, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, s := range secrets.Items {
			if s.Name == "user-secret" {
				if len(s.Annotations) != 0 || len(s.ManagedFields) != 0 {
					return fmt.Errorf("the references cache keeps more than identity: %v", s.ObjectMeta)
				}
				return nil
			}
		}
		return fmt.Errorf("user-secret not in the references cache")
	}, operatortest.Within(10*time.Second))
	unrelatedSecret := &metav1.PartialObjectMetadata{}
	unrelatedSecret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := tg.References.Get(t.Context(), client.ObjectKey{Namespace: unrelated, Name: "unrelated"}, unrelatedSecret); !apierrors.IsNotFound(err) {
		t.Errorf("a Secret of a namespace no pass asked for: %v, want NotFound (not watched)", err)
	}

	// Writes land on the target, owner-labelled, and not on the management
	// cluster; a listener's watch on the target maps them to their owner.
	owner := &v1alpha1.Glance{ObjectMeta: metav1.ObjectMeta{Name: "glance", Namespace: ns}}
	written := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "written", Namespace: ns, Labels: managed}}
	if err := c.SetOwner(owner, written); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Create(t.Context(), written); err != nil {
		t.Fatalf("create on the target: %v", err)
	}
	got := &corev1.ConfigMap{}
	if err := target.client.Get(t.Context(), client.ObjectKeyFromObject(written), got); err != nil {
		t.Fatalf("the ConfigMap is not on the target: %v", err)
	}
	if got.Labels[targetcluster.OwnerNameLabel] != "glance" || len(got.OwnerReferences) != 0 {
		t.Errorf("target child has labels %v and owner references %v, want owner labels only", got.Labels, got.OwnerReferences)
	}
	if err := mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(written), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ConfigMap on the management cluster: %v, want not found", err)
	}
	select {
	case key := <-h.owners:
		if key != (client.ObjectKey{Namespace: ns, Name: "glance"}) {
			t.Errorf("watch mapped the child to %v", key)
		}
	case <-time.After(10 * time.Second):
		t.Error("the listener's watch on the target never saw the child")
	}

	if c, err := h.registry.Resolve(t.Context(), nil); err != nil || !c.IsManagement() {
		t.Errorf("Resolve(nil) = %v, %v; want the management cluster", c, err)
	}
	noneLogged(t, keyMaterial(target.config, kc)...)
}

func TestKubeconfigChangeRestarts(t *testing.T) {
	h := startRegistry(t)
	kc := kubeconfigOf(t, target.config)
	h.register("rotate", kubeconfigData(kc))
	before := h.resolved("rotate", nil)
	h.want(h.started, "start", "rotate")
	h.mu.Lock()
	oldLife := h.lives["rotate"]
	h.mu.Unlock()

	// An edit outside the kubeconfig restarts nothing.
	s := &corev1.Secret{}
	if err := mgmtClient.Get(t.Context(), client.ObjectKey{Namespace: h.namespace, Name: "rotate"}, s); err != nil {
		t.Fatal(err)
	}
	s.Annotations = map[string]string{"rotated-by": "nobody"}
	if err := mgmtClient.Update(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	h.wantQuiet(2 * time.Second)
	if c, err := h.resolve("rotate"); err != nil || c != before {
		t.Fatalf("after an annotation edit: %v, %v; want the same cluster", c, err)
	}

	rotated, err := target.user("rotated")
	if err != nil {
		t.Fatal(err)
	}
	rotatedKC := kubeconfigOf(t, rotated)
	h.register("rotate", kubeconfigData(rotatedKC))
	h.want(h.stopped, "stop", "rotate")
	if oldLife.Err() == nil {
		t.Error("the old cluster's context still runs after its stop")
	}
	after := h.resolved("rotate", before)
	h.want(h.started, "start", "rotate")
	if who := whoAmI(t, after); who != "rotated" {
		t.Errorf("the restarted cluster's client is %q, want the new kubeconfig's user rotated", who)
	}
	h.wantGauge(map[string]string{"rotate": "true"})
	noneLogged(t, append(keyMaterial(target.config, kc), keyMaterial(rotated, rotatedKC)...)...)
}

func TestDeregister(t *testing.T) {
	h := startRegistry(t)
	kc := kubeconfigData(kubeconfigOf(t, target.config))
	h.register("gone", kc)
	h.register("relabelled", kc)
	h.resolved("gone", nil)
	h.resolved("relabelled", nil)
	for range 2 {
		<-h.started
	}
	h.wantGauge(map[string]string{"gone": "true", "relabelled": "true"})

	if err := mgmtClient.Delete(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace, Name: "gone"}}); err != nil {
		t.Fatal(err)
	}
	h.want(h.stopped, "stop", "gone")
	h.resolveFails("gone", `target cluster "gone" is not registered`)
	h.wantGauge(map[string]string{"relabelled": "true"})

	// A Secret that loses the label deregisters its cluster too.
	s := &corev1.Secret{}
	if err := mgmtClient.Get(t.Context(), client.ObjectKey{Namespace: h.namespace, Name: "relabelled"}, s); err != nil {
		t.Fatal(err)
	}
	s.Labels = nil
	if err := mgmtClient.Update(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	h.want(h.stopped, "stop", "relabelled")
	h.resolveFails("relabelled", `target cluster "relabelled" is not registered`)
	h.wantGauge(map[string]string{})

	// Registering again brings it back.
	h.register("gone", kc)
	h.resolved("gone", nil)
	h.want(h.started, "start", "gone")
	h.wantGauge(map[string]string{"gone": "true"})
}

func TestRefusedKubeconfig(t *testing.T) {
	h := startRegistry(t)
	const execSecret = "exec-arg-s3cr3t"
	execKC := clientcmdapi.NewConfig()
	execKC.Clusters["target"] = &clientcmdapi.Cluster{Server: serverOf(target.config), CertificateAuthorityData: target.config.CAData}
	execKC.AuthInfos["plugin"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1", Command: "/bin/sh", Args: []string{"-c", "echo " + execSecret},
	}}
	execKC.Contexts["target"] = &clientcmdapi.Context{Cluster: "target", AuthInfo: "plugin"}
	execKC.CurrentContext = "target"
	data, err := clientcmd.Write(*execKC)
	if err != nil {
		t.Fatal(err)
	}
	h.register("exec", kubeconfigData(data))
	h.register("nokey", map[string][]byte{"config": kubeconfigOf(t, target.config)})
	h.register("garbage", kubeconfigData([]byte("clusters: "+execSecret)))

	h.resolveFails("exec", `target cluster "exec" is refused: kubeconfig Secret `+h.namespace+`/exec: user "plugin" uses an exec credential plugin: exec plugins are refused`)
	h.resolveFails("nokey", `target cluster "nokey" is refused: kubeconfig Secret `+h.namespace+`/nokey: the Secret has no "kubeconfig" key`)
	h.resolveFails("garbage", `target cluster "garbage" is refused: kubeconfig Secret `+h.namespace+`/garbage: the kubeconfig does not parse`)
	for _, name := range []string{"exec", "garbage"} {
		if _, err := h.resolve(name); strings.Contains(err.Error(), execSecret) {
			t.Errorf("the refusal of %s carries the Secret's contents: %v", name, err)
		}
	}
	h.wantGauge(map[string]string{"exec": "false", "nokey": "false", "garbage": "false"})
	h.wantQuiet(time.Second)

	// A fixed Secret starts its cluster.
	h.register("exec", kubeconfigData(kubeconfigOf(t, target.config)))
	h.resolved("exec", nil)
	h.want(h.started, "start", "exec")
	h.wantGauge(map[string]string{"exec": "true", "nokey": "false", "garbage": "false"})
	noneLogged(t, execSecret)
}

// TestTargetAPIServerStopped stops the shared target API server; it runs
// last and starts it again whatever happens.
func TestTargetAPIServerStopped(t *testing.T) {
	h := startRegistry(t)
	ns := newNamespace(t, target.client)
	h.register("flaky", kubeconfigData(kubeconfigOf(t, target.config)))
	c := h.resolved("flaky", nil)
	h.want(h.started, "start", "flaky")
	h.wantGauge(map[string]string{"flaky": "true"})

	if err := target.stopAPIServer(); err != nil {
		t.Fatal(err)
	}
	running := false
	t.Cleanup(func() {
		if !running {
			if err := target.startAPIServer(); err != nil {
				t.Errorf("restart the target API server: %v", err)
			}
		}
	})
	h.resolveFails("flaky", `target cluster "flaky" is not reachable: `)
	_, err := h.resolve("flaky")
	t.Logf("while the target's API server is down: %v", err)
	if addr := strings.TrimPrefix(serverOf(target.config), "https://"); !strings.Contains(err.Error(), addr) {
		t.Errorf("the error does not name the target's address %s: %v", addr, err)
	}
	h.wantGauge(map[string]string{"flaky": "false"})
	// The outage is heard, so what resolves the target need not wait for
	// a requeue to see it.
	h.want(h.reach, "reachability change", "flaky")

	if err := target.startAPIServer(); err != nil {
		t.Fatalf("restart the target API server: %v", err)
	}
	running = true
	// The same cluster reconnects: no restart, no new start.
	again := h.resolved("flaky", nil)
	if again != c {
		t.Error("the target was restarted, want it to reconnect")
	}
	h.wantGauge(map[string]string{"flaky": "true"})
	h.want(h.reach, "reachability change", "flaky")
	h.wantQuiet(time.Second)
	written := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "after-outage", Namespace: ns, Labels: map[string]string{render.LabelManagedBy: render.ManagedBy},
	}}
	if err := again.Client.Create(t.Context(), written); err != nil {
		t.Fatalf("write after the outage: %v", err)
	}
	operatortest.Eventually(t, "the cache after the outage", func() error {
		return again.Client.Get(t.Context(), client.ObjectKeyFromObject(written), &corev1.ConfigMap{})
	}, operatortest.Within(time.Minute))
}
