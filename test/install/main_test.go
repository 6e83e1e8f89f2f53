// Package install proves `helm install glance-operator charts/glance-operator`
// on a full local cluster (test/stack with HelmInstall): the Helm SDK
// installs the chart with its default values, the real cert-manager
// controllers issue the webhook's serving certificate and cainjector puts
// its CA into both webhook configurations, and the API server reaches the
// webhook through the chart's Service and verifies it with that CA. Both
// binaries run as processes standing in for the chart's pods, with the
// rendered Deployments' arguments and the chart's ServiceAccounts.
package install

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/test/operatortest"
	"github.com/c5c3/glance-operator/test/stack"
)

var (
	stk *stack.Stack
	cl  client.Client
	// installed is how long the stack took from nothing to a Helm release
	// with both binaries serving.
	installed time.Duration
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "glance-install-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	stk, err = stack.Start(ctx, stack.Options{Dir: dir, HelmInstall: true, Progress: os.Stdout})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: install the chart: %v\nstate and logs kept in %s\n", err, dir)
		return 1
	}
	installed = time.Since(start)
	fmt.Printf("chart installed and serving in %s; logs in %s\n", installed.Round(time.Second), stk.LogDir)
	code := func() int {
		if cl, err = operatortest.NewClient(stk.Config); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL:", err)
			return 1
		}
		return m.Run()
	}()
	if err := stk.Check(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: the operator or the webhook died or was denied a call:", err)
		code = 1
	}
	if err := stk.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: stop the stack:", err)
		code = 1
	}
	if denials, err := stk.RBACDenials(); err != nil || len(denials) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: denied calls (%v):\n%v\n", err, denials)
		code = 1
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "state and logs of the failed run kept in %s\n", dir)
		return code
	}
	_ = os.RemoveAll(dir)
	return code
}
