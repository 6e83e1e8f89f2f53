//go:build linux

package conformance

import (
	"context"
	"net"
	"net/http"
	"time"
)

// httpClient is a client inside the pod's network: the pod's /etc/hosts
// names resolve as they do for glance, and 127.0.0.1 is the pod's own
// loopback.
func (p *pod) httpClient() *http.Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			if ip, ok := p.hostIPs[host]; ok {
				host = ip
			}
			return p.ns.dial(ctx, net.JoinHostPort(host, port))
		},
		DisableCompression: true,
		MaxIdleConns:       4,
		IdleConnTimeout:    5 * time.Second,
	}
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}
}
