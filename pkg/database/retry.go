package database

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// The backoff of a failing schema Job: a transient database outage heals
// within the first retries, a lasting fault costs at most one run every
// RetryCap.
const (
	RetryBase = time.Minute
	RetryCap  = 15 * time.Minute
)

// Backoff is how long after its failures-th failed run in a row a schema
// Job runs again: RetryBase, doubled with each failure, at most RetryCap.
func Backoff(failures int32) time.Duration {
	d := RetryBase
	for i := int32(1); i < failures && d < RetryCap; i++ {
		d *= 2
	}
	return min(d, RetryCap)
}

// CountFailure is the retry state after the run uid of job failed at
// failedAt. A run counts once: counted is false, and prev is returned as
// is, when prev has counted it already. Failures of another Job start the
// count again.
func CountFailure(prev *v1alpha1.SchemaJobRetry, job JobKind, uid types.UID, failedAt time.Time) (next *v1alpha1.SchemaJobRetry, counted bool) {
	if prev != nil && prev.Job == string(job) && prev.LastFailedJob == uid {
		return prev, false
	}
	failures := int32(1)
	if prev != nil && prev.Job == string(job) {
		failures = prev.Failures + 1
	}
	return &v1alpha1.SchemaJobRetry{
		Job: string(job), Failures: failures, LastFailedJob: uid,
		NextAttemptTime: metav1Time(failedAt.Add(Backoff(failures))),
	}, true
}

// metav1Time rounds t up to the second, the grain the API server stores, so
// that what the operator writes is what it reads back, and never earlier.
func metav1Time(t time.Time) metav1.Time {
	return metav1.NewTime(t.Add(time.Second - time.Nanosecond).Truncate(time.Second))
}
