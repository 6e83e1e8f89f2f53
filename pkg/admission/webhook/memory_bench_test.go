package webhook

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
)

// memoryLoad is how long BenchmarkServerMemory sends the largest reviews:
// WEBHOOK_MEMORY_LOAD (make bench sets it), else a minute.
func memoryLoad(tb testing.TB) time.Duration {
	v := os.Getenv("WEBHOOK_MEMORY_LOAD")
	if v == "" {
		return time.Minute
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		tb.Fatalf("WEBHOOK_MEMORY_LOAD=%q is not a positive duration", v)
	}
	return d
}

// memoryClients is how many clients send the largest reviews at once.
const memoryClients = 32

// memoryFigures are what a run of memoryUnderLoad measured.
type memoryFigures struct {
	baselineMiB, peakMiB, settledMiB float64
	// settledAfter is when, after the load, RSS was first within
	// settleMargin of the baseline; the wait gives up at settleWithin.
	settledAfter        time.Duration
	served, throttled   int64
	reviewsPerSecond    float64
	reviewBytes         int
	budgetBytes         int64
	otherStatus, failed int64
}

const (
	settleWithin = 30 * time.Second
	settleMargin = 32 // MiB
)

// largestReview is an UPDATE review of a Glance whose old and new objects
// are each about maxObjectSize, the largest etcd stores.
func largestReview(tb testing.TB) []byte {
	g := sampleGlance(benchNamespace)
	g.Annotations = map[string]string{"example.com/padding": strings.Repeat("x", maxObjectSize-8<<10)}
	old := g.DeepCopy()
	old.Annotations["example.com/padding"] = strings.Repeat("y", maxObjectSize-8<<10)
	body := reviewBody(tb, admissionRequest(tb, admissionv1.Update, g, old))
	if len(body) > maxReviewSize {
		tb.Fatalf("the largest review is %d bytes, over the %d the server takes", len(body), maxReviewSize)
	}
	return body
}

// memoryUnderLoad starts the server, lets memoryClients keep-alive clients
// send it the largest reviews for load, and reads the process's RSS before,
// at its peak, and until it settles. The clients share one body, so what
// grows is the server's.
func memoryUnderLoad(tb testing.TB, load time.Duration) memoryFigures {
	ts, ca := startFakeServer(tb, benchLookups(), ServerOptions{}, logr.Discard())
	body := largestReview(tb)
	url := ts.url(MutateGlancePath)
	hc := reviewClient(ca, true)

	f := memoryFigures{reviewBytes: len(body), budgetBytes: DefaultMaxInFlightBytes}
	f.baselineMiB = rssMiB(tb, "VmRSS")
	resetPeakRSS(tb)
	var wg sync.WaitGroup
	var served, throttled, other, failed atomic.Int64
	deadline := time.Now().Add(load)
	start := time.Now()
	for range memoryClients {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					served.Add(1)
				case http.StatusTooManyRequests:
					throttled.Add(1)
					// As the API server does: back off before retrying.
					time.Sleep(100 * time.Millisecond)
				default:
					other.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	f.peakMiB = rssMiB(tb, "VmHWM")
	f.served, f.throttled, f.otherStatus, f.failed = served.Load(), throttled.Load(), other.Load(), failed.Load()
	f.reviewsPerSecond = float64(f.served) / elapsed.Seconds()
	hc.CloseIdleConnections()
	stopped := time.Now()
	for {
		f.settledMiB = rssMiB(tb, "VmRSS")
		f.settledAfter = time.Since(stopped)
		if f.settledMiB <= f.baselineMiB+settleMargin || f.settledAfter >= settleWithin {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	return f
}

// rssMiB reads a field of /proc/self/status, in MiB.
func rssMiB(tb testing.TB, field string) float64 {
	tb.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kib, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				tb.Fatalf("%s: %v", field, err)
			}
			return kib / 1024
		}
	}
	tb.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// resetPeakRSS makes VmHWM start again from the current RSS.
func resetPeakRSS(tb testing.TB) {
	tb.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		tb.Fatalf("reset the peak RSS: %v", err)
	}
}

func (f memoryFigures) String() string {
	return fmt.Sprintf("%d clients, reviews of %.2f MiB, budget %d MiB: RSS %.0f MiB before, peak %.0f MiB, %.0f MiB %.0fs after; %d served (%.1f/s), %d refused with 429, %d other, %d failed",
		memoryClients, float64(f.reviewBytes)/(1<<20), f.budgetBytes>>20, f.baselineMiB, f.peakMiB, f.settledMiB, f.settledAfter.Seconds(),
		f.served, f.reviewsPerSecond, f.throttled, f.otherStatus, f.failed)
}

// BenchmarkServerMemory: 32 keep-alive clients send UPDATE reviews of the
// largest Glance to the mutating webhook for WEBHOOK_MEMORY_LOAD. Goals: a
// peak RSS below 256 MiB, and back within 32 MiB of the baseline within 30s
// of the load stopping.
func BenchmarkServerMemory(b *testing.B) {
	var f memoryFigures
	for range b.N {
		f = memoryUnderLoad(b, memoryLoad(b))
	}
	b.Log(f)
	b.ReportMetric(f.peakMiB, "peak-RSS-MiB")
	b.ReportMetric(f.peakMiB-f.baselineMiB, "growth-MiB")
	b.ReportMetric(f.settledMiB, "settled-RSS-MiB")
	b.ReportMetric(f.settledAfter.Seconds(), "settle-s")
	b.ReportMetric(f.reviewsPerSecond, "reviews/s")
	b.ReportMetric(float64(f.throttled)/float64(max(f.served+f.throttled, 1)), "refused-ratio")
}

// The smoke of BenchmarkServerMemory: a short load of the largest reviews
// is served or refused with 429, nothing else, and the process stays
// under 256 MiB.
func TestServerMemoryUnderTheLargestReviews(t *testing.T) {
	f := memoryUnderLoad(t, 3*time.Second)
	t.Log(f)
	if f.served == 0 || f.otherStatus != 0 || f.failed != 0 {
		t.Fatalf("%v: want reviews served, and only 200 or 429", f)
	}
	if f.peakMiB >= 256 {
		t.Fatalf("%v: peak RSS over 256 MiB", f)
	}
}
