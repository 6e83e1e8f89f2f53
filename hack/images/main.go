// Command images builds the container images of glance-operator and
// glance-webhook (make images) without Docker: one OCI image layout archive
// per binary, byte-for-byte reproducible from the commit. It prints
// "REFERENCE DIGEST  ARCHIVE" for each.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/c5c3/glance-operator/hack/images/ociimage"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run() error {
	var o ociimage.Options
	flag.StringVar(&o.OutDir, "out", "bin/images", "directory the archives NAME.oci.tar are written to")
	flag.StringVar(&o.Go, "go", "go", "go command that builds the binaries")
	flag.StringVar(&o.Arch, "arch", runtime.GOARCH, "GOARCH of the binaries and the images")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	o.SourceDateEpoch = os.Getenv("SOURCE_DATE_EPOCH")
	o.Warnings = os.Stderr

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	results, err := ociimage.Build(ctx, o)
	if err != nil {
		return err
	}
	for _, r := range results {
		fmt.Println(r)
	}
	return nil
}
