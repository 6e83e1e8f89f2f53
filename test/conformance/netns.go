//go:build linux

package conformance

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/c5c3/glance-operator/test/testhost"
)

// netNS is a pod's network namespace: only a loopback interface, so glance
// binds its fixed port 9292 without touching the host's network, and every
// address the rendered config names resolves (through the pod's /etc/hosts)
// to a loopback address inside it, where the harness listens.
//
// The namespace belongs to one OS thread, locked to a goroutine that runs
// whatever must create sockets inside it; a socket keeps its namespace for
// life, so listeners and connections made there are used from any goroutine.
// Sandboxed processes join it through the file fd.
type netNS struct {
	fd   *os.File
	work chan func()
	stop chan struct{}
	once sync.Once

	// logf records what the harness's network side could not do.
	logf func(format string, args ...any)

	mu        sync.Mutex
	listeners []net.Listener
	servers   []*http.Server
}

func newNetNS() (*netNS, error) {
	ns := &netNS{work: make(chan func()), stop: make(chan struct{}), logf: func(string, ...any) {}}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			ready <- err
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ready <- fmt.Errorf("unshare(CLONE_NEWNET): %w (the conformance suite must run as root)", err)
			return
		}
		// Back to the host's namespace when done, so the thread can be
		// reused. Were it to end instead (a goroutine returning while
		// locked), every child it had forked would get its parent-death
		// signal. If the way back fails, it stays locked and ends.
		defer func() {
			if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
				runtime.UnlockOSThread()
			}
		}()
		fd, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			ready <- err
			return
		}
		if err := loopbackUp(); err != nil {
			_ = fd.Close()
			ready <- fmt.Errorf("bringing up lo: %w", err)
			return
		}
		ns.fd = fd
		ready <- nil
		for {
			select {
			case f := <-ns.work:
				f()
			case <-ns.stop:
				return
			}
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return ns, nil
}

func loopbackUp() error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr)
}

// do runs f on the namespace's thread.
func (ns *netNS) do(f func()) {
	done := make(chan struct{})
	select {
	case ns.work <- func() { defer close(done); f() }:
		<-done
	case <-ns.stop:
	}
}

// listen opens a TCP listener inside the namespace.
func (ns *netNS) listen(addr string) (net.Listener, error) {
	var l net.Listener
	err := errors.New("network namespace closed")
	ns.do(func() { l, err = net.Listen("tcp", addr) })
	if err != nil {
		return nil, err
	}
	ns.mu.Lock()
	ns.listeners = append(ns.listeners, l)
	ns.mu.Unlock()
	return l, nil
}

// dial connects to addr inside the namespace.
func (ns *netNS) dial(ctx context.Context, addr string) (net.Conn, error) {
	var c net.Conn
	err := errors.New("network namespace closed")
	ns.do(func() {
		d := net.Dialer{Timeout: 5 * time.Second}
		c, err = d.DialContext(ctx, "tcp", addr)
	})
	return c, err
}

// serve serves h on addr inside the namespace.
func (ns *netNS) serve(addr string, h http.Handler) error {
	l, err := ns.listen(addr)
	if err != nil {
		return err
	}
	s := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ns.mu.Lock()
	ns.servers = append(ns.servers, s)
	ns.mu.Unlock()
	go func() { _ = s.Serve(l) }()
	return nil
}

// forward accepts connections on addr inside the namespace and splices each
// to a new connection from dial, made outside it.
func (ns *netNS) forward(addr string, dial func() (net.Conn, error)) error {
	l, err := ns.listen(addr)
	if err != nil {
		return err
	}
	go testhost.Forward(l, dial, func(err error) { ns.logf("forwarding %s: %v", addr, err) })
	return nil
}

// close stops the listeners and the namespace's thread.
func (ns *netNS) close() {
	ns.once.Do(func() {
		ns.mu.Lock()
		for _, l := range ns.listeners {
			_ = l.Close()
		}
		for _, s := range ns.servers {
			_ = s.Close()
		}
		ns.mu.Unlock()
		close(ns.stop)
		_ = ns.fd.Close()
	})
}
