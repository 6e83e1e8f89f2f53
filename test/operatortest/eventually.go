package operatortest

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// PollOption changes how Eventually waits.
type PollOption func(*pollOptions)

type pollOptions struct {
	timeout, interval time.Duration
	unless            func() error
}

// Within is how long Eventually waits. The default, 30 seconds, is twice
// the longest periodic requeue a step of the integration suites waits on.
func Within(d time.Duration) PollOption { return func(o *pollOptions) { o.timeout = d } }

// Every is how often Eventually calls the condition; 100ms by default.
func Every(d time.Duration) PollOption { return func(o *pollOptions) { o.interval = d } }

// Unless makes Eventually call check before each try and fail at once with
// its error: a process the condition depends on has died, so waiting on
// would only hide why.
func Unless(check func() error) PollOption { return func(o *pollOptions) { o.unless = check } }

// Eventually calls cond until it returns nil, and fails t with what and
// cond's last error when it has not within the timeout. The error is what
// cond saw last, so that the failure says how far it got.
func Eventually(t testing.TB, what string, cond func() error, opts ...PollOption) {
	t.Helper()
	o := pollOptions{timeout: 30 * time.Second, interval: 100 * time.Millisecond}
	for _, opt := range opts {
		opt(&o)
	}
	var last error
	// Not t.Context(): it is already done when a cleanup waits.
	err := wait.PollUntilContextTimeout(context.Background(), o.interval, o.timeout, true, func(context.Context) (bool, error) {
		if o.unless != nil {
			if err := o.unless(); err != nil {
				return false, err
			}
		}
		last = cond()
		return last == nil, nil
	})
	switch {
	case err == nil:
	case wait.Interrupted(err):
		t.Fatalf("waiting for %s: not within %s: %v", what, o.timeout, last)
	default:
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
