package operator

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
)

// registerIndexes registers every field index the controllers and the
// webhook lookups list by, before any controller is set up.
func registerIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := registerChildIndexes(ctx, indexer); err != nil {
		return err
	}
	for _, ix := range []struct {
		obj     client.Object
		field   string
		extract client.IndexerFunc
	}{
		{&v1alpha1.GlanceBackend{}, v1alpha1.IndexBackendGlance, v1alpha1.BackendGlanceIndex},
		{&v1alpha1.GlanceBackend{}, v1alpha1.IndexBackendSecret, func(o client.Object) []string {
			return o.(*v1alpha1.GlanceBackend).SecretNames()
		}},
		{&v1alpha1.Glance{}, v1alpha1.IndexGlanceSecret, func(o client.Object) []string {
			return o.(*v1alpha1.Glance).SecretNames()
		}},
		{&v1alpha1.Glance{}, v1alpha1.IndexGlanceConfigMap, func(o client.Object) []string {
			if p := o.(*v1alpha1.Glance).Spec.PolicyOverrides; p != nil && p.ConfigMapRef != nil {
				return []string{p.ConfigMapRef.Name}
			}
			return nil
		}},
		{&v1alpha1.Glance{}, v1alpha1.IndexGlanceSecretStore, func(o client.Object) []string {
			kind, name := o.(*v1alpha1.Glance).SecretStore()
			return []string{string(kind) + "/" + name}
		}},
		{&v1alpha1.Glance{}, v1alpha1.IndexGlanceTargetCluster, func(o client.Object) []string {
			if ref := o.(*v1alpha1.Glance).Spec.TargetClusterRef; ref != nil {
				return []string{ref.Name}
			}
			return nil
		}},
		{&v1alpha1.Glance{}, v1alpha1.IndexGlanceMariaDB, func(o client.Object) []string {
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

// registerChildIndexes registers the indexes of the operator's children,
// which every cluster's cache needs: the management cluster's and each
// target's.
func registerChildIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	// Secrets are cached as metadata only (targetcluster.NewCache).
	secrets := &metav1.PartialObjectMetadata{}
	secrets.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	for _, obj := range []client.Object{&corev1.ConfigMap{}, secrets, &batchv1.Job{}} {
		if err := indexer.IndexField(ctx, obj, v1alpha1.IndexChildComponent, render.ChildComponentIndex); err != nil {
			return err
		}
	}
	return indexer.IndexField(ctx, &discoveryv1.EndpointSlice{}, v1alpha1.IndexEndpointSliceService, render.EndpointSliceServiceIndex)
}
