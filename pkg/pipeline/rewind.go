package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// DefaultRewindCheckInterval is how often RewindCheck compares: a restore
// is noticed within it.
const DefaultRewindCheckInterval = 30 * time.Second

// ErrRewound is what RewindCheck ends the manager with.
var ErrRewound = errors.New("the API server's resourceVersions went back, as after an etcd restore")

// RewindCheck ends the manager when the API server's resourceVersion is
// older than one its caches hold, as after an etcd restore. The caches'
// watches then resume from a version the server has not reached again, and
// miss every change until the cluster's writes pass it; a pass on such a
// copy conflicts with what the server holds. A manager started afresh lists
// what the server holds, so the check ends this one (its Deployment starts
// it again), as a cluster's operators restart controllers after a restore.
type RewindCheck struct {
	// Interval is how often to compare.
	Interval time.Duration
	// Newest is the newest resourceVersion the caches hold ("" for none).
	Newest func(context.Context) (string, error)
	// Current is the server's resourceVersion now, from a consistent read.
	Current func(context.Context) (string, error)
}

// Start compares every Interval until ctx ends, and returns ErrRewound,
// which stops the manager, once the server is behind the caches. A failed
// read is no rewind: the next tick tries again.
func (c RewindCheck) Start(ctx context.Context) error {
	t := time.NewTicker(c.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		// The manager logs the error it stops with: once.
		if err := c.compare(ctx); err != nil {
			return err
		}
	}
}

// compare returns ErrRewound when the server is behind the caches.
func (c RewindCheck) compare(ctx context.Context) error {
	newest, err := c.Newest(ctx)
	if err != nil || newest == "" {
		return nil
	}
	current, err := c.Current(ctx)
	if err != nil {
		return nil
	}
	// Versions that do not compare (an API server that does not promise
	// ordered versions) never end the manager.
	if cmp, err := resourceversion.CompareResourceVersion(current, newest); err == nil && cmp < 0 {
		return fmt.Errorf("%w: the server is at resourceVersion %s, the caches hold %s; stopping, so that a new manager lists what the server holds", ErrRewound, current, newest)
	}
	return nil
}

// NeedLeaderElection is false: a standby's caches are the ones it would
// lead with.
func (RewindCheck) NeedLeaderElection() bool { return false }
