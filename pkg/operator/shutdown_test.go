package operator_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/c5c3/glance-operator/pkg/logging"
	"github.com/c5c3/glance-operator/pkg/metrics"
	"github.com/c5c3/glance-operator/pkg/operator"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/operatortest"
)

var (
	srv *controlplane.APIServer
	// managerLog is what the managers of the tests log, through the logger
	// glance-operator uses, set up as cmd/manager sets it up. The logger is
	// set once: controller-runtime's global logger takes only the first.
	managerLog operatortest.LogBuffer
)

func TestMain(m *testing.M) {
	log, err := logging.New(&managerLog, "text", "info")
	if err != nil {
		panic(err)
	}
	ctrllog.SetLogger(log)
	klog.SetLogger(log)
	// Every API the manager watches, so that nothing it logs is about a
	// missing one.
	crds := controlplane.CRDs{Glance: true, MariaDB: true, ExternalSecrets: true, GatewayAPI: true}
	os.Exit(controlplane.RunTests(m, controlplane.APIServerOptions{CRDs: crds},
		func(s *controlplane.APIServer) (func(), error) { srv = s; return nil, nil }))
}

// runningManager is a manager started by startManager.
type runningManager struct {
	elected <-chan struct{}
	cancel  context.CancelFunc
	done    chan error
}

func startManager(t *testing.T, namespace string) *runningManager {
	t.Helper()
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := operator.New(ctx, srv.Config, operator.Options{
		MetricsAddress: "0", HealthAddress: "0", Metrics: m,
		LeaderElection: true, LeaderElectionNamespace: namespace,
		GracefulShutdownTimeout: 10 * time.Second, SkipNameValidation: true,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r := &runningManager{elected: mgr.Elected(), cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(time.Minute):
			t.Error("the manager did not stop within a minute")
		}
	})
	return r
}

// stop cancels the manager's context, as SIGTERM does in glance-operator,
// and waits for Start to return.
func (r *runningManager) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("a clean stop ended Start with %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the manager did not stop within a minute")
	}
}

func errorLines(log string) []string {
	var out []string
	for line := range strings.Lines(log) {
		if strings.Contains(line, "level=ERROR") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// noErrorLogged fails when the manager log has an ERROR line after offset,
// now or within a grace period: controller-runtime's manager logs what
// reaches its error channel during the stop from a goroutine that may run
// after Start returned (controller-runtime#3535).
func noErrorLogged(t *testing.T, what string, offset int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		if lines := errorLines(managerLog.Since(offset)); len(lines) > 0 {
			t.Fatalf("%s logged ERROR:\n%s", what, strings.Join(lines, "\n"))
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCleanStopLogsNoError stops a standby replica and then the leader,
// with leader election on and the logger glance-operator uses: a stop is
// a normal end, and neither logs an error (the leader's released lease was
// logged as "leader election lost").
func TestCleanStopLogsNoError(t *testing.T) {
	const namespace = "default"
	offset := managerLog.Len()

	leader := startManager(t, namespace)
	select {
	case <-leader.elected:
	case err := <-leader.done:
		t.Fatalf("the first manager stopped before it was elected: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the first manager was not elected within a minute")
	}

	standby := startManager(t, namespace)
	deadline := time.Now().Add(time.Minute)
	for strings.Count(managerLog.Since(offset), "Attempting to acquire leader lease") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the second manager did not try for the lease within a minute; log:\n%s", managerLog.Since(offset))
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-standby.elected:
		t.Fatal("the second manager was elected while the first holds the lease")
	default:
	}
	noErrorLogged(t, "starting two managers", offset)

	standby.stop(t)
	noErrorLogged(t, "stopping the standby manager", offset)

	leader.stop(t)
	noErrorLogged(t, "stopping the leader", offset)

	// The leader gave the lease up on its way out, so that a new one takes
	// over at once; that release is what was reported as lost.
	cl, err := client.New(srv.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{}
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: operator.LeaderElectionID}, lease); err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("the lease is still held by %q after the leader stopped", *h)
	}
}
