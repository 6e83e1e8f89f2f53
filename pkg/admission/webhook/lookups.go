package webhook

import (
	"context"

	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// The lookups are the webhook's only API calls, uncached: a List of
// GlanceBackends and a Get of a PriorityClass.
// +kubebuilder:rbac:groups=glance.openstack.c5c3.io,resources=glancebackends,verbs=list
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get

// APILookups answers the admission lookups from the API server. Give it an
// uncached reader: a webhook judging against a stale cache lets two default
// backends in.
type APILookups struct {
	Reader client.Reader
}

// Backends lists the backends of a Glance with a server-side field selector
// on the CRD's selectable field spec.glanceRef.name.
func (l APILookups) Backends(ctx context.Context, namespace, glance string) ([]v1alpha1.GlanceBackend, error) {
	var list v1alpha1.GlanceBackendList
	if err := l.Reader.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{v1alpha1.IndexBackendGlance: glance}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// PriorityClassExists gets the PriorityClass.
func (l APILookups) PriorityClassExists(ctx context.Context, name string) (bool, error) {
	err := l.Reader.Get(ctx, client.ObjectKey{Name: name}, &schedulingv1.PriorityClass{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	default:
		return false, err
	}
}
