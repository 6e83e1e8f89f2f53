package check

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const okGlance = `apiVersion: glance.openstack.c5c3.io/v1alpha1
kind: Glance
metadata: {name: glance, namespace: openstack}
spec:
  openStackRelease: "2025.2"
  image: {repository: registry.example.com/openstack/glance, tag: "2025.2"}
  database: {clusterRef: {name: mariadb}, database: glance, secretRef: {name: glance-db}}
  keystoneEndpoint: http://keystone:5000/v3
  serviceUser: {secretRef: {name: glance-service-user}}
`

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runCheck(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestRunVerdictsAndExitStatus(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a/glance.yaml", okGlance)
	code, out, errOut := runCheck(t, "-f", dir)
	if code != ExitAllowed {
		t.Fatalf("exit %d, want 0\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "a/glance.yaml#0: Glance openstack/glance allowed") || !strings.Contains(out, "1 object(s) checked, 0 denied") {
		t.Errorf("text output:\n%s", out)
	}

	// A warning alone passes, unless warnings are errors.
	writeFile(t, dir, "b/warn.yaml", strings.Replace(okGlance, "name: glance,", "name: warned,", 1)+"  staging: {unbounded: true}\n")
	if code, out, _ := runCheck(t, "-f", dir); code != ExitAllowed || !strings.Contains(out, "  Warning: spec.staging.unbounded") {
		t.Errorf("warning: exit %d\n%s", code, out)
	}
	if code, _, _ := runCheck(t, "-f", dir, "--warnings-as-errors"); code != ExitDenied {
		t.Errorf("--warnings-as-errors: exit %d, want 1", code)
	}

	// One denial makes the run fail.
	writeFile(t, dir, "c/bad.yaml", strings.Replace(strings.Replace(okGlance, "name: glance,", "name: bad,", 1), `tag: "2025.2"`, `tag: "2025.2", digest: "sha256:`+strings.Repeat("a", 64)+`"`, 1))
	code, out, _ = runCheck(t, "-f", dir)
	if code != ExitDenied {
		t.Fatalf("exit %d, want 1\n%s", code, out)
	}
	if !strings.Contains(out, "c/bad.yaml#0: Glance openstack/bad denied\n  error: spec.image: Invalid value: exactly one of image.tag or image.digest must be set") {
		t.Errorf("text output:\n%s", out)
	}
}

func TestRunJSON(t *testing.T) {
	dir := t.TempDir()
	f := writeFile(t, dir, "m.yaml", okGlance+"---\n"+strings.Replace(okGlance, "2025.2", "2025.3", 1))
	code, out, _ := runCheck(t, "-o", "json", "-f", f)
	if code != ExitDenied {
		t.Fatalf("exit %d", code)
	}
	var report Report
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatal(err)
	}
	if len(report.Results) != 2 {
		t.Fatalf("%d results", len(report.Results))
	}
	first, second := report.Results[0], report.Results[1]
	if first.Source != f+"#0" || !first.Allowed || first.Kind != "Glance" || first.Namespace != "openstack" || first.Name != "glance" {
		t.Errorf("first result %+v", first)
	}
	// The second document updates the first (same name): the release
	// pattern fails before anything else.
	if second.Source != f+"#1" || second.Allowed || len(second.Errors) == 0 || !strings.HasPrefix(second.Errors[0], "spec.openStackRelease: Invalid value: \"2025.3\"") {
		t.Errorf("second result %+v", second)
	}
	// Arrays are never null in the JSON form.
	if !strings.Contains(out, `"warnings": []`) {
		t.Errorf("empty warnings not rendered as []:\n%s", out)
	}
}

func TestRunJUnit(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "ok.yaml", okGlance)
	writeFile(t, dir, "warn.yaml", strings.Replace(okGlance, "name: glance,", "name: warned,", 1)+"  staging: {unbounded: true}\n")
	code, out, _ := runCheck(t, "-o", "junit", "--warnings-as-errors", "-f", dir)
	if code != ExitDenied {
		t.Fatalf("exit %d", code)
	}
	var suites junitSuites
	if err := xml.Unmarshal([]byte(out), &suites); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s := suites.Suites[0]
	if s.Tests != 2 || s.Failures != 1 || s.Cases[0].Failure != nil || s.Cases[1].Failure == nil || s.Cases[1].Failure.Type != "Warning" {
		t.Errorf("junit suite %+v", s)
	}
}

func TestRunUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-f", "/does/not/exist"},
		{"-f", ".", "-o", "yaml"},
		{"-f", ".", "extra"},
		{"--bogus"},
	} {
		if code, _, _ := runCheck(t, args...); code != ExitUsage {
			t.Errorf("check %q: exit %d, want 2", args, code)
		}
	}
	dir := t.TempDir()
	f := writeFile(t, dir, "x.yaml", "kind: Glance\n")
	if code, _, errOut := runCheck(t, "-f", f); code != ExitUsage || !strings.Contains(errOut, "apiVersion and kind are required") {
		t.Errorf("missing apiVersion: exit %d: %s", code, errOut)
	}
}

func TestReadDocumentsExpandsLists(t *testing.T) {
	dir := t.TempDir()
	f := writeFile(t, dir, "list.yaml", `apiVersion: v1
kind: List
items:
- apiVersion: scheduling.k8s.io/v1
  kind: PriorityClass
  metadata: {name: gold}
  value: 10
- apiVersion: glance.openstack.c5c3.io/v1alpha1
  kind: GlanceBackend
  metadata: {name: b}
---
---
apiVersion: v1
kind: Secret
metadata: {name: s}
`)
	docs, err := ReadDocuments(f)
	if err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, d := range docs {
		sources = append(sources, strings.TrimPrefix(d.Source, f)+" "+d.Object.GetKind())
	}
	want := "#0[0] PriorityClass,#0[1] GlanceBackend,#1 Secret"
	if strings.Join(sources, ",") != want {
		t.Errorf("sources %v, want %s", sources, want)
	}
}

// TestSequentialState: objects are judged in input order against what came
// before, as kubectl apply would create them.
func TestSequentialState(t *testing.T) {
	dir := t.TempDir()
	backend := func(name string) string {
		return `apiVersion: glance.openstack.c5c3.io/v1alpha1
kind: GlanceBackend
metadata: {name: ` + name + `, namespace: openstack}
spec:
  glanceRef: {name: glance}
  type: S3
  isDefault: true
  s3: {host: "http://s3:9000", bucket: images, credentialsSecretRef: {name: s3}}
`
	}
	f := writeFile(t, dir, "b.yaml", backend("first")+"---\n"+backend("second"))
	code, out, _ := runCheck(t, "-o", "json", "-f", f)
	var report Report
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatal(err)
	}
	if code != ExitDenied || !report.Results[0].Allowed || report.Results[1].Allowed ||
		report.Results[1].Errors[0] != `spec.isDefault: Invalid value: true: GlanceBackend "first" is already the default store of Glance "glance"; unset its isDefault first` {
		t.Errorf("exit %d, results %+v", code, report.Results)
	}
	// A PriorityClass counts once it came before the Glance.
	pc := "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: gold}\nvalue: 10\n"
	withPC := okGlance + "  deployment: {priorityClassName: gold}\n"
	after := writeFile(t, dir, "after.yaml", pc+"---\n"+withPC)
	before := writeFile(t, dir, "before.yaml", withPC+"---\n"+pc)
	if code, out, _ := runCheck(t, "-f", after); code != ExitAllowed {
		t.Errorf("PriorityClass first: exit %d\n%s", code, out)
	}
	if code, out, _ := runCheck(t, "-f", before); code != ExitDenied || !strings.Contains(out, `spec.deployment.priorityClassName: Not found: "gold"`) {
		t.Errorf("PriorityClass after: exit %d\n%s", code, out)
	}
}

// TestMapEntryErrorsNameTheEntry: an error about a map entry names the entry,
// whether the CRD (the value schema) or the webhook (the key) refuses it.
func TestMapEntryErrorsNameTheEntry(t *testing.T) {
	backend := func(name, extraOptions string) string {
		return `apiVersion: glance.openstack.c5c3.io/v1alpha1
kind: GlanceBackend
metadata: {name: ` + name + `, namespace: openstack}
spec:
  glanceRef: {name: glance}
  type: S3
  s3: {host: "http://s3:9000", bucket: images, credentialsSecretRef: {name: s3}}
  extraOptions: ` + extraOptions + "\n"
	}
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"option value", backend("value", `{weight: "1\n[DEFAULT]"}`),
			`spec.extraOptions[weight]: Invalid value: "1\n[DEFAULT]": value must not contain line breaks`},
		{"option key", backend("key", `{s3_store_host: x}`),
			`spec.extraOptions[s3_store_host]: Invalid value: "s3_store_host": is rendered by the operator from spec.s3 (s3_store_* and store_description cannot be set here)`},
		{"policy rule", okGlance + "  policyOverrides: {rules: {get_images: ''}}\n",
			`spec.policyOverrides.rules[get_images]: Invalid value: "": check string must not be empty: oslo.policy reads it as allow-all; write "@" if that is meant`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := writeFile(t, t.TempDir(), "m.yaml", tc.doc)
			_, out, _ := runCheck(t, "-o", "json", "-f", f)
			var report Report
			if err := json.Unmarshal([]byte(out), &report); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if r := report.Results; len(r) != 1 || r[0].Allowed || len(r[0].Errors) != 1 || r[0].Errors[0] != tc.want {
				t.Errorf("results %+v\nwant the one error %s", r, tc.want)
			}
		})
	}
}
