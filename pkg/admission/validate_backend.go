package admission

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// ValidateGlanceBackend validates a create (old nil) or an update of a
// GlanceBackend. Reserved names, the immutable fields and extraOptions are
// CRD rules, which the API server enforces before any webhook. The one-default
// rule is judged when a backend becomes the
// default, against the siblings not being deleted; a failed lookup denies.
func ValidateGlanceBackend(ctx context.Context, old, b *v1alpha1.GlanceBackend, lookups Lookups) (Warnings, field.ErrorList) {
	var errs field.ErrorList
	becomesDefault := b.Spec.IsDefault && (old == nil || !old.Spec.IsDefault)
	if becomesDefault {
		p := field.NewPath("spec", "isDefault")
		siblings, err := lookups.Backends(ctx, b.Namespace, b.Spec.GlanceRef.Name)
		if err != nil {
			errs = append(errs, field.InternalError(p, fmt.Errorf("listing the backends of Glance %q: %w", b.Spec.GlanceRef.Name, err)))
		}
		for _, s := range siblings {
			if s.Name != b.Name && s.Spec.IsDefault && s.DeletionTimestamp == nil {
				errs = append(errs, field.Invalid(p, true, fmt.Sprintf("GlanceBackend %q is already the default store of Glance %q; unset its isDefault first", s.Name, b.Spec.GlanceRef.Name)))
			}
		}
	}
	return nil, errs
}

// reservedStoreNames are Glance's own config sections (the GlanceBackend CRD
// refuses them as store names); plugin sections may not use them either.
var reservedStoreNames = map[string]bool{
	"default": true, "database": true, "keystone_authtoken": true,
	"glance_store": true, "paste_deploy": true, "oslo_policy": true,
}

func isReservedStoreName(name string) bool {
	n := strings.ToLower(name)
	return reservedStoreNames[n] || strings.HasPrefix(n, "os_glance_") || strings.HasPrefix(n, "os-glance-")
}
