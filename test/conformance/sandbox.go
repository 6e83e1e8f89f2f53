//go:build linux

package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The sandbox is how the harness runs a container's command: the test binary
// re-executes itself in a new mount, PID, IPC and UTS namespace (joining the
// pod's network namespace), and there, as PID 1 like a container's process,
// it
//   - mounts an overlay of the Debian root (lower, never written) and the
//     per-container image additions (upper: the WSGI shim, hidden default
//     configs),
//   - bind-mounts every volume at the exact mountPath of the pod spec, plus
//     the pod's /etc/hosts, a fresh /proc, a minimal /dev and /dev/shm,
//   - makes the root read-only when the container's securityContext says so,
//   - chroots, drops to the pod's runAsUser/runAsGroup/fsGroup with
//     no_new_privs, and
//   - execs the container's command with exactly its resolved environment.
// The new mount namespace is private, so nothing is mounted on the host and
// every mount disappears with the process; PID 1 of a PID namespace takes all
// its descendants with it when it dies.

// sandboxEnv carries the path of the sandbox spec to the re-executed binary.
const sandboxEnv = "GLANCE_CONFORMANCE_SANDBOX"

type sandboxMount struct {
	Source   string
	Target   string
	ReadOnly bool
}

type sandboxSpec struct {
	// Lower is the Debian root; Upper and Work the overlay's writable
	// directories; RootFS the (empty) directory it is mounted on.
	Lower, Upper, Work, RootFS string
	Mounts                     []sandboxMount
	ReadOnlyRoot               bool
	Hostname                   string
	UID, GID                   int
	Groups                     []int
	NoNewPrivs                 bool
	Argv                       []string
	Env                        []string
	Dir                        string
	// NetNS is true when fd 3 is the network namespace to join.
	NetNS bool
}

// maybeRunSandbox turns the process into a sandboxed container when the
// harness re-executed it for that; it returns only when it was not.
func maybeRunSandbox() {
	path := os.Getenv(sandboxEnv)
	if path == "" {
		return
	}
	runtime.LockOSThread()
	err := runSandbox(path)
	fmt.Fprintf(os.Stderr, "conformance sandbox: %v\n", err)
	os.Exit(127)
}

func runSandbox(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var s sandboxSpec
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	if len(s.Argv) == 0 {
		return errors.New("no command")
	}
	if s.NetNS {
		if err := unix.Setns(3, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("joining the pod network: %w", err)
		}
		_ = unix.Close(3)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	if s.Hostname != "" {
		if err := unix.Sethostname([]byte(s.Hostname)); err != nil {
			return err
		}
	}
	root := s.RootFS
	opts := "lowerdir=" + s.Lower + ",upperdir=" + s.Upper + ",workdir=" + s.Work
	if err := unix.Mount("overlay", root, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mounting the root overlay: %w", err)
	}

	mounts := append([]sandboxMount(nil), s.Mounts...)
	// Parents before children.
	sort.SliceStable(mounts, func(i, j int) bool {
		return strings.Count(filepath.Clean(mounts[i].Target), "/") < strings.Count(filepath.Clean(mounts[j].Target), "/")
	})
	for _, m := range mounts {
		if err := bindMount(root, m); err != nil {
			return err
		}
	}
	if err := kernelMounts(root); err != nil {
		return err
	}
	if s.ReadOnlyRoot {
		if err := unix.Mount("", root, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("making the root read-only: %w", err)
		}
	}

	if err := unix.Chroot(root); err != nil {
		return err
	}
	dir := s.Dir
	if dir == "" {
		dir = "/"
	}
	if err := os.Chdir(dir); err != nil {
		return err
	}
	if err := syscall.Setgroups(s.Groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setgid(s.GID); err != nil {
		return fmt.Errorf("setgid: %w", err)
	}
	if err := syscall.Setuid(s.UID); err != nil {
		return fmt.Errorf("setuid: %w", err)
	}
	if s.NoNewPrivs {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return err
		}
	}
	// Changing credentials cleared it: the container dies with the test.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return err
	}

	argv0 := s.Argv[0]
	if !strings.Contains(argv0, "/") {
		path := ""
		for _, e := range s.Env {
			if v, ok := strings.CutPrefix(e, "PATH="); ok {
				path = v
			}
		}
		_ = os.Setenv("PATH", path)
		p, err := exec.LookPath(argv0)
		if err != nil {
			return fmt.Errorf("command %q: %w", argv0, err)
		}
		argv0 = p
	}
	return syscall.Exec(argv0, s.Argv, s.Env)
}

// inRoot joins target to root, refusing a symlink on the way: it would be
// resolved against the host's root, not the container's.
func inRoot(root, target string) (string, error) {
	p := root
	for _, part := range strings.Split(filepath.Clean("/"+target), "/") {
		if part == "" {
			continue
		}
		p = filepath.Join(p, part)
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			return "", fmt.Errorf("mount target %s crosses the symlink %s in the root", target, p)
		}
	}
	return p, nil
}

func bindMount(root string, m sandboxMount) error {
	target, err := inRoot(root, m.Target)
	if err != nil {
		return err
	}
	fi, err := os.Stat(m.Source)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		err = os.MkdirAll(target, 0o755)
	} else {
		if err = os.MkdirAll(filepath.Dir(target), 0o755); err == nil {
			var f *os.File
			if f, err = os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				err = f.Close()
			}
		}
	}
	if err != nil {
		return fmt.Errorf("mount point %s: %w", m.Target, err)
	}
	if err := unix.Mount(m.Source, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind-mounting %s at %s: %w", m.Source, m.Target, err)
	}
	if m.ReadOnly {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("making %s read-only: %w", m.Target, err)
		}
	}
	return nil
}

// kernelMounts gives the container /proc of its own PID namespace, a
// minimal /dev with /dev/shm, and a read-only /sys, as a container runtime
// does.
func kernelMounts(root string) error {
	must := func(p string) (string, error) {
		t, err := inRoot(root, p)
		if err != nil {
			return "", err
		}
		return t, os.MkdirAll(t, 0o755)
	}
	proc, err := must("/proc")
	if err != nil {
		return err
	}
	if err := unix.Mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc: %w", err)
	}
	sys, err := must("/sys")
	if err != nil {
		return err
	}
	if err := unix.Mount("sysfs", sys, "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /sys: %w", err)
	}
	dev, err := must("/dev")
	if err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=755,size=65536k"); err != nil {
		return fmt.Errorf("mounting /dev: %w", err)
	}
	for _, n := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		t := filepath.Join(dev, n)
		if err := os.WriteFile(t, nil, 0o666); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+n, t, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mounting /dev/%s: %w", n, err)
		}
	}
	for name, to := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(to, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	shm := filepath.Join(dev, "shm")
	if err := os.Mkdir(shm, 0o1777); err != nil {
		return err
	}
	if err := unix.Mount("shm", shm, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=1777,size=65536k"); err != nil {
		return fmt.Errorf("mounting /dev/shm: %w", err)
	}
	return nil
}
