package main

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// takeTerminal makes Ctrl-C reach this program alone when it runs in the
// terminal's foreground process group together with its parents, as under
// `make run` (make, go run and this program are one job of the shell).
// Ctrl-C signals that whole group, and GNU make, once it receives SIGINT
// itself, exits through the signal ("*** Interrupt", status 130) whatever
// its recipe returns. So this program moves into a process group of its own
// and makes it the terminal's foreground, as a shell does for a job: Ctrl-C
// then interrupts only this program, which stops the cluster and exits 0,
// and make exits with that.
//
// restore gives the terminal back to the group that had it; call it before
// exiting. Without a controlling terminal, in the background, or already
// leading its own group (started by an interactive shell), nothing changes.
func takeTerminal() (restore func()) {
	noop := func() {}
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return noop
	}
	fd := int(tty.Fd())
	foreground, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	own := syscall.Getpgrp()
	if err != nil || foreground != own || own == os.Getpid() {
		tty.Close()
		return noop
	}
	// Setting the foreground from what is then a background group raises
	// SIGTTOU, which would stop this process. Ctrl-Z would stop this
	// group while the shell waits on make, which is not stopped, leaving
	// the terminal to a stopped job; so it does nothing. Both stay ignored
	// in the processes started from here, which never read the terminal.
	signal.Ignore(syscall.SIGTTOU, syscall.SIGTSTP)
	if err := syscall.Setpgid(0, 0); err != nil {
		tty.Close()
		return noop
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, os.Getpid()); err != nil {
		// Back into the group that has the terminal, so Ctrl-C still
		// reaches this program.
		_ = syscall.Setpgid(0, foreground)
		tty.Close()
		return noop
	}
	return func() {
		_ = unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, foreground)
		tty.Close()
	}
}
