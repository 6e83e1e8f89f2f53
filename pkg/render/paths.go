package render

// Where glance-api finds its files. The Deployment, the database Jobs and the
// purge CronJob mount at exactly these paths, and the rendered config points
// at them, so both sides must use these constants.
const (
	// ConfigDir is the --config-dir of the config ConfigMap (glance-api.conf,
	// glance-api-paste.ini, policy.yaml, logging.conf).
	ConfigDir = "/etc/glance/glance-api.conf.d/"
	// BackendsDir is the --config-dir of the backends Secret (backends.conf).
	BackendsDir = "/etc/glance/backends.conf.d/"

	// StagingDir backs [os_glance_staging_store] (the staging emptyDir).
	StagingDir = "/var/lib/glance/staging"
	// TasksWorkDir backs [os_glance_tasks_store] (the tasks-work emptyDir).
	TasksWorkDir = "/var/lib/glance/tasks-work"
	// ImageCacheDir is image_cache_dir (the image-cache emptyDir).
	ImageCacheDir = "/var/lib/glance/image-cache"

	// HealthcheckDisablePath is the file whose presence makes /healthcheck
	// report 503, so a pod can be drained by hand (kubectl exec … touch). It
	// is on the /tmp emptyDir: the root file system is read-only.
	HealthcheckDisablePath = "/tmp/healthcheck_disable"

	// DBTLSCADir holds the CA bundle of database.tls.caBundleSecretRef.
	DBTLSCADir = "/etc/glance/db-tls/ca"
	// DBTLSClientDir holds the kubernetes.io/tls Secret of
	// database.tls.clientCertSecretRef.
	DBTLSClientDir = "/etc/glance/db-tls/client"
	// DBTLSClientCertPath and DBTLSClientKeyPath are its two files.
	DBTLSClientCertPath = DBTLSClientDir + "/tls.crt"
	DBTLSClientKeyPath  = DBTLSClientDir + "/tls.key"
)

// Keys of the config ConfigMap, the backends Secret and the DB connection
// Secret.
const (
	GlanceAPIConfKey = "glance-api.conf"
	PasteINIKey      = "glance-api-paste.ini"
	PolicyYAMLKey    = "policy.yaml"
	LoggingConfKey   = "logging.conf"
	BackendsConfKey  = "backends.conf"
	// DBConnectionKey holds the DSN in the {name}-db-connection Secret.
	DBConnectionKey = "connection"
)

// Files inside ConfigDir that glance-api.conf points at.
const (
	PasteINIPath    = ConfigDir + PasteINIKey
	PolicyYAMLPath  = ConfigDir + PolicyYAMLKey
	LoggingConfPath = ConfigDir + LoggingConfKey
)
