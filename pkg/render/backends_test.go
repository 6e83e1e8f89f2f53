package render

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/iniparse"
)

func TestBackendsConf(t *testing.T) {
	a := s3Backend("alpha", true)
	b := s3Backend("beta", false)
	b.Spec.S3.Region = "us-east-1"
	b.Spec.S3.BucketURLFormat = v1alpha1.BucketURLFormatVirtual
	b.Spec.S3.CreateBucketOnPut = true
	b.Spec.S3.LargeObjectSize = ptr.To[int32](100)
	b.Spec.S3.LargeObjectChunkSize = ptr.To[int32](10)
	b.Spec.ExtraOptions = map[string]v1alpha1.OptionValue{"z_opt": "$verbatim", "a_opt": "1"}
	b.SecretAccessKey = `"$pecial" `

	text, err := BackendsConf([]Backend{a, b})
	if err != nil {
		t.Fatal(err)
	}
	p := mustParseINI(t, text, iniparse.Oslo)
	if got := p["DEFAULT"]["enabled_backends"]; got != "alpha:s3,beta:s3" {
		t.Errorf("enabled_backends = %q", got)
	}
	if _, ok := p["glance_store"]; ok {
		t.Error("backends.conf carries [glance_store]; the default belongs in glance-api.conf")
	}
	wantAlpha := map[string]string{
		"store_description":             "S3 image store alpha",
		"s3_store_host":                 "https://s3.example.com",
		"s3_store_access_key":           "AKIAalpha",
		"s3_store_secret_key":           "secret/alpha+key",
		"s3_store_bucket":               "glance-alpha",
		"s3_store_bucket_url_format":    "path",
		"s3_store_create_bucket_on_put": "false",
	}
	if !mapsEqual(p["alpha"], wantAlpha) {
		t.Errorf("[alpha] = %v\nwant %v", p["alpha"], wantAlpha)
	}
	wantBeta := map[string]string{
		"s3_store_bucket_url_format":       "virtual",
		"s3_store_create_bucket_on_put":    "true",
		"s3_store_region_name":             "us-east-1",
		"s3_store_large_object_size":       "100",
		"s3_store_large_object_chunk_size": "10",
		"a_opt":                            "1",
		"z_opt":                            "$verbatim",
	}
	for k, v := range wantBeta {
		if p["beta"][k] != v {
			t.Errorf("[beta] %s = %q, want %q", k, p["beta"][k], v)
		}
	}
	if got, err := iniparse.OsloSubstituted(p["beta"]["s3_store_secret_key"]); err != nil || got != b.SecretAccessKey {
		t.Errorf("secret key reads back as %q (%v), want %q", got, err, b.SecretAccessKey)
	}
	// Extra options follow the operator's keys, sorted.
	if !strings.Contains(text, "s3_store_large_object_chunk_size = 10\na_opt = 1\nz_opt = $verbatim\n") {
		t.Errorf("extra options not last and sorted:\n%s", text)
	}
	// The section header is a whole line, which is what ConfigProjected looks for.
	if !strings.Contains(text, "\n[beta]\n") {
		t.Errorf("no [beta] line:\n%s", text)
	}
}

func TestBackendsConfIgnoresIsDefault(t *testing.T) {
	a, b := s3Backend("a", true), s3Backend("b", false)
	before, err := BackendsConf([]Backend{a, b})
	if err != nil {
		t.Fatal(err)
	}
	a.Spec.IsDefault, b.Spec.IsDefault = false, true
	after, err := BackendsConf([]Backend{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if before != after {
		t.Error("moving the default changed backends.conf")
	}
}

func TestCheckBackend(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(b *Backend)
		wantInErr string // empty: no error
	}{
		{"fine", func(*Backend) {}, ""},
		{"dollar and quotes in credentials are escaped", func(b *Backend) { b.SecretAccessKey = `'$x'` }, ""},
		{"line break in secret", func(b *Backend) { b.SecretAccessKey = "abc\ndef" }, "s3_store_secret_key"},
		{"tab in access key", func(b *Backend) { b.AccessKeyID = "ab\tc" }, "s3_store_access_key"},
		{"backslash-dollar in secret", func(b *Backend) { b.SecretAccessKey = `a\$b` }, "s3_store_secret_key"},
		{"control character in host", func(b *Backend) { b.Spec.S3.Host = "https://h\x00" }, "s3_store_host"},
		{"line break in extra option", func(b *Backend) {
			b.Spec.ExtraOptions = map[string]v1alpha1.OptionValue{"k": "v\n[other]"}
		}, `key "k"`},
		{"bad extra option key", func(b *Backend) {
			b.Spec.ExtraOptions = map[string]v1alpha1.OptionValue{"a=b": "v"}
		}, `key "a=b"`},
		{"extra option shadows an operator key", func(b *Backend) {
			b.Spec.ExtraOptions = map[string]v1alpha1.OptionValue{"S3_store_secret_key": "v"}
		}, "rendered by the operator"},
		{"no s3 block", func(b *Backend) { b.Spec.S3 = nil }, "s3 block"},
		{"unknown type", func(b *Backend) { b.Spec.Type = "Swift" }, "not supported"},
		{"name with line break", func(b *Backend) { b.Name = "a\nb" }, "section name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := s3Backend("store", false)
			tt.mutate(&b)
			err := CheckBackend(b)
			switch {
			case tt.wantInErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantInErr == "":
				return
			case err == nil:
				t.Fatal("no error")
			case !strings.Contains(err.Error(), tt.wantInErr):
				t.Errorf("error %q does not mention %q", err, tt.wantInErr)
			}
			for _, secret := range []string{b.SecretAccessKey, b.AccessKeyID} {
				if len(secret) > 3 && strings.Contains(err.Error(), secret) {
					t.Errorf("error %q reveals a credential", err)
				}
			}
			// BackendsConf agrees: the bad backend fails it too, the
			// sibling alone renders.
			if _, err := BackendsConf([]Backend{s3Backend("ok", true), b}); err == nil {
				t.Error("BackendsConf rendered a backend CheckBackend refuses")
			}
			if _, err := BackendsConf([]Backend{s3Backend("ok", true)}); err != nil {
				t.Errorf("sibling alone: %v", err)
			}
		})
	}
}

func TestBackendsConfDuplicate(t *testing.T) {
	if _, err := BackendsConf([]Backend{s3Backend("a", true), s3Backend("a", false)}); err == nil {
		t.Error("duplicate backend rendered")
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestBackendHostsReadsWhatBackendsConfWrites(t *testing.T) {
	var backends []Backend
	want := []string{"http://s3.example.com:9000", "https://objects.example.org/$path"}
	for i, host := range want {
		backends = append(backends, Backend{
			Name:        fmt.Sprintf("store%d", i),
			Spec:        v1alpha1.GlanceBackendSpec{Type: v1alpha1.BackendTypeS3, IsDefault: i == 0, S3: &v1alpha1.S3BackendSpec{Host: host, Bucket: "images"}},
			AccessKeyID: "ak", SecretAccessKey: "s3_store_host = http://not-a-host:1",
		})
	}
	conf, err := BackendsConf(backends)
	if err != nil {
		t.Fatal(err)
	}
	if got := BackendHosts(conf); !slices.Equal(got, want) {
		t.Errorf("BackendHosts = %q, want %q\n%s", got, want, conf)
	}
}

// A backend with a CA bundle gets a file of it beside backends.conf, which
// oslo.config does not read as config (not *.conf), and its section points
// s3_store_cacert at that file where the pods mount the Secret; a backend
// without one keeps boto3's bundle.
func TestBackendsSecretDataCABundle(t *testing.T) {
	a := s3Backend("alpha", true)
	a.CABundle = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	b := s3Backend("beta", false)
	data, err := BackendsSecretData([]Backend{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 2 || data[S3CABundleKey("alpha")] != a.CABundle {
		t.Errorf("data keys %v, want backends.conf and %s holding alpha's bundle", slices.Sorted(maps.Keys(data)), S3CABundleKey("alpha"))
	}
	if strings.HasSuffix(S3CABundleKey("alpha"), ".conf") {
		t.Errorf("%s would be read as config from the --config-dir", S3CABundleKey("alpha"))
	}
	p := mustParseINI(t, data[BackendsConfKey], iniparse.Oslo)
	if got, want := p["alpha"]["s3_store_cacert"], BackendsDir+"alpha.ca.crt"; got != want {
		t.Errorf("[alpha] s3_store_cacert = %q, want %q", got, want)
	}
	if got, ok := p["beta"]["s3_store_cacert"]; ok {
		t.Errorf("[beta] s3_store_cacert = %q, want none (boto3's own bundle)", got)
	}
}
