// Command localcluster runs a local control plane in the foreground until
// interrupted. -mode=cluster (make run, make cluster) runs the full cluster
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok) with
// the product on it: glance-operator and glance-webhook built from this
// repository and run as processes, and the stand-ins of test/stack for the
// operators the product talks to; the applied Glances are awaited until
// Ready. -mode=apiserver (make apiserver) runs an envtest API server with the
// CRDs only.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/operatortest"
	"github.com/c5c3/glance-operator/test/realnode"
	"github.com/c5c3/glance-operator/test/stack"
)

func main() {
	opts := parseFlags()
	if opts.stop {
		if err := stopRecorded(opts.dir); err != nil {
			fmt.Fprintln(os.Stderr, "localcluster:", err)
			os.Exit(1)
		}
		return
	}
	// SIGHUP too: closing the terminal is a stop like Ctrl-C.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	restore := takeTerminal()
	err := run(ctx, opts)
	restore()
	stop()
	switch {
	case ctx.Err() != nil:
		// Stopped by a signal: a normal end, also when it cut the start
		// short. The cluster was stopped before run returned.
		if err != nil {
			fmt.Fprintln(os.Stderr, "localcluster: interrupted:", err)
		}
	case err != nil:
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

// progressInterval is how often the wait for Ready reports what is missing.
const progressInterval = 5 * time.Second

// options are the command line.
type options struct {
	mode, dir     string
	node          string
	nodes         int
	withOperator  bool
	readyTimeout  time.Duration
	apply, stages stringList
	stop          bool
}

func parseFlags() options {
	var o options
	flag.StringVar(&o.mode, "mode", "cluster", "cluster (full local cluster with kwok nodes) or apiserver (etcd + kube-apiserver only)")
	flag.StringVar(&o.dir, "dir", ".run/cluster", "state directory: certificates, kubeconfig, logs, PIDs")
	flag.IntVar(&o.nodes, "nodes", 2, "kwok fake nodes (cluster mode)")
	flag.StringVar(&o.node, "node", "kwok", "cluster mode: kwok (fake nodes) or real (a kubelet on containerd, kube-proxy, CoreDNS and a NetworkPolicy enforcer; needs root)")
	flag.BoolVar(&o.withOperator, "operator", true, "cluster mode: run glance-operator, glance-webhook and the stand-ins, and wait for the applied Glances to turn Ready (false: the bare cluster)")
	flag.DurationVar(&o.readyTimeout, "ready-timeout", 5*time.Minute, "cluster mode: how long the applied Glances may take to turn Ready")
	flag.Var(&o.apply, "apply", "manifest to server-side apply once the cluster is up (repeatable)")
	flag.Var(&o.stages, "kwok-stage", "extra kwok Stage file (repeatable; cluster mode)")
	flag.BoolVar(&o.stop, "stop", false, "stop the processes a cluster recorded in -dir, and exit")
	flag.Parse()
	return o
}

func stopRecorded(dir string) error {
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	return controlplane.StopRecorded(absDir)
}

// run starts the cluster, waits for the applied Glances and then for ctx to
// end, and stops the cluster before it returns.
func run(ctx context.Context, o options) error {
	absDir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	// A cluster left behind by a killed run holds the same directory.
	if err := controlplane.StopRecorded(absDir); err != nil {
		return err
	}
	if err := os.RemoveAll(absDir); err != nil {
		return err
	}

	var (
		cfg        *rest.Config
		kubeconfig string
		stopFn     func() error
		// check reports a crashed operator or webhook while waiting.
		check = func() error { return nil }
	)
	if o.node != "kwok" && o.node != "real" {
		return fmt.Errorf("unknown -node %q: want kwok or real", o.node)
	}
	if o.node == "real" && o.mode != "cluster" {
		return errors.New("-node=real needs -mode=cluster")
	}
	var glances []client.ObjectKey
	// scene is the real node's sample Glance, its Keystone and S3 store.
	var scene *realnode.Scene
	switch {
	case o.mode == "cluster" && o.withOperator && o.node == "real":
		if len(o.apply) > 0 {
			return errors.New("-node=real sets its own scene: -apply is for kwok clusters")
		}
		rn, err := startRealNode(ctx, absDir)
		if err != nil {
			return err
		}
		cfg, kubeconfig, stopFn, scene = rn.env.Cluster.Config, rn.env.Cluster.Kubeconfig, rn.stop, rn.scene
		glances = append(glances, client.ObjectKey{Namespace: rn.scene.Namespace, Name: realnode.GlanceName})
	case o.mode == "cluster" && o.withOperator:
		s, err := stack.Start(ctx, stack.Options{Dir: absDir, Nodes: o.nodes, KwokStages: o.stages, Progress: os.Stdout})
		if err != nil {
			return err
		}
		cfg, kubeconfig, stopFn, check = s.Config, s.Kubeconfig, s.Stop, s.Check
		fmt.Println("running: glance-operator, glance-webhook (registered with the API server), and stand-ins for mariadb-operator, External Secrets and a Gateway controller")
	case o.mode == "cluster":
		nodes := "kwok"
		if o.node == "real" {
			nodes = "a real node (containerd, kubelet, kube-proxy, CoreDNS, kube-network-policies)"
		}
		fmt.Printf("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler and %s ...\n", nodes)
		c, err := controlplane.StartCluster(ctx, controlplane.ClusterOptions{Dir: absDir, Nodes: o.nodes, CRDs: controlplane.AllCRDs, KwokStages: o.stages, RealNode: o.node == "real"})
		if err != nil {
			return err
		}
		if c.Registry != nil {
			fmt.Printf("image registry: %s (containerd pulls from it)\n", c.Registry.Host)
		}
		cfg, kubeconfig, stopFn = c.Config, c.Kubeconfig, c.Stop
	case o.mode == "apiserver":
		fmt.Println("starting etcd and kube-apiserver ...")
		srv, err := controlplane.StartAPIServer(controlplane.APIServerOptions{CRDs: controlplane.AllCRDs})
		if err != nil {
			return err
		}
		cfg, stopFn = srv.Config, srv.Stop
		if err := os.MkdirAll(absDir, 0o755); err != nil {
			return errors.Join(err, stopFn())
		}
		kubeconfig = filepath.Join(absDir, "admin.kubeconfig")
		if err := os.WriteFile(kubeconfig, srv.Env.KubeConfig, 0o600); err != nil {
			return errors.Join(err, stopFn())
		}
	default:
		return fmt.Errorf("unknown -mode %q: want cluster or apiserver", o.mode)
	}
	defer func() {
		fmt.Println("stopping ...")
		if err := stopFn(); err != nil {
			fmt.Fprintln(os.Stderr, "localcluster: stop:", err)
		}
	}()

	fmt.Println("installed CRDs: Glance, GlanceBackend, mariadb-operator, External Secrets, Gateway API, cert-manager")
	logs := filepath.Join(absDir, "logs")
	if len(o.apply) > 0 {
		// Admission warnings are printed as kubectl prints them.
		cfg := rest.CopyConfig(cfg)
		cfg.WarningHandler = warningPrinter{}
		applied, err := controlplane.ApplyFiles(ctx, cfg, o.apply...)
		if err != nil {
			return err
		}
		fmt.Println("applied:", strings.Join(o.apply, ", "))
		for _, obj := range applied {
			if obj.GroupVersionKind() == v1alpha1.GroupVersion.WithKind("Glance") {
				glances = append(glances, client.ObjectKeyFromObject(obj))
			}
		}
	}

	bin, _ := controlplane.BinDir()
	kubectl := filepath.Join(bin, "kubectl")
	if o.mode == "cluster" && o.withOperator && len(glances) > 0 {
		if err := waitReady(ctx, cfg, glances, o.readyTimeout, check, logs); err != nil {
			if ctx.Err() != nil {
				return nil // interrupted while waiting
			}
			return err
		}
		out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "get", "gl,glb", "-A").CombinedOutput()
		fmt.Printf("\n%s", out)
		if err != nil {
			return fmt.Errorf("kubectl get gl,glb -A: %w", err)
		}
	}

	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, kubectl); err == nil {
			kubectl = rel
		}
	}
	fmt.Printf("\nkubeconfig: %s\ntry:        %s --kubeconfig %s get gl,glb -A\nlogs:       %s\n",
		kubeconfig, kubectl, kubeconfig, logs)
	if scene != nil {
		if err := registerImageService(ctx, cfg, scene); err != nil {
			return err
		}
		if err := printUpload(ctx, cfg, scene); err != nil {
			return err
		}
	}
	fmt.Println("\nPress Ctrl-C to stop.")
	<-ctx.Done()
	return nil
}

// waitReady waits until every Glance reports Ready=True, printing the
// conditions not yet True every progressInterval.
func waitReady(ctx context.Context, cfg *rest.Config, keys []client.ObjectKey, timeout time.Duration, check func() error, logs string) error {
	cl, err := operatortest.NewClient(cfg)
	if err != nil {
		return err
	}
	fmt.Printf("waiting up to %s for %s to turn Ready ...\n", timeout, names(keys))
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	lastReport := time.Now()
	for {
		var pending []string
		for _, key := range keys {
			g := &v1alpha1.Glance{}
			if err := cl.Get(ctx, key, g); err != nil {
				pending = append(pending, fmt.Sprintf("%s: %v", key, err))
				continue
			}
			if missing := notTrue(g); len(missing) > 0 {
				pending = append(pending, fmt.Sprintf("%s: %s", key, strings.Join(missing, "; ")))
			}
		}
		if len(pending) == 0 {
			fmt.Printf("%s Ready after %s (all nine conditions True)\n", names(keys), time.Since(start).Round(time.Second))
			return nil
		}
		if err := check(); err != nil {
			return fmt.Errorf("%w\nlogs: %s", err, logs)
		}
		if time.Since(lastReport) >= progressInterval {
			lastReport = time.Now()
			fmt.Printf("  %s: not yet True: %s\n", time.Since(start).Round(time.Second), strings.Join(pending, " | "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("%s not Ready after %s:\n  %s\nlogs: %s (glance-operator.log, glance-webhook.log, stand-ins.log, and the cluster's)",
				names(keys), timeout, strings.Join(pending, "\n  "), logs)
		case <-poll.C:
		}
	}
}

// notTrue lists the sub-conditions of g that are not True, with reason and
// message, and the ones not reported at all.
func notTrue(g *v1alpha1.Glance) []string {
	if c := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue {
		return nil
	}
	var out []string
	for _, typ := range append(slices.Clone(v1alpha1.SubConditions), v1alpha1.ConditionReady) {
		c := meta.FindStatusCondition(g.Status.Conditions, typ)
		switch {
		case c == nil:
			out = append(out, typ+" not reported")
		case c.Status != metav1.ConditionTrue && typ != v1alpha1.ConditionReady:
			out = append(out, fmt.Sprintf("%s=%s %s: %s", typ, c.Status, c.Reason, c.Message))
		}
	}
	if len(out) == 0 {
		out = append(out, "Ready not True yet")
	}
	return out
}

func names(keys []client.ObjectKey) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = "Glance " + k.String()
	}
	return strings.Join(s, ", ")
}

// warningPrinter prints admission warnings the way kubectl does.
type warningPrinter struct{}

func (warningPrinter) HandleWarningHeader(code int, _ string, text string) {
	if code == 299 && text != "" {
		fmt.Println("Warning:", text)
	}
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
