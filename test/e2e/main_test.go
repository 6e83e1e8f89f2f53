// Package e2e walks the user stories of the glance-operator on a full local
// cluster (test/stack): kube-apiserver with RBAC, kube-controller-manager
// (Deployment, ReplicaSet, Job, CronJob controllers and the garbage
// collector), kube-scheduler and kwok running the pods on fake nodes, with
// glance-operator and glance-webhook built from this repository and running
// as processes under the Helm chart's ServiceAccounts and generated RBAC. The
// stories assert only on what a user sees: objects, conditions, events,
// admission warnings and denials, and the manager's /metrics. Nothing plays
// a Kubernetes controller; the operators the product talks to
// (mariadb-operator, External Secrets, a Gateway controller) are the stack's
// stand-ins. Each story runs in its own namespace, all at once. Least
// privilege is proven besides: the binaries' identities and what their roles
// deny (identities_test.go), and no call denied to them during the run.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/operatortest"
	"github.com/c5c3/glance-operator/test/stack"
)

var (
	stk *stack.Stack
	cl  client.Client
)

// Namespaces whose pods the suite's kwok stages fail on purpose.
const (
	expandFailsNamespace = "e2e-expand-fails"
	dbPurgeNamespace     = "e2e-dbpurge"
)

// Manual db-purge runs of the DBPurge story; the failing stage spares them.
var manualPurgeRuns = []string{"purge-now-1", "purge-now-2"}

// failingStages fail, instead of completing, the pods of the expand Job in
// expandFailsNamespace and of every db-purge run in dbPurgeNamespace but
// the manual ones. Pods carry their Job's name in batch.kubernetes.io/job-name.
var failingStages = controlplane.FailingPodStage("e2e-fail-expand",
	fmt.Sprintf(`{key: .metadata.namespace, operator: In, values: [%q]}`, expandFailsNamespace),
	`{key: '.metadata.labels["batch.kubernetes.io/job-name"]', operator: In, values: ["glance-db-expand"]}`,
) + "---\n" + controlplane.FailingPodStage("e2e-fail-scheduled-db-purge",
	fmt.Sprintf(`{key: .metadata.namespace, operator: In, values: [%q]}`, dbPurgeNamespace),
	`{key: '.metadata.labels["app.kubernetes.io/component"]', operator: In, values: ["db-purge"]}`,
	fmt.Sprintf(`{key: '.metadata.labels["batch.kubernetes.io/job-name"]', operator: NotIn, values: [%q, %q]}`, manualPurgeRuns[0], manualPurgeRuns[1]),
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	flag.Parse()
	// The stories wait on controllers and kwok, not on the CPU: run them all
	// at once unless -parallel says otherwise.
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		_ = flag.Set("test.parallel", "32")
	}

	dir, err := os.MkdirTemp("", "glance-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	stages := filepath.Join(dir, "e2e-stages.yaml")
	if err := os.WriteFile(stages, []byte(failingStages+"---\n"+imageCacheEvictionStage), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Both binaries log at debug: the leakage story scans what they write
	// at their most verbose.
	stk, err = stack.Start(ctx, stack.Options{Dir: dir, KwokStages: []string{stages}, LogLevel: "debug"})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: start the stack: %v\nstate and logs kept in %s\n", err, dir)
		return 1
	}
	fmt.Printf("stack up in %s; logs in %s\n", time.Since(start).Round(time.Second), stk.LogDir)

	code := func() int {
		if cl, err = operatortest.NewClient(stk.Config); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL:", err)
			return 1
		}
		if err := createSecretStore(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL:", err)
			return 1
		}
		return m.Run()
	}()
	if err := stk.Check(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: the operator or the webhook died or was denied a call during the suite:", err)
		code = 1
	} else if err := checkEventReasons(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		code = 1
	} else if err := checkManagerNotForbidden(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		code = 1
	}
	if err := stk.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: stop the stack:", err)
		code = 1
	}
	// After Stop the binaries' logs are complete.
	if err := checkNoRBACDenials(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		code = 1
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "state and logs of the failed run kept in %s\n", dir)
		return code
	}
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintln(os.Stderr, "remove", dir, err)
	}
	return code
}

// maxDenialsShown bounds the denied calls a failed run prints; the logs hold
// the rest.
const maxDenialsShown = 40

// checkNoRBACDenials fails the suite when the API server denied
// glance-operator or glance-webhook anything during the run: the binaries
// run under the chart's generated roles, and every call the code makes must
// be in them.
func checkNoRBACDenials() error {
	denials, err := stk.RBACDenials()
	if err != nil {
		return fmt.Errorf("scan the binaries' logs for RBAC denials: %w", err)
	}
	if len(denials) == 0 {
		return nil
	}
	shown := denials[:min(len(denials), maxDenialsShown)]
	more := ""
	if n := len(denials) - len(shown); n > 0 {
		more = fmt.Sprintf("\n... and %d more lines", n)
	}
	return fmt.Errorf("the API server denied glance-operator or glance-webhook (%d log lines in %s); the chart's generated roles lack a rule the code needs:\n%s%s",
		len(denials), stk.LogDir, strings.Join(shown, "\n"), more)
}

// checkManagerNotForbidden fails the suite when the API server answered any
// of glance-operator's requests 403, logged or not.
func checkManagerNotForbidden() error {
	// Not the start-up context: the suite may have outlived it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	forbidden, err := stk.ManagerForbiddenRequests(ctx, "")
	if err != nil {
		return fmt.Errorf("read glance-operator's denied requests: %w", err)
	}
	if len(forbidden) == 0 {
		return nil
	}
	return fmt.Errorf("the API server answered glance-operator 403 (by method: %v); the chart's generated roles lack a rule the code needs; see %s", forbidden, stk.ManagerLog)
}

// checkEventReasons fails the suite when glance-operator emitted, in any
// story, an event whose reason is not one of v1alpha1.EventReasons, the
// list docs/operations.md documents.
func checkEventReasons() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var list eventsv1.EventList
	if err := cl.List(ctx, &list); err != nil {
		return fmt.Errorf("list the events of the suite: %w", err)
	}
	emitted := 0
	var unknown []string
	for _, e := range list.Items {
		if e.ReportingController != "glance-operator" {
			continue
		}
		emitted++
		if !slices.Contains(v1alpha1.EventReasons, e.Reason) {
			unknown = append(unknown, fmt.Sprintf("%s %s/%s on %s %s/%s", e.Type, e.Reason, e.Action, e.Regarding.Kind, e.Namespace, e.Regarding.Name))
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("glance-operator emitted events whose reason v1alpha1.EventReasons (and docs/operations.md) does not list: %s", strings.Join(unknown, "; "))
	}
	// A run of a few stories may emit none; the whole suite emits dozens.
	fmt.Printf("%d events of glance-operator, each reason listed\n", emitted)
	return nil
}

// createSecretStore creates the ClusterSecretStore every Glance selects by
// default; the stack's External Secrets stand-in reports it Ready.
func createSecretStore(ctx context.Context) error {
	store := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"provider": map[string]any{"vault": map[string]any{"server": "http://openbao.openbao.svc:8200"}}},
	}}
	store.SetAPIVersion("external-secrets.io/v1")
	store.SetKind("ClusterSecretStore")
	store.SetName("openbao-cluster-store")
	if err := cl.Create(ctx, store); err != nil {
		return fmt.Errorf("create ClusterSecretStore: %w", err)
	}
	return nil
}
