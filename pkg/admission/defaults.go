package admission

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// DefaultGlance fills in the defaults the mutating webhook sets, the same
// for `check`: the v1alpha1.Default* constants. Blocks whose absence
// means something (staging, imageCache, dbPurge, targetClusterRef,
// topologySpreadConstraints, strategy) are left absent: the controller
// resolves them, and materialising them would fight a later kubectl apply.
func DefaultGlance(g *v1alpha1.Glance) {
	s := &g.Spec
	if s.Deployment == nil {
		s.Deployment = &v1alpha1.GlanceDeploymentSpec{}
	}
	d := s.Deployment
	if d.Replicas == nil {
		d.Replicas = ptr.To(v1alpha1.DefaultReplicas)
	}
	if d.TerminationGracePeriodSeconds == nil {
		d.TerminationGracePeriodSeconds = ptr.To(v1alpha1.DefaultTerminationGracePeriodSeconds)
	}
	if d.PreStopSleepSeconds == nil {
		d.PreStopSleepSeconds = ptr.To(v1alpha1.DefaultPreStopSleepSeconds)
	}
	if len(d.Resources.Requests) == 0 && len(d.Resources.Limits) == 0 {
		d.Resources.Requests = DefaultRequests()
		d.Resources.Limits = DefaultLimits()
	}

	if s.Database.Port == 0 {
		s.Database.Port = v1alpha1.DefaultDatabasePort
	}
	if s.Database.CredentialsMode == "" {
		s.Database.CredentialsMode = v1alpha1.DefaultCredentialsMode
	}
	if s.Cache != nil && s.Cache.Backend == "" {
		s.Cache.Backend = v1alpha1.DefaultCacheBackend
	}

	u := &s.ServiceUser
	setIfEmpty(&u.Username, v1alpha1.DefaultServiceUsername)
	setIfEmpty(&u.ProjectName, v1alpha1.DefaultServiceProjectName)
	setIfEmpty(&u.UserDomainName, v1alpha1.DefaultServiceUserDomainName)
	setIfEmpty(&u.ProjectDomainName, v1alpha1.DefaultServiceProjectDomainName)

	if s.APIServer != nil && s.APIServer.UWSGI != nil {
		w := s.APIServer.UWSGI
		if w.Processes == nil {
			w.Processes = ptr.To(v1alpha1.DefaultUWSGIProcesses)
		}
		if w.Threads == nil {
			w.Threads = ptr.To(v1alpha1.DefaultUWSGIThreads)
		}
		if w.HTTPKeepAlive == nil {
			w.HTTPKeepAlive = ptr.To(v1alpha1.DefaultUWSGIHTTPKeepAlive)
		}
	}

	if s.Gateway != nil && s.Gateway.Path == "" {
		s.Gateway.Path = v1alpha1.DefaultGatewayPath
	}

	if s.Logging == nil {
		s.Logging = &v1alpha1.LoggingSpec{}
	}
	if s.Logging.Format == "" {
		s.Logging.Format = v1alpha1.DefaultLogFormat
	}
	if s.Logging.Level == "" {
		s.Logging.Level = v1alpha1.DefaultLogLevel
	}
	if s.Logging.Debug == nil {
		s.Logging.Debug = ptr.To(v1alpha1.DefaultLogDebug)
	}

	if s.SecretStoreRef != nil && s.SecretStoreRef.Kind == "" {
		s.SecretStoreRef.Kind = v1alpha1.DefaultSecretStoreKind
	}
	for i := range s.Middleware {
		if s.Middleware[i].Position == "" {
			s.Middleware[i].Position = v1alpha1.DefaultMiddlewarePosition
		}
	}
	if s.ImageCache != nil && s.ImageCache.MaintenanceInterval == nil {
		s.ImageCache.MaintenanceInterval = &metav1.Duration{Duration: v1alpha1.DefaultImageCacheMaintenanceInterval}
	}
	if p := s.DBPurge; p != nil {
		setIfEmpty(&p.Schedule, v1alpha1.DefaultDBPurgeSchedule)
		if p.Suspend == nil {
			p.Suspend = ptr.To(v1alpha1.DefaultDBPurgeSuspend)
		}
		if p.AgeInDays == nil {
			p.AgeInDays = ptr.To(v1alpha1.DefaultDBPurgeAgeInDays)
		}
		if p.MaxRows == nil {
			p.MaxRows = ptr.To(v1alpha1.DefaultDBPurgeMaxRows)
		}
		if p.ActiveDeadlineSeconds == nil {
			p.ActiveDeadlineSeconds = ptr.To(v1alpha1.DefaultDBPurgeActiveDeadlineSecs)
		}
		if p.SuccessfulJobsHistoryLimit == nil {
			p.SuccessfulJobsHistoryLimit = ptr.To(v1alpha1.DefaultDBPurgeSuccessfulJobsLimit)
		}
		if p.FailedJobsHistoryLimit == nil {
			p.FailedJobsHistoryLimit = ptr.To(v1alpha1.DefaultDBPurgeFailedJobsLimit)
		}
	}
}

// DefaultGlanceBackend fills in the defaults of a GlanceBackend.
func DefaultGlanceBackend(b *v1alpha1.GlanceBackend) {
	if b.Spec.S3 != nil && b.Spec.S3.BucketURLFormat == "" {
		b.Spec.S3.BucketURLFormat = v1alpha1.DefaultBucketURLFormat
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

func setIfEmpty(s *string, v string) {
	if *s == "" {
		*s = v
	}
}
