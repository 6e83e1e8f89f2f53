package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/admission/check"
)

var (
	corpusNew = filepath.Join("testdata", "corpus", "new")
	corpusOld = filepath.Join("testdata", "corpus", "old")
)

// TestDifferentialCorpus applies every manifest of the corpus to the cluster,
// in order, and runs `glance-webhook check -o json` over the same corpus: the
// verdicts, error messages and warning sets must be identical.
func TestDifferentialCorpus(t *testing.T) {
	ctx := context.Background()
	docs, err := check.ReadDocuments(corpusNew)
	if err != nil {
		t.Fatal(err)
	}
	olds, err := check.ReadDocuments(corpusOld)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(docs) + len(olds); n < 60 {
		t.Fatalf("the corpus holds %d manifests, want at least 60", n)
	}

	// The cluster: each case lives in a namespace of its own; the stored
	// objects it updates are created first, with their status.
	cl, _ := newClient(t)
	namespaces := map[string]bool{}
	for _, d := range append(append([]check.Document{}, olds...), docs...) {
		if ns := d.Object.GetNamespace(); ns != "" && !namespaces[ns] {
			namespaces[ns] = true
			if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, d := range olds {
		if err := store(ctx, cl, d.Object); err != nil {
			t.Fatalf("%s: storing the old object: %v", d.Source, err)
		}
	}
	var cluster []check.Result
	for _, d := range docs {
		if d.Object.GroupVersionKind().Group != v1alpha1.GroupVersion.Group {
			if err := cl.Create(ctx, d.Object.DeepCopy()); err != nil {
				t.Fatalf("%s: %v", d.Source, err)
			}
			continue
		}
		cluster = append(cluster, applyToCluster(ctx, t, d))
	}
	checkPinnedErrors(t, cluster)

	// Offline, through the command's own entry point.
	var stdout, stderr bytes.Buffer
	code := check.Run([]string{"-o", "json", "-f", corpusNew, "--old", corpusOld}, &stdout, &stderr)
	var report check.Report
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		t.Fatalf("check printed no JSON report (exit %d): %v\nstdout:\n%s\nstderr:\n%s", code, err, stdout.String(), stderr.String())
	}

	if len(report.Results) != len(cluster) {
		t.Fatalf("check judged %d objects, the cluster %d", len(report.Results), len(cluster))
	}
	denied := 0
	for i, want := range cluster {
		got := report.Results[i]
		normalize(&got)
		normalize(&want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s differs:\n  cluster: %s\n  check:   %s", want.Source, show(want), show(got))
		}
		if !want.Allowed {
			denied++
		}
	}
	if wantCode := map[bool]int{true: check.ExitDenied, false: check.ExitAllowed}[denied > 0]; code != wantCode {
		t.Errorf("check exited %d, want %d (%d denials)", code, wantCode, denied)
	}
	// The corpus must exercise both verdicts and warnings, or the test
	// proves little.
	warned := 0
	for _, r := range cluster {
		if len(r.Warnings) > 0 {
			warned++
		}
	}
	if denied < 20 || len(cluster)-denied < 20 || warned < 5 {
		t.Errorf("corpus too one-sided: %d allowed, %d denied, %d warned", len(cluster)-denied, denied, warned)
	}
	t.Logf("%d objects: %d allowed, %d denied, %d with warnings", len(cluster), len(cluster)-denied, denied, warned)
}

// pinnedErrors are the exact errors the cluster gives for some corpus cases,
// by file: the differential comparison alone would pass if the webhook and
// check agreed on a wrong answer. An error about a map entry names the entry
// in its field path, whether the CRD (a rule on the value schema) or the
// webhook (a rule on the key) refuses it.
var pinnedErrors = map[string][]string{
	"024-glance-extra-config-key-injection.yaml": {
		`spec.extraConfig[DEFAULT][debug = true` + "\n" + `[database]` + "\n" + `connection]: Invalid value: "debug = true\n[database]\nconnection": ` + msgOptionName,
	},
	"045-backend-extra-option-owned.yaml": {
		`spec.extraOptions[s3_store_host]: Invalid value: "s3_store_host": is rendered by the operator from spec.s3 (s3_store_* and store_description cannot be set here)`,
	},
	"046-backend-extra-option-line-break.yaml": {
		`spec.extraOptions[a]: Invalid value: "x\n[DEFAULT]": value must not contain line breaks`,
	},
	"071-backend-extra-option-key-shape.yaml": {
		`spec.extraOptions[a-b]: Invalid value: "a-b": option name must be 1-256 characters of letters, digits and '_'`,
	},
	"072-glance-policy-rule-empty.yaml": {
		`spec.policyOverrides.rules[get_images]: Invalid value: "": check string must not be empty: oslo.policy reads it as allow-all; write "@" if that is meant`,
	},
	"073-glance-policy-name-empty.yaml": {
		`spec.policyOverrides.rules[]: Invalid value: "": policy name must not be empty`,
	},
	"074-glance-extra-config-entries.yaml": {
		`spec.extraConfig[DEFAULT][bad=key]: Invalid value: "bad=key": ` + msgOptionName,
		`spec.extraConfig[bad]section]: Invalid value: "bad]section": section name contains '[' or ']'`,
	},
	"075-glance-middleware-config-key.yaml": {
		`spec.middleware[0].config[use]: Invalid value: "use": is a paste.deploy directive`,
	},
	"076-glance-plugin-config-key.yaml": {
		`spec.plugins[0].config[a:b]: Invalid value: "a:b": ` + msgOptionName,
	},
}

const msgOptionName = "option name contains '=', ':', '[' or ']'"

// checkPinnedErrors holds the cluster's verdicts to pinnedErrors.
func checkPinnedErrors(t *testing.T, cluster []check.Result) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range cluster {
		file, _, _ := strings.Cut(filepath.Base(r.Source), "#")
		want, ok := pinnedErrors[file]
		if !ok {
			continue
		}
		seen[file] = true
		if r.Allowed || !slices.Equal(r.Errors, want) {
			t.Errorf("%s: the cluster answered\n  %s\nwant\n  %s", r.Source, strings.Join(r.Errors, "\n  "), strings.Join(want, "\n  "))
		}
	}
	for file := range pinnedErrors {
		if !seen[file] {
			t.Errorf("pinned case %s is not in the corpus", file)
		}
	}
}

// applyToCluster creates the object, or updates it when it exists, the way
// kubectl would, with strict field validation, and records the verdict.
func applyToCluster(ctx context.Context, t *testing.T, d check.Document) check.Result {
	cl, rec := newClient(t)
	obj := d.Object.DeepCopy()
	r := check.Result{Source: d.Source, Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(), Errors: []string{}, Warnings: []string{}}
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(obj.GroupVersionKind())
	err := cl.Get(ctx, client.ObjectKeyFromObject(obj), existing)
	switch {
	case apierrors.IsNotFound(err):
		err = cl.Create(ctx, obj, client.FieldValidation("Strict"))
	case err == nil:
		obj.SetResourceVersion(existing.GetResourceVersion())
		err = cl.Update(ctx, obj, client.FieldValidation("Strict"))
	}
	r.Warnings = append(r.Warnings, rec.Texts()...)
	if err == nil {
		r.Allowed = true
		return r
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		t.Fatalf("%s: %v", d.Source, err)
	}
	st := status.Status()
	if st.Details == nil || len(st.Details.Causes) == 0 {
		r.Errors = append(r.Errors, st.Message)
	} else {
		for _, c := range st.Details.Causes {
			r.Errors = append(r.Errors, check.FormatCause(c))
		}
	}
	return r
}

// store creates an old object and writes its status through the status
// subresource, as the operator would have.
func store(ctx context.Context, cl client.Client, u *unstructured.Unstructured) error {
	obj := u.DeepCopy()
	status, hasStatus := obj.Object["status"]
	if err := cl.Create(ctx, obj); err != nil {
		return err
	}
	if !hasStatus {
		return nil
	}
	obj.Object["status"] = status
	return cl.Status().Update(ctx, obj)
}

// normalize makes the comparison independent of the order warnings arrive
// in through HTTP headers.
func normalize(r *check.Result) {
	sort.Strings(r.Warnings)
}

func show(r check.Result) string {
	data, _ := json.MarshalIndent(r, "  ", "  ")
	return fmt.Sprint(string(data))
}
