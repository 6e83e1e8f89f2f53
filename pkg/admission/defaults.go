package admission

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// DefaultGlanceSpec fills in the defaults the mutating webhook sets, the
// same for `check`: the v1alpha1.Default* constants. Every default lives in
// the spec, so that the webhook diffs the spec alone, never the metadata. Blocks whose absence
// means something (staging, imageCache, dbPurge, targetClusterRef,
// topologySpreadConstraints, strategy) are left absent: the controller
// resolves them, and materialising them would fight a later kubectl apply.
func DefaultGlanceSpec(s *v1alpha1.GlanceSpec) {
	if s.Deployment == nil {
		s.Deployment = &v1alpha1.GlanceDeploymentSpec{}
	}
	d := s.Deployment
	setIfNil(&d.Replicas, v1alpha1.DefaultReplicas)
	setIfNil(&d.TerminationGracePeriodSeconds, v1alpha1.DefaultTerminationGracePeriodSeconds)
	setIfNil(&d.PreStopSleepSeconds, v1alpha1.DefaultPreStopSleepSeconds)
	if len(d.Resources.Requests) == 0 && len(d.Resources.Limits) == 0 {
		d.Resources.Requests = DefaultRequests()
		d.Resources.Limits = DefaultLimits()
	}

	setIfZero(&s.Database.Port, v1alpha1.DefaultDatabasePort)
	setIfZero(&s.Database.CredentialsMode, v1alpha1.DefaultCredentialsMode)
	if s.Cache != nil && s.Cache.Backend == "" {
		s.Cache.Backend = v1alpha1.DefaultCacheBackend
	}

	u := &s.ServiceUser
	setIfZero(&u.Username, v1alpha1.DefaultServiceUsername)
	setIfZero(&u.ProjectName, v1alpha1.DefaultServiceProjectName)
	setIfZero(&u.UserDomainName, v1alpha1.DefaultServiceUserDomainName)
	setIfZero(&u.ProjectDomainName, v1alpha1.DefaultServiceProjectDomainName)

	if s.APIServer != nil && s.APIServer.UWSGI != nil {
		w := s.APIServer.UWSGI
		setIfNil(&w.Processes, v1alpha1.DefaultUWSGIProcesses)
		setIfNil(&w.Threads, v1alpha1.DefaultUWSGIThreads)
		setIfNil(&w.HTTPKeepAlive, v1alpha1.DefaultUWSGIHTTPKeepAlive)
	}

	if s.Gateway != nil && s.Gateway.Path == "" {
		s.Gateway.Path = v1alpha1.DefaultGatewayPath
	}

	if s.Logging == nil {
		s.Logging = &v1alpha1.LoggingSpec{}
	}
	setIfZero(&s.Logging.Format, v1alpha1.DefaultLogFormat)
	setIfZero(&s.Logging.Level, v1alpha1.DefaultLogLevel)
	setIfNil(&s.Logging.Debug, v1alpha1.DefaultLogDebug)

	if s.SecretStoreRef != nil && s.SecretStoreRef.Kind == "" {
		s.SecretStoreRef.Kind = v1alpha1.DefaultSecretStoreKind
	}
	for i := range s.Middleware {
		setIfZero(&s.Middleware[i].Position, v1alpha1.DefaultMiddlewarePosition)
	}
	if s.ImageCache != nil && s.ImageCache.MaintenanceInterval == nil {
		s.ImageCache.MaintenanceInterval = &metav1.Duration{Duration: v1alpha1.DefaultImageCacheMaintenanceInterval}
	}
	if p := s.DBPurge; p != nil {
		setIfZero(&p.Schedule, v1alpha1.DefaultDBPurgeSchedule)
		setIfNil(&p.Suspend, v1alpha1.DefaultDBPurgeSuspend)
		setIfNil(&p.AgeInDays, v1alpha1.DefaultDBPurgeAgeInDays)
		setIfNil(&p.MaxRows, v1alpha1.DefaultDBPurgeMaxRows)
		setIfNil(&p.ActiveDeadlineSeconds, v1alpha1.DefaultDBPurgeActiveDeadlineSecs)
		setIfNil(&p.SuccessfulJobsHistoryLimit, v1alpha1.DefaultDBPurgeSuccessfulJobsLimit)
		setIfNil(&p.FailedJobsHistoryLimit, v1alpha1.DefaultDBPurgeFailedJobsLimit)
	}
}

// DefaultGlanceBackendSpec fills in the defaults of a GlanceBackend.
func DefaultGlanceBackendSpec(s *v1alpha1.GlanceBackendSpec) {
	if s.S3 != nil && s.S3.BucketURLFormat == "" {
		s.S3.BucketURLFormat = v1alpha1.DefaultBucketURLFormat
	}
}

// DefaultRequests are the glance-api container requests when none are set.
func DefaultRequests() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(v1alpha1.DefaultCPURequest),
		corev1.ResourceMemory: resource.MustParse(v1alpha1.DefaultMemoryRequest),
	}
}

// DefaultLimits are the glance-api container limits when none are set.
func DefaultLimits() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(v1alpha1.DefaultCPULimit),
		corev1.ResourceMemory: resource.MustParse(v1alpha1.DefaultMemoryLimit),
	}
}

// setIfZero and setIfNil set a field the spec leaves out to its default.
func setIfZero[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

func setIfNil[T any](p **T, v T) {
	if *p == nil {
		*p = &v
	}
}
