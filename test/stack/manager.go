package stack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/c5c3/glance-operator/test/controlplane"
)

// startManager runs glance-operator against the cluster as its
// ServiceAccount and returns once its caches are synced (/readyz).
// baseArgs are a chart Deployment's arguments, or nil for the stack's own.
func (s *Stack) startManager(ctx context.Context, bin, healthcheckAddress string, baseArgs, extraArgs []string) error {
	if baseArgs == nil {
		// As the chart's Deployment: target clusters register in the
		// operator's namespace.
		baseArgs = []string{"--leader-elect=false", "--operator-namespace=" + OperatorNamespace, "--clusters-namespace=" + OperatorNamespace}
	}
	s.managerBaseArgs = baseArgs
	name := s.processName("glance-operator")
	if s.managerRestarts > 0 {
		name = fmt.Sprintf("%s-restart-%d", name, s.managerRestarts)
	}
	manager, metricsURL, err := s.runManager(ctx, name, bin, healthcheckAddress, baseArgs, extraArgs, func(p *controlplane.Process) {
		s.mu.Lock()
		s.manager = p
		s.mu.Unlock()
	})
	if manager != nil {
		s.ManagerMetricsURL = metricsURL
		s.ManagerLog = manager.LogPath()
	}
	return err
}

// runManager starts a run of glance-operator named name, hands it to
// started at once, and returns it with its /metrics URL once it is ready.
func (s *Stack) runManager(ctx context.Context, name, bin, healthcheckAddress string, baseArgs, extraArgs []string, started func(*controlplane.Process)) (*controlplane.Process, string, error) {
	ports, err := controlplane.FreePorts(2)
	if err != nil {
		return nil, "", err
	}
	metrics, health := ports[0], ports[1]
	args := append(withFlags(baseArgs,
		"--kubeconfig="+s.ManagerKubeconfig,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metrics),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", health),
		// The manager runs outside the cluster network and kwok's pods
		// serve nothing, so health probes go to the stand-in.
		"--dev-healthcheck-address="+healthcheckAddress,
	), extraArgs...)
	p, err := controlplane.StartProcess(s.Dir, name, bin, args...)
	started(p)
	if p != nil {
		s.binaryLogs = append(s.binaryLogs, p.LogPath())
	}
	if err != nil {
		return p, "", err
	}
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics)
	return p, metricsURL, s.poll(ctx, name+" /readyz", 2*time.Minute, func(ctx context.Context) (bool, error) {
		return getOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", health))
	})
}

// ManagerReplica is a run of glance-operator besides the stack's own.
type ManagerReplica struct {
	*controlplane.Process
	// MetricsURL is its Prometheus endpoint.
	MetricsURL string
}

// StartManagerReplica starts another run of glance-operator with the
// stack's arguments and extraArgs after them, and returns once it is
// ready; the caller stops it. Its log is one of ManagerLogs.
func (s *Stack) StartManagerReplica(ctx context.Context, name string, extraArgs ...string) (*ManagerReplica, error) {
	p, metricsURL, err := s.runManager(ctx, "glance-operator-"+name, s.bins.manager, s.healthcheckAddress, s.managerBaseArgs, append(slices.Clone(s.managerExtraArgs), extraArgs...), func(*controlplane.Process) {})
	if p == nil {
		return nil, err
	}
	return &ManagerReplica{Process: p, MetricsURL: metricsURL}, err
}

// StopManager stops the stack's glance-operator with SIGTERM, as a rollout
// deletes its pod; StartManager starts it again with the same arguments.
func (s *Stack) StopManager() error {
	manager, err := s.takeManager()
	if err != nil {
		return err
	}
	return manager.Stop(30 * time.Second)
}

// StartManager starts the stack's glance-operator after StopManager.
func (s *Stack) StartManager(ctx context.Context) error {
	s.managerRestarts++
	return s.startManager(ctx, s.bins.manager, s.healthcheckAddress, s.managerBaseArgs, s.managerExtraArgs)
}

// takeManager removes the running manager from the stack, so that Check
// does not report it once it is stopped.
func (s *Stack) takeManager() (*controlplane.Process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	manager := s.manager
	s.manager = nil
	if manager == nil {
		return nil, errors.New("glance-operator is not running")
	}
	return manager, nil
}

// startHealthcheck serves the stand-in of glance-api's /healthcheck on
// loopback and returns its host:port. DEVELOPMENT ONLY: kwok's pods run no
// glance-api, so the manager's probes (--dev-healthcheck-address) come here
// and always pass; real Glance health is proven by the conformance suite.
func (s *Stack) startHealthcheck() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthcheck", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("OK"))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	s.healthcheck = srv
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Println("healthcheck stand-in:", err)
		}
	}()
	return l.Addr().String(), nil
}

// ManagerPID is the process ID of the running glance-operator.
func (s *Stack) ManagerPID() int { return s.manager.PID() }

// WaitManagerExit waits until glance-operator ends on its own, as a pod's
// container does before the kubelet starts it again, and returns how it
// ended: the exit and the last lines of its output. StartManager starts it
// again.
func (s *Stack) WaitManagerExit(ctx context.Context) (string, error) {
	s.mu.Lock()
	manager := s.manager
	s.mu.Unlock()
	if manager == nil {
		return "", errors.New("glance-operator is not running")
	}
	for {
		if ended := manager.Exited(); ended != nil {
			_, err := s.takeManager()
			return ended.Error(), err
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("glance-operator still running: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// KillManager SIGKILLs glance-operator and starts it again with the same
// arguments, as a Deployment replaces a killed pod, and returns once the
// new run is ready. Check does not report the killed run.
func (s *Stack) KillManager(ctx context.Context) error {
	manager, err := s.takeManager()
	if err != nil {
		return err
	}
	if err := manager.Kill(); err != nil {
		return err
	}
	return s.StartManager(ctx)
}

// ManagerLogs are the logs of every run of glance-operator.
func (s *Stack) ManagerLogs() []string {
	var logs []string
	for _, l := range s.binaryLogs {
		if strings.HasPrefix(filepath.Base(l), "glance-operator") {
			logs = append(logs, l)
		}
	}
	return logs
}

// BinaryLogs are the logs of every run of glance-operator and
// glance-webhook so far.
func (s *Stack) BinaryLogs() []string { return slices.Clone(s.binaryLogs) }

// BinariesServer is the address the binaries' kubeconfigs name: the
// API server's front door.
func (s *Stack) BinariesServer() string {
	if s.front == nil {
		return s.Config.Host
	}
	return "https://" + s.front.address
}

// RestartAPIServer stops kube-apiserver for down, keeping etcd, the
// controllers and both binaries running, and starts it again.
func (s *Stack) RestartAPIServer(ctx context.Context, down time.Duration) error {
	return s.behindClosedDoor(ctx, func() error {
		if err := s.Cluster.StopAPIServer(); err != nil {
			return err
		}
		select {
		case <-time.After(down):
		case <-ctx.Done():
			return ctx.Err()
		}
		return s.Cluster.StartAPIServer(ctx)
	})
}

// BackupEtcd takes a file-level backup of etcd into dir (Cluster.BackupEtcd).
func (s *Stack) BackupEtcd(ctx context.Context, dir string) error {
	return s.Cluster.BackupEtcd(ctx, dir)
}

// RestoreEtcd restores the backup in dir (Cluster.RestoreEtcd): every
// resourceVersion goes back to the backup's. The stand-ins and the webhook
// start afresh, as a restore procedure restarts the cluster's controllers;
// glance-operator keeps running, to be seen noticing by itself.
func (s *Stack) RestoreEtcd(ctx context.Context, dir string) error {
	if err := s.behindClosedDoor(ctx, func() error { return s.Cluster.RestoreEtcd(ctx, dir) }); err != nil {
		return err
	}
	if err := s.standIns.Stop(); err != nil {
		return err
	}
	s.standInRestarts++
	var err error
	if s.standIns, err = startStandIns(ctx, s.Config, s.LogDir, fmt.Sprintf("stand-ins-%d", s.standInRestarts+1)); err != nil {
		return err
	}
	if s.webhookPort == 0 {
		return nil
	}
	if err := s.StopWebhook(); err != nil {
		return err
	}
	return s.StartWebhook(ctx)
}

// behindClosedDoor runs change, which replaces kube-apiserver, with the
// binaries' way to it closed. They lose their connections at the close and
// reach the new server once it is ready and authorizes the chart's roles,
// as behind a load balancer that checks /readyz: a server still loading
// its RBAC denies every call.
func (s *Stack) behindClosedDoor(ctx context.Context, change func() error) error {
	ids, err := renderChartIdentities()
	if err != nil {
		return err
	}
	s.front.close()
	if err := change(); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		return err
	}
	if err := s.waitAuthorized(ctx, cs, ids.rbac); err != nil {
		return err
	}
	return s.front.open()
}
