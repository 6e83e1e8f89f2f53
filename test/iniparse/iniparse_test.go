package iniparse

import (
	"reflect"
	"testing"
)

func mustParse(t *testing.T, text string, d Dialect) File {
	t.Helper()
	f, err := Parse(text, d)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, text)
	}
	return f
}

func TestParseINIImitatesOslo(t *testing.T) {
	text := "[DEFAULT]\n" +
		"a = 1\n" +
		"b: 2\n" +
		"c = x = y\n" +
		"d : x = y\n" +
		"# comment = no\n" +
		"; comment: no\n" +
		"e = \"quoted\"\n" +
		"f = 'half\"\n" +
		"g = first\n" +
		"  second\n" +
		"\tthird\n" +
		"\n" +
		"[s p]\n" +
		"h =\n"
	got := mustParse(t, text, Oslo)
	want := File{
		"DEFAULT": {"a": "1", "b": "2", "c": "x = y", "d": "x = y", "e": "quoted", "f": "'half\"", "g": "first\nsecond\nthird"},
		"s p":     {"h": ""},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v\nwant %#v", got, want)
	}
	cp := mustParse(t, text, ConfigParser)
	if cp["DEFAULT"]["e"] != `"quoted"` {
		t.Errorf("configparser keeps quotes, got %q", cp["DEFAULT"]["e"])
	}

	for name, bad := range map[string]string{
		"continuation first":  "[s]\n x = 1\n",
		"no separator":        "[s]\nx\n",
		"empty key":           "[s]\n= 1\n",
		"unterminated header": "[s\n",
		"empty section":       "[]\n",
		"outside section":     "x = 1\n",
		"repeated section":    "[s]\n[s]\n",
		"repeated key":        "[s]\nx = 1\nx = 2\n",
	} {
		if _, err := Parse(bad, Oslo); err == nil {
			t.Errorf("%s: parsed %q without error", name, bad)
		}
	}
}

func TestOsloSubstituted(t *testing.T) {
	for in, want := range map[string]string{"a$$b": "a$b", `a\$b`: "a$b", "plain": "plain"} {
		got, err := OsloSubstituted(in)
		if err != nil || got != want {
			t.Errorf("OsloSubstituted(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := OsloSubstituted("$foo"); err == nil {
		t.Error("OsloSubstituted($foo) did not report the substitution")
	}
}
