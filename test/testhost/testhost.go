//go:build linux

// Package testhost makes a test host: a network namespace of the suite's
// own, joined to this machine's namespace by a veth pair, so that a process
// here reaches it at a non-loopback address. The API server refuses
// loopback addresses in EndpointSlices; a test host's address is one it
// accepts, and traffic to it never leaves the machine.
package testhost

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Host is a network namespace reached at Address from this machine.
type Host struct {
	// Name names the namespace (ip netns) and, with a suffix, both veth ends.
	Name string
	// Address is the namespace's end of the veth pair; HostAddress is this
	// machine's end.
	Address, HostAddress netip.Addr

	mu        sync.Mutex
	listeners []net.Listener
}

// New creates the namespace name with a veth pair on subnet, a /30: its
// first address is this machine's end, the second the host's. It needs root
// and iproute2. A namespace of the same name a killed run left behind is
// removed first.
func New(name string, subnet netip.Prefix) (*Host, error) {
	if subnet.Bits() != 30 || !subnet.Addr().Is4() {
		return nil, fmt.Errorf("test host %s: subnet %s is not an IPv4 /30", name, subnet)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("test host %s: the ip command (Debian package iproute2) is missing: %w", name, err)
	}
	base := subnet.Masked().Addr()
	h := &Host{Name: name, HostAddress: base.Next(), Address: base.Next().Next()}
	_ = h.Close()
	outside, inside := h.vethNames()
	bits := fmt.Sprintf("/%d", subnet.Bits())
	for _, args := range [][]string{
		{"netns", "add", name},
		{"link", "add", outside, "type", "veth", "peer", "name", inside, "netns", name},
		{"addr", "add", h.HostAddress.String() + bits, "dev", outside},
		{"link", "set", outside, "up"},
		{"-n", name, "addr", "add", h.Address.String() + bits, "dev", inside},
		{"-n", name, "link", "set", inside, "up"},
		{"-n", name, "link", "set", "lo", "up"},
	} {
		if err := ip(args...); err != nil {
			return nil, errors.Join(fmt.Errorf("test host %s: %w (it needs root)", name, err), h.Close())
		}
	}
	return h, nil
}

// vethNames are the two ends of the pair; interface names are at most 15
// bytes.
func (h *Host) vethNames() (outside, inside string) {
	n := h.Name
	if len(n) > 12 {
		n = n[:12]
	}
	return n + "-h", n + "-n"
}

// AddAddress gives the namespace's end one more address (a /32), and
// routes replies to prefix back through this machine.
func (h *Host) AddAddress(addr netip.Addr, back netip.Prefix) error {
	_, inside := h.vethNames()
	if err := ip("-n", h.Name, "addr", "add", addr.String()+"/32", "dev", inside); err != nil {
		return fmt.Errorf("test host %s: %w", h.Name, err)
	}
	return h.RouteBack(back)
}

// RouteBack routes the namespace's replies to prefix through this
// machine's end of the pair.
func (h *Host) RouteBack(prefix netip.Prefix) error {
	if err := ip("-n", h.Name, "route", "replace", prefix.String(), "via", h.HostAddress.String()); err != nil {
		return fmt.Errorf("test host %s: %w", h.Name, err)
	}
	return nil
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Listen opens a TCP listener at the host's address and port, inside its
// namespace. A socket keeps its namespace for life, so the listener is used
// from any goroutine.
func (h *Host) Listen(port int) (net.Listener, error) {
	return h.ListenOn(h.Address, port)
}

// ListenOn is Listen at another address the namespace holds (AddAddress).
func (h *Host) ListenOn(addr netip.Addr, port int) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		// setns changes the calling thread only: lock it, and return it to
		// this machine's namespace before unlocking. If the way back fails
		// the thread stays locked and ends with the goroutine.
		runtime.LockOSThread()
		self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: err}
			return
		}
		defer self.Close()
		target, err := os.Open(filepath.Join("/run/netns", h.Name))
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("setns %s: %w", h.Name, err)}
			return
		}
		l, err := net.Listen("tcp", netip.AddrPortFrom(addr, uint16(port)).String())
		if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		done <- result{l, err}
	}()
	r := <-done
	if r.err != nil {
		return nil, fmt.Errorf("test host %s: listen on %s:%d: %w", h.Name, addr, port, r.err)
	}
	h.mu.Lock()
	h.listeners = append(h.listeners, r.l)
	h.mu.Unlock()
	return r.l, nil
}

// Forward accepts connections at the host's address and port and splices
// each to target, dialled from this machine's namespace: a process
// listening on loopback here is then reachable at the host's address.
func (h *Host) Forward(port int, target string) error {
	l, err := h.Listen(port)
	if err != nil {
		return err
	}
	go Forward(l, func() (net.Conn, error) { return net.Dial("tcp", target) }, func(error) {})
	return nil
}

// Forward accepts connections on l until it closes and splices each to a
// new connection from dial; a failed dial closes the accepted connection
// and goes to logf.
func Forward(l net.Listener, dial func() (net.Conn, error), logf func(error)) {
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close()
			out, err := dial()
			if err != nil {
				logf(err)
				return
			}
			defer out.Close()
			Splice(in, out)
		}()
	}
}

// Splice copies both ways until both directions are done, passing on
// half-closes.
func Splice(a, b net.Conn) {
	var wg sync.WaitGroup
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	wg.Add(2)
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
}

// Close closes the listeners and deletes the namespace and the veth pair.
// It is safe to call more than once, and on a host a killed run left.
func (h *Host) Close() error {
	h.mu.Lock()
	for _, l := range h.listeners {
		_ = l.Close()
	}
	h.listeners = nil
	h.mu.Unlock()
	var errs []error
	outside, _ := h.vethNames()
	if _, err := os.Stat(filepath.Join("/sys/class/net", outside)); err == nil {
		errs = append(errs, ip("link", "del", outside))
	}
	if _, err := os.Stat(filepath.Join("/run/netns", h.Name)); err == nil {
		errs = append(errs, ip("netns", "del", h.Name))
	}
	return errors.Join(errs...)
}
