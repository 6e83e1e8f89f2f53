package realnode

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/stack"
)

// clusterSecretStoreGVK is External Secrets' ClusterSecretStore.
var clusterSecretStoreGVK = schema.GroupVersionKind{Group: "external-secrets.io", Version: "v1", Kind: "ClusterSecretStore"}

// CreateSecretStore creates the ClusterSecretStore a Glance uses by default,
// reported Ready: the real node runs no External Secrets, and whoever sets
// a scene writes the Secrets a store would sync.
func CreateSecretStore(ctx context.Context, cl client.Client) error {
	store := &unstructured.Unstructured{}
	store.SetGroupVersionKind(clusterSecretStoreGVK)
	store.SetName(v1alpha1.DefaultSecretStoreName)
	if err := unstructured.SetNestedField(store.Object, "http://openbao.openbao.svc:8200", "spec", "provider", "vault", "server"); err != nil {
		return err
	}
	if err := cl.Create(ctx, store); err != nil {
		return err
	}
	if _, err := stack.SetReady(store, "the real node's scenes write the Secrets themselves"); err != nil {
		return err
	}
	return cl.Status().Update(ctx, store)
}
