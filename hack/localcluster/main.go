// Command localcluster runs a local control plane in the foreground until
// interrupted: the full cluster (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kwok) or an envtest API server, with CRDs and optionally
// manifests applied. `make run`, `make cluster` and `make apiserver` call it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/c5c3/glance-operator/test/controlplane"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func run() error {
	mode := flag.String("mode", "cluster", "cluster (full local cluster with kwok nodes) or apiserver (etcd + kube-apiserver only)")
	dir := flag.String("dir", ".run/cluster", "state directory: certificates, kubeconfig, logs, PIDs")
	nodes := flag.Int("nodes", 2, "kwok fake nodes (cluster mode)")
	var apply stringList
	flag.Var(&apply, "apply", "manifest to server-side apply once the cluster is up (repeatable)")
	stop := flag.Bool("stop", false, "stop the processes a cluster recorded in -dir, and exit")
	flag.Parse()

	absDir, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	if *stop {
		return controlplane.StopRecorded(absDir)
	}
	// A cluster left behind by a killed run holds the same directory.
	if err := controlplane.StopRecorded(absDir); err != nil {
		return err
	}
	if err := os.RemoveAll(absDir); err != nil {
		return err
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	var kubeconfig string
	var stopFn func() error
	var applyTo func(context.Context, ...string) error
	switch *mode {
	case "cluster":
		fmt.Println("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok ...")
		c, err := controlplane.StartCluster(ctx, controlplane.ClusterOptions{Dir: absDir, Nodes: *nodes, CRDs: controlplane.AllCRDs})
		if err != nil {
			return err
		}
		kubeconfig, stopFn = c.Kubeconfig, c.Stop
		applyTo = func(ctx context.Context, files ...string) error {
			_, err := controlplane.ApplyFiles(ctx, c.Config, files...)
			return err
		}
	case "apiserver":
		fmt.Println("starting etcd and kube-apiserver ...")
		srv, err := controlplane.StartAPIServer(controlplane.APIServerOptions{CRDs: controlplane.AllCRDs})
		if err != nil {
			return err
		}
		stopFn = srv.Stop
		if err := os.MkdirAll(absDir, 0o755); err != nil {
			return err
		}
		kubeconfig = filepath.Join(absDir, "admin.kubeconfig")
		if err := os.WriteFile(kubeconfig, srv.Env.KubeConfig, 0o600); err != nil {
			return err
		}
		applyTo = func(ctx context.Context, files ...string) error {
			_, err := controlplane.ApplyFiles(ctx, srv.Config, files...)
			return err
		}
	default:
		return fmt.Errorf("unknown -mode %q: want cluster or apiserver", *mode)
	}
	defer func() {
		fmt.Println("stopping the control plane ...")
		if err := stopFn(); err != nil {
			fmt.Fprintln(os.Stderr, "localcluster: stop:", err)
		}
	}()

	fmt.Println("installed CRDs: Glance, GlanceBackend, mariadb-operator, External Secrets, Gateway API, cert-manager")
	if len(apply) > 0 {
		if err := applyTo(ctx, apply...); err != nil {
			return err
		}
		fmt.Println("applied:", strings.Join(apply, ", "))
	}
	bin, _ := controlplane.BinDir()
	kubectl := filepath.Join(bin, "kubectl")
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, kubectl); err == nil {
			kubectl = rel
		}
	}
	fmt.Printf("\nkubeconfig: %s\ntry:        %s --kubeconfig %s get gl,glb -A\nlogs:       %s\n\nPress Ctrl-C to stop.\n",
		kubeconfig, kubectl, kubeconfig, filepath.Join(absDir, "logs"))
	<-ctx.Done()
	return nil
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
