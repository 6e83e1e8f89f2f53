package install

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/chart"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/stack"
)

// TestUninstallAsTheREADMESays runs the README's Quick start's kubectl
// lines (the samples applied again, then listed), then its Uninstall
// section, in its order, on the installed operator with its Glance:
// kubectl's lines with the local kubectl from the repository's root, Helm's
// with the Helm SDK once their arguments are checked to name this release
// (the OCI install itself is the real-node suite's). Every Glance is gone with its finalizer run
// before the chart goes, and the CRDs go last (kubectl delete waits for
// them). It runs last: it ends the
// stack's operator.
func TestUninstallAsTheREADMESays(t *testing.T) {
	ctx := context.Background()
	quickStart := readmeCommands(t, "## Quick start")
	if len(quickStart) != 4 || quickStart[0][0] != "helm" {
		t.Fatalf("the README's Quick start has commands %q, want helm install, two kubectl apply, kubectl get", quickStart)
	}
	if want := []string{"helm", "install", chart.ReleaseName}; !slices.Equal(quickStart[0][:3], want) || !slices.Contains(quickStart[0], stack.OperatorNamespace) {
		t.Errorf("the README installs %q, the release is %s in %s", quickStart[0], chart.ReleaseName, stack.OperatorNamespace)
	}
	for _, args := range quickStart[1:] {
		out := readmeKubectl(t, args)
		if args[1] == "get" && (!strings.Contains(out, "glance") || !strings.Contains(out, "glancebackend")) {
			t.Errorf("%s lists no Glance and GlanceBackend:\n%s", strings.Join(args, " "), out)
		}
	}

	commands := readmeCommands(t, "## Uninstall")
	if len(commands) != 3 {
		t.Fatalf("the README's Uninstall section has commands %q, want kubectl delete glances, helm uninstall, kubectl delete crd", commands)
	}
	var glances v1alpha1.GlanceList
	if err := cl.List(ctx, &glances); err != nil || len(glances.Items) == 0 {
		t.Fatalf("before the uninstall: %d Glances (%v), want the suite's", len(glances.Items), err)
	}
	for _, args := range commands {
		switch args[0] {
		case "kubectl":
			readmeKubectl(t, args)
		case "helm":
			if want := []string{"helm", "uninstall", chart.ReleaseName, "--namespace", stack.OperatorNamespace}; !slices.Equal(args, want) {
				t.Fatalf("the README runs %q, the release is %q", args, want)
			}
			// The operator's pods go with the release.
			if err := stk.StopBinaries(); err != nil {
				t.Fatal(err)
			}
			if _, err := stk.UninstallChart(); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("the README's Uninstall section runs %q, which this test does not know", args)
		}
		// kubectl delete returns once the finalizers have run: nothing is
		// left to wait for.
		if args[0] == "kubectl" && args[1] == "delete" && args[2] == "glances" {
			if err := cl.List(ctx, &glances); err != nil || len(glances.Items) != 0 {
				t.Fatalf("after %q: %d Glances left (%v)", args, len(glances.Items), err)
			}
		}
	}
	for _, name := range []string{"glances.glance.openstack.c5c3.io", "glancebackends.glance.openstack.c5c3.io"} {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, crd); !apierrors.IsNotFound(err) {
			t.Errorf("the CRD %s after the README's uninstall: %v, want it gone", name, err)
		}
	}
}

// readmeKubectl runs a README kubectl command, its -f paths taken from the
// repository's root, and returns its output.
func readmeKubectl(t *testing.T, args []string) string {
	t.Helper()
	if args[0] != "kubectl" {
		t.Fatalf("%q is not a kubectl command", args)
	}
	repo, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	words := slices.Clone(args[1:])
	for i := 1; i < len(words); i++ {
		if words[i-1] == "-f" {
			words[i] = filepath.Join(repo, words[i])
		}
	}
	out, err := controlplane.Kubectl(t, stk.Config, "", words...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// readmeCommands returns the commands of the sh blocks of the README's
// section heading, split into words, comments and line continuations
// dropped.
func readmeCommands(t *testing.T, heading string) [][]string {
	t.Helper()
	repo, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(repo + "/README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("the README has no %q section", heading)
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var commands [][]string
	inBlock := false
	for _, line := range strings.Split(strings.ReplaceAll(section, "\\\n", " "), "\n") {
		switch {
		case strings.HasPrefix(line, "```sh"):
			inBlock = true
		case strings.HasPrefix(line, "```"):
			inBlock = false
		case inBlock:
			line, _, _ = strings.Cut(line, "#")
			if words := strings.Fields(line); len(words) > 0 {
				commands = append(commands, words)
			}
		}
	}
	return commands
}
