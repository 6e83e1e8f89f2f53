package glance

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
)

// deleteChild deletes the Glance's child of obj's kind named like the Glance,
// if it exists and is the Glance's: a block removed from the spec takes its
// object with it.
func deleteChild(ctx context.Context, p *pass, g *v1alpha1.Glance, obj client.Object) error {
	err := p.cluster.Client.Get(ctx, client.ObjectKey{Namespace: g.Namespace, Name: g.Name}, obj)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get %T %s: %w", obj, g.Name, err)
	}
	if !ownedBy(obj, g) {
		return nil
	}
	if err := p.cluster.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %T %s: %w", obj, g.Name, err)
	}
	return nil
}

// ownedBy reports whether obj is the Glance's: its controller reference on
// the management cluster, its owner labels on a target cluster.
func ownedBy(obj client.Object, g *v1alpha1.Glance) bool {
	if metav1.IsControlledBy(obj, g) {
		return true
	}
	key, ok := targetcluster.OwnerOf(obj.GetLabels(), "Glance")
	return ok && key == client.ObjectKeyFromObject(g)
}
