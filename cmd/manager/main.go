// Command glance-operator runs the controllers of the glance-operator: the
// Glance pipeline and the GlanceBackend status controller.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/c5c3/glance-operator/pkg/logging"
	"github.com/c5c3/glance-operator/pkg/operator"
	"github.com/c5c3/glance-operator/pkg/render"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("glance-operator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o operator.Options
	var kubeconfig, watchNamespaces, logFormat, logLevel string
	fs.StringVar(&o.MetricsAddress, "metrics-bind-address", ":8080", `address of the Prometheus /metrics endpoint ("0" disables it)`)
	fs.StringVar(&o.HealthAddress, "health-probe-bind-address", ":8081", `address of /healthz and /readyz ("0" disables them)`)
	fs.BoolVar(&o.LeaderElection, "leader-elect", true, "elect one active replica among several")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election lease (default: the pod's namespace)")
	fs.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", 4, "reconciles each controller runs at once")
	fs.StringVar(&watchNamespaces, "watch-namespace", "", "comma-separated namespaces to watch (default: all)")
	fs.StringVar(&o.ClustersNamespace, "clusters-namespace", "glance-system", "namespace of the target clusters' kubeconfig Secrets")
	fs.StringVar(&o.ClusterDomain, "cluster-domain", render.DefaultClusterDomain, "cluster DNS domain of Service names, for the health probe and status.endpoint")
	fs.StringVar(&o.OperatorNamespace, "operator-namespace", os.Getenv("POD_NAMESPACE"), "namespace the operator runs in; NetworkPolicies admit its health probes from there (default: $POD_NAMESPACE)")
	fs.StringVar(&o.DevHealthcheckAddress, "dev-healthcheck-address", "", "DEVELOPMENT ONLY: send every /healthcheck probe to this host:port instead of the Glance's Service, for a manager running outside the cluster")
	fs.DurationVar(&o.GracefulShutdownTimeout, "graceful-shutdown-timeout", 30*time.Second, "how long running reconciles may finish on SIGTERM")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the management cluster (default: in-cluster config)")
	var qps float64
	var burst int
	fs.Float64Var(&qps, "kube-api-qps", 50, "client-side rate limit of the API calls, queries per second")
	fs.IntVar(&burst, "kube-api-burst", 100, "client-side burst of the API calls")
	fs.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&logLevel, "log-level", "info", "log level: error, info or debug")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "glance-operator: unexpected arguments %q\n", fs.Args())
		return 2
	}
	for _, ns := range strings.Split(watchNamespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			o.WatchNamespaces = append(o.WatchNamespaces, ns)
		}
	}
	log, err := logging.New(stderr, logFormat, logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "glance-operator: %v\n", err)
		return 2
	}
	ctrllog.SetLogger(log)
	klog.SetLogger(log)

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig) // in-cluster without a kubeconfig
	if err != nil {
		log.Error(err, "load the API server config")
		return 1
	}
	cfg.UserAgent = "glance-operator"
	cfg.QPS, cfg.Burst = float32(qps), burst
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	mgr, err := operator.New(ctx, cfg, o)
	if err != nil {
		log.Error(err, "set up the manager")
		return 1
	}
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "manager stopped")
		return 1
	}
	return 0
}
