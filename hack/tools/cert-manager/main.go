// Command cert-manager runs a local cert-manager for the test clusters: the
// cert-manager controller (issuers, clusterissuers, the certificates
// controllers and the selfSigned and CA certificaterequests issuers with the
// approver) and the cainjector (webhook configurations, APIServices, CRDs) in
// one process, against the cluster a kubeconfig names. Leader election is
// off: one instance per cluster.
//
//	cert-manager --kubeconfig admin.kubeconfig --health-bind-address 127.0.0.1:9403
//
// It stops cleanly on SIGTERM or SIGINT.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	cmutil "github.com/cert-manager/cert-manager/pkg/util"
	utilfeature "github.com/cert-manager/cert-manager/pkg/util/feature"
	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
)

// options are the command's flags.
type options struct {
	kubeconfig               string
	namespace                string
	clusterResourceNamespace string
	metricsAddr              string
	cainjectorMetricsAddr    string
	healthAddr               string
	workers                  int
	featureGates             string
	version                  bool
}

func main() {
	var o options
	// Not flag.CommandLine: controller-runtime registers its own
	// --kubeconfig there.
	fs := flag.NewFlagSet("cert-manager", flag.ExitOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (empty: in-cluster or $KUBECONFIG)")
	fs.StringVar(&o.namespace, "namespace", "", "watch only this namespace (disables clusterissuers); empty watches all")
	fs.StringVar(&o.clusterResourceNamespace, "cluster-resource-namespace", "kube-system", "namespace holding the Secrets that ClusterIssuers refer to")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "0", "address of the controller's Prometheus /metrics; \"0\" turns it off")
	fs.StringVar(&o.cainjectorMetricsAddr, "cainjector-metrics-bind-address", "0", "address of the cainjector's controller-runtime /metrics; \"0\" turns it off")
	fs.StringVar(&o.healthAddr, "health-bind-address", "0", "address serving /livez and /readyz (ready once both components have synced their caches); \"0\" turns it off")
	fs.IntVar(&o.workers, "concurrent-workers", 5, "workers per controller")
	fs.StringVar(&o.featureGates, "feature-gates", "", "cert-manager feature gates, key=value pairs separated by commas")
	fs.BoolVar(&o.version, "version", false, "print the cert-manager version and exit")
	klog.InitFlags(fs) // -v, -vmodule, ...
	_ = fs.Parse(os.Args[1:])

	setVersion()
	if o.version {
		fmt.Println(cmutil.VersionInfo().GitVersion)
		return
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unexpected arguments: %v\n", fs.Args())
		os.Exit(2)
	}
	klog.EnableContextualLogging(true)
	ctrl.SetLogger(klog.NewKlogr())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err := run(ctx, o)
	klog.Flush()
	if err != nil {
		fmt.Fprintf(os.Stderr, "cert-manager: %v\n", err)
		os.Exit(1)
	}
}

// setVersion reports cert-manager's module version (from the build info) in
// the user agent and the version flag, as cert-manager's release link flags
// would.
func setVersion() {
	info, ok := debug.ReadBuildInfo()
	if !ok || cmutil.AppVersion != "canary" {
		return
	}
	for _, dep := range info.Deps {
		if dep.Path == "github.com/cert-manager/cert-manager" {
			cmutil.AppVersion = dep.Version
		}
	}
}

func run(ctx context.Context, o options) error {
	if o.featureGates != "" {
		gates := map[string]bool{}
		for kv := range strings.SplitSeq(o.featureGates, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || (v != "true" && v != "false") {
				return fmt.Errorf("--feature-gates: %q is not key=true|false", kv)
			}
			gates[k] = v == "true"
		}
		if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(gates); err != nil {
			return fmt.Errorf("--feature-gates: %w", err)
		}
	}
	klog.InfoS("starting cert-manager", "version", cmutil.VersionInfo().GitVersion, "namespace", o.namespace, "clusterResourceNamespace", o.clusterResourceNamespace)

	var controllerReady, injectorReady atomic.Bool
	g, ctx := errgroup.WithContext(ctx)
	if err := serveHealth(ctx, g, o.healthAddr, func() bool { return controllerReady.Load() && injectorReady.Load() }); err != nil {
		return err
	}
	g.Go(func() error { return runController(ctx, o, &controllerReady) })
	g.Go(func() error { return runCAInjector(ctx, o, &injectorReady) })
	err := g.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	klog.InfoS("cert-manager stopped")
	return err
}

// listen opens addr, or returns nil for "0" or "" (off).
func listen(ctx context.Context, addr string) (net.Listener, error) {
	if addr == "" || addr == "0" {
		return nil, nil
	}
	var lc net.ListenConfig
	return lc.Listen(ctx, "tcp", addr)
}

// serveHTTP serves srv on ln until ctx ends, then shuts it down.
func serveHTTP(ctx context.Context, g *errgroup.Group, srv *http.Server, ln net.Listener) {
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdownCtx)
	})
}

// serveHealth serves /livez (the process runs) and /readyz (ready reports
// true) on addr.
func serveHealth(ctx context.Context, g *errgroup.Group, addr string, ready func() bool) error {
	ln, err := listen(ctx, addr)
	if err != nil || ln == nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok")
	})
	klog.InfoS("serving health", "address", ln.Addr().String())
	serveHTTP(ctx, g, &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, ln)
	return nil
}
