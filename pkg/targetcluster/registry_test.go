package targetcluster

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/metrics"
)

// These tests drive the registry's bookkeeping without an API server: every
// target points at a closed port. test/integration/targetcluster runs it
// against real API servers.

func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func tokenKubeconfig(t *testing.T, server, token string) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func kubeconfigSecret(name string, data []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "clusters", Labels: map[string]string{KubeconfigSecretLabel: "true"}},
		Data:       map[string][]byte{KubeconfigSecretKey: data},
	}
}

// newTestRegistry is a registry as Start leaves it once the Secrets are
// listed, fed by apply instead of an informer.
func newTestRegistry(t *testing.T) (*Registry, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	gauge := m.TargetClusters
	r, err := NewRegistry(&rest.Config{Host: "https://127.0.0.1:1"}, RegistryOptions{
		Namespace: "clusters", Management: &Cluster{}, Scheme: scheme.Scheme, Metrics: gauge,
		ProbeInterval: 50 * time.Millisecond, ProbeTimeout: time.Second, ConnectTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	r.ctx = ctx
	close(r.listed)
	t.Cleanup(func() {
		cancel()
		r.shutdown()
	})
	return r, reg
}

func resolveErr(t *testing.T, r *Registry, name string) string {
	t.Helper()
	return resolveError(t, r, name).Error()
}

func resolveError(t *testing.T, r *Registry, name string) error {
	t.Helper()
	c, err := r.Resolve(t.Context(), &v1alpha1.TargetClusterReference{Name: name})
	if err == nil {
		t.Fatalf("resolved %q to %v", name, c)
	}
	return err
}

// TestOnlyAMissingSecretIsNotRegistered: ErrNotRegistered, under which a
// Glance being deleted abandons its children, means the Secret is gone, and
// nothing that may pass.
func TestOnlyAMissingSecretIsNotRegistered(t *testing.T) {
	early, err := NewRegistry(&rest.Config{}, RegistryOptions{
		Namespace: "clusters", Management: &Cluster{}, Scheme: scheme.Scheme, ConnectTimeout: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := resolveError(t, early, "west"); errors.Is(err, ErrNotRegistered) {
		t.Errorf("before the Secrets are read: %v is ErrNotRegistered", err)
	}
	r, _ := newTestRegistry(t)
	if err := resolveError(t, r, "west"); !errors.Is(err, ErrNotRegistered) {
		t.Errorf("no Secret: %v is not ErrNotRegistered", err)
	}
	refused := kubeconfigSecret("west", nil)
	refused.Data = map[string][]byte{"value": []byte(secretValue)}
	r.apply("west", refused)
	if err := resolveError(t, r, "west"); errors.Is(err, ErrNotRegistered) {
		t.Errorf("refused kubeconfig: %v is ErrNotRegistered", err)
	}
	r.apply("west", kubeconfigSecret("west", tokenKubeconfig(t, "https://"+closedPort(t), secretValue)))
	if err := resolveError(t, r, "west"); errors.Is(err, ErrNotRegistered) {
		t.Errorf("unreachable: %v is ErrNotRegistered", err)
	}
	r.apply("west", nil)
	if err := resolveError(t, r, "west"); !errors.Is(err, ErrNotRegistered) {
		t.Errorf("Secret deleted: %v is not ErrNotRegistered", err)
	}
	if _, err := (ManagementOnly{}).Resolve(t.Context(), &v1alpha1.TargetClusterReference{Name: "west"}); !errors.Is(err, ErrNotRegistered) {
		t.Errorf("ManagementOnly: %v is not ErrNotRegistered", err)
	}
}

func wantGauge(t *testing.T, reg *prometheus.Registry, series ...string) {
	t.Helper()
	want := "# HELP glance_operator_target_clusters Registered target clusters (1 each), by whether the operator is connected to them.\n" +
		"# TYPE glance_operator_target_clusters gauge\n"
	for _, s := range series {
		want += "glance_operator_target_clusters" + s + " 1\n"
	}
	if len(series) == 0 {
		want = ""
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "glance_operator_target_clusters"); err != nil {
		t.Error(err)
	}
}

func TestResolveNilIsManagement(t *testing.T) {
	r, _ := newTestRegistry(t)
	c, err := r.Resolve(t.Context(), nil)
	if err != nil || c != r.o.Management {
		t.Fatalf("Resolve(nil) = %v, %v; want the management cluster", c, err)
	}
}

func TestResolveNotRegistered(t *testing.T) {
	r, reg := newTestRegistry(t)
	got := resolveErr(t, r, "west")
	want := `target cluster "west" is not registered: no Secret "west" in namespace "clusters" carries the label sigs.k8s.io/multicluster-runtime-kubeconfig: "true"`
	if got != want {
		t.Errorf("error %q, want %q", got, want)
	}
	wantGauge(t, reg)
}

func TestResolveBeforeSecretsListed(t *testing.T) {
	r, err := NewRegistry(&rest.Config{}, RegistryOptions{
		Namespace: "clusters", Management: &Cluster{}, Scheme: scheme.Scheme, ConnectTimeout: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := resolveErr(t, r, "west"); !strings.Contains(got, `target cluster "west" is not known yet: the kubeconfig Secrets in namespace "clusters" have not been read yet`) {
		t.Errorf("error %q", got)
	}
}

func TestRefusedKubeconfig(t *testing.T) {
	r, reg := newTestRegistry(t)
	s := kubeconfigSecret("west", nil)
	s.Data = map[string][]byte{"value": []byte(secretValue)}
	r.apply("west", s)
	got := resolveErr(t, r, "west")
	if want := `target cluster "west" is refused: kubeconfig Secret clusters/west: the Secret has no "kubeconfig" key`; got != want {
		t.Errorf("error %q, want %q", got, want)
	}
	wantGauge(t, reg, `{cluster="west",connected="false"}`)

	// Fixing the Secret starts the cluster.
	r.apply("west", kubeconfigSecret("west", tokenKubeconfig(t, "https://"+closedPort(t), secretValue)))
	if got := resolveErr(t, r, "west"); !strings.Contains(got, `target cluster "west" is not reachable: `) {
		t.Errorf("error %q, want not reachable", got)
	}
}

func TestUnreachableThenDeregistered(t *testing.T) {
	r, reg := newTestRegistry(t)
	addr := closedPort(t)
	r.apply("west", kubeconfigSecret("west", tokenKubeconfig(t, "https://"+addr, secretValue)))
	got := resolveErr(t, r, "west")
	if !strings.Contains(got, `target cluster "west" is not reachable: `) || !strings.Contains(got, addr) || !strings.Contains(got, "connection refused") {
		t.Errorf("error %q, want not reachable with the dial error", got)
	}
	if strings.Contains(got, secretValue) {
		t.Errorf("error carries the token: %q", got)
	}
	wantGauge(t, reg, `{cluster="west",connected="false"}`)

	run := r.clusters["west"].run
	r.apply("west", nil)
	select {
	case <-run.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the cluster did not stop when its Secret went")
	}
	if got := resolveErr(t, r, "west"); !strings.HasPrefix(got, `target cluster "west" is not registered`) {
		t.Errorf("error %q, want not registered", got)
	}
	wantGauge(t, reg)

	// Registered again, it runs after the old run, so listeners hear the
	// old stop before the new start.
	r.apply("west", kubeconfigSecret("west", tokenKubeconfig(t, "https://"+addr, secretValue)))
	if again := r.clusters["west"]; again.run == run || again.prev != (<-chan struct{})(run.done) {
		t.Error("the new run does not wait for the old one")
	}
}

func TestOnlyKubeconfigChangesRestart(t *testing.T) {
	r, _ := newTestRegistry(t)
	server := "https://" + closedPort(t)
	s := kubeconfigSecret("west", tokenKubeconfig(t, server, "a"))
	r.apply("west", s)
	first := r.clusters["west"].run

	s = s.DeepCopy()
	s.Annotations = map[string]string{"note": "edited"}
	r.apply("west", s)
	if r.clusters["west"].run != first {
		t.Fatal("an edit outside the kubeconfig restarted the cluster")
	}

	r.apply("west", kubeconfigSecret("west", tokenKubeconfig(t, server, "b")))
	second := r.clusters["west"].run
	if second == first {
		t.Fatal("a kubeconfig change did not restart the cluster")
	}
	select {
	case <-first.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the old cluster did not stop")
	}
	if second.ctx.Err() != nil {
		t.Fatal("the new cluster was stopped")
	}
}

func TestShutdownStopsEveryCluster(t *testing.T) {
	r, reg := newTestRegistry(t)
	var runs []*run
	for i := range 3 {
		name := "c" + strconv.Itoa(i)
		r.apply(name, kubeconfigSecret(name, tokenKubeconfig(t, "https://"+closedPort(t), "t")))
		runs = append(runs, r.clusters[name].run)
	}
	r.shutdown() // returns once every run has returned
	for i, rn := range runs {
		select {
		case <-rn.done:
		default:
			t.Errorf("cluster c%d still runs after shutdown", i)
		}
	}
	wantGauge(t, reg)
	r.apply("late", kubeconfigSecret("late", tokenKubeconfig(t, "https://"+closedPort(t), "t")))
	if _, ok := r.clusters["late"]; ok {
		t.Error("a Secret seen after shutdown started a cluster")
	}
}

const secretValue = "s3cr3t-value"
