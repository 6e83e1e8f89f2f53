package webhook

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/controlplane"
)

// The API server is started by the first test that needs it (benchmarks
// do not) and stopped after all tests.
var apiServer struct {
	once sync.Once
	srv  *controlplane.APIServer
	err  error
}

func TestMain(m *testing.M) {
	// controller-runtime's own logs (webhook registration, certwatcher) are
	// not what these tests look at.
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	if apiServer.srv != nil {
		if err := apiServer.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop API server:", err)
		}
	}
	os.Exit(code)
}

// testAPIServer returns the config of the shared kube-apiserver with the
// Glance CRDs installed; a missing control plane fails the test with the
// command that builds it.
func testAPIServer(t testing.TB) *rest.Config {
	t.Helper()
	apiServer.once.Do(func() {
		apiServer.srv, apiServer.err = controlplane.StartAPIServer(controlplane.APIServerOptions{CRDs: controlplane.CRDs{Glance: true}})
	})
	if apiServer.err != nil {
		t.Fatal(apiServer.err)
	}
	return rest.CopyConfig(apiServer.srv.Config)
}

func testClient(t testing.TB, cfg *rest.Config) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func create(t testing.TB, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

func TestServerJudgesReviewsOverTLS(t *testing.T) {
	cfg := testAPIServer(t)
	c := testClient(t, cfg)
	const ns = "webhook-reviews"
	create(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "glance-critical"}, Value: 1000},
		sampleBackend(ns, "primary", true),
	)

	ts := startTestServer(t, cfg, ServerOptions{}, testr.New(t))
	ca := newTestCA(t)

	t.Run("not ready before the certificate exists", func(t *testing.T) {
		waitFor(t, "/healthz to answer", func() error {
			if code := ts.probe("/healthz"); code != http.StatusOK {
				return fmt.Errorf("/healthz: %d", code)
			}
			return nil
		})
		if code := ts.probe("/readyz"); code != http.StatusInternalServerError {
			t.Fatalf("/readyz without a certificate: %d, want %d", code, http.StatusInternalServerError)
		}
	})

	t.Run("ready once the certificate exists", func(t *testing.T) {
		ts.installCertificate(t, ca, 10, time.Now().Add(12*time.Hour))
		ts.waitReady(t)
		serial, err := ts.servingSerial(ca)
		if err != nil {
			t.Fatal(err)
		}
		if serial.Int64() != 10 {
			t.Fatalf("serving serial %s, want 10", serial)
		}
	})

	hc := reviewClient(ca, true)
	withUWSGI := sampleGlance(ns)
	withUWSGI.Spec.APIServer = &v1alpha1.APIServerSpec{UWSGI: &v1alpha1.UWSGISpec{Processes: ptr.To[int32](4)}}
	withUWSGI.Spec.Deployment.PriorityClassName = ptr.To("glance-critical")
	missingClass := sampleGlance(ns)
	missingClass.Spec.Deployment.PriorityClassName = ptr.To("no-such-class")
	installed := sampleGlance(ns)
	installed.Status.InstalledRelease = "2025.2"
	skipping := sampleGlance(ns)
	skipping.Spec.OpenStackRelease = "2026.2"
	skipping.Spec.Image.Tag = "2026.2"

	cases := []struct {
		name     string
		path     string
		req      *admissionv1.AdmissionRequest
		allowed  bool
		code     int32
		patch    string // a substring of the JSON patch
		warning  string // a substring of one warning
		causeFor string // the field of a cause
	}{
		{name: "defaults a Glance", path: MutateGlancePath, req: admissionRequest(t, admissionv1.Create, sampleGlance(ns), nil),
			allowed: true, patch: `"path":"/spec/database/port"`},
		{name: "warns about an inert knob", path: ValidateGlancePath, req: admissionRequest(t, admissionv1.Create, withUWSGI, nil),
			allowed: true, warning: "spec.apiServer.uwsgi has no effect on 2025.2"},
		{name: "denies a PriorityClass the API server does not have", path: ValidateGlancePath, req: admissionRequest(t, admissionv1.Create, missingClass, nil),
			allowed: false, code: http.StatusUnprocessableEntity, causeFor: "spec.deployment.priorityClassName"},
		{name: "denies skipping a release", path: ValidateGlancePath, req: admissionRequest(t, admissionv1.Update, skipping, installed),
			allowed: false, code: http.StatusUnprocessableEntity, causeFor: "spec.openStackRelease"},
		{name: "defaults a GlanceBackend", path: MutateGlanceBackendPath, req: admissionRequest(t, admissionv1.Create, sampleBackend(ns, "secondary", false), nil),
			allowed: true},
		{name: "admits a second non-default backend", path: ValidateGlanceBackendPath, req: admissionRequest(t, admissionv1.Create, sampleBackend(ns, "secondary", false), nil),
			allowed: true},
		{name: "denies a second default backend", path: ValidateGlanceBackendPath, req: admissionRequest(t, admissionv1.Create, sampleBackend(ns, "secondary", true), nil),
			allowed: false, code: http.StatusUnprocessableEntity, causeFor: "spec.isDefault"},
	}
	before := ts.verdictCounts(t)
	t.Run("reviews", func(t *testing.T) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp, err := postReview(hc, ts.url(tc.path), tc.req)
				if err != nil {
					t.Fatal(err)
				}
				if resp.Allowed != tc.allowed {
					t.Fatalf("allowed %v, want %v; result %+v", resp.Allowed, tc.allowed, resp.Result)
				}
				if tc.code != 0 && (resp.Result == nil || resp.Result.Code != tc.code) {
					t.Fatalf("result %+v, want code %d", resp.Result, tc.code)
				}
				if tc.patch != "" && !strings.Contains(string(resp.Patch), tc.patch) {
					t.Errorf("patch %s lacks %s", resp.Patch, tc.patch)
				}
				if tc.warning != "" && !containsSubstring(resp.Warnings, tc.warning) {
					t.Errorf("warnings %q lack %q", resp.Warnings, tc.warning)
				}
				if tc.warning == "" && len(resp.Warnings) > 0 {
					t.Errorf("unexpected warnings %q", resp.Warnings)
				}
				if tc.causeFor != "" && !hasCause(resp.Result, tc.causeFor) {
					t.Errorf("result %+v has no cause for %s", resp.Result, tc.causeFor)
				}
			})
		}
		t.Run("an undecodable review is an error", func(t *testing.T) {
			status, review := postStatus(t, hc, ts.url(ValidateGlancePath), `{"kind":`)
			if status != http.StatusBadRequest {
				t.Fatalf("HTTP %d, want 400", status)
			}
			if resp := review.Response; resp == nil || resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusBadRequest {
				t.Fatalf("response %+v, want a denial with code 400", resp)
			}
		})
	})

	t.Run("metrics count reviews by webhook and verdict", func(t *testing.T) {
		want := verdictCounts{
			MutateGlancePath:          {VerdictAllowed: 1},
			ValidateGlancePath:        {VerdictAllowed: 1, VerdictDenied: 2, VerdictError: 1},
			MutateGlanceBackendPath:   {VerdictAllowed: 1},
			ValidateGlanceBackendPath: {VerdictAllowed: 1, VerdictDenied: 1},
		}
		if got := ts.verdictCounts(t).since(before); !reflect.DeepEqual(got, want) {
			t.Errorf("reviews counted (with their durations) by webhook and verdict: %v, want %v", got, want)
		}
		families := ts.scrape(t)
		if f := families[CertificateExpiryMetric]; f == nil || f.Metric[0].GetGauge().GetValue() <= float64(time.Now().Unix()) {
			t.Errorf("%s: %v, want the certificate's NotAfter", CertificateExpiryMetric, f)
		}
	})

	// The sibling lookup reads a watch, which lags the API server; a
	// default made a moment ago must still be seen.
	t.Run("a default created a moment ago is never missed", func(t *testing.T) {
		for i := range 20 {
			glance := fmt.Sprintf("just-now-%d", i)
			first := sampleBackend(ns, glance+"-first", true)
			first.Spec.GlanceRef.Name = glance
			create(t, c, first)
			second := sampleBackend(ns, glance+"-second", true)
			second.Spec.GlanceRef.Name = glance
			resp, err := postReview(hc, ts.url(ValidateGlanceBackendPath), admissionRequest(t, admissionv1.Create, second, nil))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Allowed || !hasCause(resp.Result, "spec.isDefault") {
				t.Fatalf("a second default of %s right after the first: allowed %v, %+v", glance, resp.Allowed, resp.Result)
			}
		}
	})
}

// TestCertificateRotationFailsNoReview rotates the serving certificate twice,
// the way the kubelet updates a cert-manager Secret volume, while clients
// send reviews continuously, half of them on kept-alive connections and half
// with a new TLS handshake per review.
func TestCertificateRotationFailsNoReview(t *testing.T) {
	cfg := testAPIServer(t)
	ts := startTestServer(t, cfg, ServerOptions{}, testr.NewWithOptions(t, testr.Options{Verbosity: 0}))
	ca := newTestCA(t)
	ts.installCertificate(t, ca, 100, time.Now().Add(6*time.Hour))
	ts.waitReady(t)

	const workers = 8
	var (
		stop     atomic.Bool
		failures atomic.Int64
		firstErr atomic.Pointer[error]
		done     [workers]atomic.Int64
		wg       sync.WaitGroup
	)
	review := admissionRequest(t, admissionv1.Create, sampleGlance("rotation"), nil)
	for i := range workers {
		hc := reviewClient(ca, i%2 == 0)
		wg.Go(func() {
			for !stop.Load() {
				req := *review
				req.UID = uuid.NewUUID()
				resp, err := postReview(hc, ts.url(ValidateGlancePath), &req)
				if err == nil && !resp.Allowed {
					err = fmt.Errorf("denied: %+v", resp.Result)
				}
				if err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, &err)
					continue
				}
				done[i].Add(1)
			}
		})
	}
	// Each worker must have completed reviews after a step, so that the
	// traffic spans every swap.
	waitProgress := func(what string) {
		var base [workers]int64
		for i := range workers {
			base[i] = done[i].Load()
		}
		waitFor(t, what, func() error {
			for i := range workers {
				if done[i].Load() < base[i]+5 {
					return fmt.Errorf("worker %d has done %d reviews since", i, done[i].Load()-base[i])
				}
			}
			return nil
		})
	}

	waitProgress("reviews on the first certificate")
	var lastNotAfter time.Time
	for _, serial := range []int64{101, 102} {
		lastNotAfter = time.Now().Add(time.Duration(serial) * time.Hour).Truncate(time.Second)
		ts.installCertificate(t, ca, serial, lastNotAfter)
		waitFor(t, fmt.Sprintf("new connections to present serial %d", serial), func() error {
			got, err := ts.servingSerial(ca)
			if err != nil {
				return err
			}
			if got.Cmp(big.NewInt(serial)) != 0 {
				return fmt.Errorf("serving serial %s", got)
			}
			return nil
		})
		waitProgress(fmt.Sprintf("reviews on serial %d", serial))
	}
	stop.Store(true)
	wg.Wait()

	var total int64
	for i := range workers {
		total += done[i].Load()
	}
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d of %d reviews failed during rotation; first: %v", n, n+total, *firstErr.Load())
	}
	t.Logf("%d reviews, none failed, across two rotations", total)

	gauge := ts.scrape(t)[CertificateExpiryMetric]
	if gauge == nil || int64(gauge.Metric[0].GetGauge().GetValue()) != lastNotAfter.Unix() {
		t.Errorf("%s: %v, want %d", CertificateExpiryMetric, gauge, lastNotAfter.Unix())
	}
}

// blockingLookups holds PriorityClassExists for one class until released,
// then asks the API server with the review's context.
type blockingLookups struct {
	APILookups
	class    string
	entered  chan struct{}
	release  chan struct{}
	canceled chan error // the cause, when the review's context ends first
}

func (b blockingLookups) PriorityClassExists(ctx context.Context, name string) (bool, error) {
	if name == b.class {
		close(b.entered)
		select {
		case <-b.release:
		case <-ctx.Done():
			b.canceled <- context.Cause(ctx)
			return false, ctx.Err()
		}
	}
	return b.APILookups.PriorityClassExists(ctx, name)
}

// TestShutdownDrainsInFlightReviews cancels the server while a review waits
// in its lookup, over HTTP/1.1 and over HTTP/2 (with EnableHTTP2).
func TestShutdownDrainsInFlightReviews(t *testing.T) {
	cfg := testAPIServer(t)
	c := testClient(t, cfg)
	create(t, c, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "glance-slow"}, Value: 10})
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run(proto, func(t *testing.T) { testShutdownDrains(t, c, proto) })
	}
}

func testShutdownDrains(t *testing.T, c client.Client, proto string) {
	lookups := blockingLookups{
		APILookups: APILookups{Reader: c},
		class:      "glance-slow",
		entered:    make(chan struct{}),
		release:    make(chan struct{}),
		canceled:   make(chan error, 1),
	}
	ts := startTestServer(t, nil, ServerOptions{Lookups: lookups, ShutdownTimeout: 5 * time.Minute, EnableHTTP2: proto == "HTTP/2.0"}, testr.New(t))
	ca := newTestCA(t)
	ts.installCertificate(t, ca, 7, time.Now().Add(time.Hour))
	ts.waitReady(t)

	slow := sampleGlance("drain")
	slow.Spec.Deployment.PriorityClassName = ptr.To("glance-slow")
	type result struct {
		resp *admissionv1.AdmissionResponse
		err  error
	}
	answered := make(chan result, 1)
	review := admissionRequest(t, admissionv1.Create, slow, nil)
	hc := reviewClient(ca, true)
	hc.Transport.(*http.Transport).ForceAttemptHTTP2 = proto == "HTTP/2.0"
	go func() {
		resp, err := postReview(hc, ts.url(ValidateGlancePath), review, proto)
		answered <- result{resp, err}
	}()
	receive(t, lookups.entered, "the review to reach its lookup")
	ts.cancel()

	waitFor(t, "/readyz to report not ready while draining", func() error {
		if code := ts.probe("/readyz"); code != http.StatusInternalServerError {
			return fmt.Errorf("/readyz: %d", code)
		}
		return nil
	})
	waitFor(t, "the listener to refuse new connections", func() error {
		if _, err := ts.servingSerial(ca); err == nil {
			return errors.New("a new TLS connection was accepted")
		}
		return nil
	})
	select {
	case err := <-ts.done:
		t.Fatalf("RunServer returned %v with a review in flight", err)
	case err := <-lookups.canceled:
		t.Fatalf("the in-flight review's context was cancelled by shutdown: %v", err)
	default:
	}

	close(lookups.release)
	r := receive(t, answered, "the in-flight review's response")
	if r.err != nil {
		t.Fatalf("in-flight review failed: %v", r.err)
	}
	if !r.resp.Allowed {
		t.Fatalf("in-flight review: %+v, want allowed (glance-slow exists)", r.resp.Result)
	}
	if err := receive(t, ts.done, "RunServer to return after the drain"); err != nil {
		t.Fatalf("RunServer: %v", err)
	}
	ts.done <- nil // for the cleanup
}

func containsSubstring(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func hasCause(st *metav1.Status, fieldPath string) bool {
	if st == nil || st.Details == nil {
		return false
	}
	for _, c := range st.Details.Causes {
		if c.Field == fieldPath {
			return true
		}
	}
	return false
}
