// Command standins runs, in a pod of the real node, a stand-in for a
// service Glance talks to: Keystone (keystone). It serves the API on -addr
// and, on -admin, what a test needs to drive or inspect it: Keystone's
// users.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/c5c3/glance-operator/test/keystone"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: standins keystone [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	addr := fs.String("addr", ":8080", "the API's listen address")
	admin := fs.String("admin", ":8081", "the admin API's listen address")
	url := fs.String("url", "", "keystone: the versioned endpoint as clients see it (the catalog's URL)")
	_ = fs.Parse(os.Args[2:])

	var api, adminAPI http.Handler
	switch os.Args[1] {
	case "keystone":
		if *url == "" {
			fail(errors.New("keystone: -url is required"))
		}
		k := keystone.New(*url)
		api, adminAPI = k, k.AdminHandler()
	default:
		fail(fmt.Errorf("unknown stand-in %q", os.Args[1]))
	}
	errs := make(chan error, 2)
	for _, srv := range []*http.Server{
		{Addr: *addr, Handler: api, ReadHeaderTimeout: 10 * time.Second},
		{Addr: *admin, Handler: adminAPI, ReadHeaderTimeout: 10 * time.Second},
	} {
		go func() { errs <- srv.ListenAndServe() }()
	}
	fmt.Printf("%s stand-in: API on %s, admin on %s\n", os.Args[1], *addr, *admin)
	fail(<-errs)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "error:", err)
	os.Exit(1)
}
