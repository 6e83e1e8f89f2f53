package render

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// INI is an INI file under construction: sections and keys keep the order
// they were first set in, so the same input always renders the same bytes
// (and so the same content hash).
//
// It is read by two parsers: oslo.config's iniparser (glance-api.conf,
// backends.conf, and logging.conf, which sits in the same --config-dir) and
// Python's configparser (glance-api-paste.ini, logging.conf). Render refuses
// every name and value that would make either of them see other sections or
// keys than the ones set; values are otherwise written as given, so quoting,
// '$' and '%' keep the meaning each consumer gives them (see OsloLiteral and
// configParserLiteral for values that must be read back literally).
type INI struct {
	sections []*iniSection
	index    map[string]*iniSection
}

type iniSection struct {
	name   string
	keys   []string
	values map[string]string
}

// NewINI returns an empty INI file.
func NewINI() *INI {
	return &INI{index: map[string]*iniSection{}}
}

// Section adds the section if it is not there yet, so that it renders even
// without keys, and keeps its position otherwise.
func (f *INI) Section(name string) {
	f.section(name)
}

func (f *INI) section(name string) *iniSection {
	if s, ok := f.index[name]; ok {
		return s
	}
	s := &iniSection{name: name, values: map[string]string{}}
	f.sections = append(f.sections, s)
	f.index[name] = s
	return s
}

// Set sets key in section to value. Setting a key that is already there
// replaces its value in place, so an override does not move the key.
func (f *INI) Set(section, key, value string) {
	s := f.section(section)
	if _, ok := s.values[key]; !ok {
		s.keys = append(s.keys, key)
	}
	s.values[key] = value
}

// Get returns the value of key in section.
func (f *INI) Get(section, key string) (string, bool) {
	s, ok := f.index[section]
	if !ok {
		return "", false
	}
	v, ok := s.values[key]
	return v, ok
}

// Render returns the file, or an error naming the first section or key that
// either parser would read differently from how it was set.
func (f *INI) Render() (string, error) {
	var b strings.Builder
	for i, s := range f.sections {
		if err := checkSectionName(s.name); err != nil {
			return "", err
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("[" + s.name + "]\n")
		for _, k := range s.keys {
			if err := checkKey(s.name, k); err != nil {
				return "", err
			}
			v := s.values[k]
			if problem := TextProblem(v); problem != "" {
				return "", fmt.Errorf("section [%s] key %q: value %s", s.name, k, problem)
			}
			if v == "" {
				b.WriteString(k + " =\n")
			} else {
				b.WriteString(k + " = " + v + "\n")
			}
		}
	}
	return b.String(), nil
}

func checkSectionName(name string) error {
	if problem := SectionNameProblem(name); problem != "" {
		return fmt.Errorf("section name %q %s", name, problem)
	}
	return nil
}

func checkKey(section, key string) error {
	if problem := KeyProblem(key); problem != "" {
		return fmt.Errorf("section [%s] key %q %s", section, key, problem)
	}
	return nil
}

// SectionNameProblem says why name cannot be an INI section name, or
// returns "". Admission refuses the same names through it.
func SectionNameProblem(name string) string {
	switch {
	case name == "":
		return "is empty"
	case strings.ContainsAny(name, "[]"):
		return "contains '[' or ']'"
	case hasSurroundingSpace(name):
		return "starts or ends with whitespace"
	}
	return TextProblem(name)
}

// KeyProblem says why key cannot be an INI option name, or returns "".
// Admission refuses the same keys through it.
func KeyProblem(key string) string {
	switch {
	case key == "":
		return "is empty"
	// '=' and ':' both end a key in both parsers; a leading '[' opens a
	// section and a leading '#' or ';' makes the line a comment.
	case strings.ContainsAny(key, "=:[]"):
		return "contains '=', ':', '[' or ']'"
	case key[0] == '#' || key[0] == ';':
		return "starts with a comment character"
	// Leading whitespace makes the line a continuation of the previous value;
	// trailing whitespace is trimmed, so the key would not be the one set.
	case hasSurroundingSpace(key):
		return "starts or ends with whitespace"
	}
	return TextProblem(key)
}

// TextProblem says why s cannot stand in an INI file, or returns "":
// control characters (CR and LF end the line; the rest have no business in
// config), the Unicode line and paragraph separators, the bidirectional
// controls (they make the file read differently from what it says), and
// invalid UTF-8, which makes Python fail to decode the whole file.
func TextProblem(s string) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, r := range s {
		switch {
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029':
			return fmt.Sprintf("contains the control character %U", r)
		case unicode.Is(unicode.Bidi_Control, r):
			return fmt.Sprintf("contains the bidirectional control character %U", r)
		}
	}
	return ""
}

// hasSurroundingSpace reports leading or trailing whitespace as Python's
// str.strip() sees it, which both parsers use on keys and values.
func hasSurroundingSpace(s string) bool {
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	return isPythonSpace(first) || isPythonSpace(last)
}

// isPythonSpace is Python's str.isspace for one character: Go's notion plus
// the four information separators U+001C..U+001F.
func isPythonSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// OsloLiteral returns the text that oslo.config reads back as exactly v.
// oslo.config trims whitespace around a value, strips one pair of matching
// quotes, and substitutes $name / ${name} with other options (with "$$" and
// "\$" as escapes). Values the operator derives from Secrets and free-text
// fields must not be reinterpreted that way: a '$' in an S3 secret key would
// otherwise become a lookup. The sequence `\$` cannot be expressed at all,
// since oslo.config rewrites it before substituting, so it is an error.
func OsloLiteral(v string) (string, error) {
	if strings.Contains(v, `\$`) {
		return "", fmt.Errorf(`contains "\$", which oslo.config cannot read literally`)
	}
	v = strings.ReplaceAll(v, "$", "$$")
	if v == "" {
		return v, nil
	}
	if hasSurroundingSpace(v) || (v[0] == v[len(v)-1] && (v[0] == '"' || v[0] == '\'')) {
		// oslo.config removes exactly one pair of matching quotes.
		v = `"` + v + `"`
	}
	return v, nil
}

// configParserLiteral returns the text Python's configparser, with the basic
// '%' interpolation paste.deploy and logging.config use, reads back as v.
func configParserLiteral(v string) string {
	return strings.ReplaceAll(v, "%", "%%")
}
