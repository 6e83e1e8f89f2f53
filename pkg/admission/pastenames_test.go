package admission

import (
	"bufio"
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
)

// TestAdmissionRefusesEveryPasteNameTheRendererEmits renders the paste ini
// of several specs and checks that admission refuses a middleware named
// after any section, filter or app in it: a name admission lets through
// and the renderer emits itself fails later, at render, as a ConfigError.
func TestAdmissionRefusesEveryPasteNameTheRendererEmits(t *testing.T) {
	userFilters := []v1alpha1.MiddlewareSpec{
		{Name: "audit", FilterFactory: "keystonemiddleware.audit:filter_factory", Position: v1alpha1.MiddlewareAfterAuth},
		{Name: "ratelimit", FilterFactory: "ratelimit.middleware:filter_factory", Position: v1alpha1.MiddlewareBeforeAuth},
	}
	specs := map[string]func(*v1alpha1.Glance){
		"minimal": func(*v1alpha1.Glance) {},
		"image cache": func(g *v1alpha1.Glance) {
			g.Spec.ImageCache = &v1alpha1.ImageCacheSpec{Size: resource.MustParse("10Gi")}
		},
		"middleware": func(g *v1alpha1.Glance) { g.Spec.Middleware = userFilters },
		"image cache and middleware": func(g *v1alpha1.Glance) {
			g.Spec.ImageCache = &v1alpha1.ImageCacheSpec{Size: resource.MustParse("10Gi")}
			g.Spec.Middleware = userFilters
		},
	}
	emitted := map[string]bool{}
	for name, mutate := range specs {
		g := baseGlance(mutate)
		ini, err := render.PasteINI(&g.Spec)
		if err != nil {
			t.Fatalf("%s: render: %v", name, err)
		}
		for _, n := range pasteNames(t, ini) {
			emitted[n] = true
		}
	}
	for _, mw := range userFilters {
		delete(emitted, mw.Name)
	}
	// The walk must see the names of every kind of entry, or it proves
	// nothing: the composite, the pipeline, an app and a filter.
	for _, n := range []string{render.PasteApp, "api", "apiv2app", "authtoken", "cache"} {
		if !emitted[n] {
			t.Fatalf("the rendered paste inis do not name %q; names seen: %v", n, slices.Sorted(maps.Keys(emitted)))
		}
	}

	for _, n := range slices.Sorted(maps.Keys(emitted)) {
		// Paste names are matched without regard to case.
		for _, spelled := range []string{n, strings.ToUpper(n)} {
			g := baseGlance(func(g *v1alpha1.Glance) {
				g.Spec.Middleware = []v1alpha1.MiddlewareSpec{{Name: spelled, FilterFactory: "example.middleware:filter_factory"}}
			})
			_, errs := ValidateGlance(context.Background(), nil, g, &fakeLookups{})
			refused := slices.ContainsFunc(errs, func(e *field.Error) bool { return e.Field == "spec.middleware[0].name" })
			if !refused {
				t.Errorf("admission lets a middleware named %q through (errors: %v), but the renderer emits that name itself", spelled, errs)
			}
			if _, err := render.PasteINI(&g.Spec); err == nil {
				t.Errorf("the renderer renders a middleware named %q over its own entry of that name", spelled)
			}
		}
	}
}

// pasteNames returns every name a paste ini defines or refers to: the names
// of its sections ([filter:cors] defines cors), the elements of pipelines,
// and the apps a composite maps paths to.
func pasteNames(t *testing.T, ini string) []string {
	t.Helper()
	var names []string
	section := ""
	sc := bufio.NewScanner(strings.NewReader(ini))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.TrimSuffix(strings.TrimPrefix(line, "["), "]")
			kind, name, ok := strings.Cut(section, ":")
			if !ok {
				t.Fatalf("section [%s] has no type: prefix", section)
			}
			switch kind {
			case "app", "filter", "pipeline", "composite":
			default:
				t.Fatalf("section [%s] has an unknown type %q", section, kind)
			}
			names = append(names, name)
		default:
			key, value, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("line %q in [%s] is not key = value", line, section)
			}
			key, value = strings.TrimSpace(key), strings.TrimSpace(value)
			switch {
			case strings.HasPrefix(section, "pipeline:") && key == "pipeline":
				names = append(names, strings.Fields(value)...)
			case strings.HasPrefix(section, "composite:") && strings.HasPrefix(key, "/"):
				names = append(names, value)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// TestAdmissionRefusesMiddlewareConfigKeysTheRendererRefuses holds admission
// to the renderer for the keys of a middleware's config: a key paste.deploy
// would not hand to the filter factory fails at render, so admission
// refuses it first, naming the key.
func TestAdmissionRefusesMiddlewareConfigKeysTheRendererRefuses(t *testing.T) {
	for _, key := range []string{"audit_map_file", "paste.filter_factory", "paste.app_factory", "use", "filter-with", "next", "require", "set debug", "get debug", "here", "__file__"} {
		g := baseGlance(func(g *v1alpha1.Glance) {
			g.Spec.Middleware = []v1alpha1.MiddlewareSpec{{Name: "audit", FilterFactory: "keystonemiddleware.audit:filter_factory", Config: map[string]string{key: "x"}}}
		})
		_, renderErr := render.PasteINI(&g.Spec)
		_, errs := ValidateGlance(context.Background(), nil, g, &fakeLookups{})
		path := "spec.middleware[0].config[" + key + "]"
		refused := slices.ContainsFunc(errs, func(e *field.Error) bool { return e.Field == path })
		if refused != (renderErr != nil) {
			t.Errorf("config key %q: admission refuses it at %s: %v (errors %v); the renderer: %v", key, path, refused, errs, renderErr)
		}
	}
}
