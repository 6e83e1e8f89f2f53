package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GlanceBackend attaches an image store to a Glance. Its name becomes the
// store id: the [name] section of backends.conf and the value clients pass in
// X-Image-Meta-Store. Names that collide with Glance's own config sections are
// reserved; admission refuses them under metadata.name (a CRD rule on the
// name could name no field).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=glb,categories=openstack
// +kubebuilder:selectablefield:JSONPath=`.spec.glanceRef.name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Default",type=boolean,JSONPath=`.spec.isDefault`
// +kubebuilder:printcolumn:name="Glance",type=string,JSONPath=`.spec.glanceRef.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
type GlanceBackend struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired image store.
	// +required
	Spec GlanceBackendSpec `json:"spec"`

	// status is the observed state, written only by the operator.
	// +optional
	Status GlanceBackendStatus `json:"status,omitzero"`
}

// BackendType is the kind of image store.
// +kubebuilder:validation:Enum=S3
type BackendType string

// BackendTypeS3 is an S3-compatible object store.
const BackendTypeS3 BackendType = "S3"

// GlanceBackendSpec is the desired state of an image store.
//
// +kubebuilder:validation:XValidation:rule="self.type != 'S3' || has(self.s3)",message="type S3 requires the s3 block"
type GlanceBackendSpec struct {
	// glanceRef names the Glance in this namespace the store is attached to.
	// It cannot be changed.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="glanceRef is immutable; delete and recreate the backend to move it"
	GlanceRef LocalObjectReference `json:"glanceRef"`

	// type of the store. It cannot be changed.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="type is immutable"
	Type BackendType `json:"type"`

	// s3 configures an S3 store.
	// +optional
	S3 *S3BackendSpec `json:"s3,omitempty"`

	// isDefault makes this the store new images go to when the client names
	// none. Exactly one ready backend of a Glance must be the default.
	// +optional
	IsDefault bool `json:"isDefault,omitempty"`

	// extraOptions adds options to this store's section. Keys are oslo.config
	// option names; the options the operator renders itself (s3_store_* and
	// store_description) are refused.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	ExtraOptions map[string]OptionValue `json:"extraOptions,omitempty"`
}

// The value rules sit on the value type, not on the map, so that the API
// server names the entry in its error. The key rules cannot (CEL has no way
// to put a key into the path); admission.ValidateGlanceBackend judges them.

// OptionValue is the value of an oslo.config option, on one line.
// +kubebuilder:validation:MaxLength=1024
// +kubebuilder:validation:XValidation:rule="!self.contains('\\n') && !self.contains('\\r')",message="value must not contain line breaks"
type OptionValue string

// BucketURLFormat says how the bucket appears in request URLs.
// +kubebuilder:validation:Enum=path;virtual
type BucketURLFormat string

// Bucket URL formats.
const (
	BucketURLFormatPath    BucketURLFormat = "path"
	BucketURLFormatVirtual BucketURLFormat = "virtual"
)

// S3BackendSpec configures an S3-compatible store.
//
// +kubebuilder:validation:XValidation:rule="!has(self.caBundleSecretRef) || url(self.host).getScheme() == 'https'",message="s3.caBundleSecretRef needs an https s3.host: over http there is no certificate to verify"
type S3BackendSpec struct {
	// host is the S3 endpoint, an absolute http or https URL.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="s3.host must be an absolute http or https URL with a host"
	Host string `json:"host"`

	// bucket holds the images.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`
	Bucket string `json:"bucket"`

	// credentialsSecretRef names the Secret with the keys access-key-id and
	// secret-access-key.
	// +required
	CredentialsSecretRef LocalObjectReference `json:"credentialsSecretRef"`

	// bucketURLFormat is path (https://host/bucket) or virtual
	// (https://bucket.host).
	// +optional
	// +kubebuilder:default=path
	BucketURLFormat BucketURLFormat `json:"bucketURLFormat,omitempty"`

	// region of the bucket.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9-]+$`
	Region string `json:"region,omitempty"`

	// createBucketOnPut creates the bucket on the first upload when missing.
	// +optional
	CreateBucketOnPut bool `json:"createBucketOnPut,omitempty"`

	// caBundleSecretRef names the Secret key holding the CA bundle (PEM)
	// that signs an https host's certificate (key defaults to "ca.crt"),
	// in place of the bundle Glance's image ships. A change to it rolls the
	// pods.
	// +optional
	CABundleSecretRef *SecretKeySelector `json:"caBundleSecretRef,omitempty"`

	// largeObjectSize, in MiB, above which uploads go multipart.
	// +optional
	// +kubebuilder:validation:Minimum=1
	LargeObjectSize *int32 `json:"largeObjectSize,omitempty"`

	// largeObjectChunkSize, in MiB, of each multipart part.
	// +optional
	// +kubebuilder:validation:Minimum=1
	LargeObjectChunkSize *int32 `json:"largeObjectChunkSize,omitempty"`
}

// GlanceBackendStatus is the observed state of an image store.
type GlanceBackendStatus struct {
	// conditions: CredentialsReady (the credentials Secret has both keys),
	// ConfigProjected (the Glance's Deployment mounts this store's section)
	// and Ready (both).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the spec generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// GlanceBackendList is a list of GlanceBackend.
//
// +kubebuilder:object:root=true
type GlanceBackendList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GlanceBackend `json:"items"`
}

func init() {
	SchemeBuilder.Register(&GlanceBackend{}, &GlanceBackendList{})
}
