package v1alpha1

import "sigs.k8s.io/controller-runtime/pkg/client"

// Field indexes of the operator's caches, by the field or relation they
// index. The controllers list by them; pkg/operator registers them.
const (
	// IndexBackendGlance indexes GlanceBackends by spec.glanceRef.name; the
	// same key is the CRD's selectable field, which the webhook lists by.
	IndexBackendGlance = "spec.glanceRef.name"
	// IndexBackendSecret indexes GlanceBackends by every Secret they read
	// (SecretNames).
	IndexBackendSecret = "spec.s3.credentialsSecretRef.name"
	// IndexGlanceSecret indexes Glances by every Secret they read directly
	// (SecretNames).
	IndexGlanceSecret = "glance.openstack.c5c3.io/secrets"
	// IndexGlanceConfigMap indexes Glances by the policy ConfigMap they read.
	IndexGlanceConfigMap = "spec.policyOverrides.configMapRef.name"
	// IndexGlanceSecretStore indexes Glances by the store they gate on, as
	// "<kind>/<name>" (SecretStore).
	IndexGlanceSecretStore = "glance.openstack.c5c3.io/secret-store"
	// IndexGlanceMariaDB indexes Glances by spec.database.clusterRef.name.
	IndexGlanceMariaDB = "spec.database.clusterRef.name"
	// IndexGlanceTargetCluster indexes Glances by
	// spec.targetClusterRef.name, so a stopped target wakes its Glances.
	IndexGlanceTargetCluster = "spec.targetClusterRef.name"
	// IndexChildComponent indexes the operator's ConfigMaps, Secrets and
	// Jobs, on every cluster, by "<Glance name>/<component>" when they carry
	// that Glance's child labels: a Glance's history of one component, or
	// its db-purge runs, are listed without matching the labels of every
	// object of the kind in its namespace.
	IndexChildComponent = "glance.openstack.c5c3.io/child-component"
	// IndexUserSQLUser indexes mariadb-operator Users on the management
	// cluster by the SQL user they make and the MariaDB they make it on, as
	// "<MariaDB namespace>/<MariaDB name>/<user>", so a Glance finds another
	// owner's User of its SQL user without reading every User.
	IndexUserSQLUser = "glance.openstack.c5c3.io/sql-user"
	// IndexEndpointSliceService indexes EndpointSlices, on every cluster, by
	// the Service they belong to.
	IndexEndpointSliceService = "glance.openstack.c5c3.io/endpointslice-service"
)

// BackendGlanceIndex is a GlanceBackend's value of IndexBackendGlance, for
// the operator's cache and the webhook's.
func BackendGlanceIndex(o client.Object) []string {
	return []string{o.(*GlanceBackend).Spec.GlanceRef.Name}
}

// Keys of a GlanceBackend's S3 credentials Secret.
const (
	S3AccessKeyIDKey     = "access-key-id"
	S3SecretAccessKeyKey = "secret-access-key"
)

// SecretNames are the Secrets a GlanceBackend reads: the S3 credentials
// and the CA bundle.
func (b *GlanceBackend) SecretNames() []string {
	s3 := b.Spec.S3
	if s3 == nil {
		return nil
	}
	names := []string{s3.CredentialsSecretRef.Name}
	if s3.CABundleSecretRef != nil && s3.CABundleSecretRef.Name != s3.CredentialsSecretRef.Name {
		names = append(names, s3.CABundleSecretRef.Name)
	}
	return names
}

// SecretNames are the Secrets a Glance reads directly: the database and
// service-user credentials and the database TLS material.
func (g *Glance) SecretNames() []string {
	names := []string{g.Spec.Database.SecretRef.Name, g.Spec.ServiceUser.SecretRef.Name}
	if tls := g.Spec.Database.TLS; tls != nil {
		if tls.CABundleSecretRef != nil {
			names = append(names, tls.CABundleSecretRef.Name)
		}
		if tls.ClientCertSecretRef != nil {
			names = append(names, tls.ClientCertSecretRef.Name)
		}
	}
	return names
}

// SecretStore is spec.secretStoreRef with its defaults filled in.
func (g *Glance) SecretStore() (SecretStoreKind, string) {
	kind, name := DefaultSecretStoreKind, DefaultSecretStoreName
	if ref := g.Spec.SecretStoreRef; ref != nil {
		if ref.Kind != "" {
			kind = ref.Kind
		}
		if ref.Name != "" {
			name = ref.Name
		}
	}
	return kind, name
}
