package render

import (
	"strings"
	"testing"

	"github.com/c5c3/glance-operator/test/iniparse"
)

func TestINIOrderAndReplaceInPlace(t *testing.T) {
	f := NewINI()
	f.Set("b", "z", "1")
	f.Set("a", "y", "2")
	f.Set("b", "x", "3")
	f.Set("b", "z", "replaced")
	f.Section("empty")
	f.Section("a")
	f.Set("c", "empty", "")
	got, err := f.Render()
	if err != nil {
		t.Fatal(err)
	}
	want := "[b]\nz = replaced\nx = 3\n\n[a]\ny = 2\n\n[empty]\n\n[c]\nempty =\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if v, ok := f.Get("b", "z"); !ok || v != "replaced" {
		t.Errorf("Get(b, z) = %q, %v", v, ok)
	}
	if _, ok := f.Get("nope", "z"); ok {
		t.Error("Get of a missing section reported a value")
	}
}

func TestINIRenderRefuses(t *testing.T) {
	tests := []struct {
		name, section, key, value string
		wantInErr                 string
	}{
		{"empty section", "", "k", "v", `section name "" is empty`},
		{"LF in section", "a\nb", "k", "v", "control character U+000A"},
		{"CR in section", "a\rb", "k", "v", "control character U+000D"},
		{"open bracket in section", "a[b", "k", "v", "'[' or ']'"},
		{"close bracket in section", "a]b", "k", "v", "'[' or ']'"},
		{"leading space in section", " a", "k", "v", "whitespace"},
		{"trailing NBSP in section", "a\u00a0", "k", "v", "whitespace"},
		{"empty key", "s", "", "v", `key "" is empty`},
		{"equals in key", "s", "a=b", "v", "'='"},
		{"colon in key", "s", "a:b", "v", "':'"},
		{"open bracket in key", "s", "[a", "v", "'['"},
		{"close bracket in key", "s", "a]", "v", "']'"},
		{"hash key", "s", "#a", "v", "comment"},
		{"semicolon key", "s", ";a", "v", "comment"},
		{"leading space in key", "s", " a", "v", "whitespace"},
		{"leading tab in key", "s", "\ta", "v", "whitespace"},
		{"trailing space in key", "s", "a ", "v", "whitespace"},
		{"LF in key", "s", "a\nb", "v", "U+000A"},
		{"LF in value", "s", "k", "v\n[x]", "U+000A"},
		{"CR in value", "s", "k", "v\r", "U+000D"},
		{"tab in value", "s", "k", "a\tb", "U+0009"},
		{"NUL in value", "s", "k", "a\x00", "U+0000"},
		{"DEL in value", "s", "k", "a\x7f", "U+007F"},
		{"NEL in value", "s", "k", "a\u0085", "U+0085"},
		{"line separator in value", "s", "k", "a\u2028", "U+2028"},
		{"paragraph separator in value", "s", "k", "a\u2029", "U+2029"},
		{"invalid UTF-8 in value", "s", "k", "a\xff", "UTF-8"},
		{"right-to-left override in value", "s", "k", "admin\u202e", "bidirectional control character U+202E"},
		{"isolate in key", "s", "k\u2066", "v", "bidirectional control character U+2066"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewINI()
			f.Set("ok", "fine", "1")
			f.Set(tt.section, tt.key, tt.value)
			_, err := f.Render()
			if err == nil {
				t.Fatalf("Render accepted section %q key %q value %q", tt.section, tt.key, tt.value)
			}
			if !strings.Contains(err.Error(), tt.wantInErr) {
				t.Errorf("error %q does not mention %q", err, tt.wantInErr)
			}
		})
	}
}

func TestINIErrorNamesSectionAndKeyButNotValue(t *testing.T) {
	f := NewINI()
	f.Set("store", "s3_store_secret_key", "hunter2\nhunter2")
	_, err := f.Render()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"[store]", "s3_store_secret_key"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %q shows the value", err)
	}
}

func TestINIAccepts(t *testing.T) {
	tests := []struct{ name, section, key, value string }{
		{"empty value", "s", "k", ""},
		{"separators in value", "s", "k", "a = b : c"},
		{"comment characters in value", "s", "k", "#x ;y"},
		{"brackets in value", "s", "k", "[a,b]"},
		{"section with colon", "filter:cors", "paste.filter_factory", "x"},
		{"key with slash", "composite:x", "/healthcheck", "healthcheck"},
		{"key with inner space", "filter:x", "set foo", "bar"},
		{"unicode", "sektion", "schlüssel", "wert ü 値"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewINI()
			f.Set(tt.section, tt.key, tt.value)
			text, err := f.Render()
			if err != nil {
				t.Fatal(err)
			}
			got := mustParseINI(t, text, iniparse.Oslo)
			if got[tt.section][tt.key] != iniparse.OsloReads(tt.value) {
				t.Errorf("read back %q", got[tt.section][tt.key])
			}
		})
	}
}

func TestOsloLiteral(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"", ""},
		{"a$b", "a$$b"},
		{"$transport_url", "$$transport_url"},
		{" padded ", `" padded "`},
		{`"quoted"`, `""quoted""`},
		{`'single'`, `"'single'"`},
		{`"`, `"""`},
		{`"mixed'`, `"mixed'`},
		{"a\u00a0", "\"a\u00a0\""},
	}
	for _, tt := range tests {
		got, err := OsloLiteral(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("OsloLiteral(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			continue
		}
		// What oslo.config makes of it is the input again.
		f := NewINI()
		f.Set("s", "k", got)
		text, err := f.Render()
		if err != nil {
			t.Fatal(err)
		}
		read, err := iniparse.OsloSubstituted(mustParseINI(t, text, iniparse.Oslo)["s"]["k"])
		if err != nil || read != tt.in {
			t.Errorf("oslo.config reads %q (%v) back for %q", read, err, tt.in)
		}
	}
	if _, err := OsloLiteral(`a\$b`); err == nil {
		t.Error(`OsloLiteral accepted \$, which oslo.config cannot read literally`)
	}
}

func TestConfigParserLiteral(t *testing.T) {
	if got := configParserLiteral("100% of %(here)s"); got != "100%% of %%(here)s" {
		t.Errorf("got %q", got)
	}
}
