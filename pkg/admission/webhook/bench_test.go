package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

const benchNamespace = "openstack"

// benchLookups is what a production namespace answers: the PriorityClass
// exists and the Glance has three backends, one of them the default.
func benchLookups() fakeLookups {
	var backends []v1alpha1.GlanceBackend
	for i, name := range []string{"primary", "archive", "replica"} {
		backends = append(backends, *sampleBackend(benchNamespace, name, i == 0))
	}
	return fakeLookups{backends: backends, priorityClasses: map[string]bool{"glance-critical": true}}
}

func benchGlance() *v1alpha1.Glance {
	g := sampleGlance(benchNamespace)
	g.Spec.Deployment.PriorityClassName = ptr.To("glance-critical")
	return g
}

// reviewBody is the JSON of an AdmissionReview as the API server sends it.
func reviewBody(tb testing.TB, req *admissionv1.AdmissionRequest) []byte {
	tb.Helper()
	body, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return body
}

// discardResponse is a ResponseWriter that keeps nothing, so the loop
// measures the webhook rather than a recorder's buffer.
type discardResponse struct{ header http.Header }

func (d *discardResponse) Header() http.Header         { return d.header }
func (d *discardResponse) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardResponse) WriteHeader(int)             {}

// benchmarkHandler measures one review through the HTTP handler the server
// serves, in-process and without the metrics and the log: decode the
// AdmissionReview and the object(s), run the rules, encode the response.
// It first checks the verdict once.
func benchmarkHandler(b *testing.B, path string, req *admissionv1.AdmissionRequest, wantVerdict string) {
	benchmarkBody(b, path, reviewBody(b, req), wantVerdict)
}

func benchmarkBody(b *testing.B, path string, body []byte, wantVerdict string) {
	scheme := k8sruntime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	hook := reviewHandler{hook: Handlers(scheme, benchLookups())[path]}

	rec := httptest.NewRecorder()
	first := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)).WithContext(b.Context())
	first.Header.Set("Content-Type", "application/json")
	hook.ServeHTTP(rec, first)
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil || review.Response == nil {
		b.Fatalf("response %s: %v", rec.Body.String(), err)
	}
	if got := verdictOf(review.Response.Allowed, review.Response.Result); got != wantVerdict {
		b.Fatalf("verdict %s, want %s: %+v", got, wantVerdict, review.Response.Result)
	}

	r := httptest.NewRequest(http.MethodPost, path, nil).WithContext(b.Context())
	r.Header.Set("Content-Type", "application/json")
	r.ContentLength = int64(len(body)) // as the API server sends it
	w := &discardResponse{header: http.Header{}}
	reader := bytes.NewReader(body)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		reader.Reset(body)
		r.Body = io.NopCloser(reader)
		hook.ServeHTTP(w, r)
	}
}

func BenchmarkHandlerMutateGlance(b *testing.B) {
	b.Run("CREATE", func(b *testing.B) {
		benchmarkHandler(b, MutateGlancePath, admissionRequest(b, admissionv1.Create, benchGlance(), nil), VerdictAllowed)
	})
	b.Run("UPDATE", func(b *testing.B) {
		benchmarkHandler(b, MutateGlancePath, admissionRequest(b, admissionv1.Update, benchGlance(), benchGlance()), VerdictAllowed)
	})
	// The bytes allocated per review say how many copies of the object a
	// review makes: its metadata here holds nearly all of its 1.5 MiB.
	b.Run("UPDATE-largest", func(b *testing.B) {
		benchmarkBody(b, MutateGlancePath, largestReview(b), VerdictAllowed)
	})
}

func BenchmarkHandlerValidateGlance(b *testing.B) {
	b.Run("CREATE", func(b *testing.B) {
		benchmarkHandler(b, ValidateGlancePath, admissionRequest(b, admissionv1.Create, benchGlance(), nil), VerdictAllowed)
	})
	b.Run("UPDATE-release-upgrade", func(b *testing.B) {
		old := benchGlance()
		old.Status.InstalledRelease = "2025.2"
		g := benchGlance()
		g.Spec.OpenStackRelease, g.Spec.Image.Tag = "2026.1", "2026.1"
		benchmarkHandler(b, ValidateGlancePath, admissionRequest(b, admissionv1.Update, g, old), VerdictAllowed)
	})
}

func BenchmarkHandlerMutateGlanceBackend(b *testing.B) {
	b.Run("CREATE", func(b *testing.B) {
		benchmarkHandler(b, MutateGlanceBackendPath, admissionRequest(b, admissionv1.Create, sampleBackend(benchNamespace, "cold", false), nil), VerdictAllowed)
	})
}

func BenchmarkHandlerValidateGlanceBackend(b *testing.B) {
	b.Run("CREATE", func(b *testing.B) {
		benchmarkHandler(b, ValidateGlanceBackendPath, admissionRequest(b, admissionv1.Create, sampleBackend(benchNamespace, "cold", false), nil), VerdictAllowed)
	})
	b.Run("UPDATE-becomes-default", func(b *testing.B) {
		// Lists the three siblings and finds "primary" already the default.
		old := sampleBackend(benchNamespace, "archive", false)
		benchmarkHandler(b, ValidateGlanceBackendPath, admissionRequest(b, admissionv1.Update, sampleBackend(benchNamespace, "archive", true), old), VerdictDenied)
	})
}

// BenchmarkServerLoad drives the HTTPS server with 32 concurrent keep-alive
// clients posting the validating Glance review (with its PriorityClass
// lookup answered by the fake). The clients run in the same process, so
// reviews/s/core counts their CPU too and understates the server alone.
func BenchmarkServerLoad(b *testing.B) {
	const clients = 32
	ts, ca := startFakeServer(b, benchLookups(), ServerOptions{}, logr.Discard())

	body := reviewBody(b, admissionRequest(b, admissionv1.Create, benchGlance(), nil))
	url := ts.url(ValidateGlancePath)
	hc := reviewClient(ca, true)
	post := func() error {
		resp, err := postRaw(hc, url, body, "")
		if err == nil && !resp.Allowed {
			err = fmt.Errorf("denied: %+v", resp.Result)
		}
		return err
	}
	// Open every connection before timing, so handshakes are not measured.
	var warm sync.WaitGroup
	for range clients {
		warm.Go(func() { _ = post() })
	}
	warm.Wait()
	if err := post(); err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()
	all, elapsed := closedLoop(b, clients, int64(b.N), post)
	b.StopTimer()
	b.ReportMetric(percentileMs(all, 0.50), "p50-ms")
	b.ReportMetric(percentileMs(all, 0.99), "p99-ms")
	b.ReportMetric(float64(b.N)/elapsed.Seconds()/float64(runtime.GOMAXPROCS(0)), "reviews/s/core")
}

// closedLoop has clients post, each as soon as its last answer came, until
// n reviews are done, and returns every latency, sorted, and the wall time.
// A failed review fails tb.
func closedLoop(tb testing.TB, clients int, n int64, post func() error) ([]time.Duration, time.Duration) {
	var (
		next     atomic.Int64
		failures atomic.Int64
		firstErr atomic.Value
		wg       sync.WaitGroup
	)
	latencies := make([][]time.Duration, clients)
	start := time.Now()
	for i := range clients {
		wg.Go(func() {
			own := make([]time.Duration, 0, n/int64(clients)+1)
			for next.Add(1) <= n {
				t0 := time.Now()
				if err := post(); err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
				own = append(own, time.Since(t0))
			}
			latencies[i] = own
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if f := failures.Load(); f > 0 {
		tb.Fatalf("%d of %d reviews failed; the first: %v", f, n, firstErr.Load())
	}
	all := slices.Concat(latencies...)
	slices.Sort(all)
	return all, elapsed
}

// percentileMs is the p-th quantile of sorted latencies, in milliseconds.
func percentileMs(sorted []time.Duration, p float64) float64 {
	return float64(sorted[int(p*float64(len(sorted)-1))]) / float64(time.Millisecond)
}
