package webhook

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// lookupClients is the concurrency the sibling lookup is measured at.
const lookupClients = 64

// lookupScenarios are the two answers of the one-default rule: a sibling is
// the default already (refused from the watch), or none is (let in after
// the API server confirms it).
var lookupScenarios = []struct {
	name, glance, wantVerdict string
}{
	{"sibling-is-default", "taken", VerdictDenied},
	{"no-default-yet", "fresh", VerdictAllowed},
}

// lookupLoad serves the real webhook against the shared kube-apiserver, in
// a namespace of its own where Glance "taken" has a default backend and
// Glance "fresh" has none, and returns a post of the review that makes a
// third backend of glance the default: the one review that runs the
// sibling lookup.
func lookupLoad(tb testing.TB, glance, wantVerdict string) func() error {
	tb.Helper()
	cfg := testAPIServer(tb)
	c := testClient(tb, cfg)
	ns := "lookups-" + string(uuid.NewUUID())[:8]
	create(tb, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	for _, g := range []string{"taken", "fresh"} {
		for i, name := range []string{"primary", "archive", "replica"} {
			b := sampleBackend(ns, g+"-"+name, g == "taken" && i == 0)
			b.Spec.GlanceRef.Name = g
			create(tb, c, b)
		}
	}
	ts := startTestServer(tb, cfg, ServerOptions{}, logr.Discard())
	ca := newTestCA(tb)
	ts.installCertificate(tb, ca, 1, time.Now().Add(time.Hour))
	ts.waitReady(tb)

	old := sampleBackend(ns, glance+"-archive", false)
	old.Spec.GlanceRef.Name = glance
	becomes := old.DeepCopy()
	becomes.Spec.IsDefault = true
	body := reviewBody(tb, admissionRequest(tb, admissionv1.Update, becomes, old))
	url := ts.url(ValidateGlanceBackendPath)
	hc := reviewClient(ca, true)
	post := func() error {
		resp, err := postRaw(hc, url, body, "")
		if err != nil {
			return err
		}
		if got := verdictOf(resp.Allowed, resp.Result); got != wantVerdict {
			return fmt.Errorf("verdict %s, want %s: %+v", got, wantVerdict, resp.Result)
		}
		return nil
	}
	// Open every connection first, so handshakes are not measured.
	warm := make(chan error, lookupClients)
	for range lookupClients {
		go func() { warm <- post() }()
	}
	for range lookupClients {
		if err := <-warm; err != nil {
			tb.Fatal(err)
		}
	}
	return post
}

// lookupRate is the review rate the paced benchmark offers.
const lookupRate = 500

// BenchmarkBackendLookups measures the validating GlanceBackend webhook when
// every review runs the sibling lookup, against a real kube-apiserver, with
// 64 clients: closed-loop (each posts as soon as it has its answer: the
// most the webhook serves), and paced at 500 reviews/s (latency from each
// review's scheduled time, so a stall is not hidden by the clients waiting
// on it). The clients, the webhook and the API server share this
// machine's cores.
func BenchmarkBackendLookups(b *testing.B) {
	for _, sc := range lookupScenarios {
		b.Run(sc.name+"/closed-loop", func(b *testing.B) {
			post := lookupLoad(b, sc.glance, sc.wantVerdict)
			b.ResetTimer()
			all, elapsed := closedLoop(b, lookupClients, int64(b.N), post)
			b.StopTimer()
			reportLatencies(b, all, elapsed)
		})
		b.Run(sc.name+"/paced-500", func(b *testing.B) {
			post := lookupLoad(b, sc.glance, sc.wantVerdict)
			b.ResetTimer()
			all, elapsed := pacedLoop(b, lookupClients, lookupRate, int64(b.N), post)
			b.StopTimer()
			reportLatencies(b, all, elapsed)
		})
	}
}

func reportLatencies(b *testing.B, sorted []time.Duration, elapsed time.Duration) {
	b.ReportMetric(percentileMs(sorted, 0.50), "p50-ms")
	b.ReportMetric(percentileMs(sorted, 0.99), "p99-ms")
	b.ReportMetric(float64(len(sorted))/elapsed.Seconds(), "reviews/s")
	b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "cores")
}

// pacedLoop offers n reviews at rate per second to clients workers and
// returns each review's latency from its scheduled time, sorted, and the
// wall time. A failed review fails tb.
func pacedLoop(tb testing.TB, clients, rate int, n int64, post func() error) ([]time.Duration, time.Duration) {
	schedule := make(chan time.Time, n)
	start := time.Now()
	go func() {
		defer close(schedule)
		for i := range n {
			at := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
			time.Sleep(time.Until(at))
			schedule <- at
		}
	}()
	latencies := make(chan time.Duration, n)
	_, elapsed := closedLoop(tb, clients, n, func() error {
		at := <-schedule
		err := post()
		latencies <- time.Since(at)
		return err
	})
	close(latencies)
	all := make([]time.Duration, 0, n)
	for l := range latencies {
		all = append(all, l)
	}
	slices.Sort(all)
	return all, elapsed
}

// TestBackendLookupsUnderLoad is the smoke of BenchmarkBackendLookups: 64
// clients, 1,000 reviews of each scenario, every verdict right. Its figures
// are logged, never asserted.
func TestBackendLookupsUnderLoad(t *testing.T) {
	for _, sc := range lookupScenarios {
		t.Run(sc.name, func(t *testing.T) {
			post := lookupLoad(t, sc.glance, sc.wantVerdict)
			all, elapsed := closedLoop(t, lookupClients, 1000, post)
			t.Logf("%d reviews in %s: %.0f/s, p50 %.1f ms, p99 %.1f ms", len(all), elapsed, float64(len(all))/elapsed.Seconds(), percentileMs(all, 0.5), percentileMs(all, 0.99))
		})
	}
}
