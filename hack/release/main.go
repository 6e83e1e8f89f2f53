// Command release publishes glance-operator to an OCI registry (make
// release): both images as multi-architecture indexes with SPDX SBOMs as
// referrers, then the chart with the images' digests pinned. It prints what
// it pushed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/c5c3/glance-operator/hack/release/publish"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run() error {
	var o publish.Options
	flag.StringVar(&o.Registry, "registry", "", "registry to push to, HOST[:PORT][/NAMESPACE]: the images go to REGISTRY/NAME, the chart to REGISTRY/charts/glance-operator")
	flag.BoolVar(&o.PlainHTTP, "plain-http", false, "talk HTTP, not HTTPS, to the registry")
	flag.StringVar(&o.RegistryConfig, "registry-config", "", "credentials file, as `helm registry login` writes it (default: Helm's)")
	arches := flag.String("arch", strings.Join(publish.Arches, ","), "comma-separated GOARCHes of the images")
	flag.StringVar(&o.Images.OutDir, "out", "bin/release", "directory the image and chart archives are written to")
	flag.StringVar(&o.Images.Go, "go", "go", "go command that builds the binaries")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	o.Arches = strings.Split(*arches, ",")
	o.Images.SourceDateEpoch = os.Getenv("SOURCE_DATE_EPOCH")
	o.Images.Warnings = os.Stderr

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rel, err := publish.Publish(ctx, o)
	if err != nil {
		return err
	}
	fmt.Print(rel)
	return nil
}
