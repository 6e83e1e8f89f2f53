package render

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// PasteApp is the paste composite glance-api loads: [paste_deploy] flavor
// "keystone" selects "glance-api-" + flavor.
const PasteApp = "glance-api-keystone"

// builtinPasteNames are the filters, apps, pipelines and composites PasteINI
// renders itself, and nothing else; a middleware of the same name would
// replace or shadow one of them. It is the one list: admission refuses these
// names through IsBuiltinPasteName, so a spec it admits never fails here on a
// name.
var builtinPasteNames = map[string]bool{
	PasteApp: true, "api": true, "rootapp": true, "apiversions": true, "apiv2app": true,
	"healthcheck": true, "cors": true, "http_proxy_to_wsgi": true, "versionnegotiation": true,
	"authtoken": true, "context": true, "cache": true,
}

// IsBuiltinPasteName reports whether name, in any case, is a section, filter
// or app PasteINI renders itself, and so not free for a middleware.
func IsBuiltinPasteName(name string) bool {
	return builtinPasteNames[strings.ToLower(name)]
}

// PasteINI renders glance-api-paste.ini. /healthcheck is routed by the
// top-level composite to an oslo_middleware Healthcheck *app*, not a filter
// in the API pipeline, so health probes need no token and never reach Glance.
func PasteINI(s *v1alpha1.GlanceSpec) (string, error) {
	var before, after []string
	// Names, factories, positions and uniqueness are the CRD's rules (a
	// pattern, an enum, a list-map key); the built-in names are admission's.
	for i, mw := range s.Middleware {
		if IsBuiltinPasteName(mw.Name) {
			return "", fmt.Errorf("spec.middleware[%d].name %q is a filter or app the operator renders itself", i, mw.Name)
		}
		if mw.Position == v1alpha1.MiddlewareBeforeAuth {
			before = append(before, mw.Name)
		} else {
			after = append(after, mw.Name)
		}
	}

	pipeline := []string{"cors", "http_proxy_to_wsgi", "versionnegotiation"}
	pipeline = append(pipeline, before...)
	pipeline = append(pipeline, "authtoken", "context")
	pipeline = append(pipeline, after...)
	if s.ImageCache != nil {
		// The cache filter must sit directly before the root app: it serves
		// cached image data only for requests every other filter has passed.
		pipeline = append(pipeline, "cache")
	}
	pipeline = append(pipeline, "rootapp")

	f := NewINI()
	composite := "composite:" + PasteApp
	f.Set(composite, "paste.composite_factory", "glance.api:root_app_factory")
	f.Set(composite, "/", "api")
	f.Set(composite, "/healthcheck", "healthcheck")

	f.Set("pipeline:api", "pipeline", strings.Join(pipeline, " "))

	f.Set("composite:rootapp", "paste.composite_factory", "glance.api:root_app_factory")
	f.Set("composite:rootapp", "/", "apiversions")
	f.Set("composite:rootapp", "/v2", "apiv2app")

	f.Set("app:apiversions", "paste.app_factory", "glance.api.versions:create_resource")
	f.Set("app:apiv2app", "paste.app_factory", "glance.api.v2.router:API.factory")
	f.Set("app:healthcheck", "paste.app_factory", "oslo_middleware:Healthcheck.app_factory")
	f.Set("app:healthcheck", "backends", "disable_by_file")
	f.Set("app:healthcheck", "disable_by_file_path", HealthcheckDisablePath)

	f.Set("filter:cors", "paste.filter_factory", "oslo_middleware.cors:filter_factory")
	f.Set("filter:cors", "oslo_config_project", "glance")
	f.Set("filter:cors", "oslo_config_program", "glance-api")
	f.Set("filter:http_proxy_to_wsgi", "paste.filter_factory", "oslo_middleware:HTTPProxyToWSGI.factory")
	f.Set("filter:versionnegotiation", "paste.filter_factory", "glance.api.middleware.version_negotiation:VersionNegotiationFilter.factory")
	f.Set("filter:authtoken", "paste.filter_factory", "keystonemiddleware.auth_token:filter_factory")
	f.Set("filter:authtoken", "delay_auth_decision", "true")
	f.Set("filter:context", "paste.filter_factory", "glance.api.middleware.context:ContextMiddleware.factory")
	if s.ImageCache != nil {
		f.Set("filter:cache", "paste.filter_factory", "glance.api.middleware.cache:CacheFilter.factory")
	}

	for i, mw := range s.Middleware {
		section := "filter:" + mw.Name
		f.Set(section, "paste.filter_factory", mw.FilterFactory)
		for _, k := range slices.Sorted(maps.Keys(mw.Config)) {
			if reason := ReservedPasteKey(k); reason != "" {
				return "", fmt.Errorf("spec.middleware[%d].config key %q %s", i, k, reason)
			}
			// Passed to the factory as given: '%' is escaped so paste.deploy's
			// interpolation neither fails on it nor expands it.
			f.Set(section, k, configParserLiteral(mw.Config[k]))
		}
	}
	return f.Render()
}

// ReservedPasteKey says why paste.deploy would not hand key to the filter
// factory as an ordinary option, or returns "". Admission refuses the same
// keys through it.
func ReservedPasteKey(k string) string {
	switch {
	case strings.HasPrefix(k, "paste."):
		return "would replace the filter factory"
	case k == "use" || k == "filter-with" || k == "next" || k == "require":
		return "is a paste.deploy directive"
	case strings.HasPrefix(k, "set ") || strings.HasPrefix(k, "get "):
		return "is a paste.deploy global-configuration directive"
	case k == "here" || k == "__file__":
		return "is a paste.deploy default and would be dropped"
	}
	return ""
}
