//go:build linux

package conformance

import (
	"os/exec"
	"runtime"
	"sync"
)

// A child's parent-death signal (Pdeathsig, which ties MariaDB and every
// container to the test process) fires when the OS *thread* that forked it
// ends, not the process. Go ends a thread whenever a goroutine locked to it
// returns, so children are started from one goroutine that stays locked to
// its thread for the life of the test binary.
var (
	spawnOnce sync.Once
	spawnReqs chan func()
)

// startProcess starts cmd from the spawner thread.
func startProcess(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnReqs = make(chan func())
		go func() {
			runtime.LockOSThread()
			for f := range spawnReqs {
				f()
			}
		}()
	})
	errc := make(chan error, 1)
	spawnReqs <- func() { errc <- cmd.Start() }
	return <-errc
}
