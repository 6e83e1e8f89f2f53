package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// APIServerOptions configure an envtest API server.
type APIServerOptions struct {
	// CRDs to install before Start returns.
	CRDs CRDs
	// Webhooks are registered with the API server (envtest's webhook install
	// options: it serves them on loopback with its own certificates).
	Webhooks envtest.WebhookInstallOptions
	// Output shows the etcd and kube-apiserver output on the test's stdout.
	Output bool
	// Oldest runs the kube-apiserver of OldestKubernetesVersion, the oldest
	// Kubernetes the chart claims, instead of KubernetesVersion's.
	Oldest bool
}

// APIServer is a real etcd + kube-apiserver started through envtest.
type APIServer struct {
	Env    *envtest.Environment
	Config *rest.Config
}

// StartAPIServer starts etcd and kube-apiserver from the locally built
// binaries and installs the selected CRDs. It fails, naming the make target,
// when the binaries are absent.
func StartAPIServer(opts APIServerOptions) (*APIServer, error) {
	bin, err := BinDir(EnvtestBinaries...)
	if err != nil {
		return nil, err
	}
	paths, err := opts.CRDs.Paths()
	if err != nil {
		return nil, err
	}
	version, target := KubernetesVersion, "control-plane"
	env := &envtest.Environment{
		BinaryAssetsDirectory:    bin,
		CRDDirectoryPaths:        paths,
		ErrorIfCRDPathMissing:    true,
		WebhookInstallOptions:    opts.Webhooks,
		AttachControlPlaneOutput: opts.Output,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	if opts.Oldest {
		dir, err := OldestBinDir()
		if err != nil {
			return nil, err
		}
		env.ControlPlane.GetAPIServer().Path = filepath.Join(dir, "kube-apiserver")
		version, target = OldestKubernetesVersion, "control-plane-oldest"
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("start envtest control plane from %s: %w", bin, err)
	}
	if err := checkServerVersion(cfg, version, target); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &APIServer{Env: env, Config: cfg}, nil
}

// Stop stops kube-apiserver and etcd and removes their data.
func (a *APIServer) Stop() error { return a.Env.Stop() }

// checkServerVersion guards against binaries built without the version
// ldflags, which report a bogus version and break version-gated behaviour,
// and against a stale build of another version.
func checkServerVersion(cfg *rest.Config, want, target string) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return fmt.Errorf("read server version: %w", err)
	}
	if v.GitVersion != want {
		return fmt.Errorf("kube-apiserver reports version %q, want %q: rebuild with `make %s`", v.GitVersion, want, target)
	}
	return nil
}

// RunTests is the TestMain of a suite on one API server: it starts the
// server, runs setup, runs the tests, runs setup's cleanup and stops the
// server, returning the exit code. A server that does not start fails the
// suite with the reason.
func RunTests(m interface{ Run() int }, opts APIServerOptions, setup func(*APIServer) (cleanup func(), err error)) int {
	srv, err := StartAPIServer(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: start kube-apiserver:", err)
		return 1
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop kube-apiserver:", err)
		}
	}()
	if setup != nil {
		cleanup, err := setup(srv)
		if cleanup != nil {
			defer cleanup()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: suite setup:", err)
			return 1
		}
	}
	return m.Run()
}
