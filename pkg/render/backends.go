package render

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// Backend is one credential-ready GlanceBackend as backends.conf renders it.
type Backend struct {
	// Name is the GlanceBackend's name: the store id and its section.
	Name string
	Spec v1alpha1.GlanceBackendSpec
	// AccessKeyID and SecretAccessKey are read from the credentials Secret.
	AccessKeyID     string
	SecretAccessKey string
	// CABundle is the PEM read from s3.caBundleSecretRef; empty without one.
	CABundle string
}

// S3CABundleKey is the key of a backend's CA bundle in the backends Secret,
// a file beside backends.conf: oslo.config reads only the *.conf files of
// a --config-dir.
func S3CABundleKey(backend string) string { return backend + ".ca.crt" }

// BackendsSecretData is the backends Secret's content: BackendsConf, and
// the CA bundle of each backend that has one.
func BackendsSecretData(backends []Backend) (map[string]string, error) {
	conf, err := BackendsConf(backends)
	if err != nil {
		return nil, err
	}
	data := map[string]string{BackendsConfKey: conf}
	for _, b := range backends {
		if b.CABundle != "" {
			data[S3CABundleKey(b.Name)] = b.CABundle
		}
	}
	return data, nil
}

// CheckBackend reports why b cannot be rendered, or nil. The error never
// carries a credential. The caller skips a failing backend (with an event)
// and renders its siblings, so one bad backend never blocks the others.
func CheckBackend(b Backend) error {
	f := NewINI()
	if err := setBackend(f, b); err != nil {
		return err
	}
	_, err := f.Render()
	return err
}

// BackendsConf renders backends.conf for backends already sorted by name and
// each passing CheckBackend. The default store is not here but in
// glance-api.conf (ConfigFacts.DefaultBackend), so moving the default leaves
// this file, and the Secret that holds it, unchanged.
func BackendsConf(backends []Backend) (string, error) {
	f := NewINI()
	enabled := make([]string, 0, len(backends))
	seen := map[string]bool{}
	for _, b := range backends {
		if seen[b.Name] {
			return "", fmt.Errorf("backend %q is listed twice", b.Name)
		}
		seen[b.Name] = true
		enabled = append(enabled, b.Name+":"+storeType(b.Spec.Type))
	}
	f.Set("DEFAULT", "enabled_backends", strings.Join(enabled, ","))
	for _, b := range backends {
		if err := setBackend(f, b); err != nil {
			return "", err
		}
	}
	return f.Render()
}

// storeType is the glance_store driver name of a backend type.
func storeType(t v1alpha1.BackendType) string {
	return strings.ToLower(string(t))
}

func setBackend(f *INI, b Backend) error {
	// The name is an object name, which holds none of enabled_backends'
	// separators (',' and ':'), and the CRD refuses Glance's own section
	// names.
	name := b.Name
	switch {
	case b.Spec.Type != v1alpha1.BackendTypeS3:
		return fmt.Errorf("backend %q: type %q is not supported", name, b.Spec.Type)
	case b.Spec.S3 == nil:
		return fmt.Errorf("backend %q: type S3 needs the s3 block", name)
	}
	s3 := b.Spec.S3
	w := &osloWriter{f: f}
	w.literal(name, "store_description", "S3 image store "+name)
	w.literal(name, "s3_store_host", s3.Host)
	w.literal(name, "s3_store_access_key", b.AccessKeyID)
	w.literal(name, "s3_store_secret_key", b.SecretAccessKey)
	w.literal(name, "s3_store_bucket", s3.Bucket)
	w.literal(name, "s3_store_bucket_url_format", cmp.Or(string(s3.BucketURLFormat), string(v1alpha1.DefaultBucketURLFormat)))
	f.Set(name, "s3_store_create_bucket_on_put", strconv.FormatBool(s3.CreateBucketOnPut))
	if s3.Region != "" {
		w.literal(name, "s3_store_region_name", s3.Region)
	}
	// boto3 verifies the host's certificate against this bundle alone.
	if b.CABundle != "" {
		w.literal(name, "s3_store_cacert", BackendsDir+S3CABundleKey(name))
	}
	// glance_store takes both sizes in MB.
	if s3.LargeObjectSize != nil {
		f.Set(name, "s3_store_large_object_size", strconv.Itoa(int(*s3.LargeObjectSize)))
	}
	if s3.LargeObjectChunkSize != nil {
		f.Set(name, "s3_store_large_object_chunk_size", strconv.Itoa(int(*s3.LargeObjectChunkSize)))
	}
	if w.err != nil {
		return fmt.Errorf("backend %q: %w", name, w.err)
	}
	// extraOptions are oslo.config options the user writes: verbatim. The
	// ones the operator renders stay the operator's (admission refuses them).
	for _, k := range slices.Sorted(maps.Keys(b.Spec.ExtraOptions)) {
		if IsOperatorStoreOption(k) {
			return fmt.Errorf("backend %q: extraOptions key %q is rendered by the operator", name, k)
		}
		f.Set(name, k, string(b.Spec.ExtraOptions[k]))
	}
	return nil
}

// IsOperatorStoreOption reports whether the operator renders the option key
// into every store section itself, from spec.s3.
func IsOperatorStoreOption(key string) bool {
	k := strings.ToLower(key)
	return strings.HasPrefix(k, "s3_store_") || k == "store_description"
}

// BackendHosts returns the s3.host of every store a rendered backends.conf
// configures: what the pods mounting it can reach. It reads only what
// BackendsConf writes.
func BackendHosts(conf string) []string {
	var hosts []string
	for _, line := range strings.Split(conf, "\n") {
		key, value, ok := strings.Cut(line, " = ")
		if !ok || key != "s3_store_host" {
			continue
		}
		// OsloLiteral's escaping, undone: one pair of quotes, and $$.
		if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
			value = value[1 : len(value)-1]
		}
		hosts = append(hosts, strings.ReplaceAll(value, "$$", "$"))
	}
	return hosts
}
