package pipeline

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// StaleCacheRetry is the backstop for an object read from a cache that has
// not caught up with this manager's own write; the watch event of that write
// normally wakes the object first.
const StaleCacheRetry = time.Second

// DefaultStaleCacheLimit bounds how long a cached copy may stay older than
// this manager's last write before the record is given up. A cache lags by
// milliseconds; a copy still older after a minute means the versions went
// back, as after an etcd restore, and waiting longer would hold the object
// until the manager restarts.
const DefaultStaleCacheLimit = time.Minute

// WrittenVersions remembers the resourceVersion of this manager's last write
// to each object of a kind. A pass that ran on a cached copy older than that
// write would see the status before it: it would write that status again,
// and repeat the transitions it reported (events, counted Jobs). Keyed by
// name: an object created again under the same name has versions newer
// than every earlier write.
type WrittenVersions struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Limit is how long a cached copy may stay older than the last write
	// before Check gives the record up; zero means DefaultStaleCacheLimit.
	Limit    time.Duration
	mu       sync.Mutex
	versions map[types.NamespacedName]written
}

type written struct {
	rv string
	at time.Time
}

// Freshness is what Check finds of a cached copy.
type Freshness int

const (
	// Fresh: the copy is at least as new as the last write.
	Fresh Freshness = iota
	// Stale: the copy is older than the last write; wait for the cache.
	Stale
	// GaveUp: the copy has been older than the last write for longer than
	// the Limit; the record is dropped and the copy taken as current.
	// Say so once.
	GaveUp
)

func (w *WrittenVersions) now() time.Time {
	if w.Now == nil {
		return time.Now()
	}
	return w.Now()
}

// GiveUpAfter is the Limit in force.
func (w *WrittenVersions) GiveUpAfter() time.Duration {
	if w.Limit <= 0 {
		return DefaultStaleCacheLimit
	}
	return w.Limit
}

// Record remembers rv as the object's newest written version.
func (w *WrittenVersions) Record(key types.NamespacedName, rv string) {
	if rv == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.versions == nil {
		w.versions = map[types.NamespacedName]written{}
	}
	if old, ok := w.versions[key]; ok {
		if cmp, err := resourceversion.CompareResourceVersion(rv, old.rv); err == nil && cmp <= 0 {
			return
		}
	}
	w.versions[key] = written{rv: rv, at: w.now()}
}

// Check compares rv, a cached copy's resourceVersion, with the object's
// newest written version. Versions that do not compare (an API server that
// does not promise ordered versions) are never stale.
func (w *WrittenVersions) Check(key types.NamespacedName, rv string) Freshness {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.versions[key]
	if !ok {
		return Fresh
	}
	if cmp, err := resourceversion.CompareResourceVersion(rv, last.rv); err != nil || cmp >= 0 {
		return Fresh
	}
	if w.now().Sub(last.at) > w.GiveUpAfter() {
		delete(w.versions, key)
		return GaveUp
	}
	return Stale
}

// Forget drops an object that is gone.
func (w *WrittenVersions) Forget(key types.NamespacedName) {
	w.mu.Lock()
	delete(w.versions, key)
	w.mu.Unlock()
}
