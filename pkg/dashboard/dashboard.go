// Package dashboard builds the operator's Grafana dashboard. The chart ships
// it as files/grafana-dashboard.json, written by `make manifests`, so the
// panels are reviewed as code and their queries can be checked against the
// metrics the operator registers.
package dashboard

import (
	"encoding/json"
	"slices"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	grafana "github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// Identity of the dashboard in Grafana: provisioning replaces the dashboard
// of the same uid.
const (
	UID   = "glance-operator"
	Title = "Glance operator"
)

// Template variable names; the queries refer to them as $name.
const (
	datasourceVariable = "datasource"
	namespaceVariable  = "namespace"
	glanceVariable     = "glance"
)

// Queries of the namespace and glance variables: glance_info has one series
// per Glance, whatever its state.
const (
	namespaceValuesQuery = `label_values(glance_operator_glance_info, namespace)`
	glanceValuesQuery    = `label_values(glance_operator_glance_info{namespace=~"$namespace"}, glance)`
)

// glanceSelector limits per-Glance series to the Glances picked in the
// namespace and glance variables.
const glanceSelector = `namespace=~"$namespace", glance=~"$glance"`

// The panels' PromQL. Windows are fixed ([5m] for rates, [1h] for the
// counts of rare events such as Job runs) rather than $__rate_interval or
// $__range, so that every expression is plain PromQL a parser accepts.
// Per-Glance gauges are aggregated with max by (namespace, glance): a
// replica that led before may still export the same series, stale.
const (
	// 1 when Ready is True, 0 when it is False or Unknown: the series of
	// the other statuses supply the 0, so a Glance that is not Ready shows
	// as such instead of as a gap.
	readyQuery = `max by (namespace, glance) (glance_operator_glance_condition{type="Ready", status="True", ` + glanceSelector + `}` +
		` or 0 * glance_operator_glance_condition{type="Ready", ` + glanceSelector + `})`
	// The conditions that hold Ready back, with their reasons.
	conditionsNotTrueQuery = `max by (namespace, glance, type, status, reason) (glance_operator_glance_condition{status!="True", ` + glanceSelector + `})`
	// An empty upgrade_phase means no upgrade is in flight; label_replace
	// names that, as an empty cell reads like missing data.
	upgradeQuery = `label_replace(max by (namespace, glance, installed_release, target_release, upgrade_phase, launch_mode) (glance_operator_glance_info{` + glanceSelector + `}),` +
		` "upgrade_phase", "Idle", "upgrade_phase", "")`

	reconcileP95Query    = `histogram_quantile(0.95, sum by (le, sub_reconciler) (rate(glance_operator_reconcile_duration_seconds_bucket[5m])))`
	reconcileErrorsQuery = `sum by (sub_reconciler, condition_type) (rate(glance_operator_reconcile_errors_total[5m]))`

	// Counters are summed: a stale replica's counter does not grow, so it
	// adds nothing to an increase.
	dbSyncOutcomesQuery        = `sum by (namespace, glance, result) (increase(glance_operator_db_sync_total{` + glanceSelector + `}[1h]))`
	dbPurgeOutcomesQuery       = `sum by (namespace, glance, result) (increase(glance_operator_db_purge_total{` + glanceSelector + `}[1h]))`
	dbPurgeSinceSuccessQuery   = `time() - max by (namespace, glance) (glance_operator_db_purge_last_success_timestamp_seconds{` + glanceSelector + `})`
	imageCacheEvictionsQuery   = `sum by (namespace, glance) (increase(glance_operator_image_cache_evictions_total{` + glanceSelector + `}[1h]))`
	targetClustersByStateQuery = `count by (connected) (max by (cluster, connected) (glance_operator_target_clusters))`

	webhookVerdictsQuery = `sum by (webhook, verdict) (rate(glance_webhook_requests_total[5m]))`
	webhookP50Query      = `histogram_quantile(0.5, sum by (le, webhook) (rate(glance_webhook_request_duration_seconds_bucket[5m])))`
	webhookP99Query      = `histogram_quantile(0.99, sum by (le, webhook) (rate(glance_webhook_request_duration_seconds_bucket[5m])))`
	webhookInFlightQuery = `sum by (webhook) (glance_webhook_requests_in_flight)`
	// Per pod, so that a replica that did not load the renewed certificate
	// stands out; 0 means none loaded yet, not an expiry in 1970.
	webhookCertificateExpiryQuery = `min by (pod) (glance_webhook_serving_certificate_expiry_timestamp_seconds > 0) - time()`
)

// queries lists every panel expression once; the tests check that the
// panels use exactly these.
var queries = []string{
	readyQuery,
	conditionsNotTrueQuery,
	upgradeQuery,
	reconcileP95Query,
	reconcileErrorsQuery,
	dbSyncOutcomesQuery,
	dbPurgeOutcomesQuery,
	dbPurgeSinceSuccessQuery,
	imageCacheEvictionsQuery,
	targetClustersByStateQuery,
	webhookVerdictsQuery,
	webhookP50Query,
	webhookP99Query,
	webhookInFlightQuery,
	webhookCertificateExpiryQuery,
}

// Queries returns the PromQL expression of every panel target, so that
// tests can check the metrics they name.
func Queries() []string {
	return slices.Clone(queries)
}

// Thresholds of the certificate expiry panel, in seconds: the alert
// GlanceWebhookCertificateExpiring fires under 7 days, and cert-manager
// renews 15 days (the chart's default renewBefore) before expiry.
const (
	certificateExpiryAlert   = 7 * 24 * 3600
	certificateRenewalWindow = 15 * 24 * 3600
)

// Panel sizes on Grafana's 24-column grid.
const (
	fullWidth   = 24
	halfWidth   = 12
	thirdWidth  = 8
	panelHeight = 8
)

// datasource points every panel and variable at the data source picked in
// the datasource variable.
var datasource = common.DataSourceRef{
	Type: cog.ToPtr("prometheus"),
	Uid:  cog.ToPtr("${" + datasourceVariable + "}"),
}

// JSON returns the dashboard as indented JSON ending in a newline. The same
// code gives the same bytes: the SDK's types marshal in field order and
// encoding/json sorts map keys.
func JSON() ([]byte, error) {
	built, err := build().Build()
	if err != nil {
		return nil, err
	}
	numberPanels(built.Panels)
	out, err := json.MarshalIndent(built, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// numberPanels gives the panels ids in order, which the SDK leaves unset
// and Grafana would otherwise assign at load time.
func numberPanels(panels []grafana.PanelOrRowPanel) {
	for i := range panels {
		id := uint32(i + 1)
		switch {
		case panels[i].Panel != nil:
			panels[i].Panel.Id = &id
		case panels[i].RowPanel != nil:
			panels[i].RowPanel.Id = id
		}
	}
}

// build lays the panels out row by row. Rows are added empty and their
// panels after them: Grafana shows the panels nested in a row only while
// the row is collapsed.
func build() *grafana.DashboardBuilder {
	return grafana.NewDashboardBuilder(Title).
		Uid(UID).
		Tags([]string{"openstack", "glance"}).
		Readonly().
		Refresh("1m").
		Time("now-6h", "now").
		Tooltip(grafana.DashboardCursorSyncCrosshair).
		WithVariable(grafana.NewDatasourceVariableBuilder(datasourceVariable).
			Label("Data source").
			Type("prometheus")).
		WithVariable(glanceVariableBuilder(namespaceVariable, "Namespace", namespaceValuesQuery)).
		WithVariable(glanceVariableBuilder(glanceVariable, "Glance", glanceValuesQuery)).
		WithRow(grafana.NewRowBuilder("Glances")).
		WithPanel(readyPanel()).
		WithPanel(upgradePanel()).
		WithPanel(conditionsNotTruePanel()).
		WithRow(grafana.NewRowBuilder("Reconciliation")).
		WithPanel(timeseriesPanel("Reconcile p95 per step",
			"95th percentile of each pipeline step's duration over 5m.", "s", halfWidth).
			WithTarget(target("A", reconcileP95Query, "{{sub_reconciler}}"))).
		WithPanel(timeseriesPanel("Reconcile errors per step",
			"Errors per second of each pipeline step, by the condition type it reports.", "short", halfWidth).
			WithTarget(target("A", reconcileErrorsQuery, "{{sub_reconciler}} {{condition_type}}"))).
		WithRow(grafana.NewRowBuilder("Database and image cache")).
		WithPanel(timeseriesPanel("DB sync outcomes",
			"glance-manage db sync runs that ended in the last hour, by result.", "short", thirdWidth).
			WithTarget(target("A", dbSyncOutcomesQuery, "{{namespace}}/{{glance}} {{result}}"))).
		WithPanel(timeseriesPanel("DB purge outcomes",
			"db-purge CronJob runs that ended in the last hour, by result.", "short", thirdWidth).
			WithTarget(target("A", dbPurgeOutcomesQuery, "{{namespace}}/{{glance}} {{result}}"))).
		WithPanel(dbPurgeSinceSuccessPanel()).
		WithPanel(timeseriesPanel("Image cache evictions per Glance",
			"Glance pods the kubelet evicted in the last hour for filling their image-cache emptyDir: the cache limit is too small or the pruner does not run.", "short", fullWidth).
			WithTarget(target("A", imageCacheEvictionsQuery, "{{namespace}}/{{glance}}"))).
		WithRow(grafana.NewRowBuilder("Admission webhook")).
		WithPanel(timeseriesPanel("Webhook verdicts",
			"Admission reviews per second, by webhook and verdict.", "reqps", halfWidth).
			WithTarget(target("A", webhookVerdictsQuery, "{{webhook}} {{verdict}}"))).
		WithPanel(timeseriesPanel("Webhook latency",
			"Median and 99th percentile of the time to answer an admission review, by webhook.", "s", halfWidth).
			WithTarget(target("A", webhookP50Query, "{{webhook}} p50")).
			WithTarget(target("B", webhookP99Query, "{{webhook}} p99"))).
		WithPanel(timeseriesPanel("Webhook requests in flight",
			"Admission reviews being served, by webhook.", "short", halfWidth).
			WithTarget(target("A", webhookInFlightQuery, "{{webhook}}"))).
		WithPanel(certificateExpiryPanel()).
		WithRow(grafana.NewRowBuilder("Target clusters")).
		WithPanel(targetClustersPanel())
}

// glanceVariableBuilder builds a variable that picks Glances, refreshed
// with the time range so that new Glances show up.
func glanceVariableBuilder(name, label, query string) *grafana.QueryVariableBuilder {
	return grafana.NewQueryVariableBuilder(name).
		Label(label).
		Datasource(datasource).
		Query(grafana.StringOrMap{String: cog.ToPtr(query)}).
		Definition(query).
		Refresh(grafana.VariableRefreshOnTimeRangeChanged).
		Sort(grafana.VariableSortAlphabeticalAsc).
		Multi(true).
		IncludeAll(true).
		// A regex rather than the list of every value keeps the queries
		// short however many Glances there are.
		AllValue(".*")
}

func target(refID, expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().
		RefId(refID).
		Datasource(datasource).
		Expr(expr).
		LegendFormat(legend)
}

// tableTarget is an instant query whose labels become the table's columns.
func tableTarget(refID, expr string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().
		RefId(refID).
		Datasource(datasource).
		Expr(expr).
		Instant().
		Format(prometheus.PromQueryFormatTable)
}

func timeseriesPanel(title, description, unit string, width uint32) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource).
		Unit(unit).
		Min(0).
		Span(width).
		Height(panelHeight).
		Legend(legend()).
		Tooltip(tooltip())
}

// legend and tooltip are set in full: the SDK's defaults hide the legend
// and leave the tooltip mode empty.
func legend() *common.VizLegendOptionsBuilder {
	return common.NewVizLegendOptionsBuilder().
		DisplayMode(common.LegendDisplayModeList).
		Placement(common.LegendPlacementBottom).
		ShowLegend(true)
}

func tooltip() *common.VizTooltipOptionsBuilder {
	return common.NewVizTooltipOptionsBuilder().
		Mode(common.TooltipDisplayModeMulti).
		Sort(common.SortOrderDescending)
}

func readyPanel() *statetimeline.PanelBuilder {
	return statetimeline.NewPanelBuilder().
		Title("Ready per Glance").
		Description("The Ready condition of each Glance: it is True when the nine sub-conditions are.").
		Datasource(datasource).
		Span(fullWidth).
		Height(panelHeight).
		ShowValue(common.VisibilityModeNever).
		Legend(legend()).
		Tooltip(tooltip()).
		Mappings([]grafana.ValueMapping{{ValueMap: &grafana.ValueMap{
			Type: grafana.MappingTypeValueToText,
			Options: map[string]grafana.ValueMappingResult{
				"0": {Text: cog.ToPtr("Not ready"), Color: cog.ToPtr("red"), Index: cog.ToPtr[int32](0)},
				"1": {Text: cog.ToPtr("Ready"), Color: cog.ToPtr("green"), Index: cog.ToPtr[int32](1)},
			},
		}}}).
		WithTarget(target("A", readyQuery, "{{namespace}}/{{glance}}"))
}

func upgradePanel() *table.PanelBuilder {
	return table.NewPanelBuilder().
		Title("Upgrade phase per Glance").
		Description("Installed and target release of each Glance and the phase of the upgrade in flight (Expanding, Migrating, RollingUpdate, Contracting), Idle when there is none.").
		Datasource(datasource).
		Span(halfWidth).
		Height(panelHeight).
		WithTarget(tableTarget("A", upgradeQuery)).
		WithTransformation(organize(map[string]string{
			"namespace":         "Namespace",
			"glance":            "Glance",
			"installed_release": "Installed release",
			"target_release":    "Target release",
			"upgrade_phase":     "Upgrade phase",
			"launch_mode":       "Launch mode",
		}, []string{"namespace", "glance", "installed_release", "target_release", "upgrade_phase", "launch_mode"}))
}

func conditionsNotTruePanel() *table.PanelBuilder {
	return table.NewPanelBuilder().
		Title("Conditions not True").
		Description("The conditions of each Glance that are False or Unknown now, with their reasons: what holds Ready back.").
		Datasource(datasource).
		Span(halfWidth).
		Height(panelHeight).
		NoValue("All conditions are True").
		WithTarget(tableTarget("A", conditionsNotTrueQuery)).
		WithTransformation(organize(map[string]string{
			"namespace": "Namespace",
			"glance":    "Glance",
			"type":      "Condition",
			"status":    "Status",
			"reason":    "Reason",
		}, []string{"namespace", "glance", "type", "status", "reason"}))
}

// organize keeps the label columns of a table query in order, renamed,
// and drops its Time and Value columns, which are the same in every row.
func organize(rename map[string]string, order []string) grafana.DataTransformerConfig {
	index := map[string]int{}
	for i, name := range order {
		index[name] = i
	}
	return grafana.DataTransformerConfig{
		Id: "organize",
		Options: map[string]any{
			"excludeByName": map[string]bool{"Time": true, "Value": true},
			"indexByName":   index,
			"renameByName":  rename,
		},
	}
}

func dbPurgeSinceSuccessPanel() *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		Title("Time since last successful DB purge").
		Description("How long ago each Glance's newest successful db-purge CronJob run completed.").
		Datasource(datasource).
		Unit("dtdurations").
		Span(thirdWidth).
		Height(panelHeight).
		// The purge schedule is the user's, so no age is wrong by itself.
		ColorMode(common.BigValueColorModeNone).
		GraphMode(common.BigValueGraphModeNone).
		TextMode(common.BigValueTextModeValueAndName).
		ReduceOptions(lastValue()).
		WithTarget(target("A", dbPurgeSinceSuccessQuery, "{{namespace}}/{{glance}}"))
}

func certificateExpiryPanel() *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		Title("Webhook certificate expiry").
		Description("Time until the NotAfter of the serving certificate each webhook pod loaded last. Orange: renewal is due (cert-manager's default renewBefore) but was not picked up; red: the GlanceWebhookCertificateExpiring alert fires.").
		Datasource(datasource).
		Unit("dtdurations").
		Span(halfWidth).
		Height(panelHeight).
		ColorMode(common.BigValueColorModeBackground).
		GraphMode(common.BigValueGraphModeNone).
		TextMode(common.BigValueTextModeValueAndName).
		ReduceOptions(lastValue()).
		Thresholds(grafana.NewThresholdsConfigBuilder().
			Mode(grafana.ThresholdsModeAbsolute).
			Steps([]grafana.Threshold{
				{Color: "red"},
				{Color: "orange", Value: cog.ToPtr[float64](certificateExpiryAlert)},
				{Color: "green", Value: cog.ToPtr[float64](certificateRenewalWindow)},
			})).
		WithTarget(target("A", webhookCertificateExpiryQuery, "{{pod}}"))
}

func targetClustersPanel() *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		Title("Target clusters by connection").
		Description("Registered target clusters, by whether the operator is connected to them (API server answers, caches synced).").
		Datasource(datasource).
		Span(fullWidth).
		Height(panelHeight).
		ColorMode(common.BigValueColorModeNone).
		GraphMode(common.BigValueGraphModeArea).
		TextMode(common.BigValueTextModeValueAndName).
		ReduceOptions(lastValue()).
		WithTarget(target("A", targetClustersByStateQuery, "connected: {{connected}}"))
}

func lastValue() *common.ReduceDataOptionsBuilder {
	return common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})
}
