package render

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/iniparse"
)

// TestBuiltinPasteNamesAreThoseRendered: admission refuses exactly the
// section names the rendered paste uses, with every optional section on.
func TestBuiltinPasteNamesAreThoseRendered(t *testing.T) {
	g := minimalGlance()
	g.Spec.ImageCache = &v1alpha1.ImageCacheSpec{Size: resource.MustParse("10Gi")}
	out, err := PasteINI(&g.Spec)
	if err != nil {
		t.Fatal(err)
	}
	rendered := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			_, name, _ := strings.Cut(strings.Trim(line, "[]"), ":")
			rendered[name] = true
		}
	}
	if !maps.Equal(rendered, builtinPasteNames) {
		t.Errorf("rendered sections %v, refused names %v", slices.Sorted(maps.Keys(rendered)), slices.Sorted(maps.Keys(builtinPasteNames)))
	}
}

func TestPasteINIPipeline(t *testing.T) {
	tests := []struct {
		name       string
		middleware []v1alpha1.MiddlewareSpec
		imageCache bool
		want       string
	}{
		{"plain", nil, false, "cors http_proxy_to_wsgi versionnegotiation authtoken context rootapp"},
		{"image cache directly before rootapp", nil, true, "cors http_proxy_to_wsgi versionnegotiation authtoken context cache rootapp"},
		{
			name: "before and after keep list order; default is after",
			middleware: []v1alpha1.MiddlewareSpec{
				{Name: "a1", FilterFactory: "m:f", Position: v1alpha1.MiddlewareAfterAuth},
				{Name: "b1", FilterFactory: "m:f", Position: v1alpha1.MiddlewareBeforeAuth},
				{Name: "a2", FilterFactory: "m:f"},
				{Name: "b2", FilterFactory: "m:f", Position: v1alpha1.MiddlewareBeforeAuth},
			},
			imageCache: true,
			want:       "cors http_proxy_to_wsgi versionnegotiation b1 b2 authtoken context a1 a2 cache rootapp",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &minimalGlance().Spec
			s.Middleware = tt.middleware
			if tt.imageCache {
				s.ImageCache = &v1alpha1.ImageCacheSpec{Size: resource.MustParse("1Gi")}
			}
			text, err := PasteINI(s)
			if err != nil {
				t.Fatal(err)
			}
			p := mustParseINI(t, text, iniparse.ConfigParser)
			if got := p["pipeline:api"]["pipeline"]; got != tt.want {
				t.Errorf("pipeline %q, want %q", got, tt.want)
			}
			// Every filter of the pipeline exists as a filter, the last
			// element as the root composite.
			elems := strings.Fields(p["pipeline:api"]["pipeline"])
			for _, e := range elems[:len(elems)-1] {
				if p["filter:"+e]["paste.filter_factory"] == "" {
					t.Errorf("pipeline element %s has no [filter:%s] with a factory", e, e)
				}
			}
			if _, ok := p["filter:cache"]; ok != tt.imageCache {
				t.Errorf("[filter:cache] present %v, want %v", ok, tt.imageCache)
			}
		})
	}
}

func TestPasteINIHealthcheckIsAnApp(t *testing.T) {
	text, err := PasteINI(&minimalGlance().Spec)
	if err != nil {
		t.Fatal(err)
	}
	p := mustParseINI(t, text, iniparse.ConfigParser)
	top := p["composite:glance-api-keystone"]
	if top["/"] != "api" || top["/healthcheck"] != "healthcheck" || top["paste.composite_factory"] != "glance.api:root_app_factory" {
		t.Errorf("top composite %v", top)
	}
	want := map[string]string{
		"paste.app_factory":    "oslo_middleware:Healthcheck.app_factory",
		"backends":             "disable_by_file",
		"disable_by_file_path": "/tmp/healthcheck_disable",
	}
	for k, v := range want {
		if p["app:healthcheck"][k] != v {
			t.Errorf("[app:healthcheck] %s = %q, want %q", k, p["app:healthcheck"][k], v)
		}
	}
	if _, ok := p["filter:healthcheck"]; ok {
		t.Error("healthcheck rendered as a filter")
	}
	if strings.Contains(p["pipeline:api"]["pipeline"], "healthcheck") {
		t.Error("healthcheck is in the API pipeline")
	}
	root := p["composite:rootapp"]
	if root["/"] != "apiversions" || root["/v2"] != "apiv2app" {
		t.Errorf("rootapp %v", root)
	}
	if p["app:apiv2app"]["paste.app_factory"] != "glance.api.v2.router:API.factory" {
		t.Errorf("apiv2app %v", p["app:apiv2app"])
	}
	if p["filter:authtoken"]["delay_auth_decision"] != "true" {
		t.Errorf("authtoken %v", p["filter:authtoken"])
	}
}

func TestPasteINIMiddlewareSection(t *testing.T) {
	s := &minimalGlance().Spec
	s.Middleware = []v1alpha1.MiddlewareSpec{{
		Name: "audit", FilterFactory: "audit:factory",
		Config: map[string]string{"z": "last", "a": "%(here)s 100%"},
	}}
	text, err := PasteINI(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "[filter:audit]\npaste.filter_factory = audit:factory\na = %%(here)s 100%%\nz = last\n") {
		t.Errorf("middleware section:\n%s", text)
	}
}

func TestPasteINIErrors(t *testing.T) {
	tests := []struct {
		name      string
		mw        v1alpha1.MiddlewareSpec
		wantInErr string
	}{
		{"builtin name", v1alpha1.MiddlewareSpec{Name: "authtoken", FilterFactory: "m:f"}, "renders itself"},
		{"builtin name other case", v1alpha1.MiddlewareSpec{Name: "Cache", FilterFactory: "m:f"}, "renders itself"},
		{"factory override", v1alpha1.MiddlewareSpec{Name: "x", FilterFactory: "m:f", Config: map[string]string{"paste.filter_factory": "evil:f"}}, "factory"},
		{"use directive", v1alpha1.MiddlewareSpec{Name: "x", FilterFactory: "m:f", Config: map[string]string{"use": "egg:x"}}, "directive"},
		{"filter-with directive", v1alpha1.MiddlewareSpec{Name: "x", FilterFactory: "m:f", Config: map[string]string{"filter-with": "y"}}, "directive"},
		{"set directive", v1alpha1.MiddlewareSpec{Name: "x", FilterFactory: "m:f", Config: map[string]string{"set debug": "true"}}, "directive"},
		{"paste default", v1alpha1.MiddlewareSpec{Name: "x", FilterFactory: "m:f", Config: map[string]string{"here": "/"}}, "dropped"},
		{"line break in value", v1alpha1.MiddlewareSpec{Name: "x", FilterFactory: "m:f", Config: map[string]string{"k": "a\nb = c"}}, `key "k"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &minimalGlance().Spec
			s.Middleware = []v1alpha1.MiddlewareSpec{tt.mw}
			_, err := PasteINI(s)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.wantInErr) {
				t.Errorf("error %q does not mention %q", err, tt.wantInErr)
			}
		})
	}
}
