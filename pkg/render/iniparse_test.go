package render

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// parsedINI is what a parser read: section -> key -> value.
type parsedINI map[string]map[string]string

// iniDialect selects which reader parseINI imitates.
type iniDialect int

const (
	// osloDialect is oslo.config's iniparser: '=' or ':' ends the key,
	// a line starting with ' ' or '\t' continues the previous value, '#' and
	// ';' start comment lines, keys and values are trimmed, and one pair of
	// matching quotes around a value is removed.
	osloDialect iniDialect = iota
	// configParserDialect is Python's configparser as paste.deploy and
	// logging.config use it: the same, but quotes are kept, a line indented
	// deeper than its key continues the value, and comments are recognised
	// after leading whitespace.
	configParserDialect
)

// parseINI reads an INI file the way the dialect's Python parser does, with
// configparser's strictness on top for both: a repeated section header or a
// repeated key is an error (oslo.config would merge them, configparser
// refuses the file), so a file that passes is read identically by both.
func parseINI(text string, dialect iniDialect) (parsedINI, error) {
	out := parsedINI{}
	var section, key string
	var value []string
	keyIndent := 0
	seenSection := map[string]bool{}
	flush := func() {
		if key != "" {
			out[section][key] = strings.Join(value, "\n")
		}
		key, value = "", nil
	}
	// Python iterates a text file on universal newlines: \n, \r and \r\n.
	lines := strings.Split(strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n"), "\n")
	if strings.HasSuffix(text, "\n") || strings.HasSuffix(text, "\r") {
		lines = lines[:len(lines)-1]
	}
	for n, raw := range lines {
		lineno := n + 1
		line := strings.TrimRightFunc(raw, isPythonSpace)
		if line == "" {
			flush()
			continue
		}
		indent := len(raw) - len(strings.TrimLeftFunc(raw, isPythonSpace))
		isContinuation := false
		switch dialect {
		case osloDialect:
			isContinuation = line[0] == ' ' || line[0] == '\t'
		case configParserDialect:
			isContinuation = key != "" && indent > keyIndent
		}
		if isContinuation {
			if key == "" {
				return nil, fmt.Errorf("line %d: unexpected continuation", lineno)
			}
			value = append(value, strings.TrimLeftFunc(line, isPythonSpace))
			continue
		}
		flush()
		stripped := line
		if dialect == configParserDialect {
			stripped = strings.TrimLeftFunc(line, isPythonSpace)
		}
		switch {
		case strings.HasPrefix(stripped, "#") || strings.HasPrefix(stripped, ";"):
			continue
		case strings.HasPrefix(line, "["):
			if !strings.HasSuffix(line, "]") {
				return nil, fmt.Errorf("line %d: section does not end with ]", lineno)
			}
			if len(line) <= 2 {
				return nil, fmt.Errorf("line %d: empty section name", lineno)
			}
			section = line[1 : len(line)-1]
			if seenSection[section] {
				return nil, fmt.Errorf("line %d: section [%s] repeated", lineno, section)
			}
			seenSection[section] = true
			out[section] = map[string]string{}
		default:
			if section == "" {
				return nil, fmt.Errorf("line %d: assignment outside a section", lineno)
			}
			colon, equal := strings.Index(line, ":"), strings.Index(line, "=")
			var k, v string
			switch {
			case colon < 0 && equal < 0:
				return nil, fmt.Errorf("line %d: no ':' or '=' in %q", lineno, line)
			case colon < 0 || (equal >= 0 && equal < colon):
				k, v = line[:equal], line[equal+1:]
			default:
				k, v = line[:colon], line[colon+1:]
			}
			k = strings.TrimFunc(k, isPythonSpace)
			v = strings.TrimFunc(v, isPythonSpace)
			if dialect == osloDialect {
				v = osloUnquote(v)
			}
			if k == "" {
				return nil, fmt.Errorf("line %d: empty key", lineno)
			}
			if _, dup := out[section][k]; dup {
				return nil, fmt.Errorf("line %d: key %q repeated in [%s]", lineno, k, section)
			}
			key, value, keyIndent = k, []string{v}, indent
		}
	}
	flush()
	return out, nil
}

// osloUnquote removes one pair of matching quotes, as oslo.config does.
func osloUnquote(v string) string {
	if v != "" && v[0] == v[len(v)-1] && (v[0] == '"' || v[0] == '\'') {
		if len(v) == 1 { // Python's v[1:-1] of one character
			return ""
		}
		return v[1 : len(v)-1]
	}
	return v
}

// osloReads is the value oslo.config reads from `key = v` written verbatim.
func osloReads(v string) string {
	return osloUnquote(strings.TrimFunc(v, isPythonSpace))
}

// osloSubstituted is the value oslo.config hands out after its $-template
// substitution, for a value that must contain no substitution at all: "\$" is
// rewritten to "$$", "$$" becomes "$", and any other '$' is reported.
func osloSubstituted(v string) (string, error) {
	v = strings.ReplaceAll(v, `\$`, "$$")
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '$' {
			b.WriteByte(v[i])
			continue
		}
		if i+1 < len(v) && v[i+1] == '$' {
			b.WriteByte('$')
			i++
			continue
		}
		return "", fmt.Errorf("unescaped '$' at byte %d", i)
	}
	return b.String(), nil
}

func mustParseINI(t testing.TB, text string, dialect iniDialect) parsedINI {
	t.Helper()
	p, err := parseINI(text, dialect)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, text)
	}
	return p
}

func (p parsedINI) clone() parsedINI {
	c := parsedINI{}
	for s, kv := range p {
		c[s] = map[string]string{}
		for k, v := range kv {
			c[s][k] = v
		}
	}
	return c
}

func (p parsedINI) set(section, key, value string) {
	if p[section] == nil {
		p[section] = map[string]string{}
	}
	p[section][key] = value
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
	got := mustParseINI(t, text, osloDialect)
	want := parsedINI{
		"DEFAULT": {"a": "1", "b": "2", "c": "x = y", "d": "x = y", "e": "quoted", "f": "'half\"", "g": "first\nsecond\nthird"},
		"s p":     {"h": ""},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v\nwant %#v", got, want)
	}
	cp := mustParseINI(t, text, configParserDialect)
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
		if _, err := parseINI(bad, osloDialect); err == nil {
			t.Errorf("%s: parsed %q without error", name, bad)
		}
	}
}

func TestOsloSubstituted(t *testing.T) {
	for in, want := range map[string]string{"a$$b": "a$b", `a\$b`: "a$b", "plain": "plain"} {
		got, err := osloSubstituted(in)
		if err != nil || got != want {
			t.Errorf("osloSubstituted(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := osloSubstituted("$foo"); err == nil {
		t.Error("osloSubstituted($foo) did not report the substitution")
	}
}
