package manager

import (
	"context"
	"fmt"
	"maps"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/fixtures"
	"github.com/c5c3/glance-operator/test/iniparse"
	"github.com/c5c3/glance-operator/test/operatortest"
)

// The hostile-spec corpus: specs the webhook would refuse, created straight
// through the API server, as if no webhook were registered (this suite
// registers none; the CRD schema and its CEL rules still apply). A case is
// either refused by the API server, and says so, or reaches the controller,
// which must name the field in a clear condition (or, for a backend, a
// GlanceBackendSkipped event), keep the last good config and stay up. A few
// cases no rule refuses, and say so: they must render cleanly. Every
// rendered file is parsed back: none may hold a line of the hostile input.

// injectedDebug is the line most cases try to smuggle in: the clean render
// says "debug = false".
const injectedDebug = "debug = true"

// hostileGlance is a hostile change to the clean Glance spec.
type hostileGlance struct {
	name   string
	mutate func(*v1alpha1.Glance)
	// schemaRefuses: the CRD schema or a CEL rule refuses the spec, on
	// create and on update, so it never reaches the controller.
	schemaRefuses bool
	// renders: no rule refuses the spec, the webhook's neither; it must
	// render with nothing injected.
	renders bool
	// upgrade: the spec is judged against the installed release. The
	// webhook admits it on create, so it renders then; on an update of an
	// installed Glance the database step refuses it
	// (DatabaseReady=False/UpgradePathInvalid) and the config stays.
	upgrade bool
	// tooLarge: no rule refuses the spec, the webhook's neither, but its
	// config is larger than a ConfigMap may be. The Config step reports
	// SecretsReady=False/ConfigError and keeps the last good config.
	tooLarge bool
	// field is what the refusal must name: the API server's error or the
	// condition's message.
	field string
	// injected are lines of the hostile input no rendered file may hold.
	injected []string
}

var hugeValue = strings.Repeat("x", 1<<20)

var hostileGlances = []hostileGlance{
	// Control characters in an extraConfig value.
	{name: "cfg-value-lf", mutate: extraConfig("DEFAULT", "image_size_cap", "1\n[DEFAULT]\n"+injectedDebug),
		field: "spec.extraConfig[DEFAULT][image_size_cap]", injected: []string{injectedDebug}},
	{name: "cfg-value-cr", mutate: extraConfig("DEFAULT", "image_size_cap", "1\r[DEFAULT]\r"+injectedDebug),
		field: "spec.extraConfig[DEFAULT][image_size_cap]", injected: []string{injectedDebug}},
	{name: "cfg-value-crlf", mutate: extraConfig("DEFAULT", "image_size_cap", "1\r\n[database]\r\nconnection = sqlite://"),
		field: "spec.extraConfig[DEFAULT][image_size_cap]", injected: []string{"connection = sqlite://"}},
	{name: "cfg-value-nul", mutate: extraConfig("DEFAULT", "image_size_cap", "1\x00"+injectedDebug),
		field: "spec.extraConfig[DEFAULT][image_size_cap]", injected: []string{injectedDebug}},
	// Cursor up and erase line: the value hides itself from a terminal.
	{name: "cfg-value-esc", mutate: extraConfig("DEFAULT", "image_size_cap", "1\x1b[1A\x1b[2K"+injectedDebug),
		field: "spec.extraConfig[DEFAULT][image_size_cap]", injected: []string{injectedDebug}},
	{name: "cfg-value-nel", mutate: extraConfig("DEFAULT", "image_size_cap", "1\u0085[DEFAULT]\u0085"+injectedDebug),
		field: "spec.extraConfig[DEFAULT][image_size_cap]", injected: []string{injectedDebug}},
	{name: "cfg-value-ls", mutate: extraConfig("DEFAULT", "image_size_cap", "1\u2028"+injectedDebug),
		field: "spec.extraConfig[DEFAULT][image_size_cap]", injected: []string{injectedDebug}},
	// Bidirectional controls: the value reads differently from what it is.
	{name: "cfg-value-rlo", mutate: extraConfig("DEFAULT", "show_image_direct_url", "false\u202e eurt"),
		field: "spec.extraConfig[DEFAULT][show_image_direct_url]"},
	{name: "cfg-value-lri", mutate: extraConfig("DEFAULT", "show_image_direct_url", "\u2066"+injectedDebug+"\u2069"),
		field: "spec.extraConfig[DEFAULT][show_image_direct_url]", injected: []string{injectedDebug}},

	// Section names and keys that open sections or lines.
	{name: "cfg-section-injected", mutate: extraConfig("x\n[DEFAULT]\n"+injectedDebug, "k", "v"),
		field: "spec.extraConfig[x\n[DEFAULT]\n" + injectedDebug + "]", injected: []string{injectedDebug}},
	{name: "cfg-section-lf", mutate: extraConfig("glance_store\ndefault_backend = evil", "k", "v"),
		field: "spec.extraConfig[glance_store\ndefault_backend = evil]", injected: []string{"default_backend = evil"}},
	{name: "cfg-section-rlo", mutate: extraConfig("oslo_policy\u202e", "k", "v"),
		field: "spec.extraConfig[oslo_policy\u202e]"},
	{name: "cfg-key-injected", mutate: extraConfig("DEFAULT", injectedDebug+"\n[database]\nconnection", "sqlite://"),
		field: "spec.extraConfig[DEFAULT][" + injectedDebug + "\n[database]\nconnection]", injected: []string{injectedDebug}},
	{name: "cfg-key-nel", mutate: extraConfig("DEFAULT", "x\u0085debug", "true"),
		field: "spec.extraConfig[DEFAULT][x\u0085debug]", injected: []string{injectedDebug}},
	{name: "cfg-key-lri", mutate: extraConfig("DEFAULT", "policy_file\u2066", "/tmp/p"),
		field: "spec.extraConfig[DEFAULT][policy_file\u2066]", injected: []string{"/tmp/p"}},

	// Middleware config reaches glance-api-paste.ini.
	{name: "mw-value-injected", mutate: middlewareConfig("max_request_body_size", "1\n[filter:evil]\npaste.filter_factory = evil:factory"),
		field: "spec.middleware[0].config[max_request_body_size]", injected: []string{"[filter:evil]", "paste.filter_factory = evil:factory"}},
	{name: "mw-key-directive", mutate: middlewareConfig("use", "egg:evil"),
		field: "spec.middleware[0].config[use]", injected: []string{"use = egg:evil"}},
	{name: "mw-key-injected", mutate: middlewareConfig("x\n[app:evil]\nuse", "egg:evil"),
		field: "spec.middleware[0].config[x\n[app:evil]\nuse]", injected: []string{"[app:evil]", "use = egg:evil"}},

	// Plugin config and sections reach glance-api.conf.
	{name: "plugin-value-injected", mutate: pluginConfig("output_format", "raw\n[DEFAULT]\n"+injectedDebug),
		field: "spec.plugins[0].config[output_format]", injected: []string{injectedDebug}},
	{name: "plugin-key-rlo", mutate: pluginConfig("output_format\u202e", "raw"),
		field: "spec.plugins[0].config[output_format\u202e]"},
	{name: "plugin-section-default", mutate: func(g *v1alpha1.Glance) { g.Spec.Plugins[0].ConfigSection = "DEFAULT" },
		field: "spec.plugins[0].configSection"},
	{name: "plugin-section-injected", mutate: func(g *v1alpha1.Glance) { g.Spec.Plugins[0].ConfigSection = "x\n[DEFAULT]" },
		schemaRefuses: true, field: "spec.plugins[0].configSection"},

	// Logger names reach logging.conf, which configparser and oslo.config
	// both read.
	{name: "log-name-injected", mutate: loggerLevel("x\n[handler_evil]\nclass = evil.Handler", "DEBUG"),
		field: "spec.logging.perLoggerLevels[x\n[handler_evil]\nclass = evil.Handler]", injected: []string{"[handler_evil]", "class = evil.Handler"}},
	{name: "log-name-rlo", mutate: loggerLevel("glance\u202e", "DEBUG"),
		field: "spec.logging.perLoggerLevels[glance\u202e]"},
	{name: "log-name-root", mutate: loggerLevel("root", "DEBUG"),
		field: "spec.logging.perLoggerLevels[root]"},

	// Policy rules go to policy.yaml, where YAML escapes them.
	{name: "policy-name-empty", mutate: policyRule("", "role:admin"),
		field: "spec.policyOverrides.rules[]"},
	{name: "policy-check-empty", mutate: policyRule("get_images", ""),
		schemaRefuses: true, field: "spec.policyOverrides.rules[get_images]"},
	{name: "policy-check-injected", mutate: policyRule("get_images", "role:reader\n[DEFAULT]\n"+injectedDebug),
		renders: true, injected: []string{injectedDebug}},

	// Huge values: as large as the schema allows, and beyond.
	{name: "cfg-value-huge-esc", mutate: extraConfig("DEFAULT", "image_size_cap", hugeValue+"\x1b"),
		field: "spec.extraConfig[DEFAULT][image_size_cap]"},
	// No rule bounds an extraConfig value, the webhook's neither; the
	// config it makes cannot be stored.
	{name: "cfg-value-huge-legal", mutate: extraConfig("DEFAULT", "image_size_cap", hugeValue), tooLarge: true,
		field: "may not be more than 1048576 bytes"},
	{name: "cfg-65-sections", mutate: func(g *v1alpha1.Glance) {
		for i := range 65 {
			extraConfig(fmt.Sprintf("s%d", i), "k", "v")(g)
		}
	}, schemaRefuses: true, field: "spec.extraConfig"},
	{name: "mw-33-keys", mutate: func(g *v1alpha1.Glance) {
		for i := range 33 {
			middlewareConfig(fmt.Sprintf("k%d", i), "v")(g)
		}
	}, schemaRefuses: true, field: "spec.middleware[0].config"},
	{name: "mw-17-items", mutate: func(g *v1alpha1.Glance) {
		for i := range 16 {
			g.Spec.Middleware = append(g.Spec.Middleware, v1alpha1.MiddlewareSpec{Name: fmt.Sprintf("m%d", i), FilterFactory: "a:b"})
		}
	}, schemaRefuses: true, field: "spec.middleware"},

	// Overflowing quantities.
	{name: "cache-size-overflow", mutate: func(g *v1alpha1.Glance) {
		g.Spec.ImageCache = &v1alpha1.ImageCacheSpec{Size: resource.MustParse("9999999999999999999999Ei")}
	}, schemaRefuses: true, field: "imageCache.size must be between 1Mi and 1Pi"},
	// Kubernetes parses a binary quantity beyond int64 as the largest
	// int64; no rule refuses it.
	{name: "staging-overflow", mutate: func(g *v1alpha1.Glance) {
		g.Spec.Staging = &v1alpha1.StagingSpec{SizeLimit: ptr.To(resource.MustParse("9999999999999999999999Ei"))}
	}, renders: true},
	// The CRD's quantity pattern admits any exponent; comparing the request
	// with the limit would cost the controller a 10^99999999.
	{name: "cpu-request-1e99999999", mutate: func(g *v1alpha1.Glance) {
		g.Spec.Deployment = &v1alpha1.GlanceDeploymentSpec{Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1e99999999")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		}}
	}, field: "spec.deployment.resources.requests[cpu]"},

	// Releases the CRD pattern admits but no Glance has, and ones it does not.
	{name: "release-2009-1", mutate: release("2009.1"), field: "spec.openStackRelease"},
	{name: "release-0000-2", mutate: release("0000.2"), field: "spec.openStackRelease"},
	{name: "release-9999-2", mutate: release("9999.2"), upgrade: true, field: "9999.2 skips releases"},
	{name: "release-2026-3", mutate: release("2026.3"), schemaRefuses: true, field: "spec.openStackRelease"},
	{name: "release-trailing-lf", mutate: release("2025.2\n"), schemaRefuses: true, field: "spec.openStackRelease"},
}

// cleanGlance is what every hostile change starts from: a Glance with one of
// each kind of user-set config entry, so that a change edits a live one.
func cleanGlance(g *v1alpha1.Glance) {
	g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT": {"show_image_direct_url": "true"}}
	g.Spec.Middleware = []v1alpha1.MiddlewareSpec{{
		Name: "sizelimit", FilterFactory: "oslo_middleware.sizelimit:RequestBodySizeLimiter.factory",
		Config: map[string]string{"max_request_body_size": "1048576"},
	}}
	g.Spec.Plugins = []v1alpha1.PluginSpec{{Name: "image_conversion", ConfigSection: "image_conversion", Config: map[string]string{"output_format": "raw"}}}
	g.Spec.PolicyOverrides = &v1alpha1.PolicyOverridesSpec{Rules: map[string]v1alpha1.PolicyRule{"get_images": "role:reader"}}
	g.Spec.Logging = &v1alpha1.LoggingSpec{PerLoggerLevels: map[string]v1alpha1.LogLevel{"glance_store": "DEBUG"}}
}

func extraConfig(section, key, value string) func(*v1alpha1.Glance) {
	return func(g *v1alpha1.Glance) {
		if g.Spec.ExtraConfig[section] == nil {
			g.Spec.ExtraConfig[section] = map[string]string{}
		}
		g.Spec.ExtraConfig[section][key] = value
	}
}

func middlewareConfig(key, value string) func(*v1alpha1.Glance) {
	return func(g *v1alpha1.Glance) { g.Spec.Middleware[0].Config[key] = value }
}

func pluginConfig(key, value string) func(*v1alpha1.Glance) {
	return func(g *v1alpha1.Glance) { g.Spec.Plugins[0].Config[key] = value }
}

func policyRule(name, check string) func(*v1alpha1.Glance) {
	return func(g *v1alpha1.Glance) { g.Spec.PolicyOverrides.Rules[name] = v1alpha1.PolicyRule(check) }
}

func loggerLevel(name string, level v1alpha1.LogLevel) func(*v1alpha1.Glance) {
	return func(g *v1alpha1.Glance) { g.Spec.Logging.PerLoggerLevels[name] = level }
}

func release(r string) func(*v1alpha1.Glance) {
	return func(g *v1alpha1.Glance) { g.Spec.OpenStackRelease = r }
}

// TestHostileGlances runs each hostile change two ways: on the create of
// a fresh Glance, and as an update of one whose config has rendered.
func TestHostileGlances(t *testing.T) {
	t.Parallel()
	var names []string
	for _, c := range hostileGlances {
		names = append(names, c.name)
	}
	checkCaseNames(t, names)
	for _, c := range hostileGlances {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			t.Run("create", func(t *testing.T) {
				t.Parallel()
				hostileCreate(t, c)
			})
			t.Run("update", func(t *testing.T) {
				t.Parallel()
				hostileUpdate(t, c)
			})
		})
	}
}

// hostileCreate creates the hostile Glance in a fresh namespace.
func hostileCreate(t *testing.T, c hostileGlance) {
	e := newEnv(t)
	e.Credentials("pw")
	e.DefaultBackend("alpha")
	g := fixtures.NewGlance(e.NS, "glance", "2025.2")
	g.Spec.SecretStoreRef = &v1alpha1.SecretStoreReference{Kind: v1alpha1.ClusterSecretStoreKind, Name: e.Store}
	cleanGlance(g)
	c.mutate(g)
	err := cl.Create(context.Background(), g)
	switch {
	case c.schemaRefuses:
		expectSchemaRefusal(t, err, c.field)
	case err != nil:
		t.Fatalf("the API server refused a spec the case expects it to admit: %v", err)
	case c.renders || c.upgrade:
		settledRender(t, e, g)
	case c.tooLarge:
		expectRefusal(t, e, c.field, false)
		if configs := e.Names(&corev1.ConfigMapList{}, "config"); len(configs) != 0 {
			t.Errorf("a config too large to store left ConfigMaps %v", configs)
		}
	default:
		expectRefusal(t, e, c.field, true)
		// The refusal gate runs before the finalizer is added: the pipeline
		// never ran, so nothing can have been rendered.
		if fin := e.ReadGlance().Finalizers; len(fin) != 0 {
			t.Errorf("a refused Glance holds finalizers %v", fin)
		}
		if files := renderedFiles(t, e); len(files) != 0 {
			t.Errorf("a refused spec rendered %v", slices.Sorted(maps.Keys(files)))
		}
	}
	checkRendered(t, renderedFiles(t, e), c.injected)
	checkNoPanics(t)
}

// hostileUpdate applies the hostile change to a Glance whose config has
// rendered: the files must stay byte for byte the last good ones.
func hostileUpdate(t *testing.T, c hostileGlance) {
	e := newEnv(t)
	if c.schemaRefuses {
		// The API server judges the update alone; nothing needs rendering.
		e.Credentials("pw")
		e.Glance(cleanGlance)
		var err error
		for range 10 { // the operator's status writes may conflict
			g := e.ReadGlance()
			c.mutate(g)
			if err = cl.Update(context.Background(), g); !apierrors.IsConflict(err) {
				break
			}
		}
		expectSchemaRefusal(t, err, c.field)
		checkNoPanics(t)
		return
	}
	var g *v1alpha1.Glance
	if c.upgrade {
		e.InstallBrownfield(cleanGlance)
		g = e.ReadGlance()
	} else {
		e.Credentials("pw")
		e.DefaultBackend("alpha")
		g = e.Glance(cleanGlance)
	}
	goodConfig := settledRender(t, e, g)
	lastGood := renderedFiles(t, e)

	e.UpdateGlance(c.mutate)
	switch {
	case c.renders:
		config := settledRender(t, e, e.ReadGlance())
		files := renderedFiles(t, e)
		checkRendered(t, files, c.injected)
		// The config is content-addressed, so its name may change; by file,
		// only the policy may, and it reads back as the spec says (which
		// settledRender waited for).
		now, before := configFiles(files, config), configFiles(lastGood, goodConfig)
		if !reflect.DeepEqual(slices.Sorted(maps.Keys(now)), slices.Sorted(maps.Keys(before))) {
			t.Errorf("config files %v, last good %v", slices.Sorted(maps.Keys(now)), slices.Sorted(maps.Keys(before)))
		}
		for key, text := range now {
			if key != render.PolicyYAMLKey && before[key] != text {
				t.Errorf("%s changed:\n%s\nlast good:\n%s", key, text, before[key])
			}
		}
	case c.upgrade:
		cond := e.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonUpgradePathInvalid)
		if !strings.Contains(cond.Message, c.field) {
			t.Errorf("DatabaseReady message %q does not say %q", cond.Message, c.field)
		}
		expectLastGood(t, e, lastGood, c.injected)
	default:
		expectRefusal(t, e, c.field, !c.tooLarge)
		expectLastGood(t, e, lastGood, c.injected)
		// The manager still judges this Glance: the clean spec back, the
		// same files come back.
		e.UpdateGlance(resetToClean)
		e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionTrue, v1alpha1.ReasonSecretsAvailable)
		expectLastGood(t, e, lastGood, nil)
	}
	checkNoPanics(t)
}

// resetToClean puts the fields the corpus changes back to the clean spec.
func resetToClean(g *v1alpha1.Glance) {
	fresh := fixtures.NewGlance(g.Namespace, g.Name, "2025.2")
	g.Spec.OpenStackRelease = fresh.Spec.OpenStackRelease
	g.Spec.Deployment, g.Spec.Staging, g.Spec.ImageCache = nil, nil, nil
	cleanGlance(g)
}

// settledRender waits until the config of g's generation has rendered: the
// Glance reports SecretsReady=True for it, with one backends Secret and a
// config ConfigMap whose policy.yaml reads back as exactly the spec's rules,
// and returns that ConfigMap's name. Older configs stay as history.
func settledRender(t *testing.T, e *operatortest.Env, g *v1alpha1.Glance) string {
	t.Helper()
	want := map[string]string{}
	for name, check := range g.Spec.PolicyOverrides.Rules {
		want[name] = string(check)
	}
	var configs []string
	var current string
	e.Eventually("the config of the spec rendered", func() bool {
		live := e.ReadGlance()
		c := meta.FindStatusCondition(live.Status.Conditions, v1alpha1.ConditionSecretsReady)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration < live.Generation || live.Generation < g.Generation {
			return false
		}
		if len(e.Names(&corev1.SecretList{}, "backends")) != 1 {
			return false
		}
		configs = e.Names(&corev1.ConfigMapList{}, "config")
		for _, name := range configs {
			var cm corev1.ConfigMap
			var policy map[string]string
			if cl.Get(context.Background(), client.ObjectKey{Namespace: e.NS, Name: name}, &cm) == nil &&
				yaml.UnmarshalStrict([]byte(cm.Data[render.PolicyYAMLKey]), &policy) == nil && reflect.DeepEqual(policy, want) {
				current = name
				return true
			}
		}
		return false
	}, func() string {
		return fmt.Sprintf("config ConfigMaps %v, none with the policy %q; conditions %+v", configs, want, e.ReadGlance().Status.Conditions)
	})
	return current
}

// configFiles are the files of the config ConfigMap name, by key.
func configFiles(files map[string]string, name string) map[string]string {
	out := map[string]string{}
	for file, text := range files {
		if key, ok := strings.CutPrefix(file, "ConfigMap "+name+"/"); ok {
			out[key] = text
		}
	}
	return out
}

// expectSchemaRefusal checks that the API server refused a write as invalid,
// naming the field.
func expectSchemaRefusal(t *testing.T, err error, field string) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatalf("the API server admitted a spec the case says its schema refuses (%s)", field)
	case !apierrors.IsInvalid(err):
		t.Fatalf("the API server refused it, but not as invalid: %v", err)
	case !strings.Contains(err.Error(), field):
		t.Errorf("the API server's refusal does not name %q: %v", field, err)
	}
}

// expectRefusal waits for the controller's refusal of the spec:
// SecretsReady=False/ConfigError naming the field, and Ready=False. gate:
// the refusal is the admission rules', judged before any step.
func expectRefusal(t *testing.T, e *operatortest.Env, field string, gate bool) {
	t.Helper()
	c := e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonConfigError)
	if !strings.Contains(c.Message, field) {
		t.Errorf("SecretsReady message does not name %q: %.300q", field, c.Message)
	}
	if gate && !strings.Contains(c.Message, "breaks admission rules") {
		t.Errorf("SecretsReady message does not say the spec breaks admission rules: %.300q", c.Message)
	}
	e.Condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAllReady)
}

// expectLastGood checks that every rendered file is the last good one, byte
// for byte, and that the set of files is the same.
func expectLastGood(t *testing.T, e *operatortest.Env, lastGood map[string]string, injected []string) {
	t.Helper()
	files := renderedFiles(t, e)
	checkRendered(t, files, injected)
	if !reflect.DeepEqual(slices.Sorted(maps.Keys(files)), slices.Sorted(maps.Keys(lastGood))) {
		t.Errorf("rendered files %v, want the last good %v", slices.Sorted(maps.Keys(files)), slices.Sorted(maps.Keys(lastGood)))
	}
	for name, text := range files {
		if want, ok := lastGood[name]; ok && text != want {
			t.Errorf("%s is not the last good one:\n%s\nlast good:\n%s", name, text, want)
		}
	}
}

// hostileBackend is a hostile GlanceBackend "beta", created next to the
// rendered default backend "alpha".
type hostileBackend struct {
	name          string
	mutate        func(*v1alpha1.GlanceBackend)
	schemaRefuses bool
	// field is what the API server's refusal or the GlanceBackendSkipped
	// event must name.
	field    string
	injected []string
}

var hostileBackends = []hostileBackend{
	{name: "opt-value-lf", mutate: extraOption("a", "x\n[DEFAULT]\n"+injectedDebug), schemaRefuses: true, field: "spec.extraOptions[a]"},
	{name: "opt-value-cr", mutate: extraOption("a", "x\r[glance_store]\rdefault_backend = beta"), schemaRefuses: true, field: "spec.extraOptions[a]"},
	{name: "opt-value-nul", mutate: extraOption("a", "x\x00"+injectedDebug), field: "spec.extraOptions[a]", injected: []string{injectedDebug}},
	{name: "opt-value-esc", mutate: extraOption("a", "x\x1b[1A\x1b[2K"+injectedDebug), field: "spec.extraOptions[a]", injected: []string{injectedDebug}},
	{name: "opt-value-nel", mutate: extraOption("a", "x\u0085[DEFAULT]\u0085"+injectedDebug), field: "spec.extraOptions[a]", injected: []string{injectedDebug}},
	{name: "opt-value-rlo", mutate: extraOption("a", "true\u202e"), field: "spec.extraOptions[a]"},
	{name: "opt-value-lri", mutate: extraOption("a", "\u2066"+injectedDebug), field: "spec.extraOptions[a]", injected: []string{injectedDebug}},
	{name: "opt-key-injected", mutate: extraOption("x\n[DEFAULT]\ndebug", "true"), field: "spec.extraOptions[x\n[DEFAULT]\ndebug]", injected: []string{injectedDebug}},
	{name: "opt-key-operator", mutate: extraOption("s3_store_host", "http://elsewhere"), field: "spec.extraOptions[s3_store_host]", injected: []string{"s3_store_host = http://elsewhere"}},
	// The largest value the schema admits, with a bidi control at its end:
	// the event must still fit the API's 1024 characters.
	{name: "opt-value-max-rlo", mutate: extraOption("a", strings.Repeat("x", 1023)+"\u202e"), field: "spec.extraOptions[a]"},
	// The schema bounds no key.
	// The event's note would quote the key past the 1024 characters the
	// API allows a note: it is cut, not lost.
	{name: "opt-key-huge", mutate: extraOption(strings.Repeat("k", 2048), "v"), field: "spec.extraOptions[" + strings.Repeat("k", 2048) + "]"},
	{name: "opt-value-too-long", mutate: extraOption("a", strings.Repeat("x", 1025)), schemaRefuses: true, field: "spec.extraOptions.a"},
	{name: "opt-33-keys", mutate: func(b *v1alpha1.GlanceBackend) {
		for i := range 33 {
			extraOption(fmt.Sprintf("k%d", i), "v")(b)
		}
	}, schemaRefuses: true, field: "spec.extraOptions"},
	{name: "host-injected", mutate: s3Host("http://s3.example.com/\n[DEFAULT]\n" + injectedDebug), schemaRefuses: true, field: "spec.s3.host"},
	// The CRD's URL rule refuses ASCII controls, not these.
	{name: "host-rlo", mutate: s3Host("http://s3\u202e.example.com"), field: "spec.s3.host"},
	{name: "host-nel", mutate: s3Host("http://s3.example.com/\u0085" + injectedDebug), field: "spec.s3.host", injected: []string{injectedDebug}},
	{name: "host-too-long", mutate: s3Host("http://s3.example.com/" + strings.Repeat("x", 2048)), schemaRefuses: true, field: "spec.s3.host"},
	{name: "bucket-injected", mutate: func(b *v1alpha1.GlanceBackend) { b.Spec.S3.Bucket = "images\n[DEFAULT]" },
		schemaRefuses: true, field: "spec.s3.bucket"},
	{name: "region-injected", mutate: func(b *v1alpha1.GlanceBackend) { b.Spec.S3.Region = "eu\n[DEFAULT]" },
		schemaRefuses: true, field: "spec.s3.region"},
}

func s3Host(host string) func(*v1alpha1.GlanceBackend) {
	return func(b *v1alpha1.GlanceBackend) { b.Spec.S3.Host = host }
}

func extraOption(key, value string) func(*v1alpha1.GlanceBackend) {
	return func(b *v1alpha1.GlanceBackend) {
		if b.Spec.ExtraOptions == nil {
			b.Spec.ExtraOptions = map[string]v1alpha1.OptionValue{}
		}
		b.Spec.ExtraOptions[key] = v1alpha1.OptionValue(value)
	}
}

// TestHostileBackends creates each hostile backend next to a rendered
// default: it is refused by the API server or skipped with an event naming
// the field, and backends.conf and the config stay the last good ones.
func TestHostileBackends(t *testing.T) {
	t.Parallel()
	var names []string
	for _, c := range hostileBackends {
		names = append(names, c.name)
	}
	checkCaseNames(t, names)
	for _, c := range hostileBackends {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.Credentials("pw")
			e.DefaultBackend("alpha")
			settledRender(t, e, e.Glance(cleanGlance))
			lastGood := renderedFiles(t, e)

			beta := fixtures.NewBackend(e.NS, "beta", "glance", false, "s3")
			beta.Spec.S3.Bucket = "images-beta"
			c.mutate(beta)
			err := cl.Create(context.Background(), beta)
			if c.schemaRefuses {
				expectSchemaRefusal(t, err, c.field)
			} else {
				if err != nil {
					t.Fatalf("the API server refused a backend the case expects it to admit: %v", err)
				}
				e.ConditionSaying(v1alpha1.ConditionBackendsReady, metav1.ConditionTrue, v1alpha1.ReasonAllBackendsProjected, "skipped beta")
				expectSkipEvent(t, e, c.field)
			}
			expectLastGood(t, e, lastGood, c.injected)
			checkNoPanics(t)
		})
	}
}

// expectSkipEvent waits for the GlanceBackendSkipped event of beta that says
// it breaks admission rules and names the field.
func expectSkipEvent(t *testing.T, e *operatortest.Env, field string) {
	t.Helper()
	var events eventsv1.EventList
	e.Eventually("a GlanceBackendSkipped event naming "+field, func() bool {
		return skipEventArrived(t, e, field)
	}, func() string {
		_ = cl.List(context.Background(), &events, client.InNamespace(e.NS))
		return fmt.Sprintf("events: %.2000s", eventNotes(events))
	})
}

func skipEventArrived(t *testing.T, e *operatortest.Env, field string) bool {
	t.Helper()
	want := `backend "beta" skipped: it breaks admission rules: ` + field
	var events eventsv1.EventList
	if err := cl.List(context.Background(), &events, client.InNamespace(e.NS)); err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(events.Items, func(ev eventsv1.Event) bool {
		if ev.Reason != v1alpha1.EventGlanceBackendSkipped {
			return false
		}
		// A note cut to the API's bound ends in "…" within the field.
		cut, truncated := strings.CutSuffix(ev.Note, "…")
		return strings.Contains(ev.Note, want) || (truncated && strings.HasPrefix(want, cut))
	})
}

// checkCaseNames keeps case names to what makes distinct namespaces:
// NewEnv cuts the test name to 50 characters.
func checkCaseNames(t *testing.T, names []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, n := range names {
		if ns := strings.ToLower(t.Name()) + "-" + n + "-create"; len(ns) > 50 || strings.Trim(n, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" || seen[n] {
			t.Fatalf("case name %q is repeated, too long or not a DNS label part", n)
		}
		seen[n] = true
	}
}

// renderedFiles reads every file the operator may have rendered in the
// env's namespace: each key of every ConfigMap and of the operator's
// Secrets (backends.conf; the DSN), by "Kind name/key". The digest key is
// random bytes, rendered from nothing in the spec.
func renderedFiles(t *testing.T, e *operatortest.Env) map[string]string {
	t.Helper()
	ctx := context.Background()
	files := map[string]string{}
	var cms corev1.ConfigMapList
	if err := cl.List(ctx, &cms, client.InNamespace(e.NS)); err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		for k, v := range cm.Data {
			files["ConfigMap "+cm.Name+"/"+k] = v
		}
		for k, v := range cm.BinaryData {
			files["ConfigMap "+cm.Name+"/"+k] = string(v)
		}
	}
	var secrets corev1.SecretList
	if err := cl.List(ctx, &secrets, client.InNamespace(e.NS), client.MatchingLabels(render.CommonLabels("glance"))); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		if s.Labels[render.LabelComponent] == "digest-key" {
			continue
		}
		for k, v := range s.Data {
			files["Secret "+s.Name+"/"+k] = string(v)
		}
	}
	return files
}

// checkRendered parses every rendered file back and checks that none holds
// an injected line or a character that could hide or fake one.
func checkRendered(t *testing.T, files map[string]string, injected []string) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		text := files[name]
		if err := parseRendered(path.Base(name), text); err != nil {
			t.Errorf("%s does not parse: %v\n%s", name, err, text)
		}
		if !utf8.ValidString(text) {
			t.Errorf("%s is not valid UTF-8", name)
		}
		for _, r := range text {
			if r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029') {
				t.Errorf("%s holds the character %U", name, r)
				break
			}
		}
		if path.Base(name) == render.PolicyYAMLKey {
			// YAML may hold a rule's lines as a block scalar; that it reads
			// back as exactly the spec's rules, settledRender checks.
			continue
		}
		for i, line := range strings.Split(text, "\n") {
			for _, inj := range injected {
				if strings.Contains(line, inj) {
					t.Errorf("%s line %d holds the injected %q: %q", name, i+1, inj, line)
				}
			}
		}
	}
}

// parseRendered reads a rendered file the way its consumer does; files of
// other kinds have nothing to parse.
func parseRendered(key, text string) error {
	var dialects []iniparse.Dialect
	switch key {
	case render.GlanceAPIConfKey, render.BackendsConfKey:
		dialects = []iniparse.Dialect{iniparse.Oslo}
	case render.PasteINIKey:
		dialects = []iniparse.Dialect{iniparse.ConfigParser}
	case render.LoggingConfKey: // logging.config reads it; oslo.config too, in the same --config-dir
		dialects = []iniparse.Dialect{iniparse.Oslo, iniparse.ConfigParser}
	case render.PolicyYAMLKey:
		var rules map[string]string
		return yaml.UnmarshalStrict([]byte(text), &rules)
	}
	for _, d := range dialects {
		// Parse refuses repeated sections and keys.
		if _, err := iniparse.Parse(text, d); err != nil {
			return fmt.Errorf("%v: %w", d, err)
		}
	}
	return nil
}

// checkNoPanics checks that no reconciler of the manager has panicked:
// controller-runtime recovers a panic, which would otherwise pass unseen.
// That the manager still runs and judges, each case shows by the condition
// it waits for (operatortest.Manager has no other sign of life).
func checkNoPanics(t *testing.T) {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_panics_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if v := m.GetCounter().GetValue(); v > 0 {
				t.Errorf("controller %s panicked %v times", label(m, "controller"), v)
			}
		}
	}
}
