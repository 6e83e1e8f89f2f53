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
	"sigs.k8s.io/controller-runtime/pkg/client"
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
		MutateGlancePath: newSpecDefaulter(scheme, func() *v1alpha1.Glance { return &v1alpha1.Glance{} },
			func(g *v1alpha1.Glance) *v1alpha1.GlanceSpec { return &g.Spec }, (*v1alpha1.GlanceSpec).DeepCopy, admission.DefaultGlanceSpec),
		ValidateGlancePath: crwebhook.WithValidator(scheme, validator[*v1alpha1.Glance]{glanceKind, admission.ValidateGlance, lookups}),
		MutateGlanceBackendPath: newSpecDefaulter(scheme, func() *v1alpha1.GlanceBackend { return &v1alpha1.GlanceBackend{} },
			func(b *v1alpha1.GlanceBackend) *v1alpha1.GlanceBackendSpec { return &b.Spec }, (*v1alpha1.GlanceBackendSpec).DeepCopy, admission.DefaultGlanceBackendSpec),
		ValidateGlanceBackendPath: crwebhook.WithValidator(scheme, validator[*v1alpha1.GlanceBackend]{backendKind, admission.ValidateGlanceBackend, lookups}),
	}
}

// validator judges one kind by its admission rules; old is nil on CREATE.
type validator[T client.Object] struct {
	kind     schema.GroupKind
	validate func(ctx context.Context, old, obj T, lookups admission.Lookups) (admission.Warnings, field.ErrorList)
	lookups  admission.Lookups
}

func (v validator[T]) ValidateCreate(ctx context.Context, obj T) (crwebhook.Warnings, error) {
	var none T
	return v.ValidateUpdate(ctx, none, obj)
}

// ValidateUpdate turns the field errors of one request into a single
// Invalid error, which the API server passes to the client with every cause.
func (v validator[T]) ValidateUpdate(ctx context.Context, old, obj T) (crwebhook.Warnings, error) {
	w, errs := v.validate(ctx, old, obj, v.lookups)
	if len(errs) == 0 {
		return crwebhook.Warnings(w), nil
	}
	return crwebhook.Warnings(w), apierrors.NewInvalid(v.kind, obj.GetName(), errs)
}

// ValidateDelete allows every delete: the webhooks are not registered for
// DELETE, so that a webhook outage never blocks deletion.
func (validator[T]) ValidateDelete(context.Context, T) (crwebhook.Warnings, error) {
	return nil, nil
}

var (
	glanceKind  = v1alpha1.GroupVersion.WithKind("Glance").GroupKind()
	backendKind = v1alpha1.GroupVersion.WithKind("GlanceBackend").GroupKind()
)
