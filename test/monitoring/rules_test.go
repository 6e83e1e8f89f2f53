package monitoring

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/c5c3/glance-operator/test/chart"
)

// alertRule is one alert of the chart's PrometheusRule, as rendered.
type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// renderMonitoring renders the chart with its ServiceMonitors and its
// PrometheusRule.
func renderMonitoring(t *testing.T) *chart.Rendered {
	t.Helper()
	r, err := chart.Render(map[string]any{"monitoring": map[string]any{
		"serviceMonitor": map[string]any{"enabled": true},
		"prometheusRule": map[string]any{"enabled": true},
	}}, chart.Options{})
	if err != nil {
		t.Fatalf("render the chart: %v", err)
	}
	return r
}

// scrapeJobs maps each ServiceMonitor of the chart to the job label
// prometheus-operator gives its targets: the name of the Service it
// selects.
func scrapeJobs(t *testing.T, r *chart.Rendered) map[string]string {
	t.Helper()
	jobs := map[string]string{}
	for _, sm := range r.Select("ServiceMonitor") {
		selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		for _, svc := range r.Select("Service") {
			if ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports"); hasMetricsPort(ports) && labelsMatch(svc.GetLabels(), selector) {
				jobs[sm.GetName()] = svc.GetName()
			}
		}
	}
	return jobs
}

func hasMetricsPort(ports []any) bool {
	for _, p := range ports {
		if m, ok := p.(map[string]any); ok && m["name"] == "metrics" {
			return true
		}
	}
	return false
}

func labelsMatch(have, selector map[string]string) bool {
	for k, v := range selector {
		if have[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

// renderedAlerts returns the alerts of the chart's PrometheusRule.
func renderedAlerts(t *testing.T, r *chart.Rendered) []alertRule {
	t.Helper()
	objs := r.Select("PrometheusRule")
	if len(objs) != 1 {
		t.Fatalf("the chart renders %d PrometheusRules, want 1", len(objs))
	}
	data, err := json.Marshal(objs[0].Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Groups []struct {
			Rules []alertRule `json:"rules"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatalf("decode the PrometheusRule: %v", err)
	}
	var out []alertRule
	for _, g := range spec.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) == 0 {
		t.Fatal("the PrometheusRule has no alerts")
	}
	return out
}

// alertCase is one history of synthetic series and whether the alert fires
// at its end.
type alertCase struct {
	alert string
	name  string
	// series is the body of a promqltest load block, sampled every step
	// from time 0.
	series string
	// at is when the alert is judged; the rule is evaluated every step up
	// to it, as a Prometheus rule group would.
	at time.Duration
	// fires is the expected outcome; want are labels a firing alert must
	// carry.
	fires bool
	want  map[string]string
}

const step = time.Minute

// promQL parses expressions as a default Prometheus server does.
var promQL = parser.NewParser(parser.Options{})

const (
	readyFalse     = `glance_operator_glance_condition{namespace="openstack", glance="glance", type="Ready", status="False", reason="NotAllReady"}`
	readyTrue      = `glance_operator_glance_condition{namespace="openstack", glance="glance", type="Ready", status="True", reason="AllReady"}`
	managerUp      = `up{job="$MANAGER_JOB", instance="10.0.0.1:8080"}`
	webhookUp      = `up{job="$WEBHOOK_JOB", instance="10.0.0.2:8080"}`
	validateGlance = `webhook="/validate-glance-openstack-c5c3-io-v1alpha1-glance"`
)

var glanceLabels = map[string]string{"namespace": "openstack", "glance": "glance"}

var alertCases = []alertCase{
	{alert: "GlanceNotReady", name: "not Ready for 20 minutes, whatever the reason", fires: true, want: glanceLabels, at: 20 * time.Minute, series: `
		` + readyFalse + ` 1x8
		glance_operator_glance_condition{namespace="openstack", glance="glance", type="Ready", status="Unknown", reason="ReconcileError"} _x8 1x22`},
	{alert: "GlanceNotReady", name: "Ready again after 10 minutes", at: 20 * time.Minute, series: `
		` + readyFalse + ` 1x10
		` + readyTrue + ` _x10 1x20`},
	{alert: "GlanceNotReady", name: "not Ready for 10 minutes only", at: 10 * time.Minute, series: `
		` + readyFalse + ` 1x10`},

	// controller-runtime's backoff: 14 retries in the first minute, then
	// one every 17 minutes.
	{alert: "GlanceReconcileErrors", name: "a step failing on every retry", fires: true, want: map[string]string{"sub_reconciler": "Database"}, at: 50 * time.Minute, series: `
		glance_operator_reconcile_errors_total{sub_reconciler="Database", condition_type="DatabaseReady", instance="a"} 0 14x16 15x17 16x17 17x10`},
	{alert: "GlanceReconcileErrors", name: "a step failing every minute", fires: true, want: map[string]string{"sub_reconciler": "Database"}, at: 30 * time.Minute, series: `
		glance_operator_reconcile_errors_total{sub_reconciler="Database", condition_type="DatabaseReady", instance="a"} 0+1x30`},
	{alert: "GlanceReconcileErrors", name: "one burst of retries that succeeded", at: 60 * time.Minute, series: `
		glance_operator_reconcile_errors_total{sub_reconciler="Database", condition_type="DatabaseReady", instance="a"} 0 14x60`},
	{alert: "GlanceReconcileErrors", name: "two bursts 40 minutes apart", at: 90 * time.Minute, series: `
		glance_operator_reconcile_errors_total{sub_reconciler="Database", condition_type="DatabaseReady", instance="a"} 0 5x40 10x50`},

	{alert: "GlanceSchemaJobFailed", name: "migrate failed", fires: true, want: map[string]string{"namespace": "openstack", "glance": "glance", "reason": "MigrateFailed"}, at: 2 * time.Minute, series: `
		glance_operator_glance_condition{namespace="openstack", glance="glance", type="DatabaseReady", status="False", reason="MigrateFailed"} 1x5`},
	{alert: "GlanceSchemaJobFailed", name: "migrate in progress", at: 2 * time.Minute, series: `
		glance_operator_glance_condition{namespace="openstack", glance="glance", type="DatabaseReady", status="False", reason="MigrateInProgress"} 1x5`},

	// A schedule every 10 minutes: overdue after 20.
	{alert: "GlanceDBPurgeOverdue", name: "the last success 40 minutes ago", fires: true, want: glanceLabels, at: 40 * time.Minute, series: `
		glance_operator_db_purge_interval_seconds{namespace="openstack", glance="glance"} 600x60
		glance_operator_glance_created_timestamp_seconds{namespace="openstack", glance="glance"} 0x60
		glance_operator_db_purge_last_success_timestamp_seconds{namespace="openstack", glance="glance"} 60x60`},
	{alert: "GlanceDBPurgeOverdue", name: "never a success, 40 minutes after creation", fires: true, want: glanceLabels, at: 40 * time.Minute, series: `
		glance_operator_db_purge_interval_seconds{namespace="openstack", glance="glance"} 600x60
		glance_operator_glance_created_timestamp_seconds{namespace="openstack", glance="glance"} 0x60`},
	{alert: "GlanceDBPurgeOverdue", name: "a success every 10 minutes", at: 40 * time.Minute, series: `
		glance_operator_db_purge_interval_seconds{namespace="openstack", glance="glance"} 600x60
		glance_operator_glance_created_timestamp_seconds{namespace="openstack", glance="glance"} 0x60
		glance_operator_db_purge_last_success_timestamp_seconds{namespace="openstack", glance="glance"} 0 0 0 0 0 0 0 0 0 0 600 600 600 600 600 600 600 600 600 600 1200 1200 1200 1200 1200 1200 1200 1200 1200 1200 1800 1800 1800 1800 1800 1800 1800 1800 1800 1800 2400x20`},
	{alert: "GlanceDBPurgeOverdue", name: "a stale success from a replica that lost the lease", at: 40 * time.Minute, series: `
		glance_operator_db_purge_interval_seconds{namespace="openstack", glance="glance", instance="b"} 600x60
		glance_operator_glance_created_timestamp_seconds{namespace="openstack", glance="glance", instance="b"} 0x60
		glance_operator_db_purge_last_success_timestamp_seconds{namespace="openstack", glance="glance", instance="a"} 0x60
		glance_operator_db_purge_last_success_timestamp_seconds{namespace="openstack", glance="glance", instance="b"} 0x30 1800x30`},
	{alert: "GlanceDBPurgeOverdue", name: "suspended: no interval", at: 40 * time.Minute, series: `
		glance_operator_glance_created_timestamp_seconds{namespace="openstack", glance="glance"} 0x60`},

	{alert: "GlanceDBPurgeFailed", name: "the newest run failed", fires: true, want: glanceLabels, at: 12 * time.Minute, series: `
		glance_operator_glance_condition{namespace="openstack", glance="glance", type="DBPurgeReady", status="False", reason="DBPurgeJobFailed"} 1x15`},
	{alert: "GlanceDBPurgeFailed", name: "one pass that could not list the runs", at: 20 * time.Minute, series: `
		glance_operator_glance_condition{namespace="openstack", glance="glance", type="DBPurgeReady", status="False", reason="DBPurgeJobFailed"} _x5 1x2 _x13
		glance_operator_glance_condition{namespace="openstack", glance="glance", type="DBPurgeReady", status="True", reason="DBPurgeScheduled"} 1x5 _x2 1x13`},
	{alert: "GlanceDBPurgeFailed", name: "scheduled", at: 2 * time.Minute, series: `
		glance_operator_glance_condition{namespace="openstack", glance="glance", type="DBPurgeReady", status="True", reason="DBPurgeScheduled"} 1x5`},

	{alert: "GlanceImageCacheEvictions", name: "the first eviction, counted from 0", fires: true, want: glanceLabels, at: 15 * time.Minute, series: `
		glance_operator_image_cache_evictions_total{namespace="openstack", glance="glance"} 0x10 1x20`},
	{alert: "GlanceImageCacheEvictions", name: "no eviction", at: 15 * time.Minute, series: `
		glance_operator_image_cache_evictions_total{namespace="openstack", glance="glance"} 0x30`},
	{alert: "GlanceImageCacheEvictions", name: "an eviction over an hour ago", at: 90 * time.Minute, series: `
		glance_operator_image_cache_evictions_total{namespace="openstack", glance="glance"} 0x10 1x100`},

	{alert: "GlanceTargetClusterDisconnected", name: "disconnected for 15 minutes", fires: true, want: map[string]string{"cluster": "region-a"}, at: 15 * time.Minute, series: `
		glance_operator_target_clusters{cluster="region-a", connected="false"} 1x20`},
	{alert: "GlanceTargetClusterDisconnected", name: "connected", at: 15 * time.Minute, series: `
		glance_operator_target_clusters{cluster="region-a", connected="true"} 1x20`},

	{alert: "GlanceOperatorDown", name: "scraped but down", fires: true, at: 15 * time.Minute, series: `
		` + managerUp + ` 0x20`},
	{alert: "GlanceOperatorDown", name: "not scraped at all", fires: true, at: 15 * time.Minute, series: `
		` + webhookUp + ` 1x20`},
	{alert: "GlanceOperatorDown", name: "up", at: 15 * time.Minute, series: `
		` + managerUp + ` 1x20`},

	{alert: "GlanceWebhookDown", name: "scraped but down", fires: true, at: 10 * time.Minute, series: `
		` + webhookUp + ` 0x20`},
	{alert: "GlanceWebhookDown", name: "not scraped at all", fires: true, at: 10 * time.Minute, series: `
		` + managerUp + ` 1x20`},
	{alert: "GlanceWebhookDown", name: "one replica of two up", at: 10 * time.Minute, series: `
		` + webhookUp + ` 1x20
		up{job="$WEBHOOK_JOB", instance="10.0.0.3:8080"} 0x20`},

	{alert: "GlanceWebhookErrors", name: "errors every minute", fires: true, want: map[string]string{"verdict": "error"}, at: 20 * time.Minute, series: `
		glance_webhook_requests_total{` + validateGlance + `, verdict="error"} 0+1x30
		glance_webhook_requests_total{` + validateGlance + `, verdict="allowed"} 0+10x30`},
	{alert: "GlanceWebhookErrors", name: "throttled every minute", fires: true, want: map[string]string{"verdict": "throttled"}, at: 20 * time.Minute, series: `
		glance_webhook_requests_total{` + validateGlance + `, verdict="throttled"} 0+1x30`},
	{alert: "GlanceWebhookErrors", name: "allowed and denied only", at: 20 * time.Minute, series: `
		glance_webhook_requests_total{` + validateGlance + `, verdict="error"} 0x30
		glance_webhook_requests_total{` + validateGlance + `, verdict="denied"} 0+3x30
		glance_webhook_requests_total{` + validateGlance + `, verdict="allowed"} 0+10x30`},

	{alert: "GlanceWebhookSlow", name: "half the reviews over a second", fires: true, at: 20 * time.Minute, series: `
		glance_webhook_request_duration_seconds_bucket{` + validateGlance + `, verdict="allowed", le="0.5"} 0+10x30
		glance_webhook_request_duration_seconds_bucket{` + validateGlance + `, verdict="allowed", le="1"} 0+10x30
		glance_webhook_request_duration_seconds_bucket{` + validateGlance + `, verdict="allowed", le="2.5"} 0+20x30
		glance_webhook_request_duration_seconds_bucket{` + validateGlance + `, verdict="allowed", le="+Inf"} 0+20x30`},
	{alert: "GlanceWebhookSlow", name: "every review under half a second", at: 20 * time.Minute, series: `
		glance_webhook_request_duration_seconds_bucket{` + validateGlance + `, verdict="allowed", le="0.5"} 0+20x30
		glance_webhook_request_duration_seconds_bucket{` + validateGlance + `, verdict="allowed", le="1"} 0+20x30
		glance_webhook_request_duration_seconds_bucket{` + validateGlance + `, verdict="allowed", le="2.5"} 0+20x30
		glance_webhook_request_duration_seconds_bucket{` + validateGlance + `, verdict="allowed", le="+Inf"} 0+20x30`},
	{alert: "GlanceWebhookSlow", name: "no reviews", at: 20 * time.Minute, series: `
		glance_webhook_request_duration_seconds_bucket{` + validateGlance + `, verdict="allowed", le="+Inf"} 0x30`},

	{alert: "GlanceWebhookCertificateExpiring", name: "expires in 3 days", fires: true, want: map[string]string{"pod": "webhook-a"}, at: 20 * time.Minute, series: `
		glance_webhook_serving_certificate_expiry_timestamp_seconds{job="$WEBHOOK_JOB", pod="webhook-a"} 259200x30`},
	{alert: "GlanceWebhookCertificateExpiring", name: "one replica still on the old certificate", fires: true, want: map[string]string{"pod": "webhook-a"}, at: 20 * time.Minute, series: `
		glance_webhook_serving_certificate_expiry_timestamp_seconds{job="$WEBHOOK_JOB", pod="webhook-a"} 259200x30
		glance_webhook_serving_certificate_expiry_timestamp_seconds{job="$WEBHOOK_JOB", pod="webhook-b"} 7776000x30`},
	{alert: "GlanceWebhookCertificateExpiring", name: "expires in 90 days", at: 20 * time.Minute, series: `
		glance_webhook_serving_certificate_expiry_timestamp_seconds{job="$WEBHOOK_JOB", pod="webhook-a"} 7776000x30`},
	{alert: "GlanceWebhookCertificateExpiring", name: "no certificate loaded yet", at: 20 * time.Minute, series: `
		glance_webhook_serving_certificate_expiry_timestamp_seconds{job="$WEBHOOK_JOB", pod="webhook-a"} 0x30`},
}

// TestAlerts evaluates each alert of the chart over each case's history
// with Prometheus's rule engine, for durations and all, and checks whether
// it fires at the end.
func TestAlerts(t *testing.T) {
	r := renderMonitoring(t)
	jobs := scrapeJobs(t, r)
	// The series name scrape jobs as prometheus-operator would.
	jobNames := strings.NewReplacer("$MANAGER_JOB", jobs["glance-operator-manager"], "$WEBHOOK_JOB", jobs["glance-operator-webhook"])
	if len(jobs) != 2 {
		t.Fatalf("scrape jobs %v, want one for each ServiceMonitor of the manager and the webhook", jobs)
	}
	byName := map[string]alertRule{}
	for _, a := range renderedAlerts(t, r) {
		byName[a.Alert] = a
	}
	for _, c := range alertCases {
		t.Run(c.alert+"/"+c.name, func(t *testing.T) {
			a, ok := byName[c.alert]
			if !ok {
				t.Fatalf("the chart has no alert %s", c.alert)
			}
			c.series = jobNames.Replace(c.series)
			firing, firedAt := evaluate(t, a, c)
			if c.fires != (len(firing) > 0) {
				t.Fatalf("fires = %v at %v, want %v\nexpr: %s", len(firing) > 0, c.at, c.fires, a.Expr)
			}
			if !c.fires && firedAt >= 0 {
				t.Fatalf("fired at %v, want it quiet throughout\nexpr: %s", firedAt, a.Expr)
			}
			for _, f := range firing {
				for k, v := range c.want {
					if got := f.Labels.Get(k); got != v {
						t.Errorf("firing alert has %s=%q, want %q (labels %v)", k, got, v, f.Labels)
					}
				}
				f.Annotations.Range(func(l labels.Label) {
					if strings.Contains(l.Value, "error expanding template") || strings.Contains(l.Value, "<no value>") {
						t.Errorf("annotation %s does not expand: %s", l.Name, l.Value)
					}
				})
			}
		})
	}
}

// evaluate loads the case's series and runs the alert every step from 0 to
// c.at, returning the alerts firing after the last evaluation and when it
// first fired (-1 if never).
func evaluate(t *testing.T, a alertRule, c alertCase) ([]*rules.Alert, time.Duration) {
	t.Helper()
	load := "load 1m\n"
	for _, line := range strings.Split(strings.TrimSpace(c.series), "\n") {
		load += "  " + strings.TrimSpace(line) + "\n"
	}
	storage := promqltest.LoadedStorage(t, load)
	engine := promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)
	expr, err := promQL.ParseExpr(a.Expr)
	if err != nil {
		t.Fatalf("parse %s: %v", a.Alert, err)
	}
	hold, err := parseFor(a.For)
	if err != nil {
		t.Fatalf("alert %s: %v", a.Alert, err)
	}
	rule := rules.NewAlertingRule(a.Alert, expr, hold, 0, labels.FromMap(a.Labels), labels.FromMap(a.Annotations), labels.EmptyLabels(), "", false, nil)
	query := rules.EngineQueryFunc(engine, storage)
	firedAt := time.Duration(-1)
	for ts := time.Duration(0); ts <= c.at; ts += step {
		if _, err := rule.Eval(context.Background(), 0, time.Unix(0, 0).Add(ts), query, nil, 0); err != nil {
			t.Fatalf("evaluate %s at %v: %v", a.Alert, ts, err)
		}
		if firedAt < 0 && rule.State() == rules.StateFiring {
			firedAt = ts
		}
	}
	var firing []*rules.Alert
	for _, al := range rule.ActiveAlerts() {
		if al.State == rules.StateFiring {
			firing = append(firing, al)
		}
	}
	return firing, firedAt
}

// parseFor parses a rule's for, empty meaning none.
func parseFor(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("for %q: %w", s, err)
	}
	return d, nil
}

// TestEveryAlertHasAFiringAndAQuietCase keeps alertCases complete: an alert
// added to the chart without a case that fires and one that stays quiet
// fails here.
func TestEveryAlertHasAFiringAndAQuietCase(t *testing.T) {
	alerts := renderedAlerts(t, renderMonitoring(t))
	known := map[string]bool{}
	for _, a := range alerts {
		known[a.Alert] = true
		var fires, quiet bool
		for _, c := range alertCases {
			if c.alert == a.Alert {
				fires = fires || c.fires
				quiet = quiet || !c.fires
			}
		}
		if !fires || !quiet {
			t.Errorf("alert %s: a case that fires %v, a case that stays quiet %v; want both", a.Alert, fires, quiet)
		}
	}
	for _, c := range alertCases {
		if !known[c.alert] {
			t.Errorf("case %q is for %s, which the chart does not have", c.name, c.alert)
		}
	}
}
