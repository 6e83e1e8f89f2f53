package webhook

import (
	"context"

	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/admission"
)

// The lookups are the webhook's only API calls: a watch and List of
// GlanceBackends and a Get of a PriorityClass.
// +kubebuilder:rbac:groups=glance.openstack.c5c3.io,resources=glancebackends,verbs=list;watch
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get

// APILookups answers the admission lookups from the API server. Give it an
// uncached reader.
type APILookups struct {
	Reader client.Reader
}

// Backends lists the backends of a Glance with a server-side field selector
// on the CRD's selectable field spec.glanceRef.name.
func (l APILookups) Backends(ctx context.Context, namespace, glance, _ string) ([]v1alpha1.GlanceBackend, error) {
	return listBackends(ctx, l.Reader, namespace, glance)
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

// CachedLookups answers the one-default rule's sibling lookup from a watch
// of GlanceBackends, so that it costs no API call, and stays as strict as
// the API server for what it lets in: only a refusal comes from the cache.
// When the cache shows another live default, the backend is refused; a
// default unset within the watch's lag is refused once more, and the retry
// passes. When it shows none, the API server is asked, as APILookups does:
// a default made within the watch's lag is never missed.
// Its PriorityClass lookup is APILookups'.
type CachedLookups struct {
	APILookups
	// Cache is the informer cache, indexed by IndexBackendGlance.
	Cache client.Reader
}

func (l CachedLookups) Backends(ctx context.Context, namespace, glance, reviewed string) ([]v1alpha1.GlanceBackend, error) {
	// The rule only reads the list: no copy of each cached backend.
	cached, err := listBackends(ctx, l.Cache, namespace, glance, client.UnsafeDisableDeepCopy)
	if err == nil {
		for i := range cached {
			if cached[i].Name != reviewed && admission.IsLiveDefault(&cached[i]) {
				return cached, nil
			}
		}
	}
	return l.APILookups.Backends(ctx, namespace, glance, reviewed)
}

func listBackends(ctx context.Context, r client.Reader, namespace, glance string, opts ...client.ListOption) ([]v1alpha1.GlanceBackend, error) {
	var list v1alpha1.GlanceBackendList
	opts = append(opts, client.InNamespace(namespace), client.MatchingFields{v1alpha1.IndexBackendGlance: glance})
	if err := r.List(ctx, &list, opts...); err != nil {
		return nil, err
	}
	return list.Items, nil
}
