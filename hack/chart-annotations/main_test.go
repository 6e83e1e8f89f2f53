package main

import (
	"strings"
	"testing"
)

// TestPrereleaseOf: Artifact Hub's prerelease annotation follows the SemVer
// prerelease part of the chart's version, build metadata aside; a version
// that is not SemVer 2 is refused by name.
func TestPrereleaseOf(t *testing.T) {
	for version, want := range map[string]string{
		"0.1.0":             "false",
		"1.0.0":             "false",
		"1.0.0+build.5":     "false",
		"0.2.0-rc.1":        "true",
		"1.0.0-alpha":       "true",
		"1.0.0-0.3.7+exp.1": "true",
	} {
		got, err := prereleaseOf(version)
		if err != nil || got != want {
			t.Errorf("prereleaseOf(%q) = %q, %v; want %q", version, got, err, want)
		}
	}
	for _, version := range []string{"", "v1.0.0", "1.0", "1.0.0-", "01.0.0"} {
		if got, err := prereleaseOf(version); err == nil || !strings.Contains(err.Error(), "version") {
			t.Errorf("prereleaseOf(%q) = %q, %v; want an error naming the version", version, got, err)
		}
	}
}
