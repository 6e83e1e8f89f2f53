package stories

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/c5c3/glance-operator/test/controlplane"
)

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
