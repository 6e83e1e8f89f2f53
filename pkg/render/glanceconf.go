package render

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/release"
)

// ConfigFacts are what the config needs beyond the spec, resolved by the
// reconciler from other objects.
type ConfigFacts struct {
	// DefaultBackend is the name of the one ready default GlanceBackend, or
	// empty when none is known. It lives in glance-api.conf rather than
	// backends.conf so that moving the default rolls the ConfigMap and leaves
	// the backends Secret (and every store section in it) unchanged.
	DefaultBackend string
	// PolicyRules are the rules read from policyOverrides.configMapRef; the
	// spec's own rules win over them.
	PolicyRules map[string]string
	// StoreCount is how many stores the backends Secret configures; from
	// two on, images can be copied between them (copy-image).
	StoreCount int
}

// Values glance-api.conf always carries.
const (
	// ImageCacheDriver is the image cache's metadata driver.
	ImageCacheDriver = "sqlite"
	// GlanceDirectMethod is the import method that imports data staged
	// through the API.
	GlanceDirectMethod = "glance-direct"
	// CopyImageMethod is the import method that copies an active image's
	// data to other stores.
	CopyImageMethod = "copy-image"
	// MemcachedPort is the port of a memcached cluster named by
	// cache.clusterRef.
	MemcachedPort = 11211
)

// ConfigFiles renders the data of the config ConfigMap: glance-api.conf and
// glance-api-paste.ini, plus policy.yaml and logging.conf when the spec asks
// for them, and with spec.imageCache the cache-maintenance sidecar's script.
func ConfigFiles(g *v1alpha1.Glance, facts ConfigFacts) (map[string]string, error) {
	conf, err := GlanceAPIConf(g, facts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", GlanceAPIConfKey, err)
	}
	paste, err := PasteINI(&g.Spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", PasteINIKey, err)
	}
	files := map[string]string{GlanceAPIConfKey: conf, PasteINIKey: paste}
	if RendersPolicyYAML(&g.Spec) {
		policy, err := PolicyYAML(&g.Spec, facts.PolicyRules)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", PolicyYAMLKey, err)
		}
		files[PolicyYAMLKey] = policy
	}
	if RendersLoggingConf(&g.Spec) {
		logging, err := LoggingConf(&g.Spec)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", LoggingConfKey, err)
		}
		files[LoggingConfKey] = logging
	}
	if g.Spec.ImageCache != nil {
		script, err := CacheMaintenanceScript(g)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", CacheMaintenanceScriptKey, err)
		}
		files[CacheMaintenanceScriptKey] = script
	}
	return files, nil
}

// GlanceAPIConf renders glance-api.conf. Secrets are not in it: the DSN and
// the service user's password reach oslo.config through the environment
// (OS_DATABASE__CONNECTION, OS_KEYSTONE_AUTHTOKEN__PASSWORD).
func GlanceAPIConf(g *v1alpha1.Glance, facts ConfigFacts) (string, error) {
	f, err := glanceAPIConf(g, facts)
	if err != nil {
		return "", err
	}
	return f.Render()
}

func glanceAPIConf(g *v1alpha1.Glance, facts ConfigFacts) (*INI, error) {
	s := &g.Spec
	f := NewINI()
	w := &osloWriter{f: f}

	const def = "DEFAULT"
	f.Set(def, "bind_host", "0.0.0.0")
	f.Set(def, "bind_port", strconv.Itoa(v1alpha1.APIPort))
	// Under uWSGI the process and thread counts come from the command line.
	if release.LaunchModeOf(s.OpenStackRelease) == release.Eventlet && s.APIServer != nil && s.APIServer.Workers != nil {
		f.Set(def, "workers", strconv.Itoa(int(*s.APIServer.Workers)))
	}
	f.Set(def, "debug", strconv.FormatBool(resolveLogging(s).debug))
	if c := s.ImageCache; c != nil {
		f.Set(def, "image_cache_dir", ImageCacheDir)
		f.Set(def, "image_cache_driver", ImageCacheDriver)
		f.Set(def, "image_cache_max_size", strconv.FormatInt(ImageCacheMaxSize(c.Size), 10))
	}
	// oslo.config reads a bracketed list: the brackets are needed.
	f.Set(def, "enabled_import_methods", "["+strings.Join(ImportMethods(s, facts.StoreCount), ",")+"]")
	if RendersLoggingConf(s) {
		f.Set(def, "log_config_append", LoggingConfPath)
	}
	f.Set(def, "show_image_direct_url", "false")

	if s.KeystoneEndpoint == "" {
		return nil, fmt.Errorf("spec.keystoneEndpoint is empty")
	}
	const ka = "keystone_authtoken"
	w.literal(ka, "www_authenticate_uri", cmp.Or(s.KeystonePublicEndpoint, s.KeystoneEndpoint))
	w.literal(ka, "auth_url", s.KeystoneEndpoint)
	f.Set(ka, "auth_type", "password")
	u := s.ServiceUser
	w.literal(ka, "username", cmp.Or(u.Username, v1alpha1.DefaultServiceUsername))
	w.literal(ka, "project_name", cmp.Or(u.ProjectName, v1alpha1.DefaultServiceProjectName))
	w.literal(ka, "user_domain_name", cmp.Or(u.UserDomainName, v1alpha1.DefaultServiceUserDomainName))
	w.literal(ka, "project_domain_name", cmp.Or(u.ProjectDomainName, v1alpha1.DefaultServiceProjectDomainName))
	if s.Region != "" {
		w.literal(ka, "region_name", s.Region)
	}
	servers, err := memcachedServers(g)
	if err != nil {
		return nil, err
	}
	if servers != "" {
		w.literal(ka, "memcached_servers", servers)
	}
	f.Set(ka, "service_token_roles_required", "true")

	f.Set("paste_deploy", "flavor", "keystone")
	f.Set("paste_deploy", "config_file", PasteINIPath)

	if facts.DefaultBackend != "" {
		w.literal("glance_store", "default_backend", facts.DefaultBackend)
	}
	if s.WebDownload != nil {
		if err := webDownloadFilter(f, s.WebDownload); err != nil {
			return nil, err
		}
	}
	f.Set("os_glance_staging_store", "filesystem_store_datadir", StagingDir)
	f.Set("os_glance_tasks_store", "filesystem_store_datadir", TasksWorkDir)

	if RendersPolicyYAML(s) {
		f.Set("oslo_policy", "policy_file", PolicyYAMLPath)
	}
	if s.Cache != nil {
		f.Set("cache", "enabled", "true")
		w.literal("cache", "backend", cmp.Or(s.Cache.Backend, v1alpha1.DefaultCacheBackend))
		if servers != "" {
			w.literal("cache", "memcache_servers", servers)
		}
	}
	f.Set("oslo_middleware", "enable_proxy_headers_parsing", "true")
	if w.err != nil {
		return nil, w.err
	}

	if len(s.Plugins) > 0 {
		names := make([]string, 0, len(s.Plugins))
		for i, p := range s.Plugins {
			// The list is parsed by oslo.config's bracketed List type: a
			// ',', bracket, quote or space in a name would split or bend it.
			if !pluginNamePattern.MatchString(p.Name) {
				return nil, fmt.Errorf("spec.plugins[%d].name %q must be letters, digits and '_'", i, p.Name)
			}
			names = append(names, p.Name)
		}
		f.Set("image_import_opts", "image_import_plugins", "["+strings.Join(names, ",")+"]")
		for _, p := range s.Plugins {
			for _, k := range slices.Sorted(maps.Keys(p.Config)) {
				f.Set(p.ConfigSection, k, p.Config[k])
			}
		}
	}

	// extraConfig goes last so that it overrides whatever the operator
	// rendered; its values are written verbatim (oslo.config semantics).
	for _, section := range slices.Sorted(maps.Keys(s.ExtraConfig)) {
		for _, k := range slices.Sorted(maps.Keys(s.ExtraConfig[section])) {
			f.Set(section, k, s.ExtraConfig[section][k])
		}
	}
	return f, nil
}

// ImportMethods are the import methods the Glance offers with stores
// stores: copy-image once there is a second store to copy to.
func ImportMethods(s *v1alpha1.GlanceSpec, stores int) []string {
	methods := []string{GlanceDirectMethod}
	if WebDownloadOffered(s) {
		methods = append(methods, WebDownloadMethod)
	}
	if stores >= 2 {
		methods = append(methods, CopyImageMethod)
	}
	return methods
}

var pluginNamePattern = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// memcachedServers is the comma-separated server list of spec.cache, or empty
// without a cache.
func memcachedServers(g *v1alpha1.Glance) (string, error) {
	c := g.Spec.Cache
	switch {
	case c == nil:
		return "", nil
	case c.ClusterRef != nil:
		if g.Namespace == "" {
			return "", fmt.Errorf("spec.cache.clusterRef needs the Glance's namespace to address %s", c.ClusterRef.Name)
		}
		return fmt.Sprintf("%s.%s.svc:%d", c.ClusterRef.Name, g.Namespace, MemcachedPort), nil
	case len(c.Servers) > 0:
		return strings.Join(c.Servers, ","), nil
	default:
		return "", fmt.Errorf("spec.cache needs clusterRef or servers")
	}
}

// RendersPolicyYAML reports whether the config carries policy.yaml.
func RendersPolicyYAML(s *v1alpha1.GlanceSpec) bool {
	return s.PolicyOverrides != nil
}

// osloWriter sets operator-derived values so that oslo.config reads them
// literally, remembering the first value that cannot be.
type osloWriter struct {
	f   *INI
	err error
}

func (w *osloWriter) literal(section, key, value string) {
	v, err := OsloLiteral(value)
	if err != nil {
		if w.err == nil {
			// The value itself stays out of the message: it may be a secret.
			w.err = fmt.Errorf("section [%s] key %q: value %w", section, key, err)
		}
		return
	}
	w.f.Set(section, key, v)
}
