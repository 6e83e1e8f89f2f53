package v1alpha1_test

import (
	"os"
	"strings"
	"testing"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// The Events table of docs/operations.md lists every reason the operator
// emits, and no other.
func TestDocsListEveryEventReason(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Events\n")
	if !ok {
		t.Fatal("docs/operations.md has no ## Events section")
	}
	section, _, _ = strings.Cut(section, "\n#")
	listed := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		for _, reason := range strings.Split(first, ", ") {
			listed[strings.Trim(reason, "`")] = true
		}
	}
	for _, reason := range v1alpha1.EventReasons {
		if !listed[reason] {
			t.Errorf("the Events table of docs/operations.md does not list %s", reason)
		}
		delete(listed, reason)
	}
	for reason := range listed {
		t.Errorf("the Events table of docs/operations.md lists %s, which the operator never emits", reason)
	}
}
