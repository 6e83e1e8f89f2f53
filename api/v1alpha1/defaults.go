package v1alpha1

import "time"

// Defaults of the API. The CRD carries the scalar ones as schema defaults; the
// admission webhook and the controller resolve the rest from these constants,
// so a CR that bypassed admission still gets the same effective values.
const (
	DefaultReplicas                      int32 = 3
	DefaultTerminationGracePeriodSeconds int64 = 30
	DefaultPreStopSleepSeconds           int64 = 5
	DefaultMaxSurge                            = 1
	DefaultMaxUnavailable                      = 0

	DefaultCPURequest    = "100m"
	DefaultMemoryRequest = "512Mi"
	DefaultCPULimit      = "500m"
	DefaultMemoryLimit   = "1Gi"

	DefaultDatabasePort             int32 = 3306
	DefaultDatabasePasswordKey            = "password"
	DefaultDatabaseUsernameKey            = "username"
	DefaultCABundleKey                    = "ca.crt"
	DefaultCredentialsMode                = CredentialsModeStatic
	DefaultCacheBackend                   = "dogpile.cache.pymemcache"
	DefaultServiceUsername                = "glance"
	DefaultServiceProjectName             = "service"
	DefaultServiceUserDomainName          = "Default"
	DefaultServiceProjectDomainName       = "Default"
	DefaultServiceUserPasswordKey         = "password"

	DefaultUWSGIProcesses     int32 = 2
	DefaultUWSGIThreads       int32 = 1
	DefaultUWSGIHTTPKeepAlive       = true

	DefaultGatewayPath = "/"

	DefaultLogFormat = LogFormatText
	DefaultLogLevel  = LogLevel("INFO")
	DefaultLogDebug  = false

	DefaultSecretStoreKind = ClusterSecretStoreKind
	DefaultSecretStoreName = "openbao-cluster-store"

	DefaultMiddlewarePosition = MiddlewareAfterAuth

	DefaultImageCacheMaintenanceInterval = 30 * time.Minute
	// ImageCacheMaxSizePercent is image_cache_max_size as a share of
	// imageCache.size: the pruner's threshold leaves headroom below the
	// emptyDir bound so the kubelet never evicts a pod for its cache.
	ImageCacheMaxSizePercent = 80

	DefaultStagingSizeLimit = "20Gi"

	// DefaultWebDownloadHTTPPort and DefaultWebDownloadHTTPSPort are
	// webDownload.ports' default, and the ports a URL naming none
	// connects to.
	DefaultWebDownloadHTTPPort  int32 = 80
	DefaultWebDownloadHTTPSPort int32 = 443

	DefaultDBPurgeSchedule                  = "0 3 * * *"
	DefaultDBPurgeSuspend                   = false
	DefaultDBPurgeAgeInDays           int32 = 30
	DefaultDBPurgeMaxRows             int32 = 100
	DefaultDBPurgeActiveDeadlineSecs  int64 = 3600
	DefaultDBPurgeSuccessfulJobsLimit int32 = 3
	DefaultDBPurgeFailedJobsLimit     int32 = 3

	DefaultBucketURLFormat = BucketURLFormatPath

	// APIPort is the port glance-api listens on and its Service exposes.
	APIPort = 9292
)
