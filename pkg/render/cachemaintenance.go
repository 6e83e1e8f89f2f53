package render

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// CacheMaintenanceScriptKey is the config ConfigMap key of the
// cache-maintenance sidecar's script, present only with spec.imageCache.
// oslo.config's --config-dir reads only *.conf, so glance ignores it.
const (
	CacheMaintenanceScriptKey  = "cache-maintenance.sh"
	CacheMaintenanceScriptPath = ConfigDir + CacheMaintenanceScriptKey
	// CacheMaintenancePollSeconds is how often the sidecar compares the
	// cache's size with image_cache_max_size.
	CacheMaintenancePollSeconds = 30
)

// cacheMaintenanceScript loops glance-cache-pruner and glance-cache-cleaner.
// POSIX sh (dash). The environment overrides exist for tests; the pod sets
// none of them.
const cacheMaintenanceScript = `# cache-maintenance: keeps the glance-api image cache within
# image_cache_max_size, which nothing else enforces.
#
# Every CACHE_POLL_SECONDS it compares the disk usage of the cache directory
# (all of it, as the kubelet counts it against the emptyDir's sizeLimit) with
# image_cache_max_size, and runs glance-cache-pruner, then
# glance-cache-cleaner, when the cache exceeds it or when
# CACHE_MAINTENANCE_INTERVAL_SECONDS have passed since the last run.
#
# A failed run is counted and logged, never fatal: this loop shares the pod
# with glance-api, and a crash-looping sidecar would take the replica out of
# the Service.

cache_dir=${CACHE_DIR:-@CACHE_DIR@}
max_size=${CACHE_MAX_SIZE_BYTES:-@MAX_SIZE@}
poll_seconds=${CACHE_POLL_SECONDS:-@POLL_SECONDS@}
interval_seconds=${CACHE_MAINTENANCE_INTERVAL_SECONDS:-@INTERVAL_SECONDS@}

# Commands run in the background and are waited for: a trapped signal
# interrupts wait but not a foreground command, so SIGTERM ends the loop at
# once rather than after the current sleep or run.
child=
trap 'if [ -n "$child" ]; then kill "$child" 2>/dev/null; fi; exit 0' TERM INT

interruptible() {
	"$@" &
	child=$!
	wait "$child"
	status=$?
	child=
	return "$status"
}

cache_bytes() {
	kib=$(du -sk "$cache_dir" 2>/dev/null)
	kib=${kib%%[!0-9]*}
	echo $(( ${kib:-0} * 1024 ))
}

# Both tools run even when the first fails: the cleaner frees what the pruner
# cannot (stalled and invalid images).
maintain() {
	rc=0
	interruptible glance-cache-pruner --config-dir @CONFIG_DIR@ --config-dir @BACKENDS_DIR@ || rc=1
	interruptible glance-cache-cleaner --config-dir @CONFIG_DIR@ --config-dir @BACKENDS_DIR@ || rc=1
	return "$rc"
}

failures=0
last_run=$(date +%s)
while :; do
	size=$(cache_bytes)
	now=$(date +%s)
	if [ "$size" -gt "$max_size" ] || [ $((now - last_run)) -ge "$interval_seconds" ]; then
		echo "glance-cache-maintenance: cache at $size bytes, max $max_size: running glance-cache-pruner and glance-cache-cleaner"
		if maintain; then
			failures=0
		else
			failures=$((failures + 1))
			echo "glance-cache-maintenance failed: $failures consecutive" >&2
		fi
		last_run=$(date +%s)
	fi
	interruptible sleep "$poll_seconds"
done
`

// CacheMaintenanceScript renders the cache-maintenance sidecar's script for
// spec.imageCache: the threshold is the effective image_cache_max_size, the
// interval imageCache.maintenanceInterval (default 30m).
func CacheMaintenanceScript(g *v1alpha1.Glance) (string, error) {
	c := g.Spec.ImageCache
	if c == nil {
		return "", fmt.Errorf("spec.imageCache is not set")
	}
	interval := v1alpha1.DefaultImageCacheMaintenanceInterval
	if c.MaintenanceInterval != nil && c.MaintenanceInterval.Duration != 0 {
		interval = c.MaintenanceInterval.Duration
	}
	if interval < time.Second {
		return "", fmt.Errorf("spec.imageCache.maintenanceInterval must be at least 1s, is %s", interval)
	}
	return strings.NewReplacer(
		"@CACHE_DIR@", ImageCacheDir,
		"@MAX_SIZE@", strconv.FormatInt(effectiveImageCacheMaxSize(g), 10),
		"@POLL_SECONDS@", strconv.Itoa(CacheMaintenancePollSeconds),
		"@INTERVAL_SECONDS@", strconv.FormatInt(int64(interval/time.Second), 10),
		"@CONFIG_DIR@", ConfigDir,
		"@BACKENDS_DIR@", BackendsDir,
	).Replace(cacheMaintenanceScript), nil
}

// effectiveImageCacheMaxSize is the image_cache_max_size glance-cache-pruner
// will read: an integer extraConfig override wins over the rendered value,
// as it does in glance-api.conf.
func effectiveImageCacheMaxSize(g *v1alpha1.Glance) int64 {
	if v, ok := g.Spec.ExtraConfig["DEFAULT"]["image_cache_max_size"]; ok {
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n >= 0 {
			return n
		}
	}
	return ImageCacheMaxSize(g.Spec.ImageCache.Size)
}
