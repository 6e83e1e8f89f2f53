package admission

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/release"
	"github.com/c5c3/glance-operator/pkg/render"
)

// ValidateGlance validates a create (old nil) or an update of a Glance. All
// errors are returned together; lookups that fail make the request fail
// closed with an internal error on the field that needed them. Nil lookups
// skip the rules that need other objects.
func ValidateGlance(ctx context.Context, old, g *v1alpha1.Glance, lookups Lookups) (Warnings, field.ErrorList) {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	var warns Warnings

	errs = append(errs, validateRelease(old, g, &warns)...)
	errs = append(errs, validateDeployment(ctx, g, spec.Child("deployment"), lookups)...)
	if gw := g.Spec.Gateway; gw != nil {
		errs = append(errs, apivalidation.ValidateAnnotations(gw.Annotations, spec.Child("gateway", "annotations"))...)
	}
	if np := g.Spec.NetworkPolicy; np != nil {
		for i, src := range np.Ingress {
			p := spec.Child("networkPolicy", "ingress").Index(i)
			errs = append(errs, validateSelector(src.NamespaceSelector, p.Child("namespaceSelector"))...)
			errs = append(errs, validateSelector(src.PodSelector, p.Child("podSelector"))...)
		}
	}
	if po := g.Spec.PolicyOverrides; po != nil {
		errs = append(errs, validatePolicyRules(po.Rules, spec.Child("policyOverrides", "rules"))...)
	}
	errs = append(errs, validateMiddleware(g.Spec.Middleware, spec.Child("middleware"))...)
	errs = append(errs, validatePlugins(g.Spec.Plugins, spec.Child("plugins"))...)
	errs = append(errs, validateExtraConfig(g.Spec.ExtraConfig, spec.Child("extraConfig"))...)
	if l := g.Spec.Logging; l != nil {
		errs = append(errs, validateLoggerNames(l.PerLoggerLevels, spec.Child("logging", "perLoggerLevels"))...)
	}
	errs = append(errs, validateVolumeSizes(g, spec)...)
	if p := g.Spec.DBPurge; p != nil && p.Schedule != "" {
		errs = append(errs, validateSchedule(p.Schedule, spec.Child("dbPurge", "schedule"))...)
	}

	webWarns, webErrs := validateWebDownload(g, spec.Child("webDownload"))
	errs = append(errs, webErrs...)
	warns = append(warns, webWarns...)
	warns = append(warns, knobWarnings(g)...)
	warns = append(warns, storageWarnings(g)...)
	return warns, errs
}

// ValidateGlanceSpec judges a Glance by the rules that need nothing but the
// object itself: the controller's check of a Glance that bypassed admission
// (webhook absent, or the object stored before it was installed).
func ValidateGlanceSpec(g *v1alpha1.Glance) field.ErrorList {
	_, errs := ValidateGlance(context.Background(), nil, g, nil)
	return errs
}

// validateRelease checks the release year (the CRD pattern checks the form)
// and, on an update that moves the release, the upgrade path.
func validateRelease(old, g *v1alpha1.Glance, warns *Warnings) field.ErrorList {
	p := field.NewPath("spec", "openStackRelease")
	target, err := release.Parse(g.Spec.OpenStackRelease)
	if err != nil {
		return field.ErrorList{field.Invalid(p, g.Spec.OpenStackRelease, err.Error())}
	}
	if tag := g.Spec.Image.Tag; tag != "" {
		if built, ok := release.FromImageTag(tag); ok && built != target {
			*warns = append(*warns, fmt.Sprintf("spec.image.tag %q is built for %s but spec.openStackRelease is %s: the controller holds the release with ImageReleaseMismatch until they agree", tag, built, target))
		}
	}
	if old == nil {
		return nil
	}
	if _, err := release.Parse(old.Spec.OpenStackRelease); err != nil {
		*warns = append(*warns, fmt.Sprintf("the stored spec.openStackRelease %q is not a valid release: no launch-mode or upgrade-path check could be made against it", old.Spec.OpenStackRelease))
	}
	if old.Spec.OpenStackRelease == g.Spec.OpenStackRelease {
		return nil
	}

	st := old.Status
	installedStr := st.InstalledRelease
	if installedStr == "" {
		installedStr = old.Spec.OpenStackRelease
	}
	installed, err := release.Parse(installedStr)
	if err != nil {
		// Nothing to judge the path against; the controller reports it.
		return nil
	}

	if st.UpgradePhase != "" {
		switch {
		case g.Spec.OpenStackRelease == st.TargetRelease:
			return nil
		case target == installed && st.UpgradePhase == v1alpha1.UpgradePhaseContracting:
			return field.ErrorList{field.Forbidden(p, fmt.Sprintf("the upgrade to %s is Contracting: the old schema is being removed, so it can no longer be aborted back to %s", st.TargetRelease, installed))}
		case target == installed:
			return nil // abort
		default:
			return field.ErrorList{field.Forbidden(p, fmt.Sprintf("an upgrade from %s to %s is in flight (phase %s): set %s to finish it or %s to abort it before choosing %s", installed, st.TargetRelease, st.UpgradePhase, st.TargetRelease, installed, target))}
		}
	}

	switch release.StepBetween(installed, target) {
	case release.Downgrade:
		return field.ErrorList{field.Forbidden(p, fmt.Sprintf("%s is older than the installed release %s: downgrades are not supported", target, installed))}
	case release.Skip:
		return field.ErrorList{field.Forbidden(p, fmt.Sprintf("%s skips releases after the installed %s: upgrade one release at a time, next to %s", target, installed, installed.Next()))}
	}
	return nil
}

func validateDeployment(ctx context.Context, g *v1alpha1.Glance, p *field.Path, lookups Lookups) field.ErrorList {
	d := g.Spec.Deployment
	if d == nil {
		return nil
	}
	var errs field.ErrorList

	res := d.Resources
	// Out-of-range quantities are refused before any comparison, which
	// would cost a power of ten as long as their exponent.
	outOfRange := map[corev1.ResourceName]bool{}
	for _, kind := range []struct {
		name string
		list corev1.ResourceList
	}{{"requests", res.Requests}, {"limits", res.Limits}} {
		for _, name := range slices.Sorted(maps.Keys(kind.list)) {
			if q := kind.list[name]; quantityOutOfRange(q) {
				errs = append(errs, field.Invalid(p.Child("resources", kind.name).Key(string(name)), q.String(), quantityRangeMessage))
				outOfRange[name] = true
			}
		}
	}
	names := make([]string, 0, len(res.Requests))
	for name := range res.Requests {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, name := range names {
		if outOfRange[corev1.ResourceName(name)] {
			continue
		}
		req := res.Requests[corev1.ResourceName(name)]
		if limit, ok := res.Limits[corev1.ResourceName(name)]; ok && req.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(p.Child("resources", "requests").Key(name), req.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		}
	}

	if s := d.Strategy; s != nil && s.RollingUpdate != nil {
		zero := func(v *intstr.IntOrString) bool {
			return v != nil && (v.String() == "0" || v.String() == "0%")
		}
		unavailable, surge := s.RollingUpdate.MaxUnavailable, s.RollingUpdate.MaxSurge
		if unavailable == nil {
			unavailable = ptrIntOrString(v1alpha1.DefaultMaxUnavailable)
		}
		if surge == nil {
			surge = ptrIntOrString(v1alpha1.DefaultMaxSurge)
		}
		if zero(unavailable) && zero(surge) {
			errs = append(errs, field.Invalid(p.Child("strategy", "rollingUpdate"), "maxUnavailable=0, maxSurge=0", "maxUnavailable and maxSurge may not both be 0: the rollout could never make progress"))
		}
	}

	podLabels := labels.Set(render.APIPodLabels(g.Name))
	var spread []corev1.TopologySpreadConstraint
	if d.TopologySpreadConstraints != nil {
		spread = *d.TopologySpreadConstraints
	}
	for i, c := range spread {
		cp := p.Child("topologySpreadConstraints").Index(i).Child("labelSelector")
		if c.LabelSelector == nil {
			errs = append(errs, field.Required(cp, fmt.Sprintf("must select the Glance's pods (labels %s)", podLabels)))
			continue
		}
		if selErrs := validateSelector(c.LabelSelector, cp); len(selErrs) > 0 {
			errs = append(errs, selErrs...)
			continue
		}
		sel, _ := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if !sel.Matches(podLabels) {
			errs = append(errs, field.Invalid(cp, sel.String(), fmt.Sprintf("does not select the Glance's pods (labels %s), so the constraint would spread nothing", podLabels)))
		}
	}

	if pc := d.PriorityClassName; pc != nil && *pc != "" && lookups != nil {
		pp := p.Child("priorityClassName")
		exists, err := lookups.PriorityClassExists(ctx, *pc)
		switch {
		case err != nil:
			errs = append(errs, field.InternalError(pp, fmt.Errorf("looking up PriorityClass %q: %w", *pc, err)))
		case !exists:
			errs = append(errs, field.NotFound(pp, *pc))
		}
	}
	return errs
}

// quantityRangeMessage says why quantityOutOfRange refuses a quantity.
const quantityRangeMessage = "is out of range: a quantity's exponent must lie between 10^-9 and 10^18"

// quantityOutOfRange reports a quantity whose decimal exponent lies beyond
// anything a node has (10^18) or can count (10^-9). The API server lets such
// quantities through the CRD's pattern ("1e2000000000"), and comparing or
// adding two quantities scales one to the other's exponent, which costs a
// power of ten with as many digits as the exponents differ: gigabytes and
// minutes in the webhook and the controller alike. Every rule that does
// arithmetic on a quantity checks this first.
func quantityOutOfRange(q resource.Quantity) bool {
	s := q.AsDec().Scale()
	return s < -18 || s > 9
}

// validateVolumeSizes refuses volume sizes out of range; storageWarnings
// adds them up.
func validateVolumeSizes(g *v1alpha1.Glance, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	if st := g.Spec.Staging; st != nil && st.SizeLimit != nil && quantityOutOfRange(*st.SizeLimit) {
		errs = append(errs, field.Invalid(spec.Child("staging", "sizeLimit"), st.SizeLimit.String(), quantityRangeMessage))
	}
	if c := g.Spec.ImageCache; c != nil && quantityOutOfRange(c.Size) {
		errs = append(errs, field.Invalid(spec.Child("imageCache", "size"), c.Size.String(), quantityRangeMessage))
	}
	return errs
}

func ptrIntOrString(v int) *intstr.IntOrString {
	i := intstr.FromInt32(int32(v))
	return &i
}

func validateSelector(sel *metav1.LabelSelector, p *field.Path) field.ErrorList {
	if sel == nil {
		return nil
	}
	return metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, p)
}

// validatePolicyRules refuses empty policy names and check strings, naming
// the rule (a CEL rule on the map could only name the map). An empty check
// string is oslo.policy's allow-all, too easily written by mistake.
func validatePolicyRules(rules map[string]v1alpha1.PolicyRule, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if _, ok := rules[""]; ok {
		errs = append(errs, field.Invalid(p.Key(""), "", "policy name must not be empty"))
	}
	return errs
}

func validateMiddleware(mws []v1alpha1.MiddlewareSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, mw := range mws {
		mp := p.Index(i)
		if render.IsBuiltinPasteName(mw.Name) {
			errs = append(errs, field.Invalid(mp.Child("name"), mw.Name, "is a filter or app the operator renders itself"))
		}
		cp := mp.Child("config")
		for _, key := range slices.Sorted(maps.Keys(mw.Config)) {
			if reason := render.ReservedPasteKey(key); reason != "" {
				errs = append(errs, field.Invalid(cp.Key(key), key, reason))
			}
		}
		errs = append(errs, validateOptions(mw.Config, cp)...)
	}
	return errs
}

// operatorSections are the glance-api.conf sections the operator renders; a
// plugin's config there would mix with them.
var operatorSections = map[string]bool{
	"default": true, "database": true, "keystone_authtoken": true, "glance_store": true,
	"paste_deploy": true, "oslo_policy": true, "oslo_middleware": true, "oslo_concurrency": true,
	"cache": true, "image_import_opts": true, "cors": true,
}

func validatePlugins(plugins []v1alpha1.PluginSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, pl := range plugins {
		pp := p.Index(i)
		if operatorSections[strings.ToLower(pl.ConfigSection)] || isReservedStoreName(pl.ConfigSection) {
			errs = append(errs, field.Invalid(pp.Child("configSection"), pl.ConfigSection, "is a section the operator renders itself"))
		}
		errs = append(errs, validateOptions(pl.Config, pp.Child("config"))...)
	}
	return errs
}

// validateExtraConfig keeps extraConfig to the sections and keys it names,
// by the INI writer's own rules: nothing that could end a line, open a
// section or read differently from what it says.
func validateExtraConfig(cfg map[string]map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, section := range slices.Sorted(maps.Keys(cfg)) {
		sp := p.Key(section)
		if problem := render.SectionNameProblem(section); problem != "" {
			errs = append(errs, field.Invalid(sp, section, "section name "+problem))
		}
		errs = append(errs, validateOptions(cfg[section], sp)...)
	}
	return errs
}

// validateLoggerNames refuses the logger names logging.conf cannot carry:
// the root logger's (fileConfig would drop its handler), names with
// surrounding whitespace (trimmed, so another logger's), and text the INI
// writer refuses in the qualname.
func validateLoggerNames(levels map[string]v1alpha1.LogLevel, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(levels)) {
		switch {
		case name == "" || name == "root":
			errs = append(errs, field.Invalid(p.Key(name), name, "names the root logger; set spec.logging.level instead"))
		case render.TextProblem(name) != "":
			errs = append(errs, field.Invalid(p.Key(name), name, "logger name "+render.TextProblem(name)))
		case strings.TrimSpace(name) != name:
			errs = append(errs, field.Invalid(p.Key(name), name, "logger name starts or ends with whitespace"))
		}
	}
	return errs
}

// validateOptions checks the keys and values of one INI section by the INI
// writer's rules.
func validateOptions(opts map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, key := range slices.Sorted(maps.Keys(opts)) {
		kp := p.Key(key)
		if problem := render.KeyProblem(key); problem != "" {
			errs = append(errs, field.Invalid(kp, key, "option name "+problem))
		}
		if problem := render.TextProblem(opts[key]); problem != "" {
			errs = append(errs, field.Invalid(kp, opts[key], "value "+problem))
		}
	}
	return errs
}

func validateSchedule(schedule string, p *field.Path) field.ErrorList {
	if strings.Contains(schedule, "TZ") {
		return field.ErrorList{field.Invalid(p, schedule, "time zones (TZ=, CRON_TZ=) are not supported in the schedule")}
	}
	if _, err := cron.ParseStandard(schedule); err != nil {
		return field.ErrorList{field.Invalid(p, schedule, "not a valid cron schedule: "+err.Error())}
	}
	return nil
}
