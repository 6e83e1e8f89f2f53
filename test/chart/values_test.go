package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/c5c3/glance-operator/hack/images/ociimage"
	"github.com/c5c3/glance-operator/test/controlplane"
)

func TestLintStrict(t *testing.T) {
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range Matrix {
		name, values := m.Name, m.Values
		lint := action.NewLint()
		lint.Strict = true
		lint.Namespace = Namespace
		lint.KubeVersion = KubeVersion()
		if values == nil {
			values = map[string]any{}
		}
		result := lint.Run([]string{dir}, values)
		for _, e := range result.Errors {
			t.Errorf("%s: helm lint --strict: %v", name, e)
		}
		for _, m := range result.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("%s: helm lint --strict: %s", name, m)
			}
		}
	}
}

func TestValuesSchemaRejects(t *testing.T) {
	for name, c := range map[string]struct {
		values map[string]any
		want   string
	}{
		"misspelled key":    {map[string]any{"manager": map[string]any{"replicsa": 2}}, "'replicsa' not allowed"},
		"unknown top level": {map[string]any{"webhooks": map[string]any{}}, "'webhooks' not allowed"},
		"wrong type":        {map[string]any{"webhook": map[string]any{"replicas": "two"}}, "/webhook/replicas"},
		"wrong enum":        {map[string]any{"manager": map[string]any{"logFormat": "xml"}}, "/manager/logFormat"},
		"zero replicas":     {map[string]any{"webhook": map[string]any{"replicas": 0}}, "/webhook/replicas"},
		"bad issuer kind":   {map[string]any{"webhook": map[string]any{"certManager": map[string]any{"issuerRef": map[string]any{"name": "x", "kind": "Vault"}}}}, "/webhook/certManager/issuerRef/kind"},
		// Rules bundled from schemas/ into $defs.
		"reserved common label":    {map[string]any{"commonLabels": map[string]any{"app.kubernetes.io/name": "x"}}, "/commonLabels"},
		"pull Secret without name": {map[string]any{"manager": map[string]any{"imagePullSecrets": []any{map[string]any{}}}}, "/manager/imagePullSecrets/0"},
		"mount without a path":     {map[string]any{"webhook": map[string]any{"extraVolumeMounts": []any{map[string]any{"name": "x"}}}}, "/webhook/extraVolumeMounts/0"},
		"address for a CIDR":       {map[string]any{"webhook": map[string]any{"networkPolicy": map[string]any{"apiServerCIDRs": []any{"10.0.0.1"}}}}, "/webhook/networkPolicy/apiServerCIDRs/0"},
		"unknown resources key":    {map[string]any{"manager": map[string]any{"resources": map[string]any{"limit": map[string]any{}}}}, "/manager/resources"},
		"unknown issuerRef key":    {map[string]any{"webhook": map[string]any{"certManager": map[string]any{"issuerRef": map[string]any{"name": "x", "namespace": "y"}}}}, "/webhook/certManager/issuerRef"},
		"number as extra object":   {map[string]any{"extraObjects": []any{1}}, "/extraObjects/0"},
		// global is open to an umbrella's keys, not to wrong types of its own.
		"bad global registry":         {map[string]any{"global": map[string]any{"imageRegistry": "a//b"}}, "/global/imageRegistry"},
		"number as priority class":    {map[string]any{"global": map[string]any{"priorityClassName": 5}}, "/global/priorityClassName"},
		"unknown strategy":            {map[string]any{"manager": map[string]any{"strategy": map[string]any{"type": "Bogus"}}}, "/manager/strategy/type"},
		"Recreate with rollingUpdate": {map[string]any{"manager": map[string]any{"strategy": map[string]any{"type": "Recreate", "rollingUpdate": map[string]any{"maxSurge": 1}}}}, "/manager/strategy/rollingUpdate"},
		"surge neither number nor %":  {map[string]any{"webhook": map[string]any{"strategy": map[string]any{"rollingUpdate": map[string]any{"maxSurge": "1"}}}}, "/webhook/strategy/rollingUpdate/maxSurge"},
		"negative revision history":   {map[string]any{"webhook": map[string]any{"revisionHistoryLimit": -1}}, "/webhook/revisionHistoryLimit"},
		"probe timeout not a number":  {map[string]any{"manager": map[string]any{"readinessProbe": map[string]any{"timeoutSeconds": "x"}}}, "/manager/readinessProbe/timeoutSeconds"},
		"probe handler as a timing":   {map[string]any{"webhook": map[string]any{"livenessProbe": map[string]any{"exec": map[string]any{}}}}, "/webhook/livenessProbe"},
		// The API server takes no successThreshold but 1 for a liveness probe.
		"liveness successThreshold": {map[string]any{"manager": map[string]any{"livenessProbe": map[string]any{"successThreshold": 2}}}, "/manager/livenessProbe/successThreshold"},
		"sidecars not a list":       {map[string]any{"webhook": map[string]any{"extraContainers": map[string]any{"name": "x"}}}, "/webhook/extraContainers"},
		"sidecar without a name":    {map[string]any{"manager": map[string]any{"extraContainers": []any{map[string]any{"image": "x"}}}}, "/manager/extraContainers/0"},
	} {
		_, err := Render(c.values, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: render error = %v, want one naming %q", name, err, c.want)
		}
	}
	// Without cert-manager the user must bring the certificate.
	_, err := Render(map[string]any{"webhook": map[string]any{"certManager": map[string]any{"enabled": false}}}, Options{})
	if err == nil || !strings.Contains(err.Error(), "webhook.tls.secretName is required") {
		t.Errorf("cert-manager off without a Secret: render error = %v", err)
	}
}

// TestValuesSchemaAccepts renders values that reach into every object the
// schema leaves open, as Kubernetes defines it: a schema that closed one
// would refuse them.
func TestValuesSchemaAccepts(t *testing.T) {
	component := func() map[string]any {
		return map[string]any{
			"tolerations":               []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "control-plane", "effect": "NoSchedule"}},
			"affinity":                  map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "role", "operator": "In", "values": []any{"cp"}}}}}}}},
			"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}},
			"nodeSelector":              map[string]any{"kubernetes.io/os": "linux"},
			"podSecurityContext":        map[string]any{"runAsNonRoot": true, "supplementalGroups": []any{1000}},
			"securityContext":           map[string]any{"allowPrivilegeEscalation": false, "privileged": false, "procMount": "Default"},
			"resources":                 map[string]any{"requests": map[string]any{"cpu": "1", "ephemeral-storage": "1Gi"}, "limits": map[string]any{"memory": "1Gi"}},
			"extraEnv":                  []any{map[string]any{"name": "X", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "metadata.name"}}}},
			"envFrom":                   []any{map[string]any{"configMapRef": map[string]any{"name": "env"}}},
			"extraVolumes":              []any{map[string]any{"name": "extra", "configMap": map[string]any{"name": "extra"}}},
			"extraVolumeMounts":         []any{map[string]any{"name": "extra", "mountPath": "/extra", "readOnly": true}},
			"podDisruptionBudget":       map[string]any{"maxUnavailable": 1},
		}
	}
	webhook := component()
	webhook["namespaceSelector"] = map[string]any{"matchExpressions": []any{map[string]any{"key": "team", "operator": "Exists"}}}
	webhook["certManager"] = map[string]any{"issuerRef": map[string]any{"name": "ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}}
	values := map[string]any{
		"manager":      component(),
		"webhook":      webhook,
		"commonLabels": map[string]any{"team": "platform"},
		"extraObjects": []any{"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-extra\n"},
		// An umbrella chart's globals, meant for its other subcharts.
		"global": map[string]any{"storageClass": "fast", "postgresql": map[string]any{"auth": map[string]any{"username": "x"}}},
	}
	if _, err := Render(values, Options{}); err != nil {
		t.Fatalf("render: %v", err)
	}
}

func TestKubeVersionFloor(t *testing.T) {
	// CRD field selectors, which the webhook's backend lookup uses, are on by
	// default from 1.31.
	if _, err := Render(nil, Options{KubeVersion: &chartutil.KubeVersion{Version: "v1.30.9", Major: "1", Minor: "30"}}); err == nil || !strings.Contains(err.Error(), "kubeVersion") {
		t.Errorf("render for 1.30: error = %v, want the chart's kubeVersion to refuse it", err)
	}
	if _, err := Render(nil, Options{KubeVersion: &chartutil.KubeVersion{Version: "v1.31.0", Major: "1", Minor: "31"}}); err != nil {
		t.Errorf("render for 1.31: %v", err)
	}
}

// TestEveryValueIsDocumented holds the chart README's generated table to
// values.yaml: every value has a row (its own or an ancestor's) that
// describes it. helm-docs writes a row without a description for a value
// without a "# --" comment, and for one whose comment it misreads (a
// space before "--" inside the text makes it a key).
func TestEveryValueIsDocumented(t *testing.T) {
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| ([A-Za-z0-9.]+) \\| ([a-z]+) \\| `.*` \\| (.*) \\|$")
	documented := map[string]bool{}
	for _, line := range strings.Split(string(readme), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		documented[m[1]] = true
		if strings.TrimSpace(m[3]) == "" {
			t.Errorf("README's row of %s has no description: give it a \"# --\" comment in values.yaml", m[1])
		}
	}
	if len(documented) == 0 {
		t.Fatal("README has no values table")
	}
	for _, leaf := range leaves(values, "") {
		covered := false
		for prefix := leaf; prefix != ""; prefix = parent(prefix) {
			covered = covered || documented[prefix]
		}
		if !covered {
			t.Errorf("values.yaml key %s is missing from the README's table", leaf)
		}
	}
}

func leaves(v any, prefix string) []string {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return []string{prefix}
	}
	var out []string
	for k, child := range m {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		out = append(out, leaves(child, key)...)
	}
	return out
}

func parent(key string) string {
	if i := strings.LastIndex(key, "."); i >= 0 {
		return key[:i]
	}
	return ""
}

func TestCRDsAreTheGenerated(t *testing.T) {
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "files", "crds", "*.yaml"))
	if err != nil || len(files) != 2 {
		t.Fatalf("files/crds holds %v (%v), want the two generated CRDs", files, err)
	}
	r := render(t, "defaults")
	for _, f := range files {
		objs, err := controlplane.ReadObjects(f)
		if err != nil {
			t.Fatal(err)
		}
		want := decode[apiextensionsv1.CustomResourceDefinition](t, objs[0])
		got := decode[apiextensionsv1.CustomResourceDefinition](t, mustGet(t, r, "CustomResourceDefinition", want.Name))
		if !reflect.DeepEqual(got.Spec, want.Spec) {
			t.Errorf("rendered CRD %s differs from %s", want.Name, f)
		}
		if got.Annotations["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %s annotations %v lack helm.sh/resource-policy: keep", got.Name, got.Annotations)
		}
	}
	noKeep, err := Render(map[string]any{"crds": map[string]any{"keep": false}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range noKeep.Select("CustomResourceDefinition") {
		if _, ok := o.GetAnnotations()["helm.sh/resource-policy"]; ok {
			t.Errorf("crds.keep=false still keeps %s", o.GetName())
		}
	}
	none, err := Render(map[string]any{"crds": map[string]any{"enabled": false}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := none.Select("CustomResourceDefinition"); len(got) != 0 {
		t.Errorf("crds.enabled=false renders %d CRDs", len(got))
	}
}

func TestCertManagerChain(t *testing.T) {
	r := render(t, "defaults")
	selfSigned := mustGet(t, r, "Issuer", webhookName+"-selfsigned")
	if _, ok, _ := unstructured.NestedMap(selfSigned.Object, "spec", "selfSigned"); !ok {
		t.Errorf("Issuer %s is not self-signed", selfSigned.GetName())
	}
	ca := mustGet(t, r, "Certificate", webhookName+"-ca")
	if isCA, _, _ := unstructured.NestedBool(ca.Object, "spec", "isCA"); !isCA {
		t.Error("the CA Certificate is not a CA")
	}
	if ref, _, _ := unstructured.NestedString(ca.Object, "spec", "issuerRef", "name"); ref != selfSigned.GetName() {
		t.Errorf("the CA Certificate is issued by %q, want %q", ref, selfSigned.GetName())
	}
	caSecret, _, _ := unstructured.NestedString(ca.Object, "spec", "secretName")
	caIssuer := mustGet(t, r, "Issuer", webhookName+"-ca")
	if s, _, _ := unstructured.NestedString(caIssuer.Object, "spec", "ca", "secretName"); s != caSecret || s == "" {
		t.Errorf("the CA Issuer signs with Secret %q, the CA Certificate writes %q", s, caSecret)
	}
	serving := mustGet(t, r, "Certificate", webhookName+"-serving-cert")
	if ref, _, _ := unstructured.NestedString(serving.Object, "spec", "issuerRef", "name"); ref != caIssuer.GetName() {
		t.Errorf("the serving Certificate is issued by %q, want the CA Issuer %q", ref, caIssuer.GetName())
	}
	dns, _, _ := unstructured.NestedStringSlice(serving.Object, "spec", "dnsNames")
	if want := []string{webhookName + "." + Namespace + ".svc", webhookName + "." + Namespace + ".svc.cluster.local"}; !reflect.DeepEqual(dns, want) {
		t.Errorf("serving Certificate dnsNames = %v, want %v", dns, want)
	}
	for field, want := range map[string]string{"duration": "2160h", "renewBefore": "360h", "secretName": webhookName + "-serving-cert"} {
		if got, _, _ := unstructured.NestedString(serving.Object, "spec", field); got != want {
			t.Errorf("serving Certificate %s = %q, want %q", field, got, want)
		}
	}

	own, err := Render(map[string]any{"webhook": map[string]any{"certManager": map[string]any{
		"issuerRef": map[string]any{"name": "platform-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"},
		"duration":  "720h", "renewBefore": "240h",
	}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := own.Select("Issuer"); len(got) != 0 {
		t.Errorf("with an issuerRef the chart still makes %d Issuers", len(got))
	}
	if got := own.Select("Certificate"); len(got) != 1 {
		t.Fatalf("with an issuerRef the chart makes %d Certificates, want the serving one", len(got))
	}
	cert := own.Select("Certificate")[0]
	if ref, _, _ := unstructured.NestedStringMap(cert.Object, "spec", "issuerRef"); !reflect.DeepEqual(ref, map[string]string{"name": "platform-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}) {
		t.Errorf("serving Certificate issuerRef = %v", ref)
	}
	if d, _, _ := unstructured.NestedString(cert.Object, "spec", "duration"); d != "720h" {
		t.Errorf("serving Certificate duration = %q, want the value 720h", d)
	}

	off := render(t, "cert-manager-off")
	if n := len(off.Select("Certificate")) + len(off.Select("Issuer")); n != 0 {
		t.Errorf("cert-manager off still renders %d cert-manager objects", n)
	}
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		if _, ok := mustGet(t, off, kind, "glance-operator").GetAnnotations()["cert-manager.io/inject-ca-from"]; ok {
			t.Errorf("cert-manager off: %s still asks cainjector for a CA", kind)
		}
	}
}

func TestMonitoring(t *testing.T) {
	r := render(t, "monitoring")
	for _, component := range []string{managerName, webhookName} {
		sm := decode[monitoringv1.ServiceMonitor](t, mustGet(t, r, "ServiceMonitor", component))
		if sm.Labels["release"] != "prometheus" {
			t.Errorf("ServiceMonitor %s labels %v lack the values' labels", component, sm.Labels)
		}
		if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" {
			t.Fatalf("ServiceMonitor %s endpoints = %+v, want the metrics port", component, sm.Spec.Endpoints)
		}
		// The manager's per-Glance series name the Glance's namespace; without
		// honorLabels the target's namespace, the operator's, would replace it.
		if honor := sm.Spec.Endpoints[0].HonorLabels; honor != (component == managerName) {
			t.Errorf("ServiceMonitor %s honorLabels = %v, want it on the manager only", component, honor)
		}
		// It must select exactly one Service, the one with a metrics port.
		var selected []string
		for _, o := range r.Select("Service") {
			svc := decode[corev1.Service](t, o)
			matches := true
			for k, v := range sm.Spec.Selector.MatchLabels {
				matches = matches && svc.Labels[k] == v
			}
			if !matches {
				continue
			}
			for _, p := range svc.Spec.Ports {
				if p.Name == "metrics" {
					selected = append(selected, svc.Name)
				}
			}
		}
		if want := []string{component + "-metrics"}; !reflect.DeepEqual(selected, want) {
			t.Errorf("ServiceMonitor %s scrapes %v, want %v", component, selected, want)
		}
	}
	rule := decode[monitoringv1.PrometheusRule](t, mustGet(t, r, "PrometheusRule", "glance-operator"))
	if len(rule.Spec.Groups) == 0 || len(rule.Spec.Groups[0].Rules) == 0 {
		t.Errorf("PrometheusRule has no rules: %+v", rule.Spec)
	}
	for _, g := range rule.Spec.Groups {
		for _, rl := range g.Rules {
			if expr := rl.Expr.String(); strings.Contains(expr, "{{") || strings.Contains(expr, "job=\"\"") {
				t.Errorf("alert %s has an unrendered expression %q", rl.Alert, expr)
			}
		}
	}
	dashboard := decode[corev1.ConfigMap](t, mustGet(t, r, "ConfigMap", "glance-operator-dashboard"))
	if dashboard.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v lack grafana_dashboard", dashboard.Labels)
	}
	var board struct {
		UID    string           `json:"uid"`
		Panels []map[string]any `json:"panels"`
	}
	if err := json.Unmarshal([]byte(dashboard.Data["glance-operator.json"]), &board); err != nil || board.UID == "" || len(board.Panels) == 0 {
		t.Errorf("dashboard is not a Grafana dashboard (%v): %+v", err, board)
	}
}

// TestImagesAreWhatMakeImagesBuilds holds the chart's default images to the
// names `make images` gives its archives, at the chart's appVersion.
func TestImagesAreWhatMakeImagesBuilds(t *testing.T) {
	r := render(t, "defaults")
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, image := range ociimage.Images {
		deployment := managerName
		if image.Name == "glance-webhook" {
			deployment = webhookName
		}
		d := decode[appsv1.Deployment](t, mustGet(t, r, "Deployment", deployment))
		if got, want := d.Spec.Template.Spec.Containers[0].Image, image.Repository+":"+c.Metadata.AppVersion; got != want {
			t.Errorf("%s runs %s, want the image make images builds: %s", deployment, got, want)
		}
	}
}

// TestDurationsAreChecked: every duration value takes the schema's one
// duration rule; an optional one may be empty.
func TestDurationsAreChecked(t *testing.T) {
	for _, values := range []map[string]any{
		{"manager": map[string]any{"leaderElection": map[string]any{"leaseDuration": "soon"}}},
		{"webhook": map[string]any{"certManager": map[string]any{"duration": "90 days"}}},
		{"monitoring": map[string]any{"serviceMonitor": map[string]any{"scrapeTimeout": "fast"}}},
	} {
		if _, err := Render(values, Options{}); err == nil {
			t.Errorf("values %v rendered; want the duration refused", values)
		}
	}
	if _, err := Render(map[string]any{"monitoring": map[string]any{"serviceMonitor": map[string]any{"scrapeTimeout": "", "interval": "1m30s"}}}, Options{}); err != nil {
		t.Errorf("an empty scrapeTimeout and a 1m30s interval: %v", err)
	}
}
