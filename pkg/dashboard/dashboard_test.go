package dashboard

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// chartFile is the dashboard the chart ships, relative to this package.
const chartFile = "../../charts/glance-operator/files/grafana-dashboard.json"

// model is the part of Grafana's dashboard JSON the tests read.
type model struct {
	UID      string   `json:"uid"`
	Title    string   `json:"title"`
	Tags     []string `json:"tags"`
	Editable *bool    `json:"editable"`
	Refresh  string   `json:"refresh"`
	Time     struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"time"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Query      any    `json:"query"`
			Multi      bool   `json:"multi"`
			IncludeAll bool   `json:"includeAll"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int    `json:"id"`
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			RefID      string `json:"refId"`
			Expr       string `json:"expr"`
			Datasource *struct {
				UID string `json:"uid"`
			} `json:"datasource"`
		} `json:"targets"`
	} `json:"panels"`
}

func decode(t *testing.T) model {
	t.Helper()
	data, err := JSON()
	if err != nil {
		t.Fatalf("JSON: %v", err)
	}
	var m model
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("dashboard is not valid JSON: %v", err)
	}
	return m
}

func TestJSONIsValidAndDeterministic(t *testing.T) {
	first, err := JSON()
	if err != nil {
		t.Fatalf("JSON: %v", err)
	}
	second, err := JSON()
	if err != nil {
		t.Fatalf("JSON: %v", err)
	}
	if !json.Valid(first) {
		t.Fatal("dashboard is not valid JSON")
	}
	if !bytes.Equal(first, second) {
		t.Error("two calls of JSON returned different bytes")
	}
	if !bytes.HasSuffix(first, []byte("}\n")) {
		t.Error("dashboard does not end in a newline")
	}
}

func TestDashboardSettings(t *testing.T) {
	m := decode(t)
	if m.UID != "glance-operator" || m.Title != "Glance operator" {
		t.Errorf("uid, title = %q, %q; want glance-operator, Glance operator", m.UID, m.Title)
	}
	for _, tag := range []string{"openstack", "glance"} {
		if !slices.Contains(m.Tags, tag) {
			t.Errorf("tags %v lack %q", m.Tags, tag)
		}
	}
	if m.Editable == nil || *m.Editable {
		t.Error("dashboard is editable; provisioned dashboards are overwritten, so edits would be lost")
	}
	if m.Refresh != "1m" || m.Time.From != "now-6h" || m.Time.To != "now" {
		t.Errorf("refresh, time = %q, %s..%s; want 1m, now-6h..now", m.Refresh, m.Time.From, m.Time.To)
	}
}

func TestTemplateVariables(t *testing.T) {
	m := decode(t)
	variables := map[string]int{}
	for i, v := range m.Templating.List {
		variables[v.Name] = i
	}
	i, ok := variables[datasourceVariable]
	if !ok {
		t.Fatal("no datasource variable")
	}
	if v := m.Templating.List[i]; v.Type != "datasource" || v.Query != "prometheus" {
		t.Errorf("datasource variable is %s of %v; want datasource of prometheus", v.Type, v.Query)
	}
	for name, query := range map[string]string{namespaceVariable: namespaceValuesQuery, glanceVariable: glanceValuesQuery} {
		i, ok := variables[name]
		if !ok {
			t.Errorf("no %s variable", name)
			continue
		}
		v := m.Templating.List[i]
		if v.Type != "query" || v.Query != query || !v.Multi || !v.IncludeAll {
			t.Errorf("%s variable = %+v; want a multi-value query variable with All, of %s", name, v, query)
		}
	}
}

func TestPanels(t *testing.T) {
	m := decode(t)
	required := []string{
		"Ready per Glance",
		"Upgrade phase per Glance",
		"Reconcile p95 per step",
		"Reconcile errors per step",
		"DB sync outcomes",
		"DB purge outcomes",
		"Time since last successful DB purge",
		"Image cache evictions per Glance",
		"Webhook verdicts",
		"Webhook latency",
		"Webhook certificate expiry",
	}
	var titles []string
	used := map[string]bool{}
	ids := map[int]bool{}
	for _, p := range m.Panels {
		titles = append(titles, p.Title)
		if ids[p.ID] {
			t.Errorf("panel %q: id %d is taken", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the datasource variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no target", p.Title)
		}
		for _, target := range p.Targets {
			if !slices.Contains(Queries(), target.Expr) {
				t.Errorf("panel %q queries %q, which Queries does not list", p.Title, target.Expr)
			}
			if target.RefID == "" {
				t.Errorf("panel %q: target %q has no refId", p.Title, target.Expr)
			}
			if target.Datasource == nil || target.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: target %q does not use the datasource variable", p.Title, target.Expr)
			}
			used[target.Expr] = true
		}
	}
	for _, title := range required {
		if !slices.Contains(titles, title) {
			t.Errorf("no panel %q among %q", title, titles)
		}
	}
	for _, q := range Queries() {
		if !used[q] {
			t.Errorf("Queries lists %q, which no panel uses", q)
		}
	}
}

func TestQueries(t *testing.T) {
	qs := Queries()
	if len(qs) == 0 {
		t.Fatal("Queries is empty")
	}
	seen := map[string]bool{}
	for _, q := range qs {
		if seen[q] {
			t.Errorf("Queries lists %q twice", q)
		}
		seen[q] = true
		// The per-Glance metrics carry namespace and glance labels; a
		// query on them that ignores the variables shows every Glance.
		for _, metric := range []string{"glance_operator_glance_", "glance_operator_db_", "glance_operator_image_cache_"} {
			if strings.Contains(q, metric) && !strings.Contains(q, glanceSelector) {
				t.Errorf("%q reads a per-Glance metric but not the namespace and glance variables", q)
			}
		}
	}
	qs[0] = "changed"
	if Queries()[0] == "changed" {
		t.Error("Queries returns the package's slice: callers can change the list")
	}
}

// TestChartFileIsFresh fails when the chart's dashboard is not what JSON
// builds now.
func TestChartFileIsFresh(t *testing.T) {
	want, err := JSON()
	if err != nil {
		t.Fatalf("JSON: %v", err)
	}
	got, err := os.ReadFile(chartFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale; run `make manifests`", chartFile)
	}
}
