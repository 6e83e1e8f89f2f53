package glance

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/pipeline"
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

// childNotRequired is an optional child's step while its spec block, field,
// is unset: the child of obj's kind goes (none where obj is nil), and
// condition is True with reason, since nothing asked for is nothing wrong.
func childNotRequired(ctx context.Context, p *pass, g *v1alpha1.Glance, obj client.Object, condition, reason, field string) (ctrl.Result, error) {
	if obj != nil {
		if err := deleteChild(ctx, p, g, obj); err != nil {
			return ctrl.Result{}, err
		}
	}
	pipeline.SetCondition(g, condition, metav1.ConditionTrue, reason, field+" is not set")
	return ctrl.Result{}, nil
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

// targetKinds are the kinds a Glance's children on a target may have: the
// owned kinds, and the HTTPRoute where the target serves it.
func targetKinds(c *targetcluster.Cluster) ([]schema.GroupVersionKind, error) {
	var gvks []schema.GroupVersionKind
	for _, obj := range targetcluster.OwnedKinds() {
		gvk, err := apiutil.GVKForObject(obj, c.Scheme)
		if err != nil {
			return nil, err
		}
		gvks = append(gvks, gvk)
	}
	served, err := c.Serves(httpRouteGVK)
	if err != nil {
		return nil, err
	}
	if served {
		gvks = append(gvks, httpRouteGVK)
	}
	return gvks, nil
}

// deleteTargetChildren deletes the Glance's children on a target cluster,
// found by its owner labels, and returns the kinds that still have some.
func deleteTargetChildren(ctx context.Context, c *targetcluster.Cluster, g *v1alpha1.Glance) ([]string, error) {
	gvks, err := targetKinds(c)
	if err != nil {
		return nil, err
	}
	owner := client.MatchingLabels{
		targetcluster.OwnerKindLabel: "Glance", targetcluster.OwnerNameLabel: g.Name, targetcluster.OwnerNamespaceLabel: g.Namespace,
	}
	// Read uncached: the cache may still hold what is already gone.
	count := func(gvk schema.GroupVersionKind) (int, error) {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.Reader.List(ctx, list, client.InNamespace(g.Namespace), owner); err != nil {
			return 0, fmt.Errorf("list %s children on target cluster %s: %w", gvk.Kind, c.Name, err)
		}
		return len(list.Items), nil
	}
	var remaining []string
	for _, gvk := range gvks {
		n, err := count(gvk)
		if err != nil || n == 0 {
			if err != nil {
				return nil, err
			}
			continue
		}
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(gvk)
		// Background: a Job's pods, a Deployment's ReplicaSets go with it.
		if err := c.Client.DeleteAllOf(ctx, obj, client.InNamespace(g.Namespace), owner,
			client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("delete %s children on target cluster %s: %w", gvk.Kind, c.Name, err)
		}
		// Children without finalizers are gone at once; the others are
		// waited for.
		if n, err = count(gvk); err != nil {
			return nil, err
		}
		if n > 0 {
			remaining = append(remaining, fmt.Sprintf("%d %s", n, gvk.Kind))
		}
	}
	return remaining, nil
}
