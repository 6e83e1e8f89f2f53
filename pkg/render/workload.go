package render

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// WorkloadFacts are what the workloads need beyond the spec, resolved by the
// reconciler from other objects.
type WorkloadFacts struct {
	// ConfigMapName is the config ConfigMap mounted at ConfigDir.
	ConfigMapName string
	// BackendsSecretName is the backends Secret mounted at BackendsDir.
	BackendsSecretName string
	// AuthtokenHash and DBConnectionHash are digests of the service-user
	// password and the DSN. They become pod annotations of the Deployment so
	// that a rotation, which the env vars do not pick up, rolls the pods.
	// An empty hash leaves its annotation out. A schema Job carries the
	// DSN's on itself, not on its pod template: a rotation must not re-run a
	// schema migration that succeeded, but re-runs one that failed at once.
	AuthtokenHash    string
	DBConnectionHash string
	// PurgeImage is the image the purge CronJob runs; empty means
	// ImageRef. During an upgrade it is the installed release's: db purge
	// of the new release is not run on a schema it has not finished.
	PurgeImage string
	// Upgrade names the release upgrade a phase Job belongs to
	// (UpgradeKey); it labels the phase Jobs, so the next upgrade never
	// takes an earlier one's Jobs for its own.
	Upgrade string
	// PodIPFamily is the IP family of the API pods' own addresses
	// (status.podIP), which a URL brackets when it is IPv6; empty is IPv4.
	// The Deployment step takes the API Service's: a single-stack cluster
	// has one family, and a dual-stack one whose pod and Service ranges
	// are listed in the same order gives both its first family.
	PodIPFamily corev1.IPFamily
}

// Names of the pod template annotations. The operator's annotations are in
// the API group's domain; the two credential digests keep the names
// published for them, which dashboards and runbooks may key on.
const (
	AnnotationAuthtokenHash    = "glance.c5c3.io/authtoken-hash"
	AnnotationDBConnectionHash = "glance.c5c3.io/db-connection-hash"
	// AnnotationPodTemplateHash is set on each database Job to
	// PodTemplateHash of the template it was rendered with.
	AnnotationPodTemplateHash = "glance.openstack.c5c3.io/pod-template-hash"
	// AnnotationSchemaKey is set on the db-sync Job to SchemaKey of what it
	// syncs: a Job that succeeded with the same key need not run again,
	// whatever else of its template changed.
	AnnotationSchemaKey = "glance.openstack.c5c3.io/schema-key"
	// LabelUpgrade labels a phase Job with the upgrade it runs for.
	LabelUpgrade = "glance.openstack.c5c3.io/upgrade"
)

// IsOperatorAnnotation reports whether key is in one of the domains of the
// annotations the operator renders: the API group's and the published
// digests'. Others' annotations on a child are theirs to keep.
func IsOperatorAnnotation(key string) bool {
	domain, _, _ := strings.Cut(key, "/")
	for _, own := range []string{AnnotationPodTemplateHash, AnnotationAuthtokenHash} {
		if d, _, _ := strings.Cut(own, "/"); d == domain {
			return true
		}
	}
	return false
}

// UpgradeKey is the LabelUpgrade value of the upgrade from installed to
// target, such as "2025.2-to-2026.1".
func UpgradeKey(installed, target string) string { return installed + "-to-" + target }

// Volume names. The reconcilers read the live config ConfigMap and backends
// Secret back from VolumeConfig and VolumeBackends of the Deployment
// (MountedNames).
const (
	VolumeConfig      = "config"
	VolumeBackends    = "backends"
	VolumeStaging     = "staging"
	VolumeTasksWork   = "tasks-work"
	VolumeImageCache  = "image-cache"
	VolumeTmp         = "tmp"
	VolumeDBTLSCA     = "db-tls-ca"
	VolumeDBTLSClient = "db-tls-client"
)

// Env vars through which oslo.config receives the secrets, so that neither
// is ever written into the ConfigMap.
const (
	EnvDatabaseConnection = "OS_DATABASE__CONNECTION"
	EnvAuthtokenPassword  = "OS_KEYSTONE_AUTHTOKEN__PASSWORD"
	EnvAuthtokenUsername  = "OS_KEYSTONE_AUTHTOKEN__USERNAME"
)

// Env vars through which each API pod learns its own address: the config
// is one ConfigMap for every replica, so a per-pod option comes from the
// downward API through oslo.config's environment source.
const (
	// EnvPodIP is the pod's status.podIP.
	EnvPodIP = "GLANCE_POD_IP"
	// EnvWorkerSelfReferenceURL is [DEFAULT] worker_self_reference_url,
	// built from EnvPodIP by the kubelet's $(VAR) expansion.
	EnvWorkerSelfReferenceURL = "OS_DEFAULT__WORKER_SELF_REFERENCE_URL"
)

// TmpDir is the writable /tmp of every container: the root file system is
// read-only.
const TmpDir = "/tmp"

// GlanceUID is the user and group glance runs as in the image.
const GlanceUID int64 = 42424

// Modes of the mounted files. Secrets are 0440: with fsGroup the kubelet
// makes them group GlanceUID, so glance reads them through its group while no
// other UID can, and nothing needs to write or execute them. The config is
// not secret, but nothing writes it either.
const (
	secretVolumeMode    int32 = 0o440
	configMapVolumeMode int32 = 0o444
)

// tmpSizeLimit bounds /tmp, so that a stray writer fills its own emptyDir
// (and gets its pod evicted) rather than the node's disk.
var tmpSizeLimit = resource.MustParse("1Gi")

// ImageRef is the image reference of spec.image: repository@digest when a
// digest is set (it pins the content, so it wins over a tag that admission
// would have refused next to it), repository:tag otherwise.
func ImageRef(g *v1alpha1.Glance) string {
	i := g.Spec.Image
	if i.Digest != "" {
		return i.Repository + "@" + i.Digest
	}
	return i.Repository + ":" + i.Tag
}

// checkGlanceInputs checks what every container running glance code needs.
func checkGlanceInputs(g *v1alpha1.Glance, f WorkloadFacts) error {
	if g.Name == "" {
		return fmt.Errorf("the Glance has no name")
	}
	if f.ConfigMapName == "" {
		return fmt.Errorf("no config ConfigMap to mount")
	}
	if f.BackendsSecretName == "" {
		return fmt.Errorf("no backends Secret to mount")
	}
	if g.Spec.ServiceUser.SecretRef.Name == "" {
		return fmt.Errorf("spec.serviceUser.secretRef.name is empty")
	}
	return nil
}

// glanceConfigDirArgs are the two --config-dir roots every glance program
// reads: the config ConfigMap and the backends Secret.
func glanceConfigDirArgs() []string {
	return []string{"--config-dir", ConfigDir, "--config-dir", BackendsDir}
}

// glanceEnv is the environment of every container that runs glance code.
// The service user is spec.serviceUser.username from the config, unless
// spec.serviceUser.usernameKey names the Secret's key that holds it: only
// then does the Secret name the user, so that a key the spec does not ask
// for (an External Secrets template's "username") changes nothing. The key
// is required, not optional: the operator waits for it, and a pod that
// cannot read it must not start as the config's user instead.
func glanceEnv(g *v1alpha1.Glance) []corev1.EnvVar {
	su := g.Spec.ServiceUser
	env := []corev1.EnvVar{
		secretEnv(EnvDatabaseConnection, DBConnectionSecretName(g.Name), DBConnectionKey),
		secretEnv(EnvAuthtokenPassword, su.SecretRef.Name, cmp.Or(su.SecretRef.Key, v1alpha1.DefaultServiceUserPasswordKey)),
	}
	if su.UsernameKey != "" {
		env = append(env, secretEnv(EnvAuthtokenUsername, su.SecretRef.Name, su.UsernameKey))
	}
	return env
}

func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret},
		Key:                  key,
	}}}
}

// dbTLSEnabled reports whether the database connection uses TLS, and so
// whether its material is mounted.
func dbTLSEnabled(g *v1alpha1.Glance) bool {
	t := g.Spec.Database.TLS
	return t != nil && t.Mode != v1alpha1.DatabaseTLSDisabled
}

// glanceVolumes are the volumes every pod running glance code has: config,
// backends, /tmp and the database TLS material.
func glanceVolumes(g *v1alpha1.Glance, f WorkloadFacts) []corev1.Volume {
	vols := []corev1.Volume{
		{Name: VolumeConfig, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: f.ConfigMapName},
			DefaultMode:          ptr.To(configMapVolumeMode),
		}}},
		{Name: VolumeBackends, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  f.BackendsSecretName,
			DefaultMode: ptr.To(secretVolumeMode),
		}}},
		emptyDir(VolumeTmp, &tmpSizeLimit),
	}
	if !dbTLSEnabled(g) {
		return vols
	}
	t := g.Spec.Database.TLS
	if ca := t.CABundleSecretRef; ca != nil {
		key := cmp.Or(ca.Key, v1alpha1.DefaultCABundleKey)
		// Only the named key, so the file is exactly DBTLSCAPath and a
		// missing key fails the mount visibly instead of the connection.
		vols = append(vols, corev1.Volume{Name: VolumeDBTLSCA, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  ca.Name,
			Items:       []corev1.KeyToPath{{Key: key, Path: key}},
			DefaultMode: ptr.To(secretVolumeMode),
		}}})
	}
	if c := t.ClientCertSecretRef; c != nil {
		vols = append(vols, corev1.Volume{Name: VolumeDBTLSClient, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: c.Name,
			Items: []corev1.KeyToPath{
				{Key: corev1.TLSCertKey, Path: corev1.TLSCertKey},
				{Key: corev1.TLSPrivateKeyKey, Path: corev1.TLSPrivateKeyKey},
			},
			DefaultMode: ptr.To(secretVolumeMode),
		}}})
	}
	return vols
}

// glanceMounts mount glanceVolumes.
func glanceMounts(g *v1alpha1.Glance) []corev1.VolumeMount {
	mounts := []corev1.VolumeMount{
		{Name: VolumeConfig, MountPath: ConfigDir, ReadOnly: true},
		{Name: VolumeBackends, MountPath: BackendsDir, ReadOnly: true},
		{Name: VolumeTmp, MountPath: TmpDir},
	}
	if !dbTLSEnabled(g) {
		return mounts
	}
	if g.Spec.Database.TLS.CABundleSecretRef != nil {
		mounts = append(mounts, corev1.VolumeMount{Name: VolumeDBTLSCA, MountPath: DBTLSCADir, ReadOnly: true})
	}
	if g.Spec.Database.TLS.ClientCertSecretRef != nil {
		mounts = append(mounts, corev1.VolumeMount{Name: VolumeDBTLSClient, MountPath: DBTLSClientDir, ReadOnly: true})
	}
	return mounts
}

func emptyDir(name string, sizeLimit *resource.Quantity) corev1.Volume {
	var limit *resource.Quantity
	if sizeLimit != nil {
		limit = ptr.To(sizeLimit.DeepCopy())
	}
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: limit}}}
}

// glanceContainer is a container running glance code: the image, the env,
// the common mounts plus extra, and the restricted security context.
func glanceContainer(g *v1alpha1.Glance, name, image string, command []string, extra ...corev1.VolumeMount) corev1.Container {
	return corev1.Container{
		Name:                     name,
		Image:                    image,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		Command:                  command,
		Env:                      glanceEnv(g),
		VolumeMounts:             append(glanceMounts(g), extra...),
		SecurityContext:          containerSecurityContext(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// glanceManageCommand is glance-manage with both config dirs and args.
func glanceManageCommand(args ...string) []string {
	return append(append([]string{"glance-manage"}, glanceConfigDirArgs()...), args...)
}

// podSecurityContext is the restricted Pod Security Standard, running as the
// image's glance user.
func podSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To(GlanceUID),
		RunAsGroup:     ptr.To(GlanceUID),
		FSGroup:        ptr.To(GlanceUID),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func containerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		ReadOnlyRootFilesystem:   ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// glancePodSpec is the pod spec shared by the Deployment, the Jobs and the
// purge CronJob, before the workload-specific parts.
func glancePodSpec(g *v1alpha1.Glance, f WorkloadFacts) corev1.PodSpec {
	return corev1.PodSpec{
		Volumes:                      glanceVolumes(g, f),
		SecurityContext:              podSecurityContext(),
		AutomountServiceAccountToken: ptr.To(false),
		// The Service named like the Glance would otherwise inject
		// {NAME}_PORT-style variables nobody reads.
		EnableServiceLinks: ptr.To(false),
	}
}

// apiResources are deployment.resources, or the documented defaults when
// neither requests nor limits are set.
func apiResources(g *v1alpha1.Glance) corev1.ResourceRequirements {
	if d := g.Spec.Deployment; d != nil && (len(d.Resources.Requests) > 0 || len(d.Resources.Limits) > 0) {
		return *d.Resources.DeepCopy()
	}
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(v1alpha1.DefaultCPURequest),
			corev1.ResourceMemory: resource.MustParse(v1alpha1.DefaultMemoryRequest),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(v1alpha1.DefaultCPULimit),
			corev1.ResourceMemory: resource.MustParse(v1alpha1.DefaultMemoryLimit),
		},
	}
}

// PodTemplateHash is a short, stable digest of a pod template. A database Job
// carries the hash of the template it was rendered with
// (AnnotationPodTemplateHash); the reconciler compares it with the hash of a
// fresh render, never with a hash of the live Job, whose template the API
// server has defaulted.
func PodTemplateHash(t corev1.PodTemplateSpec) string {
	// Cannot fail: the type has no channels, funcs or cycles. encoding/json
	// writes struct fields in order and map keys sorted, so equal templates
	// give equal bytes.
	b, _ := json.Marshal(t)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:contentHashLength]
}

// MountedNames reads back the config ConfigMap and the backends Secret a
// pod spec mounts; empty when it mounts none.
func MountedNames(pod corev1.PodSpec) (configMap, backendsSecret string) {
	for _, v := range pod.Volumes {
		switch {
		case v.Name == VolumeConfig && v.ConfigMap != nil:
			configMap = v.ConfigMap.Name
		case v.Name == VolumeBackends && v.Secret != nil:
			backendsSecret = v.Secret.SecretName
		}
	}
	return configMap, backendsSecret
}
