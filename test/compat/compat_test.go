package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/chart"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/crdcases"
)

// TestChartClaimsTheTestedVersion: the floor of Chart.yaml's kubeVersion is
// the minor this suite runs, so that the claim is what is tested.
func TestChartClaimsTheTestedVersion(t *testing.T) {
	c, err := chart.Load()
	if err != nil {
		t.Fatal(err)
	}
	claim := c.Metadata.KubeVersion
	tested := chart.OldestKubeVersion()
	if !chartutil.IsCompatibleRange(claim, tested.Version) {
		t.Errorf("Chart.yaml's kubeVersion %q excludes %s, the version this suite runs: move controlplane.OldestKubernetesVersion and the oldest set of hack/build-control-plane.sh to the claim's floor", claim, tested.Version)
	}
	minor, err := strconv.Atoi(tested.Minor)
	if err != nil {
		t.Fatal(err)
	}
	below := "v" + tested.Major + "." + strconv.Itoa(minor-1) + ".999"
	if chartutil.IsCompatibleRange(claim, below) {
		t.Errorf("Chart.yaml's kubeVersion %q admits %s, older than %s, the oldest version a suite runs: test that minor here or narrow the claim", claim, below, tested.Version)
	}
}

// TestCRDsEstablishedAsWritten: each CRD of the chart is established, its
// names accepted, and the API server kept its versions as written: an older
// server drops what it does not know (a selectable field, a CEL rule's
// field) without an error.
func TestCRDsEstablishedAsWritten(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "charts", "glance-operator", "files", "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 {
		t.Fatalf("%d CRD files, want 2 (Glance, GlanceBackend)", len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, want); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		t.Run(want.Name, func(t *testing.T) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := cl.Get(context.Background(), client.ObjectKey{Name: want.Name}, got); err != nil {
				t.Fatal(err)
			}
			for _, cond := range []apiextensionsv1.CustomResourceDefinitionConditionType{apiextensionsv1.Established, apiextensionsv1.NamesAccepted} {
				if !crdCondition(got, cond) {
					t.Errorf("not %s: conditions %+v", cond, got.Status.Conditions)
				}
			}
			if !equality.Semantic.DeepEqual(got.Spec.Versions, want.Spec.Versions) {
				t.Errorf("the API server stored other versions than the chart's:\n  %s", strings.Join(differences("spec.versions", got.Spec.Versions, want.Spec.Versions), "\n  "))
			}
		})
	}
}

func crdCondition(crd *apiextensionsv1.CustomResourceDefinition, typ apiextensionsv1.CustomResourceDefinitionConditionType) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == typ {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

func jsonOf(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(data)
}

// differences lists where got and want differ once written as JSON: each
// path with both values, absent ones as null.
func differences(path string, got, want any) []string {
	var g, w any
	for _, c := range []struct {
		from any
		to   *any
	}{{got, &g}, {want, &w}} {
		if err := json.Unmarshal([]byte(jsonOf(c.from)), c.to); err != nil {
			return []string{fmt.Sprintf("%s: %v", path, err)}
		}
	}
	var out []string
	diffJSON(path, g, w, &out)
	return out
}

func diffJSON(path string, got, want any, out *[]string) {
	gm, gok := got.(map[string]any)
	wm, wok := want.(map[string]any)
	if gok && wok {
		keys := map[string]bool{}
		for k := range gm {
			keys[k] = true
		}
		for k := range wm {
			keys[k] = true
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			diffJSON(path+"."+k, gm[k], wm[k], out)
		}
		return
	}
	gl, gok := got.([]any)
	wl, wok := want.([]any)
	if gok && wok && len(gl) == len(wl) {
		for i := range gl {
			diffJSON(fmt.Sprintf("%s[%d]", path, i), gl[i], wl[i], out)
		}
		return
	}
	if !reflect.DeepEqual(got, want) {
		*out = append(*out, fmt.Sprintf("%s: %s, want %s", path, jsonOf(got), jsonOf(want)))
	}
}

// TestCRDRules runs the CRD cases every CEL rule and schema constraint has
// (test/crdcases) on this API server, with the webhooks out of the way.
func TestCRDRules(t *testing.T) {
	t.Run("creates", func(t *testing.T) { crdcases.RunCreates(t, cl, crdNamespace) })
	t.Run("updates", func(t *testing.T) { crdcases.RunUpdates(t, cl, crdNamespace) })
}

// TestSamplesAdmitted applies test/samples/glance.yaml, a Glance with its
// GlanceBackend, through the CRDs and both webhooks: the mutating webhook's
// defaults are stored.
func TestSamplesAdmitted(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := controlplane.ApplyFiles(context.Background(), cfg, filepath.Join(root, "test", "samples", "glance.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var g v1alpha1.Glance
	var b v1alpha1.GlanceBackend
	for _, o := range objs {
		var into client.Object
		switch o.GetKind() {
		case "Glance":
			into = &g
		case "GlanceBackend":
			into = &b
		default:
			continue
		}
		if err := cl.Get(context.Background(), client.ObjectKeyFromObject(o), into); err != nil {
			t.Fatal(err)
		}
	}
	if g.Name == "" || b.Name == "" {
		t.Fatalf("test/samples/glance.yaml has no Glance or no GlanceBackend: %d objects", len(objs))
	}
	if d := g.Spec.Deployment; d == nil || d.Replicas == nil || *d.Replicas != 2 || len(d.Resources.Requests) == 0 {
		t.Errorf("Glance %s: spec.deployment %+v, want the sample's 2 replicas and the webhook's default resources", g.Name, d)
	}
	if !b.Spec.IsDefault || b.Spec.S3 == nil || b.Spec.S3.Bucket == "" {
		t.Errorf("GlanceBackend %s: spec %+v, want the sample's default S3 store", b.Name, b.Spec)
	}
}
