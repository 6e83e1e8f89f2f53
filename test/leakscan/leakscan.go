// Package leakscan finds secret values in text a user or an attacker can
// read: logs, events, status, metrics and objects. A value is searched for
// as written and in every encoding it could pass through on its way out:
// base64 (standard and URL alphabets, at each alignment it could take
// inside a longer encoded blob), percent-encoding (query, path and the
// DSN's byte-wise form), and JSON and Go string escaping.
package leakscan

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// MinNeedle is the fewest bytes of a value a form must carry to be searched
// for: a shorter one, such as a base64 fragment of a short value, would
// match by chance.
const MinNeedle = 8

// Needle is one form of a secret value.
type Needle struct {
	// Secret names the value (never the value itself).
	Secret string
	// Encoding says how the value was written: "raw", "base64", ….
	Encoding string
	Text     string
}

// Needles are the forms of value worth searching for, each carrying at
// least MinNeedle bytes of it, without repeats. A value of several lines adds each line
// alone, so a leak cut at a line break is still found.
func Needles(name, value string) []Needle {
	var out []Needle
	seen := map[string]bool{}
	// covers is how many bytes of the value text carries.
	add := func(encoding, text string, covers int) {
		if covers < MinNeedle || seen[text] {
			return
		}
		seen[text] = true
		out = append(out, Needle{Secret: name, Encoding: encoding, Text: text})
	}
	forms := []string{value}
	if lines := strings.FieldsFunc(value, func(r rune) bool { return r == '\n' || r == '\r' }); len(lines) > 1 {
		forms = append(forms, lines...)
	}
	for i, v := range forms {
		suffix := ""
		if i > 0 {
			suffix = fmt.Sprintf(" (line %d)", i)
		}
		// Each escaped form, and each of those base64-encoded: a DSN
		// stored in a Secret's data is base64 of the percent-encoded value.
		escaped := []struct{ encoding, text string }{
			{"raw", v},
			{"query-escaped", url.QueryEscape(v)},
			{"path-escaped", url.PathEscape(v)},
			{"percent-encoded", percentEncode(v)},
			{"JSON-escaped", jsonEscape(v)},
			{"Go-quoted", strings.TrimSuffix(strings.TrimPrefix(strconv.Quote(v), `"`), `"`)},
			{"ASCII-quoted", strings.TrimSuffix(strings.TrimPrefix(strconv.QuoteToASCII(v), `"`), `"`)},
		}
		for _, e := range escaped {
			add(e.encoding+suffix, e.text, len(v))
			for _, enc := range []struct {
				name string
				enc  *base64.Encoding
			}{{"base64", base64.StdEncoding}, {"base64url", base64.URLEncoding}} {
				for offset := range 3 {
					text := alignedBase64(enc.enc, e.text, offset)
					// The bytes of the value the encoded part carries, at
					// the least.
					carries := len(text) / 4 * 3 * len(v) / max(len(e.text), 1)
					add(fmt.Sprintf("%s of %s at offset %d%s", enc.name, e.encoding, offset, suffix), text, carries)
				}
			}
		}
	}
	return out
}

// alignedBase64 is the part of the encoding of value that is the same
// wherever value stands in a longer input whose length before it is offset
// modulo 3: the characters of the 3-byte groups that hold value's bytes
// alone.
func alignedBase64(enc *base64.Encoding, value string, offset int) string {
	padded := make([]byte, offset, offset+len(value))
	encoded := enc.EncodeToString(append(padded, value...))
	start := (offset + 2) / 3 * 4
	end := (offset + len(value)) / 3 * 4
	if end <= start {
		return ""
	}
	return encoded[start:end]
}

// percentEncode encodes every byte outside RFC 3986's unreserved set, as the
// operator writes the credentials of a DSN.
func percentEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// jsonEscape is value as a JSON string's contents, as encoding/json writes
// it (with HTML escaping, which the API server and log/slog use).
func jsonEscape(value string) string {
	b, _ := json.Marshal(value) // a string always marshals
	return string(b[1 : len(b)-1])
}

// Finding is a needle found in a source.
type Finding struct {
	Source string
	Needle Needle
	// Offset is where in the source the needle starts.
	Offset int
}

// String names the source, the secret and the encoding, never the value.
func (f Finding) String() string {
	return fmt.Sprintf("%s: secret %s, %s, at byte %d", f.Source, f.Needle.Secret, f.Needle.Encoding, f.Offset)
}

// Scanner searches sources for a set of needles.
type Scanner struct {
	needles []Needle
}

// NewScanner searches for every form of each value of secrets (name →
// value).
func NewScanner(secrets map[string]string) *Scanner {
	s := &Scanner{}
	for name, value := range secrets {
		s.needles = append(s.needles, Needles(name, value)...)
	}
	return s
}

// Scan returns the needles found in data, the first place of each.
func (s *Scanner) Scan(source string, data []byte) []Finding {
	var out []Finding
	for _, n := range s.needles {
		if i := bytes.Index(data, []byte(n.Text)); i >= 0 {
			out = append(out, Finding{Source: source, Needle: n, Offset: i})
		}
	}
	return out
}
