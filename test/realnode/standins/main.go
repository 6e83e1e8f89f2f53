// Command standins runs, in a pod of the real node, a stand-in for a
// service Glance talks to: an S3 store (s3). It serves the API on -addr
// and, on -admin, what a test needs to inspect it: S3's objects.
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/c5c3/glance-operator/test/s3store"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: standins s3 [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	addr := fs.String("addr", ":8080", "the API's listen address")
	admin := fs.String("admin", ":8081", "the admin API's listen address")
	bucket := fs.String("bucket", "", "s3: a bucket to create at start")
	_ = fs.Parse(os.Args[2:])

	var api, adminAPI http.Handler
	switch os.Args[1] {
	case "s3":
		s := s3store.New()
		if *bucket != "" {
			if err := s.CreateBucket(*bucket); err != nil {
				fail(fmt.Errorf("s3: create bucket %q: %w", *bucket, err))
			}
		}
		api, adminAPI = s, s.AdminHandler()
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
