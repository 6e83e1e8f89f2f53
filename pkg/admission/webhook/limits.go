package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxObjectSize bounds one object in a review: etcd refuses to store more
// than 1.5 MiB in one write (its default --max-request-bytes), so no
// Glance or GlanceBackend that exists, or can come to exist, is larger.
const maxObjectSize = 3 << 19

// maxReviewSize bounds the body of a review: the object and, on UPDATE,
// the old one, with room for the rest of the request. A body over it is
// answered 413 before it is read.
const maxReviewSize = 2*maxObjectSize + 256<<10

// DefaultMaxInFlightBytes is ServerOptions.MaxInFlightBytes by default:
// about nine reviews of the largest size at once, or 512 of the few
// kilobytes a Glance takes. A review holds several copies of its body (the
// body, the objects it decodes, the response), so this bounds the memory
// hostile clients can pin to a few times it.
const DefaultMaxInFlightBytes = 32 << 20

// minReviewCharge is what a review of a few kilobytes is charged: its
// buffers, decoded objects and goroutine outweigh its body.
const minReviewCharge = 64 << 10

// maxReviewTime is how long a review's body may take to arrive: the API
// server waits for a webhook 30s at most (timeoutSeconds).
const maxReviewTime = 30 * time.Second

// retryAfterSeconds is the Retry-After of a review refused for load. The
// API server retries a webhook call answered 429, with backoff.
const retryAfterSeconds = 1

// inFlightBudget admits a review while the bytes charged to the reviews in
// flight, its own included, stay within max. Over it, the review is
// refused at once rather than queued: a queue would hold the bodies the
// budget is there to bound.
type inFlightBudget struct {
	max  int64
	used atomic.Int64
	// peak is the most used since releaseWhenIdle last looked.
	peak atomic.Int64
}

// acquire charges n bytes and reports whether they fit; release them when
// the review is done.
func (b *inFlightBudget) acquire(n int64) bool {
	for {
		used := b.used.Load()
		if used+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			for peak := b.peak.Load(); used+n > peak && !b.peak.CompareAndSwap(peak, used+n); peak = b.peak.Load() {
			}
			return true
		}
	}
}

func (b *inFlightBudget) release(n int64) { b.used.Add(-n) }

// Defaults of releaseWhenIdle in the server.
const (
	idleReleaseEvery = 5 * time.Second
	idleReleaseAbove = 16 << 20
)

// releaseWhenIdle calls free when, at a look every interval, no review is in
// flight and more than above bytes were since the last look. A burst of
// large reviews grows the heap; the runtime keeps the memory until its next
// collection, up to two minutes away on an idle server, and the pod's
// memory limit counts it until then.
func (b *inFlightBudget) releaseWhenIdle(ctx context.Context, every time.Duration, above int64, free func()) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if b.used.Load() == 0 && b.peak.Swap(0) > above {
			free()
		}
	}
}

// reviewCharge is what a request is charged against the budget: its
// declared length, at least minReviewCharge, or the largest review when it
// declares none (a chunked body).
func reviewCharge(r *http.Request) int64 {
	if r.ContentLength < 0 || r.ContentLength > maxReviewSize {
		return maxReviewSize
	}
	return max(r.ContentLength, minReviewCharge)
}

// writeTooManyRequests answers a request over the budget with the Status
// the API server's client reads as TooManyRequests, which it retries.
func writeTooManyRequests(w http.ResponseWriter) {
	status := metav1.Status{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status:   metav1.StatusFailure,
		Code:     http.StatusTooManyRequests,
		Reason:   metav1.StatusReasonTooManyRequests,
		Message:  fmt.Sprintf("the admission server is at its limit of reviews in flight; retry in %ds", retryAfterSeconds),
		Details:  &metav1.StatusDetails{RetryAfterSeconds: retryAfterSeconds},
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", fmt.Sprint(retryAfterSeconds))
	w.WriteHeader(http.StatusTooManyRequests)
	_ = json.NewEncoder(w).Encode(&status)
}
