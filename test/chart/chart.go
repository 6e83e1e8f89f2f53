// Package chart renders charts/glance-operator with the Helm SDK, as
// `helm template` does, for the chart tests and for the suites that run the
// binaries under the chart's own objects (its RBAC, its ServiceAccounts).
package chart

import (
	"io"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	helmchart "helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/c5c3/glance-operator/test/controlplane"
)

// Defaults of a render.
const (
	ReleaseName = "glance-operator"
	Namespace   = "glance-system"
)

// Install is one install of the values matrix.
type Install struct {
	Name   string
	Values map[string]any
}

// Matrix is the values every chart suite renders: the defaults, and the
// installs a platform team picks most.
var Matrix = []Install{
	{"defaults", nil},
	{"cert-manager-off", map[string]any{"webhook": map[string]any{
		"certManager": map[string]any{"enabled": false},
		"tls":         map[string]any{"secretName": "glance-webhook-tls", "caBundle": "Q0EgYnVuZGxl"},
	}}},
	{"namespaced", map[string]any{"watchNamespace": "openstack,tenant-b"}},
	{"monitoring", map[string]any{"monitoring": map[string]any{
		"serviceMonitor": map[string]any{
			"enabled": true, "labels": map[string]any{"release": "prometheus"}, "annotations": map[string]any{"example.com/owner": "storage"},
			"scrapeTimeout":     "10s",
			"relabelings":       []any{map[string]any{"sourceLabels": []any{"__meta_kubernetes_pod_node_name"}, "targetLabel": "node"}},
			"metricRelabelings": []any{map[string]any{"action": "drop", "sourceLabels": []any{"__name__"}, "regex": "go_gc_.*"}},
		},
		"prometheusRule": map[string]any{"enabled": true},
		"dashboard":      map[string]any{"enabled": true},
	}}},
	{"single-replica", map[string]any{"manager": map[string]any{"replicas": 1}, "webhook": map[string]any{"replicas": 1}}},
	{"common-labels", map[string]any{"commonLabels": map[string]any{"team": "storage", "example.com/cost-center": "42"}}},
	{"platform-overrides", map[string]any{
		"global": map[string]any{"imageRegistry": "mirror.example.com/ghcr", "imagePullSecrets": []any{map[string]any{"name": "mirror-pull"}}},
		"manager": map[string]any{
			"imagePullSecrets":  []any{map[string]any{"name": "manager-pull"}},
			"envFrom":           []any{map[string]any{"configMapRef": map[string]any{"name": "proxy-env"}}},
			"extraVolumes":      []any{map[string]any{"name": "ca", "configMap": map[string]any{"name": "corporate-ca"}}},
			"extraVolumeMounts": []any{map[string]any{"name": "ca", "mountPath": "/etc/ssl/corporate", "readOnly": true}},
		},
		"webhook": map[string]any{"hostNetwork": true, "port": 10260},
		"extraObjects": []any{
			map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "corporate-ca", "namespace": "{{ .Release.Namespace }}"}, "data": map[string]any{"ca.crt": "PEM"}},
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-proxy-env\n  namespace: {{ .Release.Namespace }}\ndata:\n  HTTPS_PROXY: http://proxy.example.com:3128\n",
		},
	}},
	{"service-accounts", map[string]any{
		"manager": map[string]any{"serviceAccount": map[string]any{"create": false, "name": "platform-glance-operator"}},
		"webhook": map[string]any{"serviceAccount": map[string]any{"name": "glance-admission", "annotations": map[string]any{"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/x"}}},
	}},
	{"disruption-budgets", map[string]any{
		"manager": map[string]any{"podDisruptionBudget": map[string]any{"enabled": false}},
		"webhook": map[string]any{"podDisruptionBudget": map[string]any{"maxUnavailable": "50%", "unhealthyPodEvictionPolicy": "AlwaysAllow"}},
	}},
	{"manager-network-policy", map[string]any{"manager": map[string]any{"networkPolicy": map[string]any{
		"enabled":     true,
		"metricsFrom": []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}}},
	}}}},
	{"leader-election-timings", map[string]any{"manager": map[string]any{"leaderElection": map[string]any{
		"leaseDuration": "1m", "renewDeadline": "40s", "retryPeriod": "5s",
	}}}},
	{"target-cluster-rbac", map[string]any{"targetCluster": map[string]any{"rbac": true}}},
	// Values of the Deployments themselves, with the global priority class
	// beside an umbrella chart's global key (Recreate: deployments_test.go).
	{"deployment-overrides", map[string]any{
		"global": map[string]any{"priorityClassName": "platform-critical", "storageClass": "fast"},
		"manager": map[string]any{
			"strategy":             map[string]any{"rollingUpdate": map[string]any{"maxSurge": 0, "maxUnavailable": 1}},
			"revisionHistoryLimit": 3,
			"livenessProbe":        map[string]any{"timeoutSeconds": 5, "failureThreshold": 6},
			"readinessProbe":       map[string]any{"periodSeconds": 15, "successThreshold": 2},
			"extraContainers":      []any{sidecar("log-shipper")},
		},
		"webhook": map[string]any{
			"priorityClassName":    "webhook-critical",
			"strategy":             map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": 1, "maxUnavailable": "0%"}},
			"revisionHistoryLimit": 0,
			"livenessProbe":        map[string]any{"initialDelaySeconds": 5, "timeoutSeconds": 3},
			"readinessProbe":       map[string]any{"failureThreshold": 2},
			"extraContainers":      []any{sidecar("cert-watcher")},
		},
	}},
	{"webhook-network-policy", map[string]any{"webhook": map[string]any{"networkPolicy": map[string]any{
		"enabled":        true,
		"apiServerCIDRs": []any{"10.0.0.0/24", "fd00::/64"},
		"metricsFrom":    []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}}},
	}}}},
}

// sidecar is an extraContainers entry that the restricted Pod Security
// Standard admits.
func sidecar(name string) map[string]any {
	return map[string]any{
		"name":  name,
		"image": "registry.example.com/" + name + ":1.0",
		"securityContext": map[string]any{
			"allowPrivilegeEscalation": false,
			"readOnlyRootFilesystem":   true,
			"capabilities":             map[string]any{"drop": []any{"ALL"}},
		},
	}
}

// MatrixValues returns the values of the matrix install name.
func MatrixValues(name string) (map[string]any, bool) {
	for _, i := range Matrix {
		if i.Name == name {
			return i.Values, true
		}
	}
	return nil, false
}

// Dir returns the chart's directory.
func Dir() (string, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "charts", "glance-operator"), nil
}

// Load reads the chart from the repository.
func Load() (*helmchart.Chart, error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	return loader.Load(dir)
}

// Options of a render; zero values take the defaults above.
type Options struct {
	ReleaseName, Namespace string
	// KubeVersion is the cluster version the render assumes; nil means the
	// local control plane's.
	KubeVersion *chartutil.KubeVersion
}

// Rendered is the output of a render: the manifest text and its objects in
// order.
type Rendered struct {
	Manifest string
	Notes    string
	Objects  []*unstructured.Unstructured
}

// Render renders the chart with values, as `helm template` does: the values
// are checked against values.schema.json and the chart's kubeVersion against
// the control plane's version.
func Render(values map[string]any, opts Options) (*Rendered, error) {
	c, err := Load()
	if err != nil {
		return nil, err
	}
	return RenderChart(c, values, opts)
}

// RenderChart renders an already loaded chart.
func RenderChart(c *helmchart.Chart, values map[string]any, opts Options) (*Rendered, error) {
	if opts.ReleaseName == "" {
		opts.ReleaseName = ReleaseName
	}
	if opts.Namespace == "" {
		opts.Namespace = Namespace
	}
	cfg := &action.Configuration{
		KubeClient:   &kubefake.PrintingKubeClient{Out: io.Discard},
		Releases:     storage.Init(driver.NewMemory()),
		Capabilities: chartutil.DefaultCapabilities,
		Log:          func(string, ...any) {},
	}
	install := action.NewInstall(cfg)
	install.DryRun = true
	install.ClientOnly = true
	install.Replace = true
	install.ReleaseName = opts.ReleaseName
	install.Namespace = opts.Namespace
	install.KubeVersion = opts.KubeVersion
	if install.KubeVersion == nil {
		install.KubeVersion = KubeVersion()
	}
	if values == nil {
		values = map[string]any{}
	}
	rel, err := install.Run(c, values)
	if err != nil {
		return nil, err
	}
	objs, err := controlplane.DecodeObjects([]byte(rel.Manifest))
	if err != nil {
		return nil, err
	}
	return &Rendered{Manifest: rel.Manifest, Notes: rel.Info.Notes, Objects: objs}, nil
}

// KubeVersion is the version of the local control plane the suites run.
func KubeVersion() *chartutil.KubeVersion { return kubeVersion(controlplane.KubernetesVersion) }

// OldestKubeVersion is the oldest version the chart claims, which
// test/compat runs.
func OldestKubeVersion() *chartutil.KubeVersion {
	return kubeVersion(controlplane.OldestKubernetesVersion)
}

func kubeVersion(v string) *chartutil.KubeVersion {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	return &chartutil.KubeVersion{Version: v, Major: parts[0], Minor: parts[1]}
}

// Select returns the objects of a kind, in order.
func (r *Rendered) Select(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.Objects {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// Get returns the object of a kind and name, or nil.
func (r *Rendered) Get(kind, name string) *unstructured.Unstructured {
	for _, o := range r.Select(kind) {
		if o.GetName() == name {
			return o
		}
	}
	return nil
}
