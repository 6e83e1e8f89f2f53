package admission

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
)

// ValidateGlanceBackend validates a create (old nil) or an update of a
// GlanceBackend. The immutable fields and line breaks in the extraOptions
// values are CRD rules, which the API server enforces before any webhook;
// reserved names (under metadata.name), the extraOptions keys, the rest of the INI writer's rules on the
// values and on s3.host are judged here, so that each error names its field
// (the controller would otherwise skip the backend at render time). The
// one-default rule is judged when a backend becomes the default, against the
// siblings not being deleted; a failed lookup denies, and nil lookups skip it.
func ValidateGlanceBackend(ctx context.Context, old, b *v1alpha1.GlanceBackend, lookups Lookups) (Warnings, field.ErrorList) {
	var errs field.ErrorList
	if isReservedStoreName(b.Name) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), b.Name,
			"is reserved: default, database, keystone_authtoken, glance_store, paste_deploy, oslo_policy and names starting with os_glance_ or os-glance- are Glance's own config sections"))
	}
	errs = append(errs, validateExtraOptionKeys(b.Spec.ExtraOptions, field.NewPath("spec", "extraOptions"))...)
	errs = append(errs, validateStoreText(b)...)
	becomesDefault := b.Spec.IsDefault && (old == nil || !old.Spec.IsDefault)
	if becomesDefault && lookups != nil {
		p := field.NewPath("spec", "isDefault")
		siblings, err := lookups.Backends(ctx, b.Namespace, b.Spec.GlanceRef.Name, b.Name)
		if err != nil {
			errs = append(errs, field.InternalError(p, fmt.Errorf("listing the backends of Glance %q: %w", b.Spec.GlanceRef.Name, err)))
		}
		for _, s := range siblings {
			if s.Name != b.Name && IsLiveDefault(&s) {
				errs = append(errs, field.Invalid(p, true, fmt.Sprintf("GlanceBackend %q is already the default store of Glance %q; unset its isDefault first", s.Name, b.Spec.GlanceRef.Name)))
			}
		}
	}
	return nil, errs
}

// IsLiveDefault reports whether b is its Glance's default store and is not
// being deleted: the sibling the one-default rule refuses a second of.
func IsLiveDefault(b *v1alpha1.GlanceBackend) bool {
	return b.Spec.IsDefault && b.DeletionTimestamp == nil
}

// ValidateGlanceBackendSpec judges a GlanceBackend by the rules that need
// nothing but the object itself: the controller's check of a backend that
// bypassed admission. The one-default rule is the projection's to judge.
func ValidateGlanceBackendSpec(b *v1alpha1.GlanceBackend) field.ErrorList {
	_, errs := ValidateGlanceBackend(context.Background(), nil, b, nil)
	return errs
}

// optionKeyPattern is an oslo.config option name as a store section takes it.
var optionKeyPattern = regexp.MustCompile(`^[A-Za-z0-9_]{1,256}$`)

// validateExtraOptionKeys refuses the options the operator renders from
// spec.s3 and keys that are not plain option names, in key order.
func validateExtraOptionKeys(opts map[string]v1alpha1.OptionValue, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, key := range slices.Sorted(maps.Keys(opts)) {
		switch {
		case render.IsOperatorStoreOption(key):
			errs = append(errs, field.Invalid(p.Key(key), key, "is rendered by the operator from spec.s3 (s3_store_* and store_description cannot be set here)"))
		case !optionKeyPattern.MatchString(key):
			errs = append(errs, field.Invalid(p.Key(key), key, "option name must be 1-256 characters of letters, digits and '_'"))
		}
	}
	return errs
}

// validateStoreText refuses, by the INI writer's rules, the extraOptions
// values and the s3.host that would make backends.conf fail to render:
// control and bidirectional control characters, and invalid UTF-8. (The CRD
// refuses line breaks in the values, and the host's URL rule refuses ASCII
// control characters, but not the others.) The errors name the character,
// not the value: the controller reports them in a GlanceBackendSkipped
// event, whose note the API bounds to 1024 characters, and a value may have
// as many.
func validateStoreText(b *v1alpha1.GlanceBackend) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec", "extraOptions")
	for _, key := range slices.Sorted(maps.Keys(b.Spec.ExtraOptions)) {
		if problem := render.TextProblem(string(b.Spec.ExtraOptions[key])); problem != "" {
			errs = append(errs, field.Invalid(p.Key(key), field.OmitValueType{}, "value "+problem))
		}
	}
	if s3 := b.Spec.S3; s3 != nil {
		if problem := render.TextProblem(s3.Host); problem != "" {
			errs = append(errs, field.Invalid(field.NewPath("spec", "s3", "host"), field.OmitValueType{}, problem))
		}
	}
	return errs
}

// reservedStoreNames are Glance's own config sections: no store and no
// plugin section may take their names.
var reservedStoreNames = map[string]bool{
	"default": true, "database": true, "keystone_authtoken": true,
	"glance_store": true, "paste_deploy": true, "oslo_policy": true,
}

func isReservedStoreName(name string) bool {
	n := strings.ToLower(name)
	return reservedStoreNames[n] || strings.HasPrefix(n, "os_glance_") || strings.HasPrefix(n, "os-glance-")
}
