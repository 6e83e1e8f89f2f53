// Package webhook adapts the pure rules of package admission to admission
// webhooks: the handlers the webhook server serves, and that the offline
// checker calls in-process so that both give the same verdict.
package webhook

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/admission"
)

// Paths of the four admission webhooks.
const (
	MutateGlancePath          = "/mutate-glance-openstack-c5c3-io-v1alpha1-glance"
	ValidateGlancePath        = "/validate-glance-openstack-c5c3-io-v1alpha1-glance"
	MutateGlanceBackendPath   = "/mutate-glance-openstack-c5c3-io-v1alpha1-glancebackend"
	ValidateGlanceBackendPath = "/validate-glance-openstack-c5c3-io-v1alpha1-glancebackend"
)

// Handlers returns the four webhooks keyed by path.
func Handlers(scheme *runtime.Scheme, lookups admission.Lookups) map[string]*crwebhook.Webhook {
	return map[string]*crwebhook.Webhook{
		MutateGlancePath:          crwebhook.WithDefaulter[*v1alpha1.Glance](scheme, glanceDefaulter{}),
		ValidateGlancePath:        crwebhook.WithValidator[*v1alpha1.Glance](scheme, glanceValidator{lookups}),
		MutateGlanceBackendPath:   crwebhook.WithDefaulter[*v1alpha1.GlanceBackend](scheme, backendDefaulter{}),
		ValidateGlanceBackendPath: crwebhook.WithValidator[*v1alpha1.GlanceBackend](scheme, backendValidator{lookups}),
	}
}

type glanceDefaulter struct{}

func (glanceDefaulter) Default(_ context.Context, g *v1alpha1.Glance) error {
	admission.DefaultGlance(g)
	return nil
}

type backendDefaulter struct{}

func (backendDefaulter) Default(_ context.Context, b *v1alpha1.GlanceBackend) error {
	admission.DefaultGlanceBackend(b)
	return nil
}

type glanceValidator struct{ lookups admission.Lookups }

func (v glanceValidator) ValidateCreate(ctx context.Context, g *v1alpha1.Glance) (crwebhook.Warnings, error) {
	w, errs := admission.ValidateGlance(ctx, nil, g, v.lookups)
	return crwebhook.Warnings(w), invalid(glanceKind, g.Name, errs)
}

func (v glanceValidator) ValidateUpdate(ctx context.Context, old, g *v1alpha1.Glance) (crwebhook.Warnings, error) {
	w, errs := admission.ValidateGlance(ctx, old, g, v.lookups)
	return crwebhook.Warnings(w), invalid(glanceKind, g.Name, errs)
}

// ValidateDelete allows every delete: the webhooks are not registered for
// DELETE, so that a webhook outage never blocks deletion.
func (glanceValidator) ValidateDelete(context.Context, *v1alpha1.Glance) (crwebhook.Warnings, error) {
	return nil, nil
}

type backendValidator struct{ lookups admission.Lookups }

func (v backendValidator) ValidateCreate(ctx context.Context, b *v1alpha1.GlanceBackend) (crwebhook.Warnings, error) {
	w, errs := admission.ValidateGlanceBackend(ctx, nil, b, v.lookups)
	return crwebhook.Warnings(w), invalid(backendKind, b.Name, errs)
}

func (v backendValidator) ValidateUpdate(ctx context.Context, old, b *v1alpha1.GlanceBackend) (crwebhook.Warnings, error) {
	w, errs := admission.ValidateGlanceBackend(ctx, old, b, v.lookups)
	return crwebhook.Warnings(w), invalid(backendKind, b.Name, errs)
}

func (backendValidator) ValidateDelete(context.Context, *v1alpha1.GlanceBackend) (crwebhook.Warnings, error) {
	return nil, nil
}

// invalid turns the field errors of one request into a single Invalid error,
// which the API server passes to the client with every cause.
func invalid(gk schema.GroupKind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(gk, name, errs)
}

var (
	glanceKind  = v1alpha1.GroupVersion.WithKind("Glance").GroupKind()
	backendKind = v1alpha1.GroupVersion.WithKind("GlanceBackend").GroupKind()
)
