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

// WrittenVersions remembers the resourceVersion of this manager's last write
// to each object of a kind. A pass that ran on a cached copy older than that
// write would see the status before it: it would write that status again,
// and repeat the transitions it reported (events, counted Jobs). Keyed by
// name: an object created again under the same name has versions newer
// than every earlier write.
type WrittenVersions struct {
	mu       sync.Mutex
	versions map[types.NamespacedName]string
}

// Record remembers rv as the object's newest written version.
func (w *WrittenVersions) Record(key types.NamespacedName, rv string) {
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

// Stale reports whether rv, a cached copy's resourceVersion, is older than
// the object's newest written version. Versions that do not compare (an API
// server that does not promise ordered versions) are never stale.
func (w *WrittenVersions) Stale(key types.NamespacedName, rv string) bool {
	w.mu.Lock()
	written, ok := w.versions[key]
	w.mu.Unlock()
	if !ok {
		return false
	}
	cmp, err := resourceversion.CompareResourceVersion(rv, written)
	return err == nil && cmp < 0
}

// Forget drops an object that is gone.
func (w *WrittenVersions) Forget(key types.NamespacedName) {
	w.mu.Lock()
	delete(w.versions, key)
	w.mu.Unlock()
}
