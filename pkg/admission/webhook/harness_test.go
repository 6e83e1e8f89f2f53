package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/operatortest"
)

// testCA issues serving certificates for 127.0.0.1 and localhost.
type testCA struct {
	*controlplane.CA
	pool *x509.CertPool
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	ca, err := controlplane.NewCA("glance-webhook test CA")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &testCA{CA: ca, pool: pool}
}

// issue returns a PEM certificate and key with the given serial, valid
// until notAfter.
func (ca *testCA) issue(t testing.TB, serial int64, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	pair, err := ca.IssueEdited(func(c *x509.Certificate) {
		c.SerialNumber = big.NewInt(serial)
		c.NotAfter = notAfter.Truncate(time.Second)
	}, pkix.Name{CommonName: "glance-webhook"}, "localhost", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return pair.Cert, pair.Key
}

// writeSecretVolume updates dir the way the kubelet updates a mounted
// Secret: the files go into a fresh hidden directory, the ..data symlink
// is swapped to it in one rename, and the previous directory is removed.
// The visible names are symlinks through ..data, so both files change at
// the same instant.
func writeSecretVolume(t testing.TB, dir string, files map[string][]byte) {
	t.Helper()
	dataLink := filepath.Join(dir, "..data")
	previous, _ := os.Readlink(dataLink)
	next, err := os.MkdirTemp(dir, "..data_")
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(next, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tmpLink := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(next), tmpLink); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmpLink, dataLink); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	if previous != "" {
		if err := os.RemoveAll(filepath.Join(dir, previous)); err != nil {
			t.Fatal(err)
		}
	}
}

// installCertificate writes a certificate of the CA with the given serial
// into the server's certificate directory.
func (ts *testServer) installCertificate(t testing.TB, ca *testCA, serial int64, notAfter time.Time) {
	t.Helper()
	certPEM, keyPEM := ca.issue(t, serial, notAfter)
	writeSecretVolume(t, ts.certDir, map[string][]byte{DefaultCertName: certPEM, DefaultKeyName: keyPEM})
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// noAPIServer is the rest config of servers whose lookups are fake: the
// manager needs one, and never calls it.
var noAPIServer = &rest.Config{Host: "https://127.0.0.1:1"}

// testServer is RunServer running in the background on loopback.
type testServer struct {
	hookAddr string // host:port of the HTTPS listener
	health   string // base URL of the health listener
	metrics  string // base URL of the metrics listener
	certDir  string
	cancel   context.CancelFunc
	done     chan error
}

// startTestServer runs RunServer with the given options on free loopback
// ports and an empty certificate directory, and stops it at the end of the
// test. It does not wait for readiness.
func startTestServer(t testing.TB, cfg *rest.Config, opts ServerOptions, log logr.Logger) *testServer {
	t.Helper()
	opts.BindAddress = "127.0.0.1"
	opts.Port = freePort(t)
	healthPort, metricsPort := freePort(t), freePort(t)
	opts.HealthAddress = "127.0.0.1:" + strconv.Itoa(healthPort)
	opts.MetricsAddress = "127.0.0.1:" + strconv.Itoa(metricsPort)
	if opts.CertDir == "" {
		opts.CertDir = t.TempDir()
	}
	if cfg == nil {
		cfg = noAPIServer
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{
		hookAddr: net.JoinHostPort(opts.BindAddress, strconv.Itoa(opts.Port)),
		health:   "http://" + opts.HealthAddress,
		metrics:  "http://" + opts.MetricsAddress,
		certDir:  opts.CertDir,
		cancel:   cancel,
		done:     make(chan error, 1),
	}
	go func() { ts.done <- RunServer(ctx, cfg, opts, log) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-ts.done:
		case <-time.After(2 * time.Minute):
			t.Error("RunServer did not return after cancel")
		}
	})
	return ts
}

func (ts *testServer) url(path string) string { return "https://" + ts.hookAddr + path }

// probe returns the HTTP status of a health endpoint, or 0 when it does
// not answer.
func (ts *testServer) probe(path string) int {
	resp, err := http.Get(ts.health + path)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func (ts *testServer) waitReady(t testing.TB) {
	t.Helper()
	waitFor(t, "/readyz to report ready", func() error {
		if code := ts.probe("/readyz"); code != http.StatusOK {
			return fmt.Errorf("/readyz: %d", code)
		}
		return nil
	})
}

// servingSerial dials a new TLS connection, verifying against the CA, and
// returns the serial of the certificate the server presents.
func (ts *testServer) servingSerial(ca *testCA) (*big.Int, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", ts.hookAddr, &tls.Config{RootCAs: ca.pool, ServerName: "127.0.0.1"})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// waitFor polls cond until it returns nil; it fails the test when a minute
// passes first. The bound only keeps a broken server from hanging the
// suite.
func waitFor(t testing.TB, what string, cond func() error) {
	t.Helper()
	operatortest.Eventually(t, what, cond, operatortest.Within(time.Minute), operatortest.Every(50*time.Millisecond))
}

// receive waits for a value on ch; it fails the test when a minute passes
// first, so that a broken server fails the suite rather than hanging it.
func receive[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("waiting for %s: no result after a minute", what)
		var zero T
		return zero
	}
}

// reviewClient trusts the CA; keepAlive false makes every review a new
// TLS handshake.
func reviewClient(ca *testCA, keepAlive bool) *http.Client {
	return &http.Client{
		Timeout: time.Minute,
		Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: ca.pool, ServerName: "127.0.0.1"},
			DisableKeepAlives:   !keepAlive,
			MaxIdleConnsPerHost: 64,
		},
	}
}

// postReview sends an AdmissionReview and returns its response, checking
// that the response answers the request's uid and, when given, came over
// the protocol wantProto.
func postReview(c *http.Client, url string, req *admissionv1.AdmissionRequest, wantProto ...string) (*admissionv1.AdmissionResponse, error) {
	body, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
	if err != nil {
		return nil, err
	}
	return postRaw(c, url, body, req.UID, wantProto...)
}

func postRaw(c *http.Client, url string, body []byte, uid types.UID, wantProto ...string) (*admissionv1.AdmissionResponse, error) {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if len(wantProto) > 0 && resp.Proto != wantProto[0] {
		return nil, fmt.Errorf("response over %s, want %s", resp.Proto, wantProto[0])
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&review); err != nil {
		return nil, err
	}
	if review.Response == nil {
		return nil, errors.New("AdmissionReview without a response")
	}
	if uid != "" && review.Response.UID != uid {
		return nil, fmt.Errorf("response uid %q, want %q", review.Response.UID, uid)
	}
	return review.Response, nil
}

// admissionRequest builds the request the API server sends for obj (and
// old on UPDATE).
func admissionRequest(t testing.TB, op admissionv1.Operation, obj, old runtime.Object) *admissionv1.AdmissionRequest {
	t.Helper()
	raw := func(o runtime.Object) runtime.RawExtension {
		if o == nil {
			return runtime.RawExtension{}
		}
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	acc, err := metaAccessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	resource := strings.ToLower(gvk.Kind) + "s"
	if gvk.Kind == "Glance" {
		resource = "glances"
	}
	return &admissionv1.AdmissionRequest{
		UID:       uuid.NewUUID(),
		Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Resource:  metav1.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: resource},
		Name:      acc.GetName(),
		Namespace: acc.GetNamespace(),
		Operation: op,
		Object:    raw(obj),
		OldObject: raw(old),
	}
}

func metaAccessor(obj runtime.Object) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no object meta", obj)
	}
	return m, nil
}

// sampleGlance is a production-shaped Glance on 2025.2.
func sampleGlance(namespace string) *v1alpha1.Glance {
	return &v1alpha1.Glance{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Glance"},
		ObjectMeta: metav1.ObjectMeta{Name: "glance", Namespace: namespace, Labels: map[string]string{"app.kubernetes.io/part-of": "openstack"}},
		Spec: v1alpha1.GlanceSpec{
			OpenStackRelease: "2025.2",
			Image:            v1alpha1.ImageSpec{Repository: "registry.example.com/openstack/glance", Tag: "2025.2"},
			Deployment: &v1alpha1.GlanceDeploymentSpec{
				Replicas: ptr.To[int32](3),
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourceEphemeralStorage: resource.MustParse("20Gi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("2Gi"), corev1.ResourceEphemeralStorage: resource.MustParse("100Gi")},
				},
				TopologySpreadConstraints: &[]corev1.TopologySpreadConstraint{{
					MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "glance", "app.kubernetes.io/instance": "glance"}},
				}},
			},
			Database: v1alpha1.DatabaseSpec{
				ClusterRef: &v1alpha1.LocalObjectReference{Name: "mariadb"},
				Database:   "glance",
				SecretRef:  v1alpha1.SecretKeySelector{Name: "glance-db"},
			},
			Cache:            &v1alpha1.CacheSpec{Servers: []string{"memcached-0.memcached:11211", "memcached-1.memcached:11211"}},
			KeystoneEndpoint: "http://keystone.openstack.svc:5000/v3",
			ServiceUser:      v1alpha1.ServiceUserSpec{SecretRef: v1alpha1.SecretKeySelector{Name: "glance-service-user"}},
			Gateway:          nil,
			NetworkPolicy: &v1alpha1.NetworkPolicySpec{Ingress: []v1alpha1.NetworkPolicySource{
				{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "openstack"}}},
				{PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"nova", "cinder"}}}}},
			}},
			Middleware: []v1alpha1.MiddlewareSpec{{Name: "audit", FilterFactory: "keystonemiddleware.audit:filter_factory", Config: map[string]string{"audit_map_file": "/etc/glance/api_audit_map.conf"}}},
			ExtraConfig: map[string]map[string]string{
				"DEFAULT":               {"show_image_direct_url": "false", "image_size_cap": "1099511627776"},
				"oslo_messaging_rabbit": {"heartbeat_timeout_threshold": "60"},
			},
			ImageCache: &v1alpha1.ImageCacheSpec{Size: resource.MustParse("20Gi")},
			DBPurge:    &v1alpha1.DBPurgeSpec{Schedule: "17 3 * * *", AgeInDays: ptr.To[int32](30)},
		},
	}
}

// sampleBackend is an S3 GlanceBackend of the Glance "glance".
func sampleBackend(namespace, name string, isDefault bool) *v1alpha1.GlanceBackend {
	return &v1alpha1.GlanceBackend{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "GlanceBackend"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1alpha1.GlanceBackendSpec{
			GlanceRef: v1alpha1.LocalObjectReference{Name: "glance"},
			Type:      v1alpha1.BackendTypeS3,
			IsDefault: isDefault,
			S3: &v1alpha1.S3BackendSpec{
				Host:                 "http://s3.openstack.svc:9000",
				Bucket:               "glance-" + name,
				CredentialsSecretRef: v1alpha1.LocalObjectReference{Name: "s3-credentials"},
			},
			ExtraOptions: map[string]v1alpha1.OptionValue{"weight": "100"},
		},
	}
}

// fakeLookups answers from fixed data, or fails with err.
type fakeLookups struct {
	backends        []v1alpha1.GlanceBackend
	priorityClasses map[string]bool
	err             error
}

func (f fakeLookups) Backends(_ context.Context, namespace, glance, _ string) ([]v1alpha1.GlanceBackend, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []v1alpha1.GlanceBackend
	for _, b := range f.backends {
		if b.Namespace == namespace && b.Spec.GlanceRef.Name == glance {
			out = append(out, b)
		}
	}
	return out, nil
}

func (f fakeLookups) PriorityClassExists(_ context.Context, name string) (bool, error) {
	if f.err != nil {
		return false, f.err
	}
	return f.priorityClasses[name], nil
}

// scrape reads the metrics endpoint.
func (ts *testServer) scrape(t testing.TB) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(ts.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// verdictCounts is RequestsMetric and the sample count of
// RequestDurationMetric by webhook path and verdict. The metrics are the
// process's, which every server of the test binary counts into, so tests
// compare two readings (since).
type verdictCounts map[string]map[string]float64

func (ts *testServer) verdictCounts(t testing.TB) verdictCounts {
	t.Helper()
	counts := verdictCounts{}
	families := ts.scrape(t)
	for _, path := range []string{MutateGlancePath, ValidateGlancePath, MutateGlanceBackendPath, ValidateGlanceBackendPath} {
		counts[path] = map[string]float64{}
		for _, v := range verdicts {
			requests := series(families, RequestsMetric, path, v)
			observed := series(families, RequestDurationMetric, path, v)
			if requests == nil || observed == nil {
				t.Fatalf("/metrics lacks the %s series of %s %s", path, RequestsMetric, v)
			}
			if float64(observed.GetHistogram().GetSampleCount()) != requests.GetCounter().GetValue() {
				t.Fatalf("%s %s: %v requests, %d durations observed", path, v, requests.GetCounter().GetValue(), observed.GetHistogram().GetSampleCount())
			}
			counts[path][v] = requests.GetCounter().GetValue()
		}
	}
	return counts
}

// since is c less earlier, leaving out the verdicts that did not change.
func (c verdictCounts) since(earlier verdictCounts) verdictCounts {
	out := verdictCounts{}
	for path, byVerdict := range c {
		for v, n := range byVerdict {
			if d := n - earlier[path][v]; d != 0 {
				if out[path] == nil {
					out[path] = map[string]float64{}
				}
				out[path][v] = d
			}
		}
	}
	return out
}

// series returns the metric of family with the webhook and verdict labels.
func series(families map[string]*dto.MetricFamily, family, webhook, verdict string) *dto.Metric {
	f := families[family]
	if f == nil {
		return nil
	}
	for _, m := range f.Metric {
		var w, v string
		for _, l := range m.Label {
			switch l.GetName() {
			case "webhook":
				w = l.GetValue()
			case "verdict":
				v = l.GetValue()
			}
		}
		if w == webhook && v == verdict {
			return m
		}
	}
	return nil
}
