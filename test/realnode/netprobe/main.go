// Command netprobe is the real-node suites' client and server in pods: it
// serves HTTP, fetches a URL, resolves a name, dials an address, runs an
// image through Glance (glance) or keeps Glance busy (traffic), prints what
// happened and exits 0 on success, 1 otherwise, so a pod's phase is the
// verdict and its log the evidence.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: netprobe serve|http|dns|dial|glance|traffic [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	addr := fs.String("addr", ":8080", "serve, traffic: listen address; dial: HOST:PORT")
	url := fs.String("url", "", "http: the URL to GET")
	name := fs.String("name", "", "dns: the name to resolve")
	timeout := fs.Duration("timeout", 5*time.Second, "http, dns, dial: how long to wait")
	workers := fs.Int("workers", 2, "traffic: concurrent clients")
	var gf glanceFlags
	gf.register(fs)
	_ = fs.Parse(os.Args[2:])

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var err error
	switch os.Args[1] {
	case "serve":
		host, _ := os.Hostname()
		err = http.ListenAndServe(*addr, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "netprobe %s\n", host)
		}))
	case "http":
		err = get(ctx, *url)
	case "dns":
		var addrs []string
		if addrs, err = net.DefaultResolver.LookupHost(ctx, *name); err == nil {
			fmt.Println("resolved", *name, addrs)
		}
	case "dial":
		err = dial(ctx, *addr)
	case "glance":
		err = roundTrip(gf)
	case "traffic":
		err = traffic(gf, *addr, *workers)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
}

func get(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	fmt.Printf("status %d\n%s", resp.StatusCode, body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

func dial(ctx context.Context, addr string) error {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	fmt.Println("connected to", conn.RemoteAddr())
	return conn.Close()
}
