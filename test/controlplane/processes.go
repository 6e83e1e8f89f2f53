package controlplane

import (
	"fmt"
	"syscall"
	"time"
)

// Process is a program started the way the control-plane components are:
// in its own process group, its output in <dir>/logs/<name>.log, its PID
// recorded in <dir>/pids so that StopRecorded stops it after a killed run.
// Other harnesses (test/stack) run the operator's binaries with it.
type Process struct {
	p *process
}

// StartProcess starts bin with args under name. A process that started but
// could not be recorded is returned with the error, so the caller can stop
// it.
func StartProcess(dir, name, bin string, args ...string) (*Process, error) {
	p, err := startProcess(dir, name, bin, args...)
	if p == nil {
		return nil, err
	}
	return &Process{p: p}, err
}

// Name is the name the process was started under.
func (p *Process) Name() string { return p.p.name }

// PID is the process ID, which is also its process group ID.
func (p *Process) PID() int { return p.p.cmd.Process.Pid }

// LogPath is the file holding the process's output.
func (p *Process) LogPath() string { return p.p.log }

// Exited returns an error carrying the last lines of output when the
// process has already ended, and nil while it runs.
func (p *Process) Exited() error { return p.p.exited() }

// Stop sends SIGTERM to the process group, and SIGKILL after timeout. It is
// safe to call more than once.
func (p *Process) Stop(timeout time.Duration) error { return p.p.stop(timeout) }

// Kill sends SIGKILL to the process group, as the kubelet kills a container
// over its memory limit, and waits for the process to end.
func (p *Process) Kill() error {
	select {
	case <-p.p.done:
		return nil
	default:
	}
	if err := syscall.Kill(-p.PID(), syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %s: %w", p.p.name, err)
	}
	<-p.p.done
	return nil
}

// FreePorts returns n distinct free loopback ports for the listeners of
// processes about to start.
func FreePorts(n int) ([]int, error) { return freePorts(n) }
