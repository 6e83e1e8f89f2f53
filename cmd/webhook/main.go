// Command glance-webhook is the admission server of the glance-operator:
// defaulting and validation of Glance and GlanceBackend, served over HTTPS
// to the API server (`serve`), and the same verdict given offline to
// manifests (`check`).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/c5c3/glance-operator/pkg/admission/check"
	"github.com/c5c3/glance-operator/pkg/admission/webhook"
	"github.com/c5c3/glance-operator/pkg/startup"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "serve":
			return serve(args[1:], stderr)
		case "check":
			return check.Run(args[1:], stdout, stderr)
		case "help", "-h", "-help", "--help":
			usage(stdout)
			return 0
		}
		if !strings.HasPrefix(args[0], "-") {
			fmt.Fprintf(stderr, "glance-webhook: unknown command %q\n\n", args[0])
			usage(stderr)
			return 2
		}
	}
	return serve(args, stderr)
}

func usage(w io.Writer) {
	fmt.Fprint(w, `glance-webhook is the admission server of the glance-operator.

Usage:
  glance-webhook [serve] [flags]
      Serve the mutating and validating webhooks of Glance and GlanceBackend
      over HTTPS (the default command). The serving certificate is read from
      --cert-dir and re-read when it rotates; /healthz and /readyz are on
      --health-probe-bind-address, Prometheus metrics on
      --metrics-bind-address. SIGTERM drains in-flight reviews.

  glance-webhook check -f FILE|DIR [-f ...] [--old FILE] [-o text|json|junit]
                       [--warnings-as-errors]
      Judge manifests offline with the verdict the cluster gives: CRD
      defaults, webhook defaults, CRD schema and CEL rules, webhook rules,
      in the API server's order. Exits non-zero on any denial; prints
      warnings. See 'glance-webhook check --help'.

Flags of serve:
`)
	fs, _ := serveFlags(w)
	fs.PrintDefaults()
}

// serveConfig is what the serve flags set.
type serveConfig struct {
	server webhook.ServerOptions
	client startup.Flags
}

func serveFlags(output io.Writer) (*flag.FlagSet, *serveConfig) {
	c := &serveConfig{server: webhook.DefaultServerOptions()}
	fs := flag.NewFlagSet("glance-webhook serve", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprintln(output, "Usage: glance-webhook [serve] [flags]")
		fs.PrintDefaults()
	}
	o := &c.server
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "host the HTTPS webhook listener binds (empty: all interfaces)")
	fs.IntVar(&o.Port, "port", o.Port, "port of the HTTPS webhook listener")
	fs.StringVar(&o.CertDir, "cert-dir", o.CertDir, "directory holding the serving certificate and key; may be filled after start, re-read on change")
	fs.StringVar(&o.CertName, "cert-name", o.CertName, "file name of the serving certificate (PEM) in --cert-dir")
	fs.StringVar(&o.KeyName, "key-name", o.KeyName, "file name of the serving key (PEM) in --cert-dir")
	fs.StringVar(&o.MetricsAddress, "metrics-bind-address", o.MetricsAddress, `address of the Prometheus /metrics endpoint ("0" disables it)`)
	fs.StringVar(&o.HealthAddress, "health-probe-bind-address", o.HealthAddress, `address of /healthz and /readyz ("0" disables them)`)
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "how long in-flight reviews may finish after SIGTERM")
	fs.Int64Var(&o.MaxInFlightBytes, "max-in-flight-bytes", o.MaxInFlightBytes, "request bodies of the reviews served at once, each charged at least 64 KiB; a review over it is answered 429 and retried by the API server")
	startup.NamespacesVar(fs, &o.WatchNamespaces, "comma-separated namespaces whose GlanceBackends the one-default rule watches (default: all); the namespaces the webhooks judge")
	fs.BoolVar(&o.EnableHTTP2, "enable-http2", o.EnableHTTP2, "offer HTTP/2 on the webhook listener; off by default, as HTTP/2 rapid reset (CVE-2023-44487) lets one client tie up the server")
	c.client.Register(fs, startup.Usage{
		Kubeconfig: "kubeconfig of the API server to look up backends and PriorityClasses in",
		Calls:      "the lookups",
		LogLevel:   "log level: error, info, or debug (debug adds every allowed review)",
	})
	return fs, c
}

func serve(args []string, stderr io.Writer) int {
	fs, c := serveFlags(stderr)
	if code, ok := startup.Parse(fs, args); !ok {
		return code
	}
	log, err := c.client.Logger(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "glance-webhook serve: %v\n", err)
		return 2
	}
	cfg, err := c.client.RESTConfig("glance-webhook")
	if err != nil {
		log.Error(err, "load the API server config")
		return 1
	}
	ctx := ctrl.SetupSignalHandler()
	if err := webhook.RunServer(ctx, cfg, c.server, log); err != nil {
		log.Error(err, "admission server failed")
		return 1
	}
	return 0
}
