package install

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/chart"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/operatortest"
	"github.com/c5c3/glance-operator/test/stack"
)

// The stories run in file order after TestInstall, on its release and its
// Glance.

const (
	caCertificate = "glance-operator-webhook-ca"
	webhookDNS    = "glance-operator-webhook.glance-system.svc"
)

// TestRotation renews the serving certificate, then rolls the CA and
// renews the serving certificate under it, while a bounded loop of dry-run
// creates goes through the webhooks: not one may fail, the webhook serves
// each new certificate, and cainjector re-injects the new CA.
func TestRotation(t *testing.T) {
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(stk.Config)
	if err != nil {
		t.Fatal(err)
	}
	load := startLoad(t, 4)
	defer load.stop()

	served0 := servedSerial(t)
	if err := controlplane.RenewCertificate(ctx, dyn, stack.OperatorNamespace, servingCertificate); err != nil {
		t.Fatal(err)
	}
	served1 := waitServedSerialChange(t, served0, "the renewed serving certificate")
	atRenewal := load.sent.Load()

	caBefore := secretData(t, caCertificate, corev1.TLSCertKey)
	if err := controlplane.RenewCertificate(ctx, dyn, stack.OperatorNamespace, caCertificate); err != nil {
		t.Fatal(err)
	}
	var caAfter []byte
	eventually(t, "the CA to roll", func() bool {
		caAfter = secretData(t, caCertificate, corev1.TLSCertKey)
		return len(caAfter) > 0 && !bytes.Equal(caAfter, caBefore)
	})
	// The CA issuer may sign once more with the CA it read before the roll:
	// renew until the serving certificate names the new CA (bounded).
	served := served1
	for attempt := 1; ; attempt++ {
		if err := controlplane.RenewCertificate(ctx, dyn, stack.OperatorNamespace, servingCertificate); err != nil {
			t.Fatal(err)
		}
		served = waitServedSerialChange(t, served, "the serving certificate under the new CA")
		if bytes.Equal(secretData(t, servingCertificate, "ca.crt"), caAfter) {
			break
		}
		if attempt == 3 {
			t.Fatalf("after %d renewals the serving certificate still names the old CA", attempt)
		}
	}
	eventually(t, "cainjector to inject the new CA into both webhook configurations", func() bool {
		bundles := webhookBundles(t)
		// cainjector keeps the CA it replaces in the bundle for a while:
		// the new one must be there.
		return len(bundles) == 4 && !slices.ContainsFunc(bundles, func(b []byte) bool { return !bytes.Contains(b, caAfter) })
	})
	// Enough requests after the last change, and 2,000 at least in all.
	for load.sent.Load() < max(2000, atRenewal+200) {
		time.Sleep(100 * time.Millisecond)
		if load.expired() {
			break
		}
	}
	sent, failed, p50, p99 := load.stop()
	if sent < 2000 {
		t.Errorf("the load loop sent %d requests in its time bound, want at least 2,000", sent)
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d admission requests failed during the rotations; first: %v", len(failed), sent, failed[0])
	}
	t.Logf("rotation under load: %d dry-run creates, %d failed, p50 %s, p99 %s", sent, len(failed), p50, p99)
}

// TestUpgrade: `helm upgrade` with other replicas and log levels rolls both
// Deployments and keeps the CRDs and the Glance.
func TestUpgrade(t *testing.T) {
	ctx := context.Background()
	var g v1alpha1.Glance
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "openstack", Name: "glance"}, &g); err != nil {
		t.Fatal(err)
	}
	crdUIDs := chartCRDUIDs(t)
	before := map[string]int64{}
	for _, name := range []string{"glance-operator-manager", "glance-operator-webhook"} {
		before[name] = deployment(t, name).Generation
	}
	values := map[string]any{
		"manager": map[string]any{"replicas": 3, "logLevel": "debug"},
		"webhook": map[string]any{"replicas": 3, "logLevel": "debug"},
	}
	rel, err := stk.UpgradeChart(values)
	if err != nil {
		t.Fatal(err)
	}
	if rel.Version != 2 {
		t.Errorf("the release is at revision %d after one upgrade, want 2", rel.Version)
	}
	for name, generation := range before {
		d := deployment(t, name)
		if d.Generation <= generation || *d.Spec.Replicas != 3 || !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--log-level=debug") {
			t.Errorf("Deployment %s after the upgrade: generation %d (was %d), replicas %d, args %v", name, d.Generation, generation, *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Args)
		}
	}
	if err := stk.RollOut(ctx); err != nil {
		t.Fatal(err)
	}
	if got := chartCRDUIDs(t); !maps.Equal(got, crdUIDs) {
		t.Errorf("the CRDs were replaced by the upgrade: %v, were %v", got, crdUIDs)
	}
	var after v1alpha1.Glance
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "openstack", Name: "glance"}, &after); err != nil || after.UID != g.UID {
		t.Fatalf("the Glance after the upgrade: %v (UID %s, was %s)", err, after.UID, g.UID)
	}
	waitGlanceReady(t)
	// The webhook serves again, through the re-pointed Service.
	if err := dryRunCreate(ctx, cl, "after-upgrade"); err != nil {
		t.Errorf("a dry-run create after the upgrade: %v", err)
	}
}

// TestUninstallAndReinstall: `helm uninstall` removes every chart object but
// the CRDs, which the keep policy leaves with the Glance; a reinstall picks
// the Glance up without writing to its unchanged children.
func TestUninstallAndReinstall(t *testing.T) {
	ctx := context.Background()
	children := childVersions(t)
	if len(children) < 5 {
		t.Fatalf("the Glance has %d children to watch, want its Deployment, Service, PDB, ConfigMaps and Secrets: %v", len(children), children)
	}
	if err := stk.StopBinaries(); err != nil {
		t.Fatal(err)
	}
	if _, err := stk.UninstallChart(); err != nil {
		t.Fatal(err)
	}
	rendered, err := chart.Render(nil, chart.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(stk.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range rendered.Objects {
		mapping, err := cl.RESTMapper().RESTMapping(obj.GroupVersionKind().GroupKind(), obj.GroupVersionKind().Version)
		if err != nil {
			t.Fatal(err)
		}
		ri := dyn.Resource(mapping.Resource)
		var getErr error
		eventually(t, "uninstall to remove "+obj.GetKind()+" "+obj.GetName(), func() bool {
			if obj.GetNamespace() != "" {
				_, getErr = ri.Namespace(obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{})
			} else {
				_, getErr = ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
			}
			kept := obj.GetKind() == "CustomResourceDefinition"
			return kept == (getErr == nil) && (kept || apierrors.IsNotFound(getErr))
		})
	}
	var g v1alpha1.Glance
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "openstack", Name: "glance"}, &g); err != nil {
		t.Fatalf("the Glance did not survive the uninstall: %v", err)
	}

	if _, err := stk.InstallChart(nil); err != nil {
		t.Fatal(err)
	}
	if err := stk.RollOut(ctx); err != nil {
		t.Fatal(err)
	}
	// The new manager has reconciled the Glance once it reports a pass.
	eventually(t, "the reinstalled manager to reconcile the Glance", func() bool {
		return reconciles(t) > 0
	})
	waitGlanceReady(t)
	time.Sleep(2 * time.Second) // a write would land within the passes that follow
	if got := childVersions(t); !maps.Equal(got, children) {
		var changed []string
		for k, v := range got {
			if children[k] != v {
				changed = append(changed, k)
			}
		}
		sort.Strings(changed)
		t.Errorf("the reinstalled operator wrote to unchanged children: %v", changed)
	}
	var after v1alpha1.Glance
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "openstack", Name: "glance"}, &after); err != nil || after.ResourceVersion != g.ResourceVersion {
		t.Errorf("the reinstalled operator wrote the unchanged Glance: resourceVersion %s, was %s (%v)", after.ResourceVersion, g.ResourceVersion, err)
	}
}

// load is a bounded loop of dry-run creates through both webhooks.
type load struct {
	sent     atomic.Int64
	mu       sync.Mutex
	failed   []error
	latency  []time.Duration
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	deadline time.Time
	once     sync.Once
}

// loadTimeBound bounds every load loop.
const loadTimeBound = 3 * time.Minute

func startLoad(t *testing.T, workers int) *load {
	t.Helper()
	cfg := rest.CopyConfig(stk.Config)
	cfg.QPS, cfg.Burst = 1000, 1000
	c, err := operatortest.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), loadTimeBound)
	l := &load{cancel: cancel, deadline: time.Now().Add(loadTimeBound)}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				start := time.Now()
				err := dryRunCreate(ctx, c, fmt.Sprintf("load-%d-%d", w, i))
				if ctx.Err() != nil {
					return // the loop's end, not the webhook's answer
				}
				l.sent.Add(1)
				l.mu.Lock()
				l.latency = append(l.latency, time.Since(start))
				if err != nil {
					l.failed = append(l.failed, err)
				}
				l.mu.Unlock()
			}
		}()
	}
	return l
}

func (l *load) expired() bool { return time.Now().After(l.deadline) }

// stop ends the loop and returns its figures.
func (l *load) stop() (sent int64, failed []error, p50, p99 time.Duration) {
	l.once.Do(func() { l.cancel(); l.wg.Wait() })
	l.mu.Lock()
	defer l.mu.Unlock()
	lat := slices.Clone(l.latency)
	slices.Sort(lat)
	if len(lat) > 0 {
		p50, p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	return l.sent.Load(), l.failed, p50, p99
}

// dryRunCreate sends a dry-run create through both webhooks.
func dryRunCreate(ctx context.Context, c client.Client, name string) error {
	return stack.DryRunThroughWebhooks(ctx, c, "openstack", name)
}

var netDialer = net.Dialer{Timeout: 5 * time.Second}

func httpGet(url string) (string, error) {
	resp, err := http.Get(url) //nolint:gosec // a loopback metrics endpoint
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// servedSerial is the serial of the certificate the webhook serves, read
// where the API server reads it: through the Service's endpoint.
func servedSerial(t *testing.T) string {
	t.Helper()
	conn, err := tls.DialWithDialer(&netDialer, "tcp", stk.WebhookEndpoint, &tls.Config{ServerName: webhookDNS, InsecureSkipVerify: true}) //nolint:gosec // only the serial is read
	if err != nil {
		t.Fatalf("TLS to the webhook at %s: %v", stk.WebhookEndpoint, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func waitServedSerialChange(t *testing.T, old, what string) string {
	t.Helper()
	var serial string
	eventually(t, "the webhook to serve "+what, func() bool {
		serial = servedSerial(t)
		return serial != old
	})
	// What is served is what cert-manager issued.
	block, _ := pem.Decode(secretData(t, servingCertificate, corev1.TLSCertKey))
	if block == nil {
		t.Fatal("the serving Secret holds no PEM certificate")
	}
	issued, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if issued.SerialNumber.String() != serial {
		t.Errorf("the webhook serves serial %s, the Secret holds %s", serial, issued.SerialNumber)
	}
	return serial
}

func secretData(t *testing.T, certificate, key string) []byte {
	t.Helper()
	crt := &unstructured.Unstructured{}
	crt.SetAPIVersion("cert-manager.io/v1")
	crt.SetKind("Certificate")
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: stack.OperatorNamespace, Name: certificate}, crt); err != nil {
		t.Fatal(err)
	}
	name, _, _ := unstructured.NestedString(crt.Object, "spec", "secretName")
	var s corev1.Secret
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: stack.OperatorNamespace, Name: name}, &s); err != nil {
		t.Fatal(err)
	}
	return s.Data[key]
}

func webhookBundles(t *testing.T) [][]byte {
	t.Helper()
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	for _, obj := range []client.Object{m, v} {
		if err := cl.Get(context.Background(), client.ObjectKey{Name: chart.ReleaseName}, obj); err != nil {
			t.Fatal(err)
		}
	}
	var out [][]byte
	for _, w := range m.Webhooks {
		out = append(out, w.ClientConfig.CABundle)
	}
	for _, w := range v.Webhooks {
		out = append(out, w.ClientConfig.CABundle)
	}
	return out
}

func deployment(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: stack.OperatorNamespace, Name: name}, &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

func chartCRDUIDs(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range []string{"glances.glance.openstack.c5c3.io", "glancebackends.glance.openstack.c5c3.io"} {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		if err := cl.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
			t.Fatal(err)
		}
		out[name] = string(crd.GetUID())
	}
	return out
}

// childVersions maps each child of the Glance (by kind/name) to its
// resourceVersion: an unchanged version is an object nobody wrote.
func childVersions(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	ctx := context.Background()
	in := client.InNamespace("openstack")
	lists := map[string]client.ObjectList{
		"Deployment": &appsv1.DeploymentList{}, "Service": &corev1.ServiceList{},
		"ConfigMap": &corev1.ConfigMapList{}, "Secret": &corev1.SecretList{},
	}
	for kind, list := range lists {
		if err := cl.List(ctx, list, in); err != nil {
			t.Fatal(err)
		}
		err := meta.EachListItem(list, func(item runtime.Object) error {
			o, err := meta.Accessor(item)
			if err != nil {
				return err
			}
			for _, ref := range o.GetOwnerReferences() {
				if ref.Kind == "Glance" && ref.Name == "glance" {
					out[kind+"/"+o.GetName()] = o.GetResourceVersion()
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// reconciles is the new manager's count of Glance reconciles.
func reconciles(t *testing.T) float64 {
	t.Helper()
	body, err := httpGet(stk.ManagerMetricsURL)
	if err != nil {
		return 0
	}
	var total float64
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "controller_runtime_reconcile_total{") && strings.Contains(line, `controller="glance"`) {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); err == nil {
				total += v
			}
		}
	}
	return total
}

func waitGlanceReady(t *testing.T) {
	t.Helper()
	eventually(t, "the Glance to be Ready", func() bool {
		var g v1alpha1.Glance
		if err := cl.Get(context.Background(), client.ObjectKey{Namespace: "openstack", Name: "glance"}, &g); err != nil {
			return false
		}
		for _, c := range g.Status.Conditions {
			if c.Type == v1alpha1.ConditionReady {
				return c.Status == metav1.ConditionTrue && c.ObservedGeneration == g.Generation
			}
		}
		return false
	})
}

// eventually waits for what the stack does, and stops at once when a binary
// of the stack has died.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	operatortest.Eventually(t, what, func() error {
		if !cond() {
			return errors.New("not yet")
		}
		return nil
	}, operatortest.Within(2*time.Minute), operatortest.Every(250*time.Millisecond), operatortest.Unless(stk.Check))
}
