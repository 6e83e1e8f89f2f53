package realnode

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/c5c3/glance-operator/test/controlplane"
)

// Suite is how a test package runs on a real node: it takes the machine's
// suite lock, starts the node, runs its tests, stops the node and checks
// that nothing of it is left on the machine.
type Suite struct {
	// Prefix names the cluster's temporary directory; short, for
	// containerd's socket path.
	Prefix string
	// Keep leaves the directory (logs, kubeconfigs) behind.
	Keep bool
	// SetUp runs once the node is up, before the tests; stop runs before
	// the node stops.
	SetUp func(ctx context.Context, e *Env) (stop func() error, err error)
	// AfterStop runs once the node stopped and left nothing behind.
	AfterStop func() error
}

// Run runs m and returns its exit code; the test binary's flags must be
// parsed.
func (s Suite) Run(m *testing.M) int {
	// Another real node (make cluster NODE=real) may hold the machine:
	// waiting for it counts here.
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	fail := func(err ...any) int { fmt.Fprintln(os.Stderr, append([]any{"FAIL:"}, err...)...); return 1 }
	// Tests on a real node wait on pods most of the time: the parallel
	// ones all run at once, not GOMAXPROCS (two here) at a time, unless
	// -parallel says otherwise.
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		if err := flag.Set("test.parallel", "16"); err != nil {
			return fail(err)
		}
	}
	unlock, err := controlplane.LockSuite(ctx)
	if err != nil {
		return fail(err)
	}
	defer unlock()
	dir, err := os.MkdirTemp("", s.Prefix)
	if err != nil {
		return fail(err)
	}
	e, err := Start(ctx, dir)
	if err != nil {
		return fail(err)
	}
	fmt.Printf("real-node cluster up in %s (logs in %s)\n", e.Startup.Round(100*time.Millisecond), filepath.Join(dir, "logs"))
	code := func() int {
		stop, err := s.SetUp(ctx, e)
		if err != nil {
			return fail(err)
		}
		code := m.Run()
		// The node's one DNS server ran throughout: a restart fails every
		// lookup of every pod until it is back, which a story would
		// report as its own failure. The kubelet restarts it when it
		// crashes or its probes fail, as they did when it was starved of
		// CPU on a busy machine.
		if restarts, err := controlplane.DNSRestarts(ctx, e.CS); err != nil {
			code = fail("the node's CoreDNS:", err)
		} else if len(restarts) > 0 {
			code = fail("the node's CoreDNS did not run throughout the suite:\n  " + strings.Join(restarts, "\n  "))
		}
		if err := stop(); err != nil {
			code = fail(err)
		}
		return code
	}()

	// Running, the node has a footprint; stopped, none may be left.
	if running, err := controlplane.HostLeftovers(dir); err != nil || len(running) == 0 {
		code = fail(fmt.Sprintf("the leftover check sees nothing of a running node (%v): it could not catch a leftover", err))
	}
	if err := e.Stop(); err != nil {
		code = fail("stop the real-node cluster:", err)
	}
	if left, err := controlplane.HostLeftovers(dir); err != nil || len(left) > 0 {
		code = fail(fmt.Sprintf("the stopped node left behind (%v):\n  %s", err, strings.Join(left, "\n  ")))
	}
	if code == 0 && s.AfterStop != nil {
		if err := s.AfterStop(); err != nil {
			code = fail(err)
		}
	}
	if !s.Keep {
		if err := os.RemoveAll(dir); err != nil {
			code = fail("remove", dir, err)
		}
	}
	return code
}
