// Package conformance runs what the operator renders against real Glance.
//
// For a Glance spec per launch mode — 2025.2 under eventlet, 2026.1 under
// uWSGI — it renders, with pkg/render as the controller does, the config
// ConfigMap, the backends and DB connection Secrets, the Deployment, the
// db-sync/expand/migrate/contract Jobs and the db-purge CronJob, and runs
// their containers' exact commands and environment on Debian's Glance
// packages: each container in its own mount, PID, IPC and UTS namespace,
// with its pod's network namespace, an overlay of the Debian root (read-only
// when the securityContext says so), every volume at its pod-spec mountPath
// laid out as the kubelet does, and the pod's runAsUser, runAsGroup and
// fsGroup. Behind the config are a throwaway MariaDB (Debian's
// mariadb-server, TLS with a client certificate in one mode), two local S3
// servers (gofakes3) and a stand-in Keystone; the pod's /etc/hosts maps the
// service names the spec uses to them.
//
// The harness plays the image's part, and only that: the Debian root has the
// glance user renumbered to 42424 (the image's uid), Debian's default
// /etc/glance/*.conf and *.ini are hidden (oslo.config would read them), the
// WSGI shim /var/lib/openstack/bin/glance-wsgi-api is added, and uwsgi is
// wrapped to load Debian's http and python3 plugins. The rendered commands
// are never changed. Test-only environment overrides of the cache-maintenance
// sidecar's timing (CACHE_POLL_SECONDS, CACHE_MAINTENANCE_INTERVAL_SECONDS)
// are the one addition to a container's environment.
//
// Running it: `make conformance-root` once (root, the Debian package
// debootstrap; a few minutes and 850 MB into the artifact cache; see
// test/debianroot), then `go test ./test/conformance` as root with the
// Debian package mariadb-server installed; `make test` does both. The suite
// fails, never skips, when a prerequisite is missing, naming what provides
// it.
//
// Environment: GLANCE_CONFORMANCE_ROOT (or DEBIAN_ROOT_GLANCE) uses another
// root; GLANCE_CONFORMANCE_WORKDIR keeps every pod's volumes, logs and
// sandbox specs under that directory instead of a temporary one.
package conformance
