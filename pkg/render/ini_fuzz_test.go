package render

import (
	"reflect"
	"strings"
	"testing"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/iniparse"
)

// FuzzINI checks the one promise of the INI writer and of every builder that
// puts user input into INI: rendering either fails, or a parser reads back
// exactly the sections and keys that were set — nothing injected, nothing
// merged, nothing cut off — with the value oslo.config gives a verbatim
// `key = value` line. It covers the writer itself and the three ways user
// input reaches INI: spec.extraConfig (section/key/value), GlanceBackend
// extraOptions (key/value in the store's section) and plugin config
// (section/key/value), plus S3 credentials, which must be read literally.
func FuzzINI(f *testing.F) {
	seeds := [][3]string{
		{"DEFAULT", "debug", "true"},
		{"oslo_messaging", "transport_url", "rabbit://u:p@h:5672/"},
		{"s", "k", ""},
		{"s", "k", "v\n[injected]\nx = y"},
		{"s", "k", "v\r[injected]"},
		{"s\n[x]", "k", "v"},
		{"s]", "k", "v"},
		{"[s", "k", "v"},
		{"", "k", "v"},
		{"s", "", "v"},
		{"s", "k=v", "x"},
		{"s", "k:v", "x"},
		{"s", "[k]", "x"},
		{"s", "#k", "x"},
		{"s", ";k", "x"},
		{"s", " k", "x"},
		{"s", "k ", "x"},
		{" s", "k", "x"},
		{"s", "k", "  padded  "},
		{"s", "k", `"quoted"`},
		{"s", "k", `'`},
		{"s", "k", "a # not a comment ; either"},
		{"s", "k", "x = y : z"},
		{"s", "k", "$foo ${bar} $$ \\$"},
		{"s", "k", "100%"},
		{"s", "k", "tab\there"},
		{"s", "k", "nul\x00"},
		{"s", "k", "nel\u0085"},
		{"s", "k", "ls\u2028"},
		{"s", "k", "\xff\xfe"},
		{"s", "k", "\u00a0nbsp\u00a0"},
		{"sekt\u00edon", "ключ", "値"},
		{"DEFAULT", "enabled_backends", "evil:s3"},
		{"keystone_authtoken", "auth_url", "http://evil/"},
		{"glance_store", "default_backend", "other"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2])
	}
	base := baseConfigs(f)
	f.Fuzz(func(t *testing.T, section, key, value string) {
		checkWriterRoundTrip(t, section, key, value)
		checkExtraConfigRoundTrip(t, base, section, key, value)
		checkPluginConfigRoundTrip(t, base, section, key, value)
		checkExtraOptionRoundTrip(t, base, key, value)
		checkCredentialLiteral(t, base, value)
	})
}

// fuzzBase holds the parsed renders the fuzzed inputs are compared against.
type fuzzBase struct {
	conf       iniparse.File // glance-api.conf of fuzzGlance
	pluginConf iniparse.File // the same with one plugin without config
	backends   iniparse.File // backends.conf of the sibling and the fuzzed backend without extraOptions
}

func fuzzGlance() *v1alpha1.Glance {
	g := fullGlance()
	g.Spec.ExtraConfig = nil
	g.Spec.Plugins = nil
	return g
}

func fuzzPlugin(section string, config map[string]string) []v1alpha1.PluginSpec {
	return []v1alpha1.PluginSpec{{Name: "fuzz_plugin", ConfigSection: section, Config: config}}
}

func baseConfigs(tb testing.TB) fuzzBase {
	conf, err := GlanceAPIConf(fuzzGlance(), ConfigFacts{DefaultBackend: "primary"})
	if err != nil {
		tb.Fatal(err)
	}
	g := fuzzGlance()
	g.Spec.Plugins = fuzzPlugin("fuzz_section", nil)
	pluginConf, err := GlanceAPIConf(g, ConfigFacts{DefaultBackend: "primary"})
	if err != nil {
		tb.Fatal(err)
	}
	backends, err := BackendsConf([]Backend{s3Backend("fuzz", false), s3Backend("primary", true)})
	if err != nil {
		tb.Fatal(err)
	}
	return fuzzBase{
		conf:       mustParseINI(tb, conf, iniparse.Oslo),
		pluginConf: mustParseINI(tb, pluginConf, iniparse.Oslo),
		backends:   mustParseINI(tb, backends, iniparse.Oslo),
	}
}

// checkWriterRoundTrip surrounds the fuzzed entry with fixed ones and reads
// the file back with both parsers.
func checkWriterRoundTrip(t *testing.T, section, key, value string) {
	f := NewINI()
	f.Set("before", "a", "1")
	f.Set(section, key, value)
	f.Set("after", "z", "2")
	text, err := f.Render()
	if err != nil {
		return
	}
	for _, d := range []iniparse.Dialect{iniparse.Oslo, iniparse.ConfigParser} {
		want := iniparse.File{}
		want.Set("before", "a", "1")
		if d == iniparse.Oslo {
			want.Set(section, key, iniparse.OsloReads(value))
		} else {
			want.Set(section, key, strings.TrimFunc(value, iniparse.IsSpace))
		}
		want.Set("after", "z", "2")
		got, err := iniparse.Parse(text, d)
		if err != nil {
			t.Fatalf("%v: rendered file does not parse: %v\n%s", d, err, text)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%v: read back %#v\nwant %#v\nfile:\n%s", d, got, want, text)
		}
	}
}

func checkExtraConfigRoundTrip(t *testing.T, base fuzzBase, section, key, value string) {
	g := fuzzGlance()
	g.Spec.ExtraConfig = map[string]map[string]string{section: {key: value}}
	text, err := GlanceAPIConf(g, ConfigFacts{DefaultBackend: "primary"})
	if err != nil {
		return
	}
	want := base.conf.Clone()
	want.Set(section, key, iniparse.OsloReads(value))
	expectParsed(t, "extraConfig", text, want)
}

func checkPluginConfigRoundTrip(t *testing.T, base fuzzBase, section, key, value string) {
	g := fuzzGlance()
	g.Spec.Plugins = fuzzPlugin(section, map[string]string{key: value})
	text, err := GlanceAPIConf(g, ConfigFacts{DefaultBackend: "primary"})
	if err != nil {
		return
	}
	want := base.conf.Clone()
	for s, kv := range base.pluginConf {
		for k, v := range kv {
			want.Set(s, k, v)
		}
	}
	want.Set(section, key, iniparse.OsloReads(value))
	expectParsed(t, "plugin config", text, want)
}

func checkExtraOptionRoundTrip(t *testing.T, base fuzzBase, key, value string) {
	b := s3Backend("fuzz", false)
	b.Spec.ExtraOptions = map[string]v1alpha1.OptionValue{key: v1alpha1.OptionValue(value)}
	if CheckBackend(b) != nil {
		return
	}
	text, err := BackendsConf([]Backend{b, s3Backend("primary", true)})
	if err != nil {
		t.Fatalf("CheckBackend passed but BackendsConf failed: %v", err)
	}
	want := base.backends.Clone()
	want.Set("fuzz", key, iniparse.OsloReads(value))
	expectParsed(t, "extraOptions", text, want)
}

// checkCredentialLiteral puts the fuzzed value in both S3 credentials: they
// must either be refused, without the value showing in the error, or reach
// glance_store exactly, after oslo.config's unquoting and substitution.
func checkCredentialLiteral(t *testing.T, base fuzzBase, value string) {
	b := s3Backend("fuzz", false)
	b.AccessKeyID, b.SecretAccessKey = value, value
	if err := CheckBackend(b); err != nil {
		if len(value) >= 6 && strings.Contains(err.Error(), value) {
			t.Fatalf("CheckBackend error reveals the credential: %v", err)
		}
		return
	}
	text, err := BackendsConf([]Backend{b, s3Backend("primary", true)})
	if err != nil {
		t.Fatalf("CheckBackend passed but BackendsConf failed: %v", err)
	}
	got := mustParseINI(t, text, iniparse.Oslo)
	for _, k := range []string{"s3_store_access_key", "s3_store_secret_key"} {
		v, err := iniparse.OsloSubstituted(got["fuzz"][k])
		if err != nil || v != value {
			t.Fatalf("%s reads back as %q (%v), want %q\nfile:\n%s", k, v, err, value, text)
		}
	}
	want := base.backends.Clone()
	want["fuzz"]["s3_store_access_key"] = got["fuzz"]["s3_store_access_key"]
	want["fuzz"]["s3_store_secret_key"] = got["fuzz"]["s3_store_secret_key"]
	expectParsed(t, "credentials", text, want)
}

func expectParsed(t *testing.T, what, text string, want iniparse.File) {
	t.Helper()
	got, err := iniparse.Parse(text, iniparse.Oslo)
	if err != nil {
		t.Fatalf("%s: rendered file does not parse: %v\n%s", what, err, text)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: read back\n%#v\nwant\n%#v\nfile:\n%s", what, got, want, text)
	}
}
