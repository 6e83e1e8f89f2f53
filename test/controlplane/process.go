package controlplane

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one control-plane component running in its own process group,
// its output in <dir>/logs/<name>.log.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // valid once done is closed
	log  string
}

func startProcess(dir, name, bin string, args ...string) (*process, error) {
	return startProcessLogged(dir, name, name, bin, args...)
}

// startProcessLogged is startProcess with its output in
// <dir>/logs/<logName>.log: a second run of a component keeps the first
// run's log.
func startProcessLogged(dir, name, logName, bin string, args ...string) (*process, error) {
	logDir := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(logDir, logName+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Own process group, so Stop reaches any children; killed with us if
	// the parent dies without stopping the cluster.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	if err := appendPID(dir, name, cmd.Process.Pid); err != nil {
		return p, err
	}
	return p, nil
}

// exited reports an error when the process has already ended.
func (p *process) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); last output:\n%s", p.name, p.err, tail(p.log, 30))
	default:
		return nil
	}
}

// stop sends SIGTERM to the process group and SIGKILL after the timeout.
func (p *process) stop(timeout time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("%s did not stop within %s after SIGTERM; killed", p.name, timeout)
	}
}

func tail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

const pidFile = "pids"

func appendPID(dir, name string, pid int) error {
	f, err := os.OpenFile(filepath.Join(dir, pidFile), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "%d %s\n", pid, name)
	return err
}

// StopRecorded stops the processes a cluster recorded in <dir>/pids, newest
// first, and puts back what its real node changed on the machine: the
// clean-up for a cluster whose owner died without stopping it.
func StopRecorded(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, pidFile))
	if errors.Is(err, os.ErrNotExist) {
		return cleanupHostOf(dir)
	}
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var errs []error
	for i := len(lines) - 1; i >= 0; i-- {
		fields := strings.Fields(lines[i])
		if len(fields) != 2 {
			continue
		}
		pid, err := strconv.Atoi(fields[0])
		if err != nil {
			continue
		}
		if syscall.Kill(-pid, syscall.SIGTERM) != nil {
			continue // already gone
		}
		deadline := time.Now().Add(10 * time.Second)
		for syscall.Kill(-pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if syscall.Kill(-pid, 0) == nil {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			errs = append(errs, fmt.Errorf("%s (pid %d) ignored SIGTERM; killed", fields[1], pid))
		}
	}
	if err := os.Remove(filepath.Join(dir, pidFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	// A real node's pods, mounts and network outlive its processes.
	errs = append(errs, cleanupHostOf(dir))
	return errors.Join(errs...)
}

// freePorts returns n distinct free loopback ports. The listeners stay open
// until all are picked so the same port is never handed out twice.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
