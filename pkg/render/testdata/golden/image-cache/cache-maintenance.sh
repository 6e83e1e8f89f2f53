# cache-maintenance: keeps the glance-api image cache within
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

cache_dir=${CACHE_DIR:-/var/lib/glance/image-cache}
max_size=${CACHE_MAX_SIZE_BYTES:-42949672960}
poll_seconds=${CACHE_POLL_SECONDS:-30}
interval_seconds=${CACHE_MAINTENANCE_INTERVAL_SECONDS:-1800}

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
	interruptible glance-cache-pruner --config-dir /etc/glance/glance-api.conf.d/ --config-dir /etc/glance/backends.conf.d/ || rc=1
	interruptible glance-cache-cleaner --config-dir /etc/glance/glance-api.conf.d/ --config-dir /etc/glance/backends.conf.d/ || rc=1
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
