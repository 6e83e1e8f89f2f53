package v1alpha1

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Glance runs the OpenStack Glance image service: its API Deployment, database
// schema, credentials, exposure, scaling and the recurring database purge.
//
// The name becomes the name of the Service, the Deployment and the Jobs, so it
// must be a DNS-1035 label; it is capped at 43 characters so that the
// "{name}-db-purge" CronJob stays within the 52-character CronJob limit.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gl,categories=openstack
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Release",type=string,JSONPath=`.status.installedRelease`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.upgradePhase`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoint`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 43 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label of at most 43 characters (lowercase letters, digits and '-', starting with a letter)"
type Glance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired Glance service.
	// +required
	Spec GlanceSpec `json:"spec"`

	// status is the observed state, written only by the operator.
	// +optional
	Status GlanceStatus `json:"status,omitzero"`
}

// AnnotationPaused set to "true" on a Glance stops the operator from changing
// anything of it, its children and database included, until it is removed
// or set to anything else; Ready says so. Deletion still runs the
// finalizer.
const AnnotationPaused = "glance.openstack.c5c3.io/paused"

// Paused says whether AnnotationPaused holds the Glance.
func (g *Glance) Paused() bool { return g.Annotations[AnnotationPaused] == "true" }

// GlanceSpec is the desired state of a Glance image service.
//
// +kubebuilder:validation:XValidation:rule="has(oldSelf.targetClusterRef) == has(self.targetClusterRef)",message="targetClusterRef cannot be added or removed after creation"
// +kubebuilder:validation:XValidation:rule="!has(self.apiServer) || !has(self.apiServer.uwsgi) || !has(self.apiServer.uwsgi.harakiri) || self.apiServer.uwsgi.harakiri < (has(self.deployment) && has(self.deployment.terminationGracePeriodSeconds) ? self.deployment.terminationGracePeriodSeconds : 30) - (has(self.deployment) && has(self.deployment.preStopSleepSeconds) ? self.deployment.preStopSleepSeconds : 5)",message="apiServer.uwsgi.harakiri must be less than deployment.terminationGracePeriodSeconds minus deployment.preStopSleepSeconds, so a stuck request is killed before the pod is"
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || has(self.autoscaling.minReplicas) || (has(self.deployment) && has(self.deployment.replicas) ? self.deployment.replicas : 3) <= self.autoscaling.maxReplicas",message="autoscaling.maxReplicas must be at least deployment.replicas (default 3), which autoscaling.minReplicas defaults to"
type GlanceSpec struct {
	// openStackRelease is the OpenStack release this Glance runs, as YYYY.1 or
	// YYYY.2 (for example 2025.2). Releases from 2026.1 launch under uWSGI,
	// older ones under the eventlet glance-api server. Moving it forward by
	// exactly one release runs the expand-migrate-contract schema upgrade;
	// setting it back to status.installedRelease while that upgrade is in
	// flight aborts it.
	// +required
	// +kubebuilder:validation:Pattern=`^\d{4}\.[12]$`
	OpenStackRelease string `json:"openStackRelease"`

	// image is the container image that runs glance-api, the database Jobs and
	// the cache-maintenance sidecar. Its tag should carry the release prefix
	// of openStackRelease (for example 2026.1-20260301); a tag for another
	// release holds an upgrade with ImageReleaseMismatch.
	// +required
	Image ImageSpec `json:"image"`

	// deployment shapes the glance-api Deployment.
	// +optional
	Deployment *GlanceDeploymentSpec `json:"deployment,omitempty"`

	// database is the MariaDB database Glance keeps its catalogue in.
	// +required
	Database DatabaseSpec `json:"database"`

	// cache is the memcached service keystonemiddleware and oslo.cache use.
	// Without it tokens are validated against Keystone on every request.
	// +optional
	Cache *CacheSpec `json:"cache,omitempty"`

	// keystoneEndpoint is the Keystone URL glance-api validates tokens
	// against, an absolute http(s) URL with a host, usually the internal one.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="keystoneEndpoint must be an absolute http or https URL with a host"
	KeystoneEndpoint string `json:"keystoneEndpoint"`

	// keystonePublicEndpoint is the Keystone URL advertised to clients
	// (www_authenticate_uri). It falls back to keystoneEndpoint.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="keystonePublicEndpoint must be an absolute http or https URL with a host"
	KeystonePublicEndpoint string `json:"keystonePublicEndpoint,omitempty"`

	// serviceUser is the Keystone user glance-api authenticates as.
	// +required
	ServiceUser ServiceUserSpec `json:"serviceUser"`

	// region is the Keystone region of the image endpoint (region_name).
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Region string `json:"region,omitempty"`

	// apiServer tunes the API server process. Which knobs take effect depends
	// on the launch mode of openStackRelease; the other mode's knobs are
	// accepted with an admission warning and ignored.
	// +optional
	APIServer *APIServerSpec `json:"apiServer,omitempty"`

	// gateway exposes the API through a Gateway API HTTPRoute. Without it the
	// API is reachable only through its cluster-local Service.
	// +optional
	Gateway *GatewaySpec `json:"gateway,omitempty"`

	// networkPolicy, when set, isolates the API pods: ingress on 9292 only from
	// the listed sources (plus the gateway and operator namespaces), egress
	// only to DNS, the database, the cache, the S3 stores and additionalEgress.
	// +optional
	NetworkPolicy *NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// autoscaling, when set, hands the replica count to a
	// HorizontalPodAutoscaler; deployment.replicas then only seeds minReplicas.
	// +optional
	Autoscaling *AutoscalingSpec `json:"autoscaling,omitempty"`

	// logging configures oslo.log.
	// +optional
	Logging *LoggingSpec `json:"logging,omitempty"`

	// secretStoreRef selects the External Secrets Operator store that must be
	// Ready before the credential Secrets it syncs are trusted. Defaults to the
	// ClusterSecretStore "openbao-cluster-store".
	// +optional
	SecretStoreRef *SecretStoreReference `json:"secretStoreRef,omitempty"`

	// policyOverrides adds oslo.policy rules, rendered into policy.yaml.
	// +optional
	PolicyOverrides *PolicyOverridesSpec `json:"policyOverrides,omitempty"`

	// middleware adds paste filters to the API pipeline.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Middleware []MiddlewareSpec `json:"middleware,omitempty"`

	// plugins enables image import plugins and renders their configuration.
	// +optional
	// +listType=map
	// +listMapKey=configSection
	// +kubebuilder:validation:MaxItems=16
	Plugins []PluginSpec `json:"plugins,omitempty"`

	// extraConfig adds options to glance-api.conf, as section -> option ->
	// value. Values are written verbatim; options the operator renders itself
	// are overridden. Line breaks and section headers are refused.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	ExtraConfig map[string]map[string]string `json:"extraConfig,omitempty"`

	// imageCache enables the glance-api image cache on a per-pod emptyDir,
	// maintained by a cache-maintenance sidecar. Absent means no cache.
	// +optional
	ImageCache *ImageCacheSpec `json:"imageCache,omitempty"`

	// staging bounds the staging and tasks-work scratch volumes that image
	// import uses. Absent means a 20Gi sizeLimit on each.
	// +optional
	Staging *StagingSpec `json:"staging,omitempty"`

	// webDownload states where the web-download import method may fetch
	// image data from: Glance refuses any other URL, and with
	// networkPolicy the pods may connect there. Absent, web-download is
	// offered with Glance's own filter (any host but loopback and
	// link-local) unless networkPolicy is set, which would let no fetch
	// out: then it is not offered.
	// +optional
	WebDownload *WebDownloadSpec `json:"webDownload,omitempty"`

	// dbPurge schedules the recurring purge of soft-deleted database rows.
	// Absent means the defaults shown on each field.
	// +optional
	DBPurge *DBPurgeSpec `json:"dbPurge,omitempty"`

	// targetClusterRef deploys every child of this Glance to a registered
	// target cluster instead of the management cluster. It is fixed at
	// creation: it cannot be added, changed or removed later.
	// +optional
	TargetClusterRef *TargetClusterReference `json:"targetClusterRef,omitempty"`
}

// ImageSpec names the glance container image by tag or by digest.
//
// +kubebuilder:validation:XValidation:rule="has(self.tag) != has(self.digest)",message="exactly one of image.tag or image.digest must be set"
type ImageSpec struct {
	// repository is the OCI repository, for example
	// registry.example.com/openstack/glance.
	// +required
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$`
	Repository string `json:"repository"`

	// tag is the image tag, for example 2026.1-20260301.
	// +optional
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`
	Tag string `json:"tag,omitempty"`

	// digest pins the image by content, as sha256:<64 hex digits>.
	// +optional
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	Digest string `json:"digest,omitempty"`
}

// GlanceDeploymentSpec shapes the glance-api Deployment.
//
// +kubebuilder:validation:XValidation:rule="!has(self.preStopSleepSeconds) || self.preStopSleepSeconds < (has(self.terminationGracePeriodSeconds) ? self.terminationGracePeriodSeconds : 30)",message="deployment.preStopSleepSeconds must be less than deployment.terminationGracePeriodSeconds"
type GlanceDeploymentSpec struct {
	// replicas is the number of glance-api pods. Under autoscaling it only
	// seeds autoscaling.minReplicas.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	Replicas *int32 `json:"replicas,omitempty"`

	// resources of the glance-api container. Empty means requests of
	// 100m CPU / 512Mi memory and limits of 500m CPU / 1Gi memory: two
	// workers under load hold about 250Mi each.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitzero"`

	// terminationGracePeriodSeconds is how long a terminating pod may take to
	// drain in-flight requests.
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=10
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// preStopSleepSeconds delays SIGTERM so that endpoints and gateways stop
	// routing to a terminating pod before it stops accepting connections.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=0
	PreStopSleepSeconds *int64 `json:"preStopSleepSeconds,omitempty"`

	// strategy is the Deployment update strategy. Defaults to RollingUpdate
	// with maxUnavailable 0 and maxSurge 1.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.type) || self.type in ['RollingUpdate', 'Recreate']",message="deployment.strategy.type must be RollingUpdate or Recreate"
	// +kubebuilder:validation:XValidation:rule="!(has(self.type) && self.type == 'Recreate' && has(self.rollingUpdate))",message="deployment.strategy.rollingUpdate may only be set when deployment.strategy.type is RollingUpdate"
	Strategy *appsv1.DeploymentStrategy `json:"strategy,omitempty"`

	// topologySpreadConstraints spread the pods. Absent means spreading over
	// zones and hostnames (maxSkew 1, ScheduleAnyway); an empty list means no
	// constraints. Each labelSelector must match the pod labels.
	// A pointer keeps "absent" and "empty" apart through a Go round trip.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	TopologySpreadConstraints *[]corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// priorityClassName of the pods. The PriorityClass must exist.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName *string `json:"priorityClassName,omitempty"`
}

// CredentialsMode says how database credentials are issued.
// +kubebuilder:validation:Enum=Static;Dynamic
type CredentialsMode string

const (
	// CredentialsModeStatic uses the username and password of database.secretRef.
	CredentialsModeStatic CredentialsMode = "Static"
	// CredentialsModeDynamic has the secret store issue short-lived database
	// credentials; it needs a managed database (database.clusterRef).
	CredentialsModeDynamic CredentialsMode = "Dynamic"
)

// DatabaseSpec is either a managed database on a mariadb-operator MariaDB
// cluster (clusterRef) or an existing server (host).
//
// +kubebuilder:validation:XValidation:rule="has(self.clusterRef) != has(self.host)",message="exactly one of database.clusterRef or database.host must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.credentialsMode) || self.credentialsMode != 'Dynamic' || has(self.clusterRef)",message="database.credentialsMode Dynamic requires database.clusterRef"
type DatabaseSpec struct {
	// clusterRef names a mariadb-operator MariaDB in this namespace. The
	// operator then creates the Database, User and Grant itself.
	// +optional
	ClusterRef *LocalObjectReference `json:"clusterRef,omitempty"`

	// host is the address of an existing MariaDB/MySQL server whose database
	// and user already exist.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Host string `json:"host,omitempty"`

	// port of the database server.
	// +optional
	// +kubebuilder:default=3306
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// database is the schema name.
	// +required
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_]{1,64}$`
	Database string `json:"database"`

	// secretRef names the Secret with the database "username" and the
	// password under key (default "password").
	// +required
	SecretRef SecretKeySelector `json:"secretRef"`

	// credentialsMode is Static (the Secret's username and password) or
	// Dynamic (issued by the secret store; needs clusterRef).
	// +optional
	// +kubebuilder:default=Static
	CredentialsMode CredentialsMode `json:"credentialsMode,omitempty"`

	// tls secures the database connection.
	// +optional
	TLS *DatabaseTLSSpec `json:"tls,omitempty"`
}

// DatabaseTLSMode follows the MySQL client ssl-mode names.
// +kubebuilder:validation:Enum=disabled;prefer;require;verify-ca;verify-full
type DatabaseTLSMode string

// Database TLS modes.
const (
	DatabaseTLSDisabled   DatabaseTLSMode = "disabled"
	DatabaseTLSPrefer     DatabaseTLSMode = "prefer"
	DatabaseTLSRequire    DatabaseTLSMode = "require"
	DatabaseTLSVerifyCA   DatabaseTLSMode = "verify-ca"
	DatabaseTLSVerifyFull DatabaseTLSMode = "verify-full"
)

// DatabaseTLSSpec secures the database connection.
//
// +kubebuilder:validation:XValidation:rule="!(self.mode in ['verify-ca', 'verify-full']) || has(self.caBundleSecretRef)",message="database.tls.mode verify-ca and verify-full need caBundleSecretRef: without a CA nothing would be verified"
type DatabaseTLSSpec struct {
	// mode is the TLS mode: disabled, prefer, require, verify-ca (check the
	// server certificate against caBundleSecretRef) or verify-full (also check
	// the host name).
	// +required
	Mode DatabaseTLSMode `json:"mode"`

	// caBundleSecretRef names the Secret key holding the CA bundle that signs
	// the server certificate (key defaults to "ca.crt").
	// +optional
	CABundleSecretRef *SecretKeySelector `json:"caBundleSecretRef,omitempty"`

	// clientCertSecretRef names a kubernetes.io/tls Secret (tls.crt, tls.key)
	// for client-certificate authentication.
	// +optional
	ClientCertSecretRef *LocalObjectReference `json:"clientCertSecretRef,omitempty"`
}

// CacheSpec names the memcached servers, either a memcached cluster in this
// namespace or an explicit server list.
//
// +kubebuilder:validation:XValidation:rule="has(self.clusterRef) != has(self.servers)",message="exactly one of cache.clusterRef or cache.servers must be set"
type CacheSpec struct {
	// clusterRef names the memcached Service in this namespace.
	// +optional
	ClusterRef *LocalObjectReference `json:"clusterRef,omitempty"`

	// servers lists memcached servers as host:port.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?:[0-9]{1,5}$`
	Servers []string `json:"servers,omitempty"`

	// backend is the oslo.cache backend.
	// +optional
	// +kubebuilder:default="dogpile.cache.pymemcache"
	// +kubebuilder:validation:MaxLength=255
	Backend string `json:"backend,omitempty"`
}

// ServiceUserSpec is the Keystone user glance-api authenticates as.
// +kubebuilder:validation:XValidation:rule="!has(self.usernameKey) || self.usernameKey != (has(self.secretRef.key) ? self.secretRef.key : 'password')",message="serviceUser.usernameKey must differ from serviceUser.secretRef.key (default \"password\"): the password would be the user's name"
type ServiceUserSpec struct {
	// username of the service user, unless usernameKey names a key of the
	// service-user Secret that holds it.
	// +optional
	// +kubebuilder:default=glance
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Username string `json:"username,omitempty"`

	// projectName is the project the service user is scoped to.
	// +optional
	// +kubebuilder:default=service
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	ProjectName string `json:"projectName,omitempty"`

	// userDomainName is the domain of the user.
	// +optional
	// +kubebuilder:default=Default
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	UserDomainName string `json:"userDomainName,omitempty"`

	// projectDomainName is the domain of the project.
	// +optional
	// +kubebuilder:default=Default
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	ProjectDomainName string `json:"projectDomainName,omitempty"`

	// secretRef names the Secret holding the password, under key (default
	// "password").
	// +required
	SecretRef SecretKeySelector `json:"secretRef"`

	// usernameKey names the key of the secretRef Secret that holds the
	// service user's name, in place of username, so that a source rotating
	// by alternating two Keystone users switches the user and its password
	// at once (the pods roll once). Unset, no key of the Secret but the
	// password's is read, whatever else it holds. A Secret that lacks the
	// key named here is waited for, as a missing password is.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	UsernameKey string `json:"usernameKey,omitempty"`
}

// APIServerSpec tunes the API server process.
type APIServerSpec struct {
	// workers is the number of eventlet API workers ([DEFAULT] workers).
	// Effective only below 2026.1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Workers *int32 `json:"workers,omitempty"`

	// uwsgi tunes the uWSGI server. Effective only from 2026.1.
	// +optional
	UWSGI *UWSGISpec `json:"uwsgi,omitempty"`
}

// UWSGISpec tunes the uWSGI server.
//
// +kubebuilder:validation:XValidation:rule="!has(self.httpKeepAliveTimeout) || !has(self.httpKeepAlive) || self.httpKeepAlive",message="apiServer.uwsgi.httpKeepAliveTimeout requires apiServer.uwsgi.httpKeepAlive"
type UWSGISpec struct {
	// processes is the number of uWSGI worker processes.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	Processes *int32 `json:"processes,omitempty"`

	// threads per worker process.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	Threads *int32 `json:"threads,omitempty"`

	// httpKeepAlive keeps client connections open between requests.
	// +optional
	// +kubebuilder:default=true
	HTTPKeepAlive *bool `json:"httpKeepAlive,omitempty"`

	// httpKeepAliveTimeout closes idle kept-alive connections after this many
	// seconds (uWSGI reads 1 as "on, with the socket timeout", so the least
	// is 2).
	// +optional
	// +kubebuilder:validation:Minimum=2
	HTTPKeepAliveTimeout *int32 `json:"httpKeepAliveTimeout,omitempty"`

	// harakiri kills a worker stuck on one request for longer than this many
	// seconds — any request, so an image upload or download that takes
	// longer is cut off too. It must stay below
	// terminationGracePeriodSeconds minus preStopSleepSeconds.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Harakiri *int32 `json:"harakiri,omitempty"`
}

// GatewaySpec exposes the API through an HTTPRoute.
type GatewaySpec struct {
	// parentRef is the Gateway the route attaches to.
	// +required
	ParentRef GatewayParentReference `json:"parentRef"`

	// hostname the route matches, and the host of status.endpoint.
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Hostname string `json:"hostname"`

	// path is the path prefix routed to the API.
	// +optional
	// +kubebuilder:default="/"
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/[A-Za-z0-9/_.~%!$&'()*+,;=:@-]*$`
	Path string `json:"path,omitempty"`

	// annotations are added to the HTTPRoute.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// GatewayParentReference names a Gateway.
type GatewayParentReference struct {
	// name of the Gateway.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// namespace of the Gateway; defaults to the Glance's namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`

	// sectionName is the Gateway listener to attach to.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	SectionName string `json:"sectionName,omitempty"`
}

// NetworkPolicySpec isolates the API pods.
//
// +kubebuilder:validation:XValidation:rule="has(self.ingress) && size(self.ingress) > 0",message="networkPolicy.ingress must list at least one source; an empty list would cut the API off from every client"
type NetworkPolicySpec struct {
	// ingress lists the sources allowed to reach the API on port 9292.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Ingress []NetworkPolicySource `json:"ingress,omitempty"`

	// additionalEgress adds egress rules beyond the derived ones (DNS,
	// database, cache, S3 stores).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	AdditionalEgress []networkingv1.NetworkPolicyEgressRule `json:"additionalEgress,omitempty"`
}

// NetworkPolicySource selects pods allowed to reach the API.
//
// +kubebuilder:validation:XValidation:rule="has(self.namespaceSelector) || has(self.podSelector)",message="each networkPolicy.ingress source needs a namespaceSelector, a podSelector or both"
type NetworkPolicySource struct {
	// namespaceSelector selects namespaces; with podSelector, pods in them.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// podSelector selects pods; alone, in the Glance's namespace.
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
}

// AutoscalingSpec configures a HorizontalPodAutoscaler.
//
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",message="autoscaling.minReplicas must not exceed autoscaling.maxReplicas"
// +kubebuilder:validation:XValidation:rule="has(self.targetCPUUtilization) || has(self.targetMemoryUtilization)",message="autoscaling needs targetCPUUtilization, targetMemoryUtilization or both"
type AutoscalingSpec struct {
	// minReplicas is the lower bound; defaults to deployment.replicas.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// maxReplicas is the upper bound.
	// +required
	// +kubebuilder:validation:Minimum=1
	MaxReplicas int32 `json:"maxReplicas"`

	// targetCPUUtilization is the average CPU utilisation, in percent of the
	// request, the autoscaler aims for.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	TargetCPUUtilization *int32 `json:"targetCPUUtilization,omitempty"`

	// targetMemoryUtilization is the average memory utilisation, in percent
	// of the request, the autoscaler aims for.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	TargetMemoryUtilization *int32 `json:"targetMemoryUtilization,omitempty"`
}

// LogFormat is the log line format.
// +kubebuilder:validation:Enum=text;json
type LogFormat string

// Log formats.
const (
	LogFormatText LogFormat = "text"
	LogFormatJSON LogFormat = "json"
)

// LogLevel is an oslo.log level.
// +kubebuilder:validation:Enum=DEBUG;INFO;WARNING;ERROR;CRITICAL
type LogLevel string

// LoggingSpec configures oslo.log.
type LoggingSpec struct {
	// format of log lines: text, or json (one JSON object per line).
	// +optional
	// +kubebuilder:default=text
	Format LogFormat `json:"format,omitempty"`

	// level is the root log level.
	// +optional
	// +kubebuilder:default=INFO
	Level LogLevel `json:"level,omitempty"`

	// debug turns on oslo.log debug output.
	// +optional
	// +kubebuilder:default=false
	Debug *bool `json:"debug,omitempty"`

	// perLoggerLevels sets levels of individual loggers, for example
	// {"sqlalchemy": "WARNING"}.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	PerLoggerLevels map[string]LogLevel `json:"perLoggerLevels,omitempty"`
}

// SecretStoreKind is the kind of an External Secrets Operator store.
// +kubebuilder:validation:Enum=ClusterSecretStore;SecretStore
type SecretStoreKind string

// Secret store kinds.
const (
	ClusterSecretStoreKind SecretStoreKind = "ClusterSecretStore"
	SecretStoreKindName    SecretStoreKind = "SecretStore"
)

// SecretStoreReference names an External Secrets Operator store. A
// SecretStore is looked up in the Glance's own namespace.
type SecretStoreReference struct {
	// kind of the store.
	// +optional
	// +kubebuilder:default=ClusterSecretStore
	Kind SecretStoreKind `json:"kind,omitempty"`

	// name of the store.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// PolicyOverridesSpec adds oslo.policy rules.
//
// +kubebuilder:validation:XValidation:rule="has(self.rules) || has(self.configMapRef)",message="policyOverrides needs rules, configMapRef or both"
type PolicyOverridesSpec struct {
	// rules maps a policy name to its check string. Neither may be empty.
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	Rules map[string]PolicyRule `json:"rules,omitempty"`

	// configMapRef names a ConfigMap in this namespace whose "policy.yaml"
	// key holds further rules.
	// +optional
	ConfigMapRef *LocalObjectReference `json:"configMapRef,omitempty"`
}

// PolicyRule is an oslo.policy check string.
//
// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="check string must not be empty: oslo.policy reads it as allow-all; write \"@\" if that is meant"
type PolicyRule string

// MiddlewarePosition places a filter in the API pipeline.
// +kubebuilder:validation:Enum=before;after
type MiddlewarePosition string

// Middleware positions.
const (
	// MiddlewareBeforeAuth places the filter before authtoken.
	MiddlewareBeforeAuth MiddlewarePosition = "before"
	// MiddlewareAfterAuth places the filter after context, before the root app.
	MiddlewareAfterAuth MiddlewarePosition = "after"
)

// MiddlewareSpec adds a paste filter to the API pipeline.
type MiddlewareSpec struct {
	// name of the filter in glance-api-paste.ini.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_-]+$`
	Name string `json:"name"`

	// filterFactory is the paste filter factory, as module:callable.
	// +required
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_.]*$`
	FilterFactory string `json:"filterFactory"`

	// position is where the filter joins the pipeline: before authentication
	// (before authtoken) or after it (after context, before the root app).
	// +optional
	// +kubebuilder:default=after
	Position MiddlewarePosition `json:"position,omitempty"`

	// config is passed to the factory as the filter section's options.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Config map[string]string `json:"config,omitempty"`
}

// PluginSpec enables an image import plugin.
type PluginSpec struct {
	// name of the plugin, added to [image_import_opts] image_import_plugins.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_]+$`
	Name string `json:"name"`

	// configSection is the glance-api.conf section config is rendered into.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_]+$`
	ConfigSection string `json:"configSection"`

	// config holds the plugin's options.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Config map[string]string `json:"config,omitempty"`
}

// ImageCacheSpec enables the image cache.
type ImageCacheSpec struct {
	// size bounds the image-cache emptyDir. The pruner keeps the cache at 80%
	// of it (image_cache_max_size). Between 1Mi and 1Pi.
	// +required
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('1Mi')) && !quantity(string(self)).isGreaterThan(quantity('1Pi'))",message="imageCache.size must be between 1Mi and 1Pi"
	Size resource.Quantity `json:"size"`

	// maintenanceInterval is how often the sidecar runs the pruner and the
	// cleaner regardless of the cache's size, between 1m and 24h.
	// +optional
	// +kubebuilder:default="30m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('24h')",message="imageCache.maintenanceInterval must be between 1m and 24h"
	MaintenanceInterval *metav1.Duration `json:"maintenanceInterval,omitempty"`
}

// StagingSpec bounds the image import scratch volumes.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.sizeLimit) && has(self.unbounded) && self.unbounded)",message="staging.sizeLimit and staging.unbounded are mutually exclusive"
type StagingSpec struct {
	// sizeLimit of each of the staging and tasks-work emptyDirs.
	// +optional
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="staging.sizeLimit must be greater than zero"
	SizeLimit *resource.Quantity `json:"sizeLimit,omitempty"`

	// unbounded removes the sizeLimit. A large import can then fill the node's
	// disk, and the kubelet evicts pods outside the PodDisruptionBudget.
	// +optional
	Unbounded bool `json:"unbounded,omitempty"`
}

// WebDownloadSpec is the source policy of the web-download import method.
type WebDownloadSpec struct {
	// hosts are the host names and IP addresses an image URL may name, as
	// the URL spells them: a host name in lower case and fully qualified
	// (Glance resolves it as an absolute name), an IPv6 address without
	// brackets. Glance refuses a URL naming any other host.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Hosts []string `json:"hosts"`

	// cidrs are the address ranges the host names in hosts resolve to. With
	// networkPolicy the pods may connect to them, and to the IP addresses
	// in hosts; a host name needs them there.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=43
	CIDRs []string `json:"cidrs,omitempty"`

	// ports are the ports an image URL may name; defaults to 80 and 443.
	// A URL naming no port is not filtered by port and connects to its
	// scheme's (80 for http, 443 for https), so networkPolicy admits those
	// two as well.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=65535
	Ports []int32 `json:"ports,omitempty"`
}

// DBPurgeSpec schedules `glance-manage db purge`.
type DBPurgeSpec struct {
	// schedule in cron format.
	// +optional
	// +kubebuilder:default="0 3 * * *"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Schedule string `json:"schedule,omitempty"`

	// suspend pauses the purge; DBPurgeReady then reports DBPurgeSuspended.
	// +optional
	// +kubebuilder:default=false
	Suspend *bool `json:"suspend,omitempty"`

	// ageInDays purges rows soft-deleted more than this many days ago.
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=1
	AgeInDays *int32 `json:"ageInDays,omitempty"`

	// maxRows caps the rows purged per table in one run.
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	MaxRows *int32 `json:"maxRows,omitempty"`

	// activeDeadlineSeconds fails a run that takes longer, so a wedged purge
	// surfaces as DBPurgeJobFailed.
	// +optional
	// +kubebuilder:default=3600
	// +kubebuilder:validation:Minimum=1
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// successfulJobsHistoryLimit is how many succeeded runs are kept.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	SuccessfulJobsHistoryLimit *int32 `json:"successfulJobsHistoryLimit,omitempty"`

	// failedJobsHistoryLimit is how many failed runs are kept.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	FailedJobsHistoryLimit *int32 `json:"failedJobsHistoryLimit,omitempty"`
}

// TargetClusterReference names a registered target cluster.
type TargetClusterReference struct {
	// name of the target cluster: the name of its kubeconfig Secret in the
	// manager's clusters namespace.
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="targetClusterRef.name is immutable"
	Name string `json:"name"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SecretKeySelector names a key of a Secret in the same namespace.
type SecretKeySelector struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key within the Secret; each reference documents its default.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// UpgradePhase is the step of an in-flight release upgrade.
// +kubebuilder:validation:Enum=Expanding;Migrating;RollingUpdate;Contracting
type UpgradePhase string

// Upgrade phases, in order.
const (
	UpgradePhaseExpanding     UpgradePhase = "Expanding"
	UpgradePhaseMigrating     UpgradePhase = "Migrating"
	UpgradePhaseRollingUpdate UpgradePhase = "RollingUpdate"
	UpgradePhaseContracting   UpgradePhase = "Contracting"
)

// GlanceStatus is the observed state of a Glance.
type GlanceStatus struct {
	// conditions: Ready aggregates the nine sub-conditions SecretsReady,
	// BackendsReady, DatabaseReady, DeploymentReady, GlanceAPIReady, HPAReady,
	// NetworkPolicyReady, HTTPRouteReady and DBPurgeReady.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the spec generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// endpoint is the URL clients reach the image API at.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// installedRelease is the release whose schema is fully migrated.
	// +optional
	InstalledRelease string `json:"installedRelease,omitempty"`

	// targetRelease is the release an in-flight upgrade is moving to; empty
	// when no upgrade is in flight.
	// +optional
	TargetRelease string `json:"targetRelease,omitempty"`

	// upgradePhase is the step of the in-flight upgrade; empty when idle.
	// +optional
	UpgradePhase UpgradePhase `json:"upgradePhase,omitempty"`

	// dbSyncCountedJob is the UID of the finished db-sync Job whose outcome
	// the operator has counted in its metrics, so that each run counts once.
	// +optional
	DBSyncCountedJob types.UID `json:"dbSyncCountedJob,omitempty"`

	// schemaJobRetry is the backoff of a schema Job whose runs fail: the
	// operator runs it again after 1, 2, 4, 8, then every 15 minutes, and at
	// once when its image, config or credentials change. Empty once the
	// Job succeeds.
	// +optional
	SchemaJobRetry *SchemaJobRetry `json:"schemaJobRetry,omitempty"`

	// dbPurgeCountedJobs are the UIDs of the finished db-purge runs, among
	// those that still exist, whose outcome the operator has counted in its
	// metrics and events: each run counts once, whatever the order in which
	// runs finish.
	// +optional
	// +listType=set
	DBPurgeCountedJobs []types.UID `json:"dbPurgeCountedJobs,omitempty"`

	// imageCacheEvictedPods are the UIDs of the Glance's pods, among those
	// that still exist, that the kubelet evicted for filling their
	// image-cache emptyDir and that the operator has counted in its metrics
	// and events: each eviction counts once. Bounded: an eviction past the
	// bound is counted once an earlier pod is gone.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=128
	ImageCacheEvictedPods []types.UID `json:"imageCacheEvictedPods,omitempty"`
}

// SchemaJobRetry is the retry state of a failing schema Job.
type SchemaJobRetry struct {
	// job is the name of the failing Job's kind: db-sync, db-expand,
	// db-migrate or db-contract.
	// +kubebuilder:validation:Enum=db-sync;db-expand;db-migrate;db-contract
	Job string `json:"job"`

	// failures is how many of its runs failed in a row.
	// +kubebuilder:validation:Minimum=1
	Failures int32 `json:"failures"`

	// lastFailedJob is the UID of the last failed run counted, so that
	// each run counts once.
	LastFailedJob types.UID `json:"lastFailedJob"`

	// nextAttemptTime is when the Job runs again.
	NextAttemptTime metav1.Time `json:"nextAttemptTime"`
}

// GlanceList is a list of Glance.
//
// +kubebuilder:object:root=true
type GlanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Glance `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Glance{}, &GlanceList{})
}
