package glance

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// staleCacheRetry is the backstop for a Glance read from a cache that has
// not caught up with this manager's own write; the watch event of that write
// normally wakes the Glance first.
const staleCacheRetry = time.Second

// writtenVersions remembers the resourceVersion of this manager's last write
// to each Glance. A pass that ran on a cached copy older than that write
// would see the status before it, and repeat the transitions it reported:
// its events and its counted Jobs. Keyed by name: a Glance created again
// under the same name has versions newer than every earlier write.
type writtenVersions struct {
	mu       sync.Mutex
	versions map[types.NamespacedName]string
}

// record remembers rv as the Glance's newest written version.
func (w *writtenVersions) record(key types.NamespacedName, rv string) {
	if rv == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.versions == nil {
		w.versions = map[types.NamespacedName]string{}
	}
	if old, ok := w.versions[key]; ok {
		if cmp, err := resourceversion.CompareResourceVersion(rv, old); err == nil && cmp < 0 {
			return
		}
	}
	w.versions[key] = rv
}

// stale reports whether rv, a cached copy's resourceVersion, is older than
// the Glance's newest written version. Versions that do not compare (an API
// server that does not promise ordered versions) are never stale.
func (w *writtenVersions) stale(key types.NamespacedName, rv string) bool {
	w.mu.Lock()
	written, ok := w.versions[key]
	w.mu.Unlock()
	if !ok {
		return false
	}
	cmp, err := resourceversion.CompareResourceVersion(rv, written)
	return err == nil && cmp < 0
}

// forget drops a Glance that is gone.
func (w *writtenVersions) forget(key types.NamespacedName) {
	w.mu.Lock()
	delete(w.versions, key)
	w.mu.Unlock()
}
