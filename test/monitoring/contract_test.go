package monitoring

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/admission/webhook"
	"github.com/c5c3/glance-operator/pkg/metrics"
	"github.com/c5c3/glance-operator/test/chart"
)

// scrapedByPrometheus are the series Prometheus makes itself for each
// target, not the binaries.
var scrapedByPrometheus = []string{"up"}

// targetLabels are the labels prometheus-operator gives every series of a
// ServiceMonitor's targets.
var targetLabels = []string{"job", "instance", "pod", "service", "endpoint", "container", "namespace"}

// describingRegistry records the name of every metric a collector
// registered with it describes, vectors without series included.
type describingRegistry struct {
	*prometheus.Registry
	mu sync.Mutex
	// names maps each metric to its label names.
	names map[string][]string
}

// descFields reads a Desc's name and variable labels from its String form:
// client_golang exposes no accessor.
var (
	fqName         = regexp.MustCompile(`fqName: "([^"]+)"`)
	variableLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
)

func (r *describingRegistry) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	r.mu.Lock()
	defer r.mu.Unlock()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			var labels []string
			if l := variableLabels.FindStringSubmatch(d.String()); l != nil && l[1] != "" {
				labels = strings.Split(l[1], ",")
			}
			r.names[m[1]] = labels
		}
	}
	return r.Registry.Register(c)
}

func (r *describingRegistry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// registeredMetrics are the names of the metrics both binaries register,
// registered the way they do: the manager's collectors and its state
// collector, and the webhook's, all in controller-runtime's registry. The
// webhook registers once per process, so this runs once.
var registeredMetrics = sync.OnceValues(func() (map[string][]string, error) {
	reg := &describingRegistry{Registry: prometheus.NewRegistry(), names: map[string][]string{}}
	saved := crmetrics.Registry
	crmetrics.Registry = reg
	defer func() { crmetrics.Registry = saved }()

	m, err := metrics.New(crmetrics.Registry)
	if err != nil {
		return nil, err
	}
	if err := m.RegisterLeaderMetrics(nil, func() bool { return false }); err != nil {
		return nil, err
	}
	webhook.RegisterMetrics()
	return reg.names, nil
})

func mustRegisteredMetrics(t *testing.T) map[string][]string {
	t.Helper()
	names, err := registeredMetrics()
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// query is one PromQL expression the on-call engineer is shown, and where.
type query struct {
	where, expr string
}

// shownQueries are the expressions of the chart's alerts and of every
// target of its dashboard.
func shownQueries(t *testing.T) []query {
	t.Helper()
	var out []query
	for _, a := range renderedAlerts(t, renderMonitoring(t)) {
		out = append(out, query{"alert " + a.Alert, a.Expr})
	}
	dir, err := chart.Dir()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "files", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var board struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &board); err != nil {
		t.Fatalf("the dashboard: %v", err)
	}
	panels := 0
	for _, p := range board.Panels {
		for _, target := range p.Targets {
			out = append(out, query{"panel " + p.Title, target.Expr})
			panels++
		}
	}
	if panels == 0 {
		t.Fatal("the dashboard has no queries")
	}
	// label_values(selector, label) is Grafana's, not PromQL: its selector is.
	labelValues := regexp.MustCompile(`^label_values\((.+), *[a-z_]+\)$`)
	for _, v := range board.Templating.List {
		if q, ok := v.Query.(string); ok {
			if m := labelValues.FindStringSubmatch(q); m != nil {
				out = append(out, query{"variable " + v.Name, m[1]})
			}
		}
	}
	return out
}

// selectors are the vector selectors of expr.
func selectors(t *testing.T, q query) []*parser.VectorSelector {
	t.Helper()
	// The dashboard's variables are Grafana's: any value parses.
	expr, err := promQL.ParseExpr(strings.NewReplacer("$namespace", ".*", "$glance", ".*").Replace(q.expr))
	if err != nil {
		t.Fatalf("%s: %q does not parse: %v", q.where, q.expr, err)
	}
	var out []*parser.VectorSelector
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out
}

// TestShownMetricsAreRegistered holds the alerts and the dashboard to the
// binaries: a metric renamed or dropped in the code breaks this test, not
// the dashboard.
func TestShownMetricsAreRegistered(t *testing.T) {
	registered := mustRegisteredMetrics(t)
	// labelsOf is the label names of a queried series, false when no
	// binary registers it.
	labelsOf := func(name string) ([]string, bool) {
		if l, ok := registered[name]; ok {
			return l, true
		}
		if slices.Contains(scrapedByPrometheus, name) {
			return nil, true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok {
				if l, ok := registered[base]; ok {
					if suffix == "_bucket" {
						l = append(slices.Clone(l), "le")
					}
					return l, true
				}
			}
		}
		return nil, false
	}
	seen := 0
	for _, q := range shownQueries(t) {
		for _, vs := range selectors(t, q) {
			if vs.Name == "" {
				t.Errorf("%s: a selector without a metric name, %s", q.where, vs)
				continue
			}
			seen++
			labels, ok := labelsOf(vs.Name)
			if !ok {
				t.Errorf("%s queries %s, which neither binary registers", q.where, vs.Name)
				continue
			}
			for _, m := range vs.LabelMatchers {
				if m.Name != "__name__" && !slices.Contains(labels, m.Name) && !slices.Contains(targetLabels, m.Name) {
					t.Errorf("%s matches %s on label %q, which it does not have (%v)", q.where, vs.Name, m.Name, labels)
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no selector found in the alerts and the dashboard")
	}
}

// TestShownConditionTypesExist holds the condition types the alerts and the
// dashboard match on to those the state metric exports.
func TestShownConditionTypesExist(t *testing.T) {
	types := append([]string{v1alpha1.ConditionReady}, v1alpha1.SubConditions...)
	for _, q := range shownQueries(t) {
		for _, vs := range selectors(t, q) {
			if vs.Name != "glance_operator_glance_condition" {
				continue
			}
			for _, m := range vs.LabelMatchers {
				if m.Name == "type" && m.Type == labels.MatchEqual && !slices.Contains(types, m.Value) {
					t.Errorf("%s matches condition type %q, which is not one the operator reports (%v)", q.where, m.Value, types)
				}
			}
		}
	}
}

// TestRegistryRecordsNames checks the recorder itself, so the contract test
// cannot pass by recording nothing.
func TestRegistryRecordsNames(t *testing.T) {
	names := mustRegisteredMetrics(t)
	for _, want := range []string{"glance_operator_glance_condition", "glance_operator_reconcile_duration_seconds", webhook.RequestsMetric} {
		if _, ok := names[want]; !ok {
			t.Errorf("%s not recorded among %d names", want, len(names))
		}
	}
	if _, ok := names["glance_operator_no_such_metric"]; ok {
		t.Error("a name never registered is recorded")
	}
	if got, want := names[webhook.RequestsMetric], []string{"webhook", "verdict"}; !slices.Equal(got, want) {
		t.Errorf("labels of %s recorded as %v, want %v", webhook.RequestsMetric, got, want)
	}
}
