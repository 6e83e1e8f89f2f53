// Package admission holds the admission rules of Glance and GlanceBackend as
// pure functions: Default fills in what the API leaves to the operator, and
// Validate returns the warnings and the field errors of a create (old nil) or
// an update. The webhook server, the offline `check` command and the
// controller (for objects that bypassed admission) all call them.
//
// Rules the CRD schema expresses (CEL, patterns, bounds) are not repeated
// here; these are the cross-object and semantic ones.
package admission

import (
	"context"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// Warnings are admission warnings: legal but inert or risky settings.
type Warnings []string

// Lookups answers the cross-object questions validation asks. The webhook
// answers them from the API server, the offline checker from its input set.
type Lookups interface {
	// Backends lists the GlanceBackends of namespace attached to the Glance
	// named glance (spec.glanceRef.name). reviewed names the backend under
	// review; the list may hold it, as it was before this request.
	Backends(ctx context.Context, namespace, glance, reviewed string) ([]v1alpha1.GlanceBackend, error)
	// PriorityClassExists reports whether the PriorityClass exists.
	PriorityClassExists(ctx context.Context, name string) (bool, error)
}
