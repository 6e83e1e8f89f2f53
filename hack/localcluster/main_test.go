package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/operatortest"
)

// buildLocalcluster builds this program into a temporary directory.
func buildLocalcluster(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "localcluster")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// output collects what a process writes, safe to read while it runs.
type output = operatortest.LogBuffer

// waitOutput waits until out contains want, failing the test when the
// process ends first or after timeout.
func waitOutput(t *testing.T, out *output, want string, exited <-chan struct{}, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for !strings.Contains(out.String(), want) {
		select {
		case <-exited:
			t.Fatalf("exited before printing %q:\n%s", want, out.String())
		case <-deadline:
			t.Fatalf("no %q after %s:\n%s", want, timeout, out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// apiServerGone fails the test when the API server of the kubeconfig in
// dir still answers.
func apiServerGone(t *testing.T, dir string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 5 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.ServerVersion(); err == nil {
		t.Errorf("the API server at %s still answers after the stop", cfg.Host)
	}
}

// TestInterruptDuringStartExitsZero interrupts the program while the API
// server starts: a stop on a signal is a normal end, also when it cuts the
// start (here, the apply after it) short. The API server is stopped.
func TestInterruptDuringStartExitsZero(t *testing.T) {
	bin := buildLocalcluster(t)
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	manifest := filepath.Join(t.TempDir(), "namespace.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: interrupted\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out output
	cmd := exec.Command(bin, "-mode=apiserver", "-dir", dir, "-apply", manifest)
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, &out, &out
	// A group of its own, signalled as a terminal signals its foreground.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-exited })

	waitOutput(t, &out, "starting etcd and kube-apiserver", exited, time.Minute)
	// Interrupt once the API server runs (its kubeconfig is written), so
	// there is something to stop; the apply may still be under way.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "admin.kubeconfig")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no API server after a minute:\n%s", out.String())
		}
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("still running two minutes after SIGINT:\n%s", out.String())
	}
	if waitErr != nil {
		t.Fatalf("exit after SIGINT during the start: %v, want 0:\n%s", waitErr, out.String())
	}
	if !strings.Contains(out.String(), "stopping ...") {
		t.Errorf("no stop of the started API server:\n%s", out.String())
	}
	apiServerGone(t, dir)
}

// openPTY opens a new pseudo-terminal and returns its two ends.
func openPTY(t *testing.T) (controller, terminal *os.File) {
	t.Helper()
	controller, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fd := int(controller.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	terminal, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return controller, terminal
}

// TestCtrlCUnderMakeExitsZero runs the README's `make run` on a terminal
// (its run state in a temporary RUN_DIR): the sample Glance turns Ready, and
// Ctrl-C once it is up makes make exit 0. The terminal signals its whole
// foreground group, and GNU make exits 130 whenever the signal reaches make
// itself, so this holds only if Ctrl-C reaches the program alone.
func TestCtrlCUnderMakeExitsZero(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	controller, terminal := openPTY(t)
	defer controller.Close()
	cmd := exec.Command("make", "--no-print-directory", "run", "RUN_DIR="+dir)
	cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr = root, terminal, terminal, terminal
	// make leads a session on the terminal, as the login shell's job does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	terminal.Close()
	var out output
	go func() { _, _ = io.Copy(&out, controller) }() // ends with EIO once every process has left the terminal
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-exited })

	waitOutput(t, &out, "Press Ctrl-C to stop.", exited, 5*time.Minute)
	if !strings.Contains(out.String(), "Ready after") {
		t.Errorf("make run is up without the sample Glance Ready:\n%s", out.String())
	}
	if _, err := controller.Write([]byte{0x03}); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("still running two minutes after Ctrl-C:\n%s", out.String())
	}
	if waitErr != nil {
		t.Fatalf("make run after Ctrl-C: %v, want exit 0:\n%s", waitErr, out.String())
	}
	if !strings.Contains(out.String(), "stopping ...") {
		t.Errorf("no clean stop:\n%s", out.String())
	}
	apiServerGone(t, filepath.Join(dir, "cluster"))
}
