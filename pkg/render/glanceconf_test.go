package render

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/iniparse"
)

// absent marks a key that must not be rendered.
const absent = "\x00absent"

func TestGlanceAPIConf(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(g *v1alpha1.Glance)
		facts  ConfigFacts
		want   map[[2]string]string // [section, key] -> value (raw, as written)
	}{
		{
			name: "minimal resolves every default",
			want: map[[2]string]string{
				{"DEFAULT", "bind_host"}:                                "0.0.0.0",
				{"DEFAULT", "bind_port"}:                                "9292",
				{"DEFAULT", "workers"}:                                  absent,
				{"DEFAULT", "debug"}:                                    "false",
				{"DEFAULT", "image_cache_dir"}:                          absent,
				{"DEFAULT", "enabled_import_methods"}:                   "[glance-direct,web-download]",
				{"DEFAULT", "log_config_append"}:                        absent,
				{"DEFAULT", "show_image_direct_url"}:                    "false",
				{"keystone_authtoken", "www_authenticate_uri"}:          "http://keystone.openstack.svc:5000/v3",
				{"keystone_authtoken", "auth_url"}:                      "http://keystone.openstack.svc:5000/v3",
				{"keystone_authtoken", "auth_type"}:                     "password",
				{"keystone_authtoken", "username"}:                      "glance",
				{"keystone_authtoken", "project_name"}:                  "service",
				{"keystone_authtoken", "user_domain_name"}:              "Default",
				{"keystone_authtoken", "project_domain_name"}:           "Default",
				{"keystone_authtoken", "region_name"}:                   absent,
				{"keystone_authtoken", "memcached_servers"}:             absent,
				{"keystone_authtoken", "password"}:                      absent,
				{"keystone_authtoken", "service_token_roles_required"}:  "true",
				{"paste_deploy", "flavor"}:                              "keystone",
				{"paste_deploy", "config_file"}:                         "/etc/glance/glance-api.conf.d/glance-api-paste.ini",
				{"glance_store", "default_backend"}:                     absent,
				{"os_glance_staging_store", "filesystem_store_datadir"}: "/var/lib/glance/staging",
				{"os_glance_tasks_store", "filesystem_store_datadir"}:   "/var/lib/glance/tasks-work",
				{"oslo_policy", "policy_file"}:                          absent,
				{"cache", "enabled"}:                                    absent,
				{"oslo_middleware", "enable_proxy_headers_parsing"}:     "true",
				{"database", "connection"}:                              absent,
				{"image_import_opts", "image_import_plugins"}:           absent,
			},
		},
		{
			name:  "default backend goes to glance_store",
			facts: ConfigFacts{DefaultBackend: "primary"},
			want:  map[[2]string]string{{"glance_store", "default_backend"}: "primary"},
		},
		{
			name:  "one store: nothing to copy an image to",
			facts: ConfigFacts{DefaultBackend: "primary", StoreCount: 1},
			want:  map[[2]string]string{{"DEFAULT", "enabled_import_methods"}: "[glance-direct,web-download]"},
		},
		{
			name:  "two stores offer copy-image",
			facts: ConfigFacts{DefaultBackend: "primary", StoreCount: 2},
			want:  map[[2]string]string{{"DEFAULT", "enabled_import_methods"}: "[glance-direct,web-download,copy-image]"},
		},
		{
			name:  "three stores offer copy-image",
			facts: ConfigFacts{DefaultBackend: "primary", StoreCount: 3},
			want:  map[[2]string]string{{"DEFAULT", "enabled_import_methods"}: "[glance-direct,web-download,copy-image]"},
		},
		{
			name:   "workers under eventlet",
			mutate: func(g *v1alpha1.Glance) { g.Spec.APIServer = &v1alpha1.APIServerSpec{Workers: ptr.To[int32](6)} },
			want:   map[[2]string]string{{"DEFAULT", "workers"}: "6"},
		},
		{
			name: "workers inert under uWSGI",
			mutate: func(g *v1alpha1.Glance) {
				g.Spec.OpenStackRelease = "2026.1"
				g.Spec.APIServer = &v1alpha1.APIServerSpec{Workers: ptr.To[int32](6)}
			},
			want: map[[2]string]string{{"DEFAULT", "workers"}: absent},
		},
		{
			name: "unparseable release falls back to eventlet",
			mutate: func(g *v1alpha1.Glance) {
				g.Spec.OpenStackRelease = "zed"
				g.Spec.APIServer = &v1alpha1.APIServerSpec{Workers: ptr.To[int32](2)}
			},
			want: map[[2]string]string{{"DEFAULT", "workers"}: "2"},
		},
		{
			name:   "debug without logging.conf",
			mutate: func(g *v1alpha1.Glance) { g.Spec.Logging = &v1alpha1.LoggingSpec{Debug: ptr.To(true)} },
			want:   map[[2]string]string{{"DEFAULT", "debug"}: "true", {"DEFAULT", "log_config_append"}: absent},
		},
		{
			name:   "json logging points at logging.conf",
			mutate: func(g *v1alpha1.Glance) { g.Spec.Logging = &v1alpha1.LoggingSpec{Format: v1alpha1.LogFormatJSON} },
			want:   map[[2]string]string{{"DEFAULT", "log_config_append"}: "/etc/glance/glance-api.conf.d/logging.conf"},
		},
		{
			name: "image cache at 80 percent",
			mutate: func(g *v1alpha1.Glance) {
				g.Spec.ImageCache = &v1alpha1.ImageCacheSpec{Size: resource.MustParse("10Gi")}
			},
			want: map[[2]string]string{
				{"DEFAULT", "image_cache_dir"}:      "/var/lib/glance/image-cache",
				{"DEFAULT", "image_cache_driver"}:   "sqlite",
				{"DEFAULT", "image_cache_max_size"}: "8589934592",
			},
		},
		{
			name: "public endpoint and region",
			mutate: func(g *v1alpha1.Glance) {
				g.Spec.KeystonePublicEndpoint = "https://id.example.com/v3"
				g.Spec.Region = "RegionTwo"
			},
			want: map[[2]string]string{
				{"keystone_authtoken", "www_authenticate_uri"}: "https://id.example.com/v3",
				{"keystone_authtoken", "auth_url"}:             "http://keystone.openstack.svc:5000/v3",
				{"keystone_authtoken", "region_name"}:          "RegionTwo",
			},
		},
		{
			name: "cache cluster",
			mutate: func(g *v1alpha1.Glance) {
				g.Spec.Cache = &v1alpha1.CacheSpec{ClusterRef: &v1alpha1.LocalObjectReference{Name: "memcached"}}
			},
			want: map[[2]string]string{
				{"keystone_authtoken", "memcached_servers"}: "memcached.openstack.svc:11211",
				{"cache", "enabled"}:                        "true",
				{"cache", "backend"}:                        "dogpile.cache.pymemcache",
				{"cache", "memcache_servers"}:               "memcached.openstack.svc:11211",
			},
		},
		{
			name: "cache servers and backend",
			mutate: func(g *v1alpha1.Glance) {
				g.Spec.Cache = &v1alpha1.CacheSpec{Servers: []string{"a:11211", "b:11212"}, Backend: "oslo_cache.memcache_pool"}
			},
			want: map[[2]string]string{
				{"keystone_authtoken", "memcached_servers"}: "a:11211,b:11212",
				{"cache", "backend"}:                        "oslo_cache.memcache_pool",
				{"cache", "memcache_servers"}:               "a:11211,b:11212",
			},
		},
		{
			name: "policy overrides",
			mutate: func(g *v1alpha1.Glance) {
				g.Spec.PolicyOverrides = &v1alpha1.PolicyOverridesSpec{ConfigMapRef: &v1alpha1.LocalObjectReference{Name: "p"}}
			},
			want: map[[2]string]string{{"oslo_policy", "policy_file"}: "/etc/glance/glance-api.conf.d/policy.yaml"},
		},
		{
			name: "plugins in list order with their config",
			mutate: func(g *v1alpha1.Glance) {
				g.Spec.Plugins = []v1alpha1.PluginSpec{
					{Name: "zeta", ConfigSection: "zeta_opts", Config: map[string]string{"b": "2", "a": "1"}},
					{Name: "alpha", ConfigSection: "alpha_opts"},
				}
			},
			want: map[[2]string]string{
				{"image_import_opts", "image_import_plugins"}: "[zeta,alpha]",
				{"zeta_opts", "a"}:                            "1",
				{"zeta_opts", "b"}:                            "2",
			},
		},
		{
			name: "extraConfig overrides and adds, verbatim",
			mutate: func(g *v1alpha1.Glance) {
				g.Spec.ExtraConfig = map[string]map[string]string{
					"keystone_authtoken": {"auth_type": "v3password"},
					"oslo_messaging":     {"transport_url": "$transport_url"},
				}
			},
			want: map[[2]string]string{
				{"keystone_authtoken", "auth_type"}: "v3password",
				{"oslo_messaging", "transport_url"}: "$transport_url",
			},
		},
		{
			name: "operator-rendered free text is read literally",
			mutate: func(g *v1alpha1.Glance) {
				g.Spec.ServiceUser.Username = "svc$glance"
				g.Spec.ServiceUser.ProjectName = " padded "
			},
			want: map[[2]string]string{
				{"keystone_authtoken", "username"}:     "svc$$glance",
				{"keystone_authtoken", "project_name"}: `" padded "`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := minimalGlance()
			if tt.mutate != nil {
				tt.mutate(g)
			}
			text, err := GlanceAPIConf(g, tt.facts)
			if err != nil {
				t.Fatal(err)
			}
			raw := mustParseINI(t, text, iniparse.ConfigParser) // configparser keeps quotes: the text as written
			for sk, want := range tt.want {
				got, ok := raw[sk[0]][sk[1]]
				switch {
				case want == absent && ok:
					t.Errorf("[%s] %s = %q, want it absent", sk[0], sk[1], got)
				case want != absent && (!ok || got != want):
					t.Errorf("[%s] %s = %q (present %v), want %q", sk[0], sk[1], got, ok, want)
				}
			}
		})
	}
}

func TestGlanceAPIConfSectionOrder(t *testing.T) {
	g := fullGlance()
	text, err := GlanceAPIConf(g, ConfigFacts{DefaultBackend: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var sections []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "[") {
			sections = append(sections, line)
		}
	}
	want := []string{
		"[DEFAULT]", "[keystone_authtoken]", "[paste_deploy]", "[glance_store]", "[os_glance_staging_store]",
		"[os_glance_tasks_store]", "[oslo_policy]", "[cache]", "[oslo_middleware]", "[image_import_opts]",
		"[image_conversion]", "[inject_metadata_properties]", "[oslo_messaging]", "[taskflow_executor]",
	}
	if strings.Join(sections, " ") != strings.Join(want, " ") {
		t.Errorf("sections\n%v\nwant\n%v", sections, want)
	}
	// An overridden key keeps its place.
	if !strings.Contains(text, "workers = 4\ndebug = false\nenabled_import_methods = [glance-direct,web-download]\nlog_config_append = /etc/glance/glance-api.conf.d/logging.conf\nshow_image_direct_url = true\nimage_size_cap = 1099511627776\n") {
		t.Errorf("extraConfig did not override [DEFAULT] show_image_direct_url in place:\n%s", text)
	}
}

func TestGlanceAPIConfErrors(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(g *v1alpha1.Glance)
		wantInErr string
	}{
		{"no keystone endpoint", func(g *v1alpha1.Glance) { g.Spec.KeystoneEndpoint = "" }, "keystoneEndpoint"},
		{"plugin name splits the list", func(g *v1alpha1.Glance) {
			g.Spec.Plugins = []v1alpha1.PluginSpec{{Name: "a,b", ConfigSection: "x"}}
		}, "plugins[0].name"},
		{"cache cluster without namespace", func(g *v1alpha1.Glance) {
			g.Namespace = ""
			g.Spec.Cache = &v1alpha1.CacheSpec{ClusterRef: &v1alpha1.LocalObjectReference{Name: "m"}}
		}, "namespace"},
		{"empty cache block", func(g *v1alpha1.Glance) { g.Spec.Cache = &v1alpha1.CacheSpec{} }, "clusterRef or servers"},
		{"unexpressible username", func(g *v1alpha1.Glance) { g.Spec.ServiceUser.Username = `a\$b` }, "username"},
		{"extraConfig line break", func(g *v1alpha1.Glance) {
			g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT": {"debug": "true\n[x]"}}
		}, `key "debug"`},
		{"extraConfig section injection", func(g *v1alpha1.Glance) {
			g.Spec.ExtraConfig = map[string]map[string]string{"x]\n[y": {"a": "b"}}
		}, "section name"},
		{"plugin config key", func(g *v1alpha1.Glance) {
			g.Spec.Plugins = []v1alpha1.PluginSpec{{Name: "p", ConfigSection: "p", Config: map[string]string{"a=b": "c"}}}
		}, `key "a=b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := minimalGlance()
			tt.mutate(g)
			_, err := GlanceAPIConf(g, ConfigFacts{})
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.wantInErr) {
				t.Errorf("error %q does not mention %q", err, tt.wantInErr)
			}
		})
	}
}

func TestConfigFiles(t *testing.T) {
	tests := []struct {
		name   string
		glance *v1alpha1.Glance
		want   []string
	}{
		{"minimal", minimalGlance(), []string{GlanceAPIConfKey, PasteINIKey}},
		{"full", fullGlance(), []string{GlanceAPIConfKey, PasteINIKey, PolicyYAMLKey, LoggingConfKey}},
		{"warning level needs logging.conf", func() *v1alpha1.Glance {
			g := minimalGlance()
			g.Spec.Logging = &v1alpha1.LoggingSpec{Level: "WARNING"}
			return g
		}(), []string{GlanceAPIConfKey, PasteINIKey, LoggingConfKey}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, err := ConfigFiles(tt.glance, ConfigFacts{})
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != len(tt.want) {
				t.Errorf("files %v, want %v", slices.Sorted(maps.Keys(files)), tt.want)
			}
			for _, k := range tt.want {
				if files[k] == "" {
					t.Errorf("%s missing", k)
				}
			}
		})
	}
	g := minimalGlance()
	g.Spec.Middleware = []v1alpha1.MiddlewareSpec{{Name: "cors", FilterFactory: "a:b"}}
	if _, err := ConfigFiles(g, ConfigFacts{}); err == nil || !strings.Contains(err.Error(), PasteINIKey) {
		t.Errorf("ConfigFiles error %v does not name %s", err, PasteINIKey)
	}
}
