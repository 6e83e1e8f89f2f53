package pipeline

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Truncate keeps short text, and cuts long text to the limit on a
// character boundary with "…" marking the cut.
func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		text  string
		limit int
		want  string
	}{
		{"short", 1024, "short"},
		{strings.Repeat("k", 1024), 1024, strings.Repeat("k", 1024)},
		{strings.Repeat("k", 1025), 1024, strings.Repeat("k", 1021) + "…"},
		// A cut inside a 3-byte character drops the whole character.
		{"ab" + strings.Repeat("€", 400), 10, "ab€…"},
	} {
		got := Truncate(tc.text, tc.limit)
		if got != tc.want || len(got) > tc.limit || !utf8.ValidString(got) {
			t.Errorf("Truncate(%d bytes, %d) = %q (%d bytes), want %q", len(tc.text), tc.limit, got, len(got), tc.want)
		}
	}
}
