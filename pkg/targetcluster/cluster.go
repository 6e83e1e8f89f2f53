// Package targetcluster resolves where a Glance's children live: the
// management cluster, or a registered target cluster. Every client call a
// step makes for a child goes through the Cluster it resolves to, so target
// clusters plug in without touching the steps.
package targetcluster

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// Owner labels mark children on a target cluster, where owner references to
// the management cluster's CR cannot exist.
const (
	OwnerKindLabel      = "glance.openstack.c5c3.io/owner-kind"
	OwnerNameLabel      = "glance.openstack.c5c3.io/owner-name"
	OwnerNamespaceLabel = "glance.openstack.c5c3.io/owner-namespace"
)

// Cluster is the cluster a Glance's children live on, for one reconcile.
type Cluster struct {
	// Name is the target cluster's name; empty for the management cluster.
	Name string
	// Client reads children from a cache scoped to what the operator owns,
	// and writes them.
	Client client.Client
	// Reader reads uncached: the user's ConfigMaps, which the cache does
	// not hold, and what must not be read stale.
	Reader client.Reader
	// References watch the user's Secrets and ConfigMaps of the namespaces
	// that hold a Glance, and keep what is derived from a Secret (Derive)
	// while its resourceVersion stays.
	References *References
	// Scheme knows the child kinds.
	Scheme *runtime.Scheme
	// RESTMapper answers which optional APIs (ESO, mariadb-operator, Gateway
	// API) this cluster serves.
	RESTMapper meta.RESTMapper
	// ServiceProxy reaches a target's Services through its API server; nil
	// on the management cluster, whose Services the operator reaches
	// directly.
	ServiceProxy *ServiceProxy
}

// WatchReferences makes sure the user's Secrets and ConfigMaps of
// namespace are watched, before a pass there reads them.
func (c *Cluster) WatchReferences(ctx context.Context, namespace string) error {
	if c.References == nil {
		return nil
	}
	return c.References.Ensure(ctx, namespace)
}

// IsManagement reports whether the children live beside the CR.
func (c *Cluster) IsManagement() bool { return c.Name == "" }

// SetOwner marks child as owned by owner: a controller owner reference on the
// management cluster, so garbage collection follows the CR; owner labels on
// a target cluster, where watches map back by label.
func (c *Cluster) SetOwner(owner, child client.Object) error {
	if c.IsManagement() {
		return controllerutil.SetControllerReference(owner, child, c.Scheme)
	}
	gvk, err := apiutil.GVKForObject(owner, c.Scheme)
	if err != nil {
		return err
	}
	labels := child.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[OwnerKindLabel] = gvk.Kind
	labels[OwnerNameLabel] = owner.GetName()
	labels[OwnerNamespaceLabel] = owner.GetNamespace()
	child.SetLabels(labels)
	return nil
}

// Serves reports whether the cluster serves a kind; an absent optional API
// (ESO, mariadb-operator, Gateway API) is an answer, not an error.
func (c *Cluster) Serves(gvk schema.GroupVersionKind) (bool, error) {
	_, err := c.RESTMapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	switch {
	case err == nil:
		return true, nil
	case meta.IsNoMatchError(err):
		return false, nil
	default:
		return false, err
	}
}

// ErrNotRegistered is wrapped by the error of Resolve when no kubeconfig
// Secret registers the target: the one answer that says the target is gone
// rather than unreachable for now, so the only one under which a Glance
// being deleted leaves its children there behind.
var ErrNotRegistered = errors.New("not registered")

// Resolver finds the Cluster of a Glance.
type Resolver interface {
	Resolve(ctx context.Context, ref *v1alpha1.TargetClusterReference) (*Cluster, error)
}

// ManagementOnly resolves every Glance without a targetClusterRef to the
// management cluster and refuses the others: no target cluster is
// registered with it.
type ManagementOnly struct {
	Cluster *Cluster
}

// Resolve implements Resolver.
func (m ManagementOnly) Resolve(_ context.Context, ref *v1alpha1.TargetClusterReference) (*Cluster, error) {
	if ref != nil {
		return nil, fmt.Errorf("target cluster %q is %w", ref.Name, ErrNotRegistered)
	}
	return m.Cluster, nil
}

// OwnerOf returns the owner a child's labels name, for mapping watch events
// on a target cluster back to the CR.
func OwnerOf(labels map[string]string, kind string) (client.ObjectKey, bool) {
	if labels[OwnerKindLabel] != kind || labels[OwnerNameLabel] == "" {
		return client.ObjectKey{}, false
	}
	return client.ObjectKey{Namespace: labels[OwnerNamespaceLabel], Name: labels[OwnerNameLabel]}, true
}
