// Package iniparse reads INI files the way the Python parsers that consume
// the operator's files read them: oslo.config's iniparser (glance-api.conf,
// backends.conf) and configparser (glance-api-paste.ini, logging.conf). The
// render package's tests and the integration suites read rendered files back
// with it, so that what a file says is judged by a reader that shares no code
// with the writer.
package iniparse

import (
	"fmt"
	"maps"
	"strings"
	"unicode"
)

// File is what a parser read: section -> key -> value.
type File map[string]map[string]string

// Dialect selects which reader Parse imitates.
type Dialect int

const (
	// Oslo is oslo.config's iniparser: '=' or ':' ends the key, a line
	// starting with ' ' or '\t' continues the previous value, '#' and ';'
	// start comment lines, keys and values are trimmed, and one pair of
	// matching quotes around a value is removed.
	Oslo Dialect = iota
	// ConfigParser is Python's configparser as paste.deploy and
	// logging.config use it: the same, but quotes are kept, a line indented
	// deeper than its key continues the value, and comments are recognised
	// after leading whitespace.
	ConfigParser
)

func (d Dialect) String() string {
	switch d {
	case Oslo:
		return "oslo.config"
	case ConfigParser:
		return "configparser"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// Parse reads an INI file the way the dialect's Python parser does, with
// configparser's strictness on top for both: a repeated section header or a
// repeated key is an error (oslo.config would merge them, configparser
// refuses the file), so a file that passes is read identically by both.
func Parse(text string, d Dialect) (File, error) {
	out := File{}
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
		line := strings.TrimRightFunc(raw, IsSpace)
		if line == "" {
			flush()
			continue
		}
		indent := len(raw) - len(strings.TrimLeftFunc(raw, IsSpace))
		isContinuation := false
		switch d {
		case Oslo:
			isContinuation = line[0] == ' ' || line[0] == '\t'
		case ConfigParser:
			isContinuation = key != "" && indent > keyIndent
		}
		if isContinuation {
			if key == "" {
				return nil, fmt.Errorf("line %d: unexpected continuation", lineno)
			}
			value = append(value, strings.TrimLeftFunc(line, IsSpace))
			continue
		}
		flush()
		stripped := line
		if d == ConfigParser {
			stripped = strings.TrimLeftFunc(line, IsSpace)
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
			k = strings.TrimFunc(k, IsSpace)
			v = strings.TrimFunc(v, IsSpace)
			if d == Oslo {
				v = OsloUnquote(v)
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

// Clone returns a deep copy of f.
func (f File) Clone() File {
	c := File{}
	for s, kv := range f {
		c[s] = maps.Clone(kv)
	}
	return c
}

// Set sets key in section to value, adding the section if it is missing.
func (f File) Set(section, key, value string) {
	if f[section] == nil {
		f[section] = map[string]string{}
	}
	f[section][key] = value
}

// IsSpace is Python's str.isspace for one character: Go's notion plus the
// four information separators U+001C..U+001F. Both parsers strip keys,
// values and lines with it.
func IsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// OsloUnquote removes one pair of matching quotes, as oslo.config does.
func OsloUnquote(v string) string {
	if v != "" && v[0] == v[len(v)-1] && (v[0] == '"' || v[0] == '\'') {
		if len(v) == 1 { // Python's v[1:-1] of one character
			return ""
		}
		return v[1 : len(v)-1]
	}
	return v
}

// OsloReads is the value oslo.config reads from `key = v` written verbatim.
func OsloReads(v string) string {
	return OsloUnquote(strings.TrimFunc(v, IsSpace))
}

// OsloSubstituted is the value oslo.config hands out after its $-template
// substitution, for a value that must contain no substitution at all: "\$" is
// rewritten to "$$", "$$" becomes "$", and any other '$' is reported.
func OsloSubstituted(v string) (string, error) {
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
