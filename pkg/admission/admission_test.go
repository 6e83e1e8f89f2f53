package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/fixtures"
)

// fakeLookups answers from fixed data.
type fakeLookups struct {
	backends        []v1alpha1.GlanceBackend
	backendsErr     error
	priorityClasses map[string]bool
	priorityErr     error
	calls           int
}

func (f *fakeLookups) Backends(_ context.Context, namespace, glance, _ string) ([]v1alpha1.GlanceBackend, error) {
	f.calls++
	if f.backendsErr != nil {
		return nil, f.backendsErr
	}
	var out []v1alpha1.GlanceBackend
	for _, b := range f.backends {
		if b.Namespace == namespace && b.Spec.GlanceRef.Name == glance {
			out = append(out, b)
		}
	}
	return out, nil
}

func (f *fakeLookups) PriorityClassExists(_ context.Context, name string) (bool, error) {
	f.calls++
	return f.priorityClasses[name], f.priorityErr
}

func baseGlance(muts ...func(*v1alpha1.Glance)) *v1alpha1.Glance {
	g := fixtures.NewGlance("openstack", "glance", "2025.2")
	for _, m := range muts {
		m(g)
	}
	return g
}

func installed(rel string, phase v1alpha1.UpgradePhase, target string) func(*v1alpha1.Glance) {
	return func(g *v1alpha1.Glance) {
		g.Spec.OpenStackRelease = rel
		g.Spec.Image.Tag = rel
		g.Status.InstalledRelease = rel
		g.Status.UpgradePhase = phase
		g.Status.TargetRelease = target
		if target != "" {
			g.Spec.OpenStackRelease = target
			g.Spec.Image.Tag = target
		}
	}
}

func releaseTo(rel string) func(*v1alpha1.Glance) {
	return func(g *v1alpha1.Glance) {
		g.Spec.OpenStackRelease = rel
		g.Spec.Image.Tag = rel
	}
}

func deployment(f func(*v1alpha1.GlanceDeploymentSpec)) func(*v1alpha1.Glance) {
	return func(g *v1alpha1.Glance) {
		if g.Spec.Deployment == nil {
			g.Spec.Deployment = &v1alpha1.GlanceDeploymentSpec{}
		}
		f(g.Spec.Deployment)
	}
}

func spread(sel *metav1.LabelSelector) corev1.TopologySpreadConstraint {
	return corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: sel}
}

func qty(s string) resource.Quantity { return resource.MustParse(s) }

type glanceCase struct {
	name     string
	old      *v1alpha1.Glance
	new      *v1alpha1.Glance
	lookups  *fakeLookups
	errs     []string // "field|type|detail fragment", in order
	warnings []string // fragments, in order
}

func TestValidateGlance(t *testing.T) {
	podSel := &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/instance": "glance", "app.kubernetes.io/component": "api"}}
	cases := []glanceCase{
		// Creates that pass without remarks.
		{name: "minimal", new: baseGlance()},
		{name: "minimal after defaulting", new: defaulted(baseGlance())},
		{name: "release 2010.1", new: baseGlance(releaseTo("2010.1"))},
		{name: "release 2026.1 with uwsgi", new: baseGlance(releaseTo("2026.1"), func(g *v1alpha1.Glance) {
			g.Spec.APIServer = &v1alpha1.APIServerSpec{UWSGI: &v1alpha1.UWSGISpec{Processes: ptr.To[int32](4)}}
		})},
		{name: "release 2025.2 with workers", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.APIServer = &v1alpha1.APIServerSpec{Workers: ptr.To[int32](4)}
		})},
		{name: "digest instead of tag", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.Image.Tag, g.Spec.Image.Digest = "", "sha256:"+strings.Repeat("a", 64)
		})},
		{name: "tag without release prefix", new: baseGlance(func(g *v1alpha1.Glance) { g.Spec.Image.Tag = "latest" })},
		{name: "tag with release and build suffix", new: baseGlance(func(g *v1alpha1.Glance) { g.Spec.Image.Tag = "2025.2-20250901" })},
		{name: "requests equal to limits", new: baseGlance(deployment(func(d *v1alpha1.GlanceDeploymentSpec) {
			d.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": qty("1")}, Limits: corev1.ResourceList{"cpu": qty("1000m")}}
		}))},
		{name: "request without a limit", new: baseGlance(deployment(func(d *v1alpha1.GlanceDeploymentSpec) {
			d.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{"memory": qty("8Gi")}, Limits: corev1.ResourceList{"cpu": qty("1")}}
		}))},
		{name: "spread selecting the pods", new: baseGlance(deployment(func(d *v1alpha1.GlanceDeploymentSpec) {
			d.TopologySpreadConstraints = &[]corev1.TopologySpreadConstraint{spread(podSel)}
		}))},
		{name: "spread with a matchExpressions selector", new: baseGlance(deployment(func(d *v1alpha1.GlanceDeploymentSpec) {
			d.TopologySpreadConstraints = &[]corev1.TopologySpreadConstraint{spread(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app.kubernetes.io/name", Operator: metav1.LabelSelectorOpIn, Values: []string{"glance"}}}})}
		}))},
		{name: "empty spread list", new: baseGlance(deployment(func(d *v1alpha1.GlanceDeploymentSpec) {
			d.TopologySpreadConstraints = &[]corev1.TopologySpreadConstraint{}
		}))},
		{name: "existing priority class", lookups: &fakeLookups{priorityClasses: map[string]bool{"openstack": true}},
			new: baseGlance(deployment(func(d *v1alpha1.GlanceDeploymentSpec) { d.PriorityClassName = ptr.To("openstack") }))},
		{name: "rolling update with surge", new: baseGlance(deployment(func(d *v1alpha1.GlanceDeploymentSpec) {
			d.Strategy = &appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromString("25%"))}}
		}))},
		{name: "rolling update with defaults", new: baseGlance(deployment(func(d *v1alpha1.GlanceDeploymentSpec) {
			d.Strategy = &appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{}}
		}))},
		{name: "valid gateway annotations", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.Gateway = &v1alpha1.GatewaySpec{ParentRef: v1alpha1.GatewayParentReference{Name: "gw"}, Hostname: "image.example.com", Annotations: map[string]string{"example.com/team": "platform"}}
		})},
		{name: "valid network policy selectors", new: baseGlance(isolated)},
		{name: "web-download under a network policy", new: baseGlance(isolated, func(g *v1alpha1.Glance) {
			g.Spec.WebDownload = &v1alpha1.WebDownloadSpec{Hosts: []string{"images.example.com", "198.51.100.7", "2001:db8::7"}, CIDRs: []string{"203.0.113.0/24"}, Ports: []int32{8080}}
		})},
		{name: "web-download by address alone under a network policy", new: baseGlance(isolated, func(g *v1alpha1.Glance) {
			g.Spec.WebDownload = &v1alpha1.WebDownloadSpec{Hosts: []string{"198.51.100.7"}}
		})},
		{name: "web-download by name without a network policy", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.WebDownload = &v1alpha1.WebDownloadSpec{Hosts: []string{"images.example.com"}}
		})},
		{name: "web-download hosts and ranges refused", new: baseGlance(isolated, func(g *v1alpha1.Glance) {
			g.Spec.WebDownload = &v1alpha1.WebDownloadSpec{Hosts: []string{"[2001:db8::7]", "127.1", "Images.example.com", "images.example.com"}, CIDRs: []string{"203.0.113.9/24", "nonsense"}}
		}), errs: []string{
			"spec.webDownload.hosts[0]|FieldValueInvalid|an IPv6 address in brackets",
			"spec.webDownload.hosts[1]|FieldValueInvalid|shorthand IPv4",
			"spec.webDownload.hosts[2]|FieldValueInvalid|lower-case host name",
			"spec.webDownload.cidrs[0]|FieldValueInvalid|write it as 203.0.113.0/24",
			"spec.webDownload.cidrs[1]|FieldValueInvalid|is not a CIDR",
		}},
		{name: "web-download host names without ranges under a network policy", new: baseGlance(isolated, func(g *v1alpha1.Glance) {
			g.Spec.WebDownload = &v1alpha1.WebDownloadSpec{Hosts: []string{"images.example.com", "198.51.100.7", "mirror.example.org"}}
		}), errs: []string{"spec.webDownload.cidrs|FieldValueRequired|give the ranges the host names images.example.com, mirror.example.org resolve to"}},
		{name: "web-download hosts that work, but not as one may think", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.WebDownload = &v1alpha1.WebDownloadSpec{Hosts: []string{"169.254.169.254", "::1", "web", "web.images.svc", "web.images.svc.cluster.local"}, CIDRs: []string{"10.0.0.0/8"}}
		}), warnings: []string{
			"spec.webDownload.hosts[0]: 169.254.169.254 is a loopback, link-local",
			"spec.webDownload.hosts[1]: ::1 is a loopback",
			"spec.webDownload.hosts[2]: Glance resolves web as an absolute name",
			"spec.webDownload.hosts[3]: Glance resolves web.images.svc as an absolute name",
			"spec.webDownload.cidrs has no effect without spec.networkPolicy",
		}},
		{name: "custom middleware", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.Middleware = []v1alpha1.MiddlewareSpec{{Name: "sizelimit", FilterFactory: "oslo_middleware.sizelimit:RequestBodySizeLimiter.factory", Config: map[string]string{"max_request_body_size": "1048576"}}}
		})},
		{name: "plugin with its own section", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.Plugins = []v1alpha1.PluginSpec{{Name: "image_conversion", ConfigSection: "image_conversion", Config: map[string]string{"output_format": "raw"}}}
		})},
		{name: "extra config", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT": {"show_image_direct_url": "true", "empty_value": ""}, "oslo_messaging_notifications": {"driver": "noop"}}
		})},
		{name: "policy rules", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.PolicyOverrides = &v1alpha1.PolicyOverridesSpec{Rules: map[string]v1alpha1.PolicyRule{"get_images": "role:reader", "publicize_image": "!"}}
		})},
		{name: "valid purge schedules", new: baseGlance(func(g *v1alpha1.Glance) { g.Spec.DBPurge = &v1alpha1.DBPurgeSpec{Schedule: "@daily"} })},
		{name: "cron with ranges and steps", new: baseGlance(func(g *v1alpha1.Glance) { g.Spec.DBPurge = &v1alpha1.DBPurgeSpec{Schedule: "*/15 1-5 * * MON-FRI"} })},
		{name: "image cache at the floor", new: baseGlance(func(g *v1alpha1.Glance) { g.Spec.ImageCache = &v1alpha1.ImageCacheSpec{Size: qty("1Gi")} })},
		{name: "ephemeral limit covering the volumes", new: baseGlance(
			func(g *v1alpha1.Glance) { g.Spec.ImageCache = &v1alpha1.ImageCacheSpec{Size: qty("10Gi")} },
			deployment(func(d *v1alpha1.GlanceDeploymentSpec) {
				d.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: qty("50Gi")}}
			}))},

		// Release errors and warnings on create.
		{name: "release before 2010", new: baseGlance(releaseTo("2009.2")),
			errs: []string{"spec.openStackRelease|FieldValueInvalid|older than 2010.1"}},
		{name: "tag built for another release", new: baseGlance(func(g *v1alpha1.Glance) { g.Spec.Image.Tag = "2025.1-20250301" }),
			warnings: []string{`spec.image.tag "2025.1-20250301" is built for 2025.1 but spec.openStackRelease is 2025.2: the controller holds the release with ImageReleaseMismatch until they agree`}},
		{name: "uwsgi on eventlet release", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.APIServer = &v1alpha1.APIServerSpec{UWSGI: &v1alpha1.UWSGISpec{}}
		}), warnings: []string{"spec.apiServer.uwsgi has no effect on 2025.2: releases before 2026.1 run the eventlet glance-api server; use spec.apiServer.workers"}},
		{name: "workers on uwsgi release", new: baseGlance(releaseTo("2026.2"), func(g *v1alpha1.Glance) {
			g.Spec.APIServer = &v1alpha1.APIServerSpec{Workers: ptr.To[int32](2)}
		}), warnings: []string{"spec.apiServer.workers has no effect on 2026.2: releases from 2026.1 run under uWSGI; use spec.apiServer.uwsgi.processes"}},
		{name: "harakiri on uwsgi", new: baseGlance(releaseTo("2026.1"), func(g *v1alpha1.Glance) {
			g.Spec.APIServer = &v1alpha1.APIServerSpec{UWSGI: &v1alpha1.UWSGISpec{Harakiri: ptr.To[int32](20)}}
		}), warnings: []string{"spec.apiServer.uwsgi.harakiri kills every request that runs longer than 20s, image uploads and downloads included"}},
		{name: "both knobs on eventlet", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.APIServer = &v1alpha1.APIServerSpec{Workers: ptr.To[int32](2), UWSGI: &v1alpha1.UWSGISpec{}}
		}), warnings: []string{"spec.apiServer.uwsgi has no effect on 2025.2"}},

		// Deployment errors.
		{name: "cpu request above limit", new: baseGlance(deployment(func(d *v1alpha1.GlanceDeploymentSpec) {
			d.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": qty("2")}, Limits: corev1.ResourceList{"cpu": qty("1")}}
		})), errs: []string{"spec.deployment.resources.requests[cpu]|FieldValueInvalid|must be less than or equal to cpu limit of 1"}},
		{name: "two requests above limits", new: baseGlance(deployment(func(d *v1alpha1.GlanceDeploymentSpec) {
			d.Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"cpu": qty("2"), "memory": qty("2Gi")},
				Limits:   corev1.ResourceList{"cpu": qty("1"), "memory": qty("1Gi")},
			}
		})), errs: []string{
			"spec.deployment.resources.requests[cpu]|FieldValueInvalid|must be less than or equal to cpu limit of 1",
			"spec.deployment.resources.requests[memory]|FieldValueInvalid|must be less than or equal to memory limit of 1Gi",
		}},
		// A comparison of these would scale "1" up to 10^99999999: minutes
		// of CPU before the fix, so the test would time out.
		{name: "request and limit out of range", new: baseGlance(deployment(func(d *v1alpha1.GlanceDeploymentSpec) {
			d.Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"cpu": qty("1e99999999"), "memory": qty("1Gi")},
				Limits:   corev1.ResourceList{"cpu": qty("1"), "memory": qty("0e-99999999")},
			}
		})), errs: []string{
			"spec.deployment.resources.requests[cpu]|FieldValueInvalid|is out of range",
			"spec.deployment.resources.limits[memory]|FieldValueInvalid|is out of range",
		}},
		{name: "volume sizes out of range", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.Staging = &v1alpha1.StagingSpec{SizeLimit: ptr.To(qty("1e99999999"))}
			g.Spec.ImageCache = &v1alpha1.ImageCacheSpec{Size: qty("0e-99999999")}
			g.Spec.Deployment = &v1alpha1.GlanceDeploymentSpec{Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"ephemeral-storage": qty("1Gi")}}}
		}), errs: []string{
			"spec.staging.sizeLimit|FieldValueInvalid|is out of range",
			"spec.imageCache.size|FieldValueInvalid|is out of range",
		}},
		{name: "logger names logging.conf cannot carry", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.Logging = &v1alpha1.LoggingSpec{PerLoggerLevels: map[string]v1alpha1.LogLevel{
				"root": "DEBUG", "x\n[handler_evil]": "DEBUG", "glance\u202e": "INFO", " glance": "INFO", "glance_store": "DEBUG",
			}}
		}), errs: []string{
			"spec.logging.perLoggerLevels[ glance]|FieldValueInvalid|logger name starts or ends with whitespace",
			"spec.logging.perLoggerLevels[glance\u202e]|FieldValueInvalid|logger name contains the bidirectional control character U+202E",
			"spec.logging.perLoggerLevels[root]|FieldValueInvalid|names the root logger",
			"spec.logging.perLoggerLevels[x\n[handler_evil]]|FieldValueInvalid|logger name contains the control character U+000A",
		}},
		{name: "rolling update that cannot progress", new: baseGlance(deployment(func(d *v1alpha1.GlanceDeploymentSpec) {
			d.Strategy = &appsv1.DeploymentStrategy{RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromString("0%"))}}
		})), errs: []string{"spec.deployment.strategy.rollingUpdate|FieldValueInvalid|may not both be 0"}},
		{name: "spread selecting other pods", new: baseGlance(deployment(func(d *v1alpha1.GlanceDeploymentSpec) {
			d.TopologySpreadConstraints = &[]corev1.TopologySpreadConstraint{spread(&metav1.LabelSelector{MatchLabels: map[string]string{"app": "nova"}})}
		})), errs: []string{"spec.deployment.topologySpreadConstraints[0].labelSelector|FieldValueInvalid|does not select the Glance's pods"}},
		{name: "spread of another Glance instance", new: baseGlance(deployment(func(d *v1alpha1.GlanceDeploymentSpec) {
			d.TopologySpreadConstraints = &[]corev1.TopologySpreadConstraint{spread(podSel), spread(&metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/instance": "other"}})}
		})), errs: []string{"spec.deployment.topologySpreadConstraints[1].labelSelector|FieldValueInvalid|does not select the Glance's pods"}},
		{name: "spread without selector", new: baseGlance(deployment(func(d *v1alpha1.GlanceDeploymentSpec) {
			d.TopologySpreadConstraints = &[]corev1.TopologySpreadConstraint{spread(nil)}
		})), errs: []string{"spec.deployment.topologySpreadConstraints[0].labelSelector|FieldValueRequired|must select the Glance's pods"}},
		{name: "spread with a malformed selector", new: baseGlance(deployment(func(d *v1alpha1.GlanceDeploymentSpec) {
			d.TopologySpreadConstraints = &[]corev1.TopologySpreadConstraint{spread(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn}}})}
		})), errs: []string{"spec.deployment.topologySpreadConstraints[0].labelSelector.matchExpressions[0].values|FieldValueRequired|"}},
		{name: "missing priority class", lookups: &fakeLookups{},
			new:  baseGlance(deployment(func(d *v1alpha1.GlanceDeploymentSpec) { d.PriorityClassName = ptr.To("gold") })),
			errs: []string{`spec.deployment.priorityClassName|FieldValueNotFound|`}},
		{name: "priority class lookup failing", lookups: &fakeLookups{priorityErr: errors.New("connection refused")},
			new:  baseGlance(deployment(func(d *v1alpha1.GlanceDeploymentSpec) { d.PriorityClassName = ptr.To("gold") })),
			errs: []string{`spec.deployment.priorityClassName|InternalError|looking up PriorityClass "gold": connection refused`}},

		// Exposure and isolation.
		{name: "gateway annotation key invalid", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.Gateway = &v1alpha1.GatewaySpec{ParentRef: v1alpha1.GatewayParentReference{Name: "gw"}, Hostname: "h.example.com", Annotations: map[string]string{"not a key": "x"}}
		}), errs: []string{"spec.gateway.annotations|FieldValueInvalid|"}},
		{name: "network policy selector malformed", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.NetworkPolicy = &v1alpha1.NetworkPolicySpec{Ingress: []v1alpha1.NetworkPolicySource{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}}}}
		}), errs: []string{"spec.networkPolicy.ingress[0].podSelector.matchLabels|FieldValueInvalid|"}},

		// Pipeline extensions and config injection.
		{name: "middleware shadowing authtoken", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.Middleware = []v1alpha1.MiddlewareSpec{{Name: "authtoken", FilterFactory: "evil:factory"}}
		}), errs: []string{"spec.middleware[0].name|FieldValueInvalid|is a filter or app the operator renders itself"}},
		{name: "middleware shadowing cache in another case", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.Middleware = []v1alpha1.MiddlewareSpec{{Name: "Cache", FilterFactory: "m:f"}}
		}), errs: []string{"spec.middleware[0].name|FieldValueInvalid|"}},
		{name: "middleware config injecting a section", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.Middleware = []v1alpha1.MiddlewareSpec{{Name: "x", FilterFactory: "m:f", Config: map[string]string{"k": "v\n[filter:authtoken]"}}}
		}), errs: []string{"spec.middleware[0].config[k]|FieldValueInvalid|value contains the control character U+000"}},
		{name: "middleware config with a paste directive", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.Middleware = []v1alpha1.MiddlewareSpec{{Name: "x", FilterFactory: "m:f", Config: map[string]string{"use": "egg:evil"}}}
		}), errs: []string{"spec.middleware[0].config[use]|FieldValueInvalid|is a paste.deploy directive"}},
		{name: "middleware config key with equals", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.Middleware = []v1alpha1.MiddlewareSpec{{Name: "x", FilterFactory: "m:f", Config: map[string]string{"bad=key": "v"}}}
		}), errs: []string{"spec.middleware[0].config[bad=key]|FieldValueInvalid|option name contains '=', ':', '[' or ']'"}},
		{name: "middleware config errors in the second filter", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.Middleware = []v1alpha1.MiddlewareSpec{{Name: "x", FilterFactory: "m:f"}, {Name: "y", FilterFactory: "m:g", Config: map[string]string{"z": "\n", "a:b": "v"}}}
		}), errs: []string{"spec.middleware[1].config[a:b]|FieldValueInvalid|option name contains '=', ':', '[' or ']'", "spec.middleware[1].config[z]|FieldValueInvalid|value contains the control character U+000"}},
		{name: "plugin section owned by the operator", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.Plugins = []v1alpha1.PluginSpec{{Name: "p", ConfigSection: "keystone_authtoken"}}
		}), errs: []string{"spec.plugins[0].configSection|FieldValueInvalid|is a section the operator renders itself"}},
		{name: "plugin section with a reserved store prefix", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.Plugins = []v1alpha1.PluginSpec{{Name: "p", ConfigSection: "os_glance_tasks_store"}}
		}), errs: []string{"spec.plugins[0].configSection|FieldValueInvalid|"}},
		{name: "plugin config key with equals", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.Plugins = []v1alpha1.PluginSpec{{Name: "p", ConfigSection: "p", Config: map[string]string{"a=b": "c"}}}
		}), errs: []string{"spec.plugins[0].config[a=b]|FieldValueInvalid|option name contains '=', ':', '[' or ']'"}},
		{name: "plugin config value with a line break", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.Plugins = []v1alpha1.PluginSpec{{Name: "p", ConfigSection: "p", Config: map[string]string{"k": "v\n[DEFAULT]"}}}
		}), errs: []string{"spec.plugins[0].config[k]|FieldValueInvalid|value contains the control character U+000"}},
		{name: "extra config key with equals", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT": {"bad=key": "1"}}
		}), errs: []string{"spec.extraConfig[DEFAULT][bad=key]|FieldValueInvalid|option name contains '=', ':', '[' or ']'"}},
		{name: "extra config empty section", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.ExtraConfig = map[string]map[string]string{"": {"a": "b"}}
		}), errs: []string{"spec.extraConfig[]|FieldValueInvalid|section name is empty"}},
		{name: "extra config section with a bracket", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT]\n[database": {"a": "b"}}
		}), errs: []string{"spec.extraConfig[DEFAULT]\n[database]|FieldValueInvalid|section name contains '[' or ']'"}},
		{name: "extra config section with padding", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.ExtraConfig = map[string]map[string]string{" DEFAULT": {"a": "b"}}
		}), errs: []string{"spec.extraConfig[ DEFAULT]|FieldValueInvalid|"}},
		{name: "extra config empty key", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT": {"": "b"}}
		}), errs: []string{"spec.extraConfig[DEFAULT][]|FieldValueInvalid|option name is empty"}},
		{name: "extra config key with a newline", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT": {"debug = true\nx": "1"}}
		}), errs: []string{"spec.extraConfig[DEFAULT][debug = true\nx]|FieldValueInvalid|option name contains '=', ':', '[' or ']'"}},
		{name: "extra config key opening a section", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT": {"[database]": "1"}}
		}), errs: []string{"spec.extraConfig[DEFAULT][[database]]|FieldValueInvalid|"}},
		{name: "extra config key commented out", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT": {"#debug": "1"}}
		}), errs: []string{"spec.extraConfig[DEFAULT][#debug]|FieldValueInvalid|"}},
		{name: "extra config key with a colon", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT": {"a:b": "1"}}
		}), errs: []string{"spec.extraConfig[DEFAULT][a:b]|FieldValueInvalid|"}},
		{name: "extra config value with CR", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT": {"debug": "true\r[database]"}}
		}), errs: []string{"spec.extraConfig[DEFAULT][debug]|FieldValueInvalid|value contains the control character U+000"}},
		{name: "extra config value with a right-to-left override", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.ExtraConfig = map[string]map[string]string{"oslo_policy": {"policy_default_rule": "admin\u202e"}}
		}), errs: []string{"spec.extraConfig[oslo_policy][policy_default_rule]|FieldValueInvalid|value contains the bidirectional control character U+202E"}},
		{name: "plugin config key with an isolate", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.Plugins = []v1alpha1.PluginSpec{{Name: "p", ConfigSection: "p", Config: map[string]string{"k\u2067": "v"}}}
		}), errs: []string{"spec.plugins[0].config[k\u2067]|FieldValueInvalid|option name contains the bidirectional control character U+2067"}},
		{name: "every extra config error at once, sorted", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.ExtraConfig = map[string]map[string]string{"b": {"": "x"}, "a": {"k": "v\n"}}
		}), errs: []string{"spec.extraConfig[a][k]|FieldValueInvalid|", "spec.extraConfig[b][]|FieldValueInvalid|"}},
		{name: "policy rule with an empty name", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.PolicyOverrides = &v1alpha1.PolicyOverridesSpec{Rules: map[string]v1alpha1.PolicyRule{"": "role:admin"}}
		}), errs: []string{"spec.policyOverrides.rules[]|FieldValueInvalid|policy name must not be empty"}},
		{name: "purge schedule with six fields", new: baseGlance(func(g *v1alpha1.Glance) { g.Spec.DBPurge = &v1alpha1.DBPurgeSpec{Schedule: "0 0 3 * * *"} }),
			errs: []string{"spec.dbPurge.schedule|FieldValueInvalid|not a valid cron schedule"}},
		{name: "purge schedule nonsense", new: baseGlance(func(g *v1alpha1.Glance) { g.Spec.DBPurge = &v1alpha1.DBPurgeSpec{Schedule: "every night"} }),
			errs: []string{"spec.dbPurge.schedule|FieldValueInvalid|not a valid cron schedule"}},
		{name: "purge schedule minute 60", new: baseGlance(func(g *v1alpha1.Glance) { g.Spec.DBPurge = &v1alpha1.DBPurgeSpec{Schedule: "60 3 * * *"} }),
			errs: []string{"spec.dbPurge.schedule|FieldValueInvalid|"}},
		{name: "purge schedule with a time zone", new: baseGlance(func(g *v1alpha1.Glance) { g.Spec.DBPurge = &v1alpha1.DBPurgeSpec{Schedule: "CRON_TZ=UTC 0 3 * * *"} }),
			errs: []string{"spec.dbPurge.schedule|FieldValueInvalid|time zones"}},

		// Storage warnings.
		{name: "unbounded staging", new: baseGlance(func(g *v1alpha1.Glance) { g.Spec.Staging = &v1alpha1.StagingSpec{Unbounded: true} }),
			warnings: []string{"spec.staging.unbounded: the staging and tasks-work volumes have no size limit"}},
		{name: "tiny image cache", new: baseGlance(func(g *v1alpha1.Glance) { g.Spec.ImageCache = &v1alpha1.ImageCacheSpec{Size: qty("500Mi")} }),
			warnings: []string{"spec.imageCache.size 500Mi leaves the pruner a threshold of 400Mi (80%): below 1Gi most images cannot be cached"}},
		{name: "volumes above the ephemeral limit", new: baseGlance(
			func(g *v1alpha1.Glance) { g.Spec.ImageCache = &v1alpha1.ImageCacheSpec{Size: qty("10Gi")} },
			deployment(func(d *v1alpha1.GlanceDeploymentSpec) {
				d.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: qty("30Gi")}}
			})),
			warnings: []string{"spec.deployment.resources.limits[ephemeral-storage] 30Gi is below the 50Gi the volumes may fill (staging 20Gi + tasks-work 20Gi + image cache 10Gi)"}},
		{name: "custom staging above the ephemeral limit", new: baseGlance(
			func(g *v1alpha1.Glance) { g.Spec.Staging = &v1alpha1.StagingSpec{SizeLimit: ptr.To(qty("8Gi"))} },
			deployment(func(d *v1alpha1.GlanceDeploymentSpec) {
				d.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: qty("10Gi")}}
			})),
			warnings: []string{"is below the 16Gi the volumes may fill (staging 8Gi + tasks-work 8Gi + image cache 0)"}},
		{name: "unbounded staging skips the sum", new: baseGlance(
			func(g *v1alpha1.Glance) { g.Spec.Staging = &v1alpha1.StagingSpec{Unbounded: true} },
			deployment(func(d *v1alpha1.GlanceDeploymentSpec) {
				d.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: qty("1Gi")}}
			})),
			warnings: []string{"spec.staging.unbounded"}},
		{name: "several warnings in order", new: baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.Image.Tag = "2024.2"
			g.Spec.APIServer = &v1alpha1.APIServerSpec{UWSGI: &v1alpha1.UWSGISpec{}}
			g.Spec.Staging = &v1alpha1.StagingSpec{Unbounded: true}
		}), warnings: []string{"spec.image.tag", "spec.apiServer.uwsgi", "spec.staging.unbounded"}},

		// Updates: the upgrade path.
		{name: "update without release change", old: baseGlance(installed("2025.2", "", "")), new: baseGlance(installed("2025.2", "", ""), func(g *v1alpha1.Glance) { g.Spec.Region = "Two" })},
		{name: "upgrade to the next release", old: baseGlance(installed("2025.2", "", "")), new: baseGlance(releaseTo("2026.1"))},
		{name: "upgrade within a year", old: baseGlance(installed("2026.1", "", "")), new: baseGlance(releaseTo("2026.2"))},
		{name: "skip a release", old: baseGlance(installed("2025.2", "", "")), new: baseGlance(releaseTo("2026.2")),
			errs: []string{"spec.openStackRelease|FieldValueForbidden|2026.2 skips releases after the installed 2025.2: upgrade one release at a time, next to 2026.1"}},
		{name: "skip two years", old: baseGlance(installed("2024.1", "", "")), new: baseGlance(releaseTo("2026.1")),
			errs: []string{"spec.openStackRelease|FieldValueForbidden|next to 2024.2"}},
		{name: "downgrade", old: baseGlance(installed("2026.1", "", "")), new: baseGlance(releaseTo("2025.2")),
			errs: []string{"spec.openStackRelease|FieldValueForbidden|2025.2 is older than the installed release 2026.1: downgrades are not supported"}},
		{name: "judged against the old spec before anything is installed", old: baseGlance(releaseTo("2025.2")), new: baseGlance(releaseTo("2026.2")),
			errs: []string{"spec.openStackRelease|FieldValueForbidden|skips releases after the installed 2025.2"}},
		{name: "judged against installedRelease, not the old spec", old: baseGlance(installed("2025.1", "", ""), releaseTo("2025.2")), new: baseGlance(releaseTo("2026.1")),
			errs: []string{"spec.openStackRelease|FieldValueForbidden|2026.1 skips releases after the installed 2025.1"}},
		{name: "in flight: keep the target", old: baseGlance(installed("2025.2", v1alpha1.UpgradePhaseMigrating, "2026.1")), new: baseGlance(releaseTo("2026.1"), func(g *v1alpha1.Glance) { g.Spec.Region = "x" })},
		{name: "in flight: abort while Expanding", old: baseGlance(installed("2025.2", v1alpha1.UpgradePhaseExpanding, "2026.1")), new: baseGlance(releaseTo("2025.2"))},
		{name: "in flight: abort while Migrating", old: baseGlance(installed("2025.2", v1alpha1.UpgradePhaseMigrating, "2026.1")), new: baseGlance(releaseTo("2025.2"))},
		{name: "in flight: abort while RollingUpdate", old: baseGlance(installed("2025.2", v1alpha1.UpgradePhaseRollingUpdate, "2026.1")), new: baseGlance(releaseTo("2025.2"))},
		{name: "in flight: abort while Contracting", old: baseGlance(installed("2025.2", v1alpha1.UpgradePhaseContracting, "2026.1")), new: baseGlance(releaseTo("2025.2")),
			errs: []string{"spec.openStackRelease|FieldValueForbidden|the upgrade to 2026.1 is Contracting: the old schema is being removed, so it can no longer be aborted back to 2025.2"}},
		{name: "in flight: retarget", old: baseGlance(installed("2025.2", v1alpha1.UpgradePhaseExpanding, "2026.1")), new: baseGlance(releaseTo("2026.2")),
			errs: []string{"spec.openStackRelease|FieldValueForbidden|an upgrade from 2025.2 to 2026.1 is in flight (phase Expanding): set 2026.1 to finish it or 2025.2 to abort it before choosing 2026.2"}},
		{name: "in flight: retarget backwards", old: baseGlance(installed("2025.2", v1alpha1.UpgradePhaseMigrating, "2026.1")), new: baseGlance(releaseTo("2025.1")),
			errs: []string{"spec.openStackRelease|FieldValueForbidden|is in flight"}},
		{name: "unparseable stored release", old: baseGlance(releaseTo("zed")), new: baseGlance(releaseTo("2025.2")),
			warnings: []string{`the stored spec.openStackRelease "zed" is not a valid release: no launch-mode or upgrade-path check could be made against it`}},
		{name: "unparseable installed release", old: baseGlance(installed("2025.2", "", ""), func(g *v1alpha1.Glance) { g.Status.InstalledRelease = "bogus" }), new: baseGlance(releaseTo("2026.2"))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lk := tc.lookups
			if lk == nil {
				lk = &fakeLookups{}
			}
			before := tc.new.DeepCopy()
			warns, errs := ValidateGlance(context.Background(), tc.old, tc.new, lk)
			checkErrors(t, errs, tc.errs)
			checkWarnings(t, warns, tc.warnings)
			if !equality.Semantic.DeepEqual(before, tc.new) {
				t.Error("ValidateGlance modified its input")
			}
		})
	}
	if len(cases) < 60 {
		t.Fatalf("%d Glance cases, want at least 60", len(cases))
	}
}

// isolated gives the Glance a NetworkPolicy.
func isolated(g *v1alpha1.Glance) {
	g.Spec.NetworkPolicy = &v1alpha1.NetworkPolicySpec{Ingress: []v1alpha1.NetworkPolicySource{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "compute"}}}}}
}

func defaulted(g *v1alpha1.Glance) *v1alpha1.Glance {
	DefaultGlanceSpec(&g.Spec)
	return g
}

func checkErrors(t *testing.T, errs field.ErrorList, want []string) {
	t.Helper()
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%s", len(errs), len(want), errs.ToAggregate())
	}
	for i, w := range want {
		parts := strings.SplitN(w, "|", 3)
		e := errs[i]
		if e.Field != parts[0] || string(e.Type) != parts[1] || !strings.Contains(e.ErrorBody(), parts[2]) {
			t.Errorf("error %d = %s %s %q, want %s %s containing %q", i, e.Field, e.Type, e.ErrorBody(), parts[0], parts[1], parts[2])
		}
	}
}

func checkWarnings(t *testing.T, warns Warnings, want []string) {
	t.Helper()
	if len(warns) != len(want) {
		t.Fatalf("got %d warnings, want %d: %q", len(warns), len(want), warns)
	}
	for i, w := range want {
		if !strings.Contains(warns[i], w) {
			t.Errorf("warning %d = %q, want it to contain %q", i, warns[i], w)
		}
	}
}

func backendOf(name, glance string, isDefault bool, muts ...func(*v1alpha1.GlanceBackend)) v1alpha1.GlanceBackend {
	b := fixtures.NewBackend("openstack", name, glance, isDefault, "s3")
	for _, m := range muts {
		m(b)
	}
	return *b
}

// options sets extraOptions with the given keys.
func options(keys ...string) func(*v1alpha1.GlanceBackend) {
	return func(b *v1alpha1.GlanceBackend) {
		b.Spec.ExtraOptions = map[string]v1alpha1.OptionValue{}
		for _, k := range keys {
			b.Spec.ExtraOptions[k] = "v"
		}
	}
}

func TestValidateGlanceBackend(t *testing.T) {
	deleting := func(b *v1alpha1.GlanceBackend) { b.DeletionTimestamp = &metav1.Time{} }
	otherNS := func(b *v1alpha1.GlanceBackend) { b.Namespace = "other" }
	for _, tc := range []struct {
		name      string
		old       *v1alpha1.GlanceBackend
		new       v1alpha1.GlanceBackend
		lookups   *fakeLookups
		errs      []string
		wantCalls int
	}{
		{name: "first default", new: backendOf("a", "glance", true), lookups: &fakeLookups{}, wantCalls: 1},
		{name: "non-default never lists", new: backendOf("a", "glance", false), lookups: &fakeLookups{backendsErr: errors.New("down")}},
		{name: "second default", new: backendOf("b", "glance", true),
			lookups:   &fakeLookups{backends: []v1alpha1.GlanceBackend{backendOf("a", "glance", true)}},
			errs:      []string{`spec.isDefault|FieldValueInvalid|GlanceBackend "a" is already the default store of Glance "glance"; unset its isDefault first`},
			wantCalls: 1},
		{name: "default of another Glance", new: backendOf("b", "glance", true),
			lookups: &fakeLookups{backends: []v1alpha1.GlanceBackend{backendOf("a", "other", true)}}, wantCalls: 1},
		{name: "default in another namespace", new: backendOf("b", "glance", true),
			lookups: &fakeLookups{backends: []v1alpha1.GlanceBackend{backendOf("a", "glance", true, otherNS)}}, wantCalls: 1},
		{name: "default being deleted", new: backendOf("b", "glance", true),
			lookups: &fakeLookups{backends: []v1alpha1.GlanceBackend{backendOf("a", "glance", true, deleting)}}, wantCalls: 1},
		{name: "sibling non-default", new: backendOf("b", "glance", true),
			lookups: &fakeLookups{backends: []v1alpha1.GlanceBackend{backendOf("a", "glance", false)}}, wantCalls: 1},
		{name: "two defaults already there", new: backendOf("c", "glance", true),
			lookups: &fakeLookups{backends: []v1alpha1.GlanceBackend{backendOf("a", "glance", true), backendOf("b", "glance", true)}},
			errs:    []string{`spec.isDefault|FieldValueInvalid|"a"`, `spec.isDefault|FieldValueInvalid|"b"`}, wantCalls: 1},
		{name: "list failure fails closed", new: backendOf("b", "glance", true),
			lookups: &fakeLookups{backendsErr: errors.New("etcd unavailable")},
			errs:    []string{`spec.isDefault|InternalError|listing the backends of Glance "glance": etcd unavailable`}, wantCalls: 1},
		{name: "update keeping default is not re-judged", old: ptr.To(backendOf("b", "glance", true)), new: backendOf("b", "glance", true, func(b *v1alpha1.GlanceBackend) { b.Spec.S3.Bucket = "new" }),
			lookups: &fakeLookups{backends: []v1alpha1.GlanceBackend{backendOf("a", "glance", true)}}},
		{name: "update becoming default", old: ptr.To(backendOf("b", "glance", false)), new: backendOf("b", "glance", true),
			lookups: &fakeLookups{backends: []v1alpha1.GlanceBackend{backendOf("a", "glance", true), backendOf("b", "glance", false)}},
			errs:    []string{`spec.isDefault|FieldValueInvalid|"a"`}, wantCalls: 1},
		{name: "update becoming default ignores its own stored copy", old: ptr.To(backendOf("b", "glance", false)), new: backendOf("b", "glance", true),
			lookups: &fakeLookups{backends: []v1alpha1.GlanceBackend{backendOf("b", "glance", true)}}, wantCalls: 1},
		{name: "plain extra options", new: backendOf("a", "glance", false, options("weight", "filesystem_store_chunk_size", "A_1", strings.Repeat("k", 256))), lookups: &fakeLookups{}},
		{name: "extra option owned by the operator", new: backendOf("a", "glance", false, options("s3_store_access_key")), lookups: &fakeLookups{},
			errs: []string{"spec.extraOptions[s3_store_access_key]|FieldValueInvalid|is rendered by the operator from spec.s3 (s3_store_* and store_description cannot be set here)"}},
		{name: "extra option store_description in another case", new: backendOf("a", "glance", false, options("Store_Description")), lookups: &fakeLookups{},
			errs: []string{"spec.extraOptions[Store_Description]|FieldValueInvalid|is rendered by the operator"}},
		{name: "extra option key with a dash", new: backendOf("a", "glance", false, options("a-b")), lookups: &fakeLookups{},
			errs: []string{"spec.extraOptions[a-b]|FieldValueInvalid|option name must be 1-256 characters of letters, digits and '_'"}},
		{name: "extra option key opening a section", new: backendOf("a", "glance", false, options("x\n[DEFAULT]\ndebug")), lookups: &fakeLookups{},
			errs: []string{"spec.extraOptions[x\n[DEFAULT]\ndebug]|FieldValueInvalid|option name must be"}},
		{name: "extra option key empty", new: backendOf("a", "glance", false, options("")), lookups: &fakeLookups{},
			errs: []string{"spec.extraOptions[]|FieldValueInvalid|option name must be"}},
		{name: "extra option key of 257 characters", new: backendOf("a", "glance", false, options(strings.Repeat("k", 257))), lookups: &fakeLookups{},
			errs: []string{"spec.extraOptions[" + strings.Repeat("k", 257) + "]|FieldValueInvalid|option name must be"}},
		{name: "owned and malformed keys at once, sorted, beside the default rule", new: backendOf("b", "glance", true, options("z-z", "s3_store_x-y", "ok")),
			lookups: &fakeLookups{backends: []v1alpha1.GlanceBackend{backendOf("a", "glance", true)}},
			errs: []string{
				"spec.extraOptions[s3_store_x-y]|FieldValueInvalid|is rendered by the operator",
				"spec.extraOptions[z-z]|FieldValueInvalid|option name must be",
				`spec.isDefault|FieldValueInvalid|"a"`,
			}, wantCalls: 1},
		{name: "extra option values the INI writer refuses", new: backendOf("a", "glance", false, func(b *v1alpha1.GlanceBackend) {
			b.Spec.ExtraOptions = map[string]v1alpha1.OptionValue{"a": "x\x1b[2K", "b": "admin\u202e", "c": "\xff", "d": "plain"}
		}), lookups: &fakeLookups{}, errs: []string{
			"spec.extraOptions[a]|FieldValueInvalid|value contains the control character U+001B",
			"spec.extraOptions[b]|FieldValueInvalid|value contains the bidirectional control character U+202E",
			"spec.extraOptions[c]|FieldValueInvalid|value is not valid UTF-8",
		}},
		{name: "s3 host with a bidirectional control", new: backendOf("a", "glance", false, func(b *v1alpha1.GlanceBackend) { b.Spec.S3.Host = "http://s3\u202e.example.com" }),
			lookups: &fakeLookups{}, errs: []string{"spec.s3.host|FieldValueInvalid|contains the bidirectional control character U+202E"}},
		{name: "unsetting default", old: ptr.To(backendOf("a", "glance", true)), new: backendOf("a", "glance", false), lookups: &fakeLookups{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			warns, errs := ValidateGlanceBackend(context.Background(), tc.old, &tc.new, tc.lookups)
			checkErrors(t, errs, tc.errs)
			checkWarnings(t, warns, nil)
			if tc.lookups.calls != tc.wantCalls {
				t.Errorf("%d lookups, want %d", tc.lookups.calls, tc.wantCalls)
			}
		})
	}
}

func TestDefaultGlance(t *testing.T) {
	g := baseGlance()
	DefaultGlanceSpec(&g.Spec)
	d := g.Spec.Deployment
	for _, c := range []struct {
		what string
		got  any
		want any
	}{
		{"replicas", *d.Replicas, int32(3)},
		{"grace", *d.TerminationGracePeriodSeconds, int64(30)},
		{"preStop", *d.PreStopSleepSeconds, int64(5)},
		{"cpu request", d.Resources.Requests.Cpu().String(), "100m"},
		{"memory request", d.Resources.Requests.Memory().String(), v1alpha1.DefaultMemoryRequest},
		{"cpu limit", d.Resources.Limits.Cpu().String(), "500m"},
		{"memory limit", d.Resources.Limits.Memory().String(), v1alpha1.DefaultMemoryLimit},
		{"port", g.Spec.Database.Port, int32(3306)},
		{"credentials mode", g.Spec.Database.CredentialsMode, v1alpha1.CredentialsModeStatic},
		{"username", g.Spec.ServiceUser.Username, "glance"},
		{"project", g.Spec.ServiceUser.ProjectName, "service"},
		{"user domain", g.Spec.ServiceUser.UserDomainName, "Default"},
		{"project domain", g.Spec.ServiceUser.ProjectDomainName, "Default"},
		{"log format", g.Spec.Logging.Format, v1alpha1.LogFormatText},
		{"log level", g.Spec.Logging.Level, v1alpha1.LogLevel("INFO")},
		{"debug", *g.Spec.Logging.Debug, false},
		{"no strategy", d.Strategy == nil, true},
		{"no spread", d.TopologySpreadConstraints == nil, true},
		{"no staging", g.Spec.Staging == nil, true},
		{"no image cache", g.Spec.ImageCache == nil, true},
		{"no purge block", g.Spec.DBPurge == nil, true},
		{"no apiServer block", g.Spec.APIServer == nil, true},
		{"no cache block", g.Spec.Cache == nil, true},
		{"no secret store", g.Spec.SecretStoreRef == nil, true},
	} {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}

	// Blocks that are present get their fields.
	g = baseGlance(func(g *v1alpha1.Glance) {
		g.Spec.APIServer = &v1alpha1.APIServerSpec{UWSGI: &v1alpha1.UWSGISpec{Threads: ptr.To[int32](8)}}
		g.Spec.Cache = &v1alpha1.CacheSpec{Servers: []string{"m:11211"}}
		g.Spec.Gateway = &v1alpha1.GatewaySpec{Hostname: "h"}
		g.Spec.SecretStoreRef = &v1alpha1.SecretStoreReference{Name: "vault"}
		g.Spec.Middleware = []v1alpha1.MiddlewareSpec{{Name: "a"}, {Name: "b", Position: v1alpha1.MiddlewareBeforeAuth}}
		g.Spec.ImageCache = &v1alpha1.ImageCacheSpec{Size: qty("5Gi")}
		g.Spec.DBPurge = &v1alpha1.DBPurgeSpec{MaxRows: ptr.To[int32](7)}
		g.Spec.Deployment = &v1alpha1.GlanceDeploymentSpec{Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": qty("2")}}}
	})
	DefaultGlanceSpec(&g.Spec)
	u := g.Spec.APIServer.UWSGI
	p := g.Spec.DBPurge
	for _, c := range []struct {
		what string
		got  any
		want any
	}{
		{"uwsgi processes", *u.Processes, int32(2)},
		{"uwsgi threads kept", *u.Threads, int32(8)},
		{"uwsgi keepalive", *u.HTTPKeepAlive, true},
		{"cache backend", g.Spec.Cache.Backend, "dogpile.cache.pymemcache"},
		{"gateway path", g.Spec.Gateway.Path, "/"},
		{"store kind", g.Spec.SecretStoreRef.Kind, v1alpha1.ClusterSecretStoreKind},
		{"middleware a position", g.Spec.Middleware[0].Position, v1alpha1.MiddlewareAfterAuth},
		{"middleware b position kept", g.Spec.Middleware[1].Position, v1alpha1.MiddlewareBeforeAuth},
		{"cache interval", g.Spec.ImageCache.MaintenanceInterval.Duration.String(), "30m0s"},
		{"purge schedule", p.Schedule, "0 3 * * *"},
		{"purge suspend", *p.Suspend, false},
		{"purge age", *p.AgeInDays, int32(30)},
		{"purge rows kept", *p.MaxRows, int32(7)},
		{"purge deadline", *p.ActiveDeadlineSeconds, int64(3600)},
		{"purge success history", *p.SuccessfulJobsHistoryLimit, int32(3)},
		{"purge failed history", *p.FailedJobsHistoryLimit, int32(3)},
		{"partial resources kept as given", len(g.Spec.Deployment.Resources.Requests), 0},
	} {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}

	// Defaulting is idempotent.
	again := g.DeepCopy()
	DefaultGlanceSpec(&again.Spec)
	if !equality.Semantic.DeepEqual(g, again) {
		t.Error("DefaultGlanceSpec is not idempotent")
	}
}

func TestDefaultGlanceBackend(t *testing.T) {
	b := backendOf("a", "glance", false)
	DefaultGlanceBackendSpec(&b.Spec)
	if b.Spec.S3.BucketURLFormat != v1alpha1.BucketURLFormatPath {
		t.Errorf("bucketURLFormat = %q, want path", b.Spec.S3.BucketURLFormat)
	}
	b.Spec.S3.BucketURLFormat = v1alpha1.BucketURLFormatVirtual
	DefaultGlanceBackendSpec(&b.Spec)
	if b.Spec.S3.BucketURLFormat != v1alpha1.BucketURLFormatVirtual {
		t.Error("an explicit bucketURLFormat was overwritten")
	}
	noS3 := backendOf("b", "glance", false, func(b *v1alpha1.GlanceBackend) { b.Spec.S3 = nil })
	DefaultGlanceBackendSpec(&noS3.Spec) // must not panic on a missing block
	if noS3.Spec.S3 != nil {
		t.Error("defaulting invented an s3 block")
	}
}
