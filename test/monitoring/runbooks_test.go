package monitoring

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/c5c3/glance-operator/test/controlplane"
)

// TestEveryAlertHasARunbook holds docs/alerts.md to the chart's alerts: a
// section per alert, headed by its name (the anchor its runbook_url ends
// in), with text in it, and no section for an alert the chart lacks.
func TestEveryAlertHasARunbook(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "docs", "alerts.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	heading := regexp.MustCompile(`(?m)^## (\S+)$`)
	matches := heading.FindAllStringSubmatchIndex(string(data), -1)
	for i, m := range matches {
		end := len(data)
		if i+1 < len(matches) {
			end = matches[i+1][0]
		}
		sections[string(data[m[2]:m[3]])] = strings.TrimSpace(string(data[m[1]:end]))
	}
	alerts := renderedAlerts(t, renderMonitoring(t))
	for _, a := range alerts {
		body, ok := sections[a.Alert]
		if !ok {
			t.Errorf("docs/alerts.md has no section ## %s", a.Alert)
		} else if len(body) < 200 {
			t.Errorf("the runbook of %s is %d characters; say what it means and what to do", a.Alert, len(body))
		}
		if url := a.Annotations["runbook_url"]; !strings.HasSuffix(url, "/docs/alerts.md#"+strings.ToLower(a.Alert)) {
			t.Errorf("alert %s has runbook_url %q, want it to end in /docs/alerts.md#%s", a.Alert, url, strings.ToLower(a.Alert))
		}
		if a.Labels["severity"] == "" || a.Annotations["summary"] == "" {
			t.Errorf("alert %s lacks a severity or a summary", a.Alert)
		}
	}
	for name := range sections {
		found := false
		for _, a := range alerts {
			found = found || a.Alert == name
		}
		if !found {
			t.Errorf("docs/alerts.md has a section for %s, which the chart does not alert on", name)
		}
	}
}
