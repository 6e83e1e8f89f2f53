package render

import (
	"testing"

	"github.com/c5c3/glance-operator/test/iniparse"
)

// mustParseINI reads a rendered file back with the parser the dialect's
// consumer uses, failing the test when it does not parse.
func mustParseINI(t testing.TB, text string, d iniparse.Dialect) iniparse.File {
	t.Helper()
	p, err := iniparse.Parse(text, d)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, text)
	}
	return p
}
