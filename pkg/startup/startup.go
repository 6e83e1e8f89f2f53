// Package startup is what both binaries do before their own work: the API
// client and logging flags, their parsing, the logger and the REST config.
// Both take their signal context from ctrl.SetupSignalHandler.
package startup

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/c5c3/glance-operator/pkg/logging"
)

// Defaults of the client flags. A burst of new Glances makes about 20
// requests each within seconds; at 50 per second the manager's own limit
// held requests back by up to 170 ms (p95) with 500 Glances applied at once.
// The API server's priority and fairness still guard it.
const (
	DefaultQPS   = 200
	DefaultBurst = 400
)

// Flags are the API client and logging flags of a binary.
type Flags struct {
	Kubeconfig string
	QPS        float64
	Burst      int
	LogFormat  string
	LogLevel   string
}

// Usage says, in the help of the flags, what the binary's API calls are
// for and what its debug level adds.
type Usage struct {
	// Kubeconfig says which API server the kubeconfig is of.
	Kubeconfig string
	// Calls names the API calls the rate limits bound.
	Calls string
	// LogLevel is the help of --log-level.
	LogLevel string
}

// Parse parses args into fs, refusing positional arguments. When it
// returns false the binary exits with code: 0 after -help, 2 on bad flags.
func Parse(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected arguments %q\n", fs.Name(), fs.Args())
		return 2, false
	}
	return 0, true
}

// Register adds --kubeconfig, --kube-api-qps, --kube-api-burst,
// --log-format and --log-level to fs.
func (f *Flags) Register(fs *flag.FlagSet, u Usage) {
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", u.Kubeconfig+" (default: in-cluster config)")
	fs.Float64Var(&f.QPS, "kube-api-qps", DefaultQPS, "client-side rate limit of "+u.Calls+", queries per second")
	fs.IntVar(&f.Burst, "kube-api-burst", DefaultBurst, "client-side burst of "+u.Calls)
	fs.StringVar(&f.LogFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&f.LogLevel, "log-level", "info", u.LogLevel)
}

// Logger builds the logger of the flags on w and makes it
// controller-runtime's and client-go's too.
func (f *Flags) Logger(w io.Writer) (logr.Logger, error) {
	log, err := logging.New(w, f.LogFormat, f.LogLevel)
	if err != nil {
		return logr.Logger{}, err
	}
	ctrllog.SetLogger(log)
	klog.SetLogger(log)
	return log, nil
}

// RESTConfig loads the kubeconfig, the in-cluster config without one, with
// the flags' rate limits and userAgent.
func (f *Flags) RESTConfig(userAgent string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", f.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = userAgent
	cfg.QPS, cfg.Burst = float32(f.QPS), f.Burst
	return cfg, nil
}

// NamespacesVar defines --watch-namespace, a comma-separated list of
// namespaces stored in p; empty means all.
func NamespacesVar(fs *flag.FlagSet, p *[]string, usage string) {
	fs.Func("watch-namespace", usage, func(v string) error {
		*p = nil
		for ns := range strings.SplitSeq(v, ",") {
			if ns = strings.TrimSpace(ns); ns != "" {
				*p = append(*p, ns)
			}
		}
		return nil
	})
}
