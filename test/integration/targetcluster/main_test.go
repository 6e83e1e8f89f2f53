// Package targetcluster runs the target cluster registry against two real
// API servers: the management cluster holding the kubeconfig Secrets, and a
// target cluster they point at. The target is an envtest API server with a
// fixed certificate directory, so a test can stop it and start it again on
// the same address with the same certificates.
package targetcluster

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/c5c3/glance-operator/pkg/operator"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/operatortest"
)

var (
	management *controlplane.APIServer
	mgmtClient client.Client
	target     *targetServer
	// logs collects everything the registries and client-go log, so tests
	// can check that no kubeconfig contents reach a log.
	logs = &operatortest.LogBuffer{}
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	logger := funcr.New(func(prefix, args string) { fmt.Fprintln(logs, prefix, args) }, funcr.Options{Verbosity: 10})
	ctrllog.SetLogger(logger)
	klog.SetLogger(logger)

	var err error
	// The Glance CRs live on the management cluster; the external APIs
	// their children need (ESO, mariadb-operator) on the target.
	if management, err = controlplane.StartAPIServer(controlplane.APIServerOptions{CRDs: controlplane.CRDs{Glance: true}}); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: start the management kube-apiserver:", err)
		return 1
	}
	defer func() {
		if err := management.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop the management kube-apiserver:", err)
		}
	}()
	if target, err = startTargetServer(controlplane.CRDs{MariaDB: true, ExternalSecrets: true, GatewayAPI: true}); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: start the target kube-apiserver:", err)
		return 1
	}
	defer func() {
		if err := target.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop the target kube-apiserver:", err)
		}
	}()
	scheme, err := operator.NewScheme()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	if mgmtClient, err = client.New(management.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	return m.Run()
}

// targetServer is the target cluster: etcd and a kube-apiserver that can be
// stopped and started again.
type targetServer struct {
	env     *envtest.Environment
	certDir string
	// config is cluster-admin on the target.
	config *rest.Config
	client client.Client
}

// startTargetServer starts a target with the CRDs of crds installed.
func startTargetServer(crds controlplane.CRDs) (*targetServer, error) {
	bin, err := controlplane.BinDir(controlplane.EnvtestBinaries...)
	if err != nil {
		return nil, err
	}
	// A certificate directory of our own survives a stop, so the restarted
	// server keeps its serving certificate and the kubeconfigs stay valid.
	certDir, err := os.MkdirTemp("", "glance-target-apiserver-")
	if err != nil {
		return nil, err
	}
	apiServer := &envtest.APIServer{CertDir: certDir}
	// Without it the server's shutdown waits a minute for the registry's
	// open watches.
	apiServer.Configure().Set("shutdown-watch-termination-grace-period", "5s")
	paths, err := crds.Paths()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    bin,
		CRDDirectoryPaths:        paths,
		ErrorIfCRDPathMissing:    true,
		ControlPlane:             envtest.ControlPlane{APIServer: apiServer},
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		_ = os.RemoveAll(certDir)
		return nil, fmt.Errorf("start envtest control plane from %s: %w", bin, err)
	}
	scheme, err := operator.NewScheme()
	if err != nil {
		return nil, errors.Join(err, env.Stop(), os.RemoveAll(certDir))
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, errors.Join(err, env.Stop(), os.RemoveAll(certDir))
	}
	return &targetServer{env: env, certDir: certDir, config: cfg, client: c}, nil
}

// user provisions a user of the target's system:masters group.
func (s *targetServer) user(name string) (*rest.Config, error) {
	u, err := s.env.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	return u.Config(), nil
}

// stopAPIServer stops the target's kube-apiserver and leaves etcd running.
func (s *targetServer) stopAPIServer() error { return s.env.ControlPlane.APIServer.Stop() }

// startAPIServer starts it again on the same address.
func (s *targetServer) startAPIServer() error { return s.env.ControlPlane.APIServer.Start() }

func (s *targetServer) stop() error {
	return errors.Join(s.env.Stop(), os.RemoveAll(s.certDir))
}
