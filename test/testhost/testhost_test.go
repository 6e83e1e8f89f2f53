//go:build linux

package testhost

import (
	"bufio"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

// TestForwardReachesLoopback: a server on this machine's loopback answers
// at the test host's address, and closing the host removes its namespace.
func TestForwardReachesLoopback(t *testing.T) {
	h, err := New("glance-testhost", netip.MustParsePrefix("10.244.254.0/30"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.Address.String() != "10.244.254.2" || h.HostAddress.String() != "10.244.254.1" {
		t.Fatalf("addresses %s (host) and %s (this machine)", h.Address, h.HostAddress)
	}
	backend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	go func() {
		for {
			c, err := backend.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				_, _ = c.Write([]byte("echo " + line))
			}()
		}
	}()
	if err := h.Forward(9443, backend.Addr().String()); err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", netip.AddrPortFrom(h.Address, 9443).String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	got, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || got != "echo ping\n" {
		t.Fatalf("through the test host: %q, %v", got, err)
	}
	// Nothing listens at the host's address on this machine's loopback.
	if c, err := net.Dial("tcp", "127.0.0.1:9443"); err == nil {
		c.Close()
		t.Error("port 9443 answers on loopback: the listener is not inside the namespace")
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("/run/netns", h.Name)); !os.IsNotExist(err) {
		t.Errorf("the namespace is still there after Close: %v", err)
	}
}
