package stack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/c5c3/glance-operator/test/controlplane"
)

// startManager runs glance-operator against the cluster as its
// ServiceAccount and returns once its caches are synced (/readyz).
// baseArgs are a chart Deployment's arguments, or nil for the stack's own.
func (s *Stack) startManager(ctx context.Context, bin, healthcheckAddress string, baseArgs, extraArgs []string) error {
	ports, err := controlplane.FreePorts(2)
	if err != nil {
		return err
	}
	metrics, health := ports[0], ports[1]
	s.ManagerMetricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics)
	if baseArgs == nil {
		// As the chart's Deployment: target clusters register in the
		// operator's namespace.
		baseArgs = []string{"--leader-elect=false", "--operator-namespace=" + OperatorNamespace, "--clusters-namespace=" + OperatorNamespace}
	}
	s.managerBaseArgs = baseArgs
	args := append(withFlags(baseArgs,
		"--kubeconfig="+s.ManagerKubeconfig,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metrics),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", health),
		// The manager runs outside the cluster network and kwok's pods
		// serve nothing, so health probes go to the stand-in.
		"--dev-healthcheck-address="+healthcheckAddress,
	), extraArgs...)
	name := s.processName("glance-operator")
	if s.managerKills > 0 {
		name = fmt.Sprintf("%s-after-kill-%d", name, s.managerKills)
	}
	manager, err := controlplane.StartProcess(s.Dir, name, bin, args...)
	s.mu.Lock()
	s.manager = manager
	s.mu.Unlock()
	if s.manager != nil {
		s.ManagerLog = s.manager.LogPath()
		s.binaryLogs = append(s.binaryLogs, s.ManagerLog)
	}
	if err != nil {
		return err
	}
	return s.poll(ctx, "glance-operator /readyz", 2*time.Minute, func(ctx context.Context) (bool, error) {
		return getOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", health))
	})
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

// KillManager SIGKILLs glance-operator and starts it again with the same
// arguments, as a Deployment replaces a killed pod, and returns once the
// new run is ready. Check does not report the killed run.
func (s *Stack) KillManager(ctx context.Context) error {
	s.mu.Lock()
	manager := s.manager
	s.manager = nil
	s.mu.Unlock()
	if manager == nil {
		return errors.New("glance-operator is not running")
	}
	if err := manager.Kill(); err != nil {
		return err
	}
	s.managerKills++
	return s.startManager(ctx, s.bins.manager, s.healthcheckAddress, s.managerBaseArgs, s.managerExtraArgs)
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
