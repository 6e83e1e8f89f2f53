// Command glance-operator runs the controllers of the glance-operator: the
// Glance pipeline and the GlanceBackend status controller.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/c5c3/glance-operator/pkg/operator"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/pkg/startup"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("glance-operator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o operator.Options
	var client startup.Flags
	fs.StringVar(&o.MetricsAddress, "metrics-bind-address", ":8080", `address of the Prometheus /metrics endpoint ("0" disables it)`)
	fs.StringVar(&o.HealthAddress, "health-probe-bind-address", ":8081", `address of /healthz and /readyz ("0" disables them)`)
	fs.StringVar(&o.PprofAddress, "pprof-bind-address", "0", `address of Go's /debug/pprof profiling endpoints ("0" disables them); never expose it beyond the pod`)
	fs.BoolVar(&o.LeaderElection, "leader-elect", true, "elect one active replica among several")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election lease (default: the pod's namespace)")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", operator.DefaultLeaseDuration, "how long a standby waits before it takes a lease its leader stopped renewing")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", operator.DefaultRenewDeadline, "how long the leader tries to renew its lease before it stops leading; shorter than the lease duration")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", operator.DefaultRetryPeriod, "how often a replica tries to take or renew the lease")
	fs.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", 4, "reconciles each controller runs at once")
	fs.DurationVar(&o.CoalesceEvents, "coalesce-events", operator.DefaultCoalesceEvents, "how long each watch event waits in a controller's queue, so the burst of events one change sets off wakes one pass (0: a pass per event)")
	startup.NamespacesVar(fs, &o.WatchNamespaces, "comma-separated namespaces to watch (default: all)")
	fs.StringVar(&o.ClustersNamespace, "clusters-namespace", "glance-system", "namespace of the target clusters' kubeconfig Secrets")
	fs.StringVar(&o.ClusterDomain, "cluster-domain", render.DefaultClusterDomain, "cluster DNS domain of Service names, for the health probe and status.endpoint")
	fs.StringVar(&o.OperatorNamespace, "operator-namespace", os.Getenv("POD_NAMESPACE"), "namespace the operator runs in; NetworkPolicies admit its health probes from there (default: $POD_NAMESPACE)")
	fs.StringVar(&o.DevHealthcheckAddress, "dev-healthcheck-address", "", "DEVELOPMENT ONLY: send every /healthcheck probe to this host:port instead of the Glance's Service, for a manager running outside the cluster")
	fs.DurationVar(&o.RewindCheckInterval, "rewind-check-interval", pipeline.DefaultRewindCheckInterval, "how often to compare the API server's resourceVersion with the caches'; the manager stops, to be started afresh, when the server went back, as after an etcd restore (0: never)")
	fs.DurationVar(&o.StaleCacheLimit, "stale-cache-limit", pipeline.DefaultStaleCacheLimit, "how long a controller waits for its cache to catch up with its own last write to a Glance or GlanceBackend before it takes the cached copy as current, as after an etcd restore the rewind check missed (0: the default)")
	fs.DurationVar(&o.GracefulShutdownTimeout, "graceful-shutdown-timeout", 30*time.Second, "how long running reconciles may finish on SIGTERM")
	client.Register(fs, startup.Usage{
		Kubeconfig: "kubeconfig of the management cluster", Calls: "the API calls", LogLevel: "log level: error, info or debug",
	})
	if code, ok := startup.Parse(fs, args); !ok {
		return code
	}
	log, err := client.Logger(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "glance-operator: %v\n", err)
		return 2
	}
	cfg, err := client.RESTConfig("glance-operator")
	if err != nil {
		log.Error(err, "load the API server config")
		return 1
	}
	ctx := ctrl.SetupSignalHandler()
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
