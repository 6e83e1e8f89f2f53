package glance

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/admission/webhook"
)

// Field indexes. The Glance reconciler registers all of them, the
// GlanceBackend controller's too, so it is set up first.
const (
	// IndexBackendGlance indexes GlanceBackends by spec.glanceRef.name; the
	// same key is the CRD's selectable field, which the webhook lists by.
	IndexBackendGlance = webhook.GlanceRefField
	// IndexBackendSecret indexes GlanceBackends by their S3 credentials
	// Secret.
	IndexBackendSecret = "spec.s3.credentialsSecretRef.name"
	// IndexGlanceSecret indexes Glances by every Secret they read directly:
	// the database and service-user credentials and the database TLS
	// material.
	IndexGlanceSecret = "glance.openstack.c5c3.io/secrets"
	// IndexGlanceConfigMap indexes Glances by the policy ConfigMap they read.
	IndexGlanceConfigMap = "spec.policyOverrides.configMapRef.name"
	// IndexGlanceSecretStore indexes Glances by the store they gate on, as
	// "<kind>/<name>".
	IndexGlanceSecretStore = "glance.openstack.c5c3.io/secret-store"
	// IndexGlanceMariaDB indexes Glances by spec.database.clusterRef.name.
	IndexGlanceMariaDB = "spec.database.clusterRef.name"
	// IndexGlanceTargetCluster indexes Glances by
	// spec.targetClusterRef.name, so a stopped target wakes its Glances.
	IndexGlanceTargetCluster = "spec.targetClusterRef.name"
)

// RegisterIndexes registers the field indexes of both controllers.
func RegisterIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	for _, ix := range []struct {
		obj     client.Object
		field   string
		extract client.IndexerFunc
	}{
		{&v1alpha1.GlanceBackend{}, IndexBackendGlance, func(o client.Object) []string {
			return []string{o.(*v1alpha1.GlanceBackend).Spec.GlanceRef.Name}
		}},
		{&v1alpha1.GlanceBackend{}, IndexBackendSecret, func(o client.Object) []string {
			if s3 := o.(*v1alpha1.GlanceBackend).Spec.S3; s3 != nil {
				return []string{s3.CredentialsSecretRef.Name}
			}
			return nil
		}},
		{&v1alpha1.Glance{}, IndexGlanceSecret, func(o client.Object) []string {
			return secretNames(o.(*v1alpha1.Glance))
		}},
		{&v1alpha1.Glance{}, IndexGlanceConfigMap, func(o client.Object) []string {
			if p := o.(*v1alpha1.Glance).Spec.PolicyOverrides; p != nil && p.ConfigMapRef != nil {
				return []string{p.ConfigMapRef.Name}
			}
			return nil
		}},
		{&v1alpha1.Glance{}, IndexGlanceSecretStore, func(o client.Object) []string {
			kind, name := secretStore(o.(*v1alpha1.Glance))
			return []string{string(kind) + "/" + name}
		}},
		{&v1alpha1.Glance{}, IndexGlanceTargetCluster, func(o client.Object) []string {
			if ref := o.(*v1alpha1.Glance).Spec.TargetClusterRef; ref != nil {
				return []string{ref.Name}
			}
			return nil
		}},
		{&v1alpha1.Glance{}, IndexGlanceMariaDB, func(o client.Object) []string {
			if ref := o.(*v1alpha1.Glance).Spec.Database.ClusterRef; ref != nil {
				return []string{ref.Name}
			}
			return nil
		}},
	} {
		if err := indexer.IndexField(ctx, ix.obj, ix.field, ix.extract); err != nil {
			return err
		}
	}
	return nil
}

// secretNames are the Secrets a Glance reads directly.
func secretNames(g *v1alpha1.Glance) []string {
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

// secretStore resolves spec.secretStoreRef with its defaults.
func secretStore(g *v1alpha1.Glance) (v1alpha1.SecretStoreKind, string) {
	kind, name := v1alpha1.DefaultSecretStoreKind, v1alpha1.DefaultSecretStoreName
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
