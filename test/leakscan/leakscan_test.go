package leakscan

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
)

const secret = "pa$$w0rd\nsecond-line/+?#%\"é"

// Each way a value can leave a program is found, wherever it stands in the
// text around it.
func TestScanFindsEveryEncoding(t *testing.T) {
	var slogText strings.Builder
	slog.New(slog.NewTextHandler(&slogText, nil)).Info("msg", "value", secret)
	var slogJSON strings.Builder
	slog.New(slog.NewJSONHandler(&slogJSON, nil)).Info("msg", "value", secret)
	object, _ := json.Marshal(map[string]any{"data": map[string][]byte{"k": []byte("prefix-" + secret)}})

	leaks := map[string]string{
		"raw":                   "x" + secret + "y",
		"base64":                base64.StdEncoding.EncodeToString([]byte(secret)),
		"base64 inside, 1 byte": base64.StdEncoding.EncodeToString([]byte("a" + secret + "tail")),
		"base64 inside, 2":      base64.StdEncoding.EncodeToString([]byte("ab" + secret)),
		"base64 URL alphabet":   base64.RawURLEncoding.EncodeToString([]byte("abc" + secret)),
		"query-escaped":         "u=" + url.QueryEscape(secret),
		"path-escaped":          "/" + url.PathEscape(secret),
		"DSN":                   "mysql+pymysql://glance:" + percentEncode(secret) + "@db:3306/glance",
		"slog text":             slogText.String(),
		"slog JSON":             slogJSON.String(),
		"object bytes":          string(object),
		"first line alone":      "error: password pa$$w0rd rejected",
		"second line alone":     fmt.Sprintf("%q", "second-line/+?#%\"é"),
	}
	s := NewScanner(map[string]string{"db-password": secret})
	for name, text := range leaks {
		if found := s.Scan(name, []byte(text)); len(found) == 0 {
			t.Errorf("%s: %q not found as a leak", name, text)
		}
	}
}

func TestScanIgnoresOtherText(t *testing.T) {
	s := NewScanner(map[string]string{"db-password": secret})
	clean := "pa$$w0r second-lin " + base64.StdEncoding.EncodeToString([]byte("pa$$w0r")) + ` {"password":"<redacted>"}`
	if found := s.Scan("clean", []byte(clean)); len(found) != 0 {
		t.Errorf("found %v in text without the secret", found)
	}
}

func TestFindingNamesNoValue(t *testing.T) {
	s := NewScanner(map[string]string{"db-password": secret})
	for _, f := range s.Scan("log", []byte(secret)) {
		if msg := f.String(); strings.Contains(msg, "pa$$w0rd") || !strings.Contains(msg, "db-password") {
			t.Errorf("finding %q names the value or not the secret", msg)
		}
	}
}

// A form that carries fewer than MinNeedle bytes of the value would match
// by chance: the short line and the 6 bytes a base64 needle of the long
// line carries are not searched for.
func TestNeedlesAreLongEnough(t *testing.T) {
	var raw []string
	for _, n := range Needles("short", "abc\ndefghijk") {
		if strings.HasPrefix(n.Encoding, "base64") && strings.HasSuffix(n.Encoding, "(line 2)") {
			t.Errorf("needle %s %q carries 6 bytes", n.Encoding, n.Text)
		}
		if strings.HasPrefix(n.Encoding, "raw") {
			raw = append(raw, n.Text)
		}
	}
	if want := []string{"abc\ndefghijk", "defghijk"}; strings.Join(raw, "|") != strings.Join(want, "|") {
		t.Errorf("raw needles %q, want %q", raw, want)
	}
}
