package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestInFlightBudget(t *testing.T) {
	b := &inFlightBudget{max: 100}
	if !b.acquire(60) || !b.acquire(40) {
		t.Fatal("charges within the budget refused")
	}
	if b.acquire(1) {
		t.Fatal("a charge over the budget admitted")
	}
	b.release(40)
	if !b.acquire(40) || b.acquire(1) {
		t.Fatal("released bytes not reusable, or reused twice")
	}
}

func TestReviewCharge(t *testing.T) {
	for _, tc := range []struct {
		length int64
		want   int64
	}{
		{1 << 10, minReviewCharge},
		{1 << 20, 1 << 20},
		{-1, maxReviewSize}, // chunked: as large as it may be
		{maxReviewSize + 1, maxReviewSize},
	} {
		if got := reviewCharge(&http.Request{ContentLength: tc.length}); got != tc.want {
			t.Errorf("charge of a %d-byte body = %d, want %d", tc.length, got, tc.want)
		}
	}
}

// A review over the budget is answered 429 at once, with the Status and
// Retry-After the API server retries on, and counted as throttled; once
// the review holding the budget ends, reviews are served again.
func TestReviewsOverTheBudgetAreRefusedWith429(t *testing.T) {
	lookups := newStuckLookups()
	ts, ca := startFakeServer(t, lookups, ServerOptions{MaxInFlightBytes: maxReviewSize}, testr.New(t))
	hc := reviewClient(ca, true)
	body := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":` + mustJSON(t, stuckReview(t)) + `}`)

	// A chunked body declares no length, so it is charged the largest
	// review: the whole budget.
	ctx, giveUp := context.WithCancel(context.Background())
	defer giveUp()
	held := make(chan error, 1)
	go func() {
		held <- postUntilCancelled(ctx, hc, ts.url(ValidateGlancePath), io.MultiReader(bytes.NewReader(body)))
	}()
	receive(t, lookups.entered, "the review holding the budget to reach its lookup")

	throttledBefore := series(ts.scrape(t), RequestsMetric, ValidateGlancePath, VerdictThrottled).GetCounter().GetValue()
	small := mustJSON(t, admissionRequest(t, "CREATE", sampleGlance("small"), nil))
	resp, err := hc.Post(ts.url(ValidateGlancePath), "application/json", strings.NewReader(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":`+small+`}`))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var status metav1.Status
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" ||
		json.Unmarshal(data, &status) != nil || status.Reason != metav1.StatusReasonTooManyRequests || status.Code != http.StatusTooManyRequests {
		t.Fatalf("HTTP %d, Retry-After %q, body %s; want 429 with a TooManyRequests Status and Retry-After 1", resp.StatusCode, resp.Header.Get("Retry-After"), data)
	}
	if got := series(ts.scrape(t), RequestsMetric, ValidateGlancePath, VerdictThrottled).GetCounter().GetValue(); got != throttledBefore+1 {
		t.Errorf("throttled verdicts %v, want %v", got, throttledBefore+1)
	}

	giveUp()
	receive(t, held, "the review holding the budget to end")
	receive(t, lookups.cause, "its lookup to end")
	// The charge goes back when the handler returns, just after the lookup.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		review, err := postRaw(hc, ts.url(ValidateGlancePath), []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":`+small+`}`), "")
		if err == nil && review.Allowed {
			break
		}
		if time.Now().After(deadline) || (err != nil && !strings.Contains(err.Error(), "429")) {
			t.Fatalf("after the budget was released: %+v, %v; want the review allowed", review, err)
		}
	}
}

// A body that declares more than the largest review is refused 413.
func TestReviewOverTheLargestIsRefusedUnread(t *testing.T) {
	ts, ca := startFakeServer(t, fakeLookups{}, ServerOptions{}, testr.New(t))
	hc := reviewClient(ca, true)
	req, err := http.NewRequest(http.MethodPost, ts.url(ValidateGlancePath), bytes.NewReader(make([]byte, maxReviewSize+1)))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = maxReviewSize + 1
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("HTTP %d, want 413", resp.StatusCode)
	}
}

// The memory of a burst is given back once no review is in flight, once
// per burst, and never for a burst below the threshold.
func TestReleaseWhenIdle(t *testing.T) {
	b := &inFlightBudget{max: 64 << 20}
	freed := make(chan struct{}, 4)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go b.releaseWhenIdle(ctx, time.Millisecond, 16<<20, func() { freed <- struct{}{} })

	b.acquire(20 << 20)
	b.acquire(1 << 10)
	b.release(1 << 10)
	time.Sleep(20 * time.Millisecond) // many looks while the burst is in flight
	if len(freed) != 0 {
		t.Fatal("freed while a review was in flight")
	}
	b.release(20 << 20)
	receive(t, freed, "the burst's memory to be freed")

	b.acquire(1 << 20)
	b.release(1 << 20)
	time.Sleep(20 * time.Millisecond)
	if len(freed) != 0 {
		t.Fatalf("freed %d more times: after the burst, or for a burst below the threshold", len(freed))
	}
}
