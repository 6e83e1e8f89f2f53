// Package realnode runs the suite on a real node: the local control plane
// with a kubelet on containerd and runc, the bridge CNI, kube-proxy and
// CoreDNS, every image pulled by digest from a registry on loopback. Pods
// here run real processes.
package realnode

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/c5c3/glance-operator/test/controlplane"
)

// The suite's cluster and the images it pushed.
var (
	cluster *controlplane.Cluster
	cs      kubernetes.Interface
	// netprobeImage is the suite's client and server, by digest.
	netprobeImage string
	// images are the chart's images, built by `make images`' builder.
	images productImages
	// startup is how long StartCluster took, for the report.
	startup time.Duration
)

var keep = flag.Bool("realnode.keep", false, "leave the cluster's directory (logs, kubeconfigs) behind after the suite")

func TestMain(m *testing.M) {
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// A short directory: containerd's socket path must fit a sun_path.
	dir, err := os.MkdirTemp("", "glrn-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	start := time.Now()
	// cert-manager runs as a pod; the chart installs the Glance CRDs, and
	// the operator watches the external kinds it talks to.
	crds := controlplane.AllCRDs
	crds.Glance = false
	cluster, err = controlplane.StartCluster(ctx, controlplane.ClusterOptions{Dir: dir, RealNode: true, CertManager: true, CRDs: crds})
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: start the real-node cluster:", err)
		return 1
	}
	startup = time.Since(start)
	fmt.Printf("real-node cluster up in %s (logs in %s)\n", startup.Round(100*time.Millisecond), filepath.Join(dir, "logs"))

	code := func() int {
		if cs, err = kubernetes.NewForConfig(cluster.Config); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL:", err)
			return 1
		}
		if netprobeImage, err = pushNetprobe(ctx, dir); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL:", err)
			return 1
		}
		if images, err = pushProductImages(ctx, dir); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: the chart's images:", err)
			return 1
		}
		return m.Run()
	}()

	// Running, the node has a footprint; stopped, none may be left.
	running, err := controlplane.HostLeftovers(dir)
	if err != nil || len(running) == 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the leftover check sees nothing of a running node (%v): it could not catch a leftover\n", err)
		code = 1
	}
	if err := cluster.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: stop the real-node cluster:", err)
		code = 1
	}
	left, err := controlplane.HostLeftovers(dir)
	if err != nil || len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the stopped node left behind (%v):\n  %s\n", err, strings.Join(left, "\n  "))
		code = 1
	}
	if code == 0 {
		crashCtx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		if err := crashedRunCleansUp(crashCtx); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL:", err)
			code = 1
		}
	}
	if !*keep {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: remove", dir, err)
			code = 1
		}
	}
	return code
}

// pushNetprobe builds the netprobe command into an image and pushes it.
func pushNetprobe(ctx context.Context, dir string) (string, error) {
	return cluster.Registry.BuildAndPush(ctx, filepath.Join(dir, "images"), "netprobe", "./test/realnode/netprobe", "test/netprobe", "v1")
}

// crashedRunCleansUp starts a real-node cluster with `localcluster`, kills
// it with SIGKILL once the node is up (its containers and containerd's
// shims outlive it), and checks that `localcluster -stop` (make
// cluster-down) leaves nothing behind.
func crashedRunCleansUp(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "glrn-crash-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	root, err := controlplane.RepoRoot()
	if err != nil {
		return err
	}
	bin := filepath.Join(dir, "localcluster")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./hack/localcluster")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build localcluster: %w: %s", err, out)
	}
	state := filepath.Join(dir, "cluster")
	lc := exec.CommandContext(ctx, bin, "-mode=cluster", "-operator=false", "-node=real", "-dir="+state)
	lc.Dir = root
	out, err := lc.StdoutPipe()
	if err != nil {
		return err
	}
	lc.Stderr = lc.Stdout
	if err := lc.Start(); err != nil {
		return err
	}
	var seen strings.Builder
	up := make(chan bool, 1)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := out.Read(buf)
			seen.Write(buf[:n])
			if strings.Contains(seen.String(), "Press Ctrl-C") {
				up <- true
				return
			}
			if err != nil {
				up <- false
				return
			}
		}
	}()
	select {
	case ok := <-up:
		if !ok {
			_ = lc.Wait()
			return fmt.Errorf("localcluster -node=real ended before the cluster was up:\n%s", seen.String())
		}
	case <-time.After(4 * time.Minute):
		_ = lc.Process.Kill()
		return fmt.Errorf("localcluster -node=real not up within 4m:\n%s", seen.String())
	}
	if running, err := controlplane.HostLeftovers(state); err != nil || len(running) == 0 {
		return fmt.Errorf("before the crash the leftover check sees nothing (%v)", err)
	}
	_ = lc.Process.Kill()
	_ = lc.Wait()
	stop := exec.CommandContext(ctx, bin, "-stop", "-dir="+state)
	stop.Dir = root
	if out, err := stop.CombinedOutput(); err != nil {
		return fmt.Errorf("localcluster -stop after the crash: %w: %s", err, out)
	}
	left, err := controlplane.HostLeftovers(state)
	if err != nil || len(left) > 0 {
		return fmt.Errorf("after a crash and localcluster -stop, left behind (%v):\n  %s", err, strings.Join(left, "\n  "))
	}
	return nil
}
