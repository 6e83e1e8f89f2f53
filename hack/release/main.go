// Command release publishes glance-operator to an OCI registry (make
// release): both images as multi-architecture indexes with SPDX SBOMs as
// referrers, then the chart with the images' digests pinned, then the static
// manifests the chart renders; with -signing-key each is signed and its
// SLSA provenance attested, in cosign's layout. It prints what it pushed.
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
	o, err := options(os.Args[1:])
	if err != nil {
		return err
	}
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

// options reads the flags, and the signing key they name.
func options(args []string) (publish.Options, error) {
	var o publish.Options
	fs := flag.NewFlagSet("release", flag.ExitOnError)
	fs.StringVar(&o.Registry, "registry", "", "registry to push to, HOST[:PORT][/NAMESPACE]: the images go to REGISTRY/NAME, the chart to REGISTRY/charts/glance-operator, the static manifests to REGISTRY/manifests/glance-operator")
	fs.BoolVar(&o.PlainHTTP, "plain-http", false, "talk HTTP, not HTTPS, to the registry")
	fs.StringVar(&o.RegistryConfig, "registry-config", "", "credentials file, as `helm registry login` writes it (default: Helm's)")
	arches := fs.String("arch", strings.Join(publish.Arches, ","), "comma-separated GOARCHes of the images")
	fs.StringVar(&o.Images.OutDir, "out", "bin/release", "directory the image and chart archives and the static manifests are written to")
	fs.StringVar(&o.Images.Go, "go", "go", "go command that builds the binaries")
	signingKey := fs.String("signing-key", "", "private key that signs the images, the chart and the manifests and attests their provenance: cosign's (made by cosign generate-key-pair, its password in "+publish.SigningKeyPasswordEnv+") or an unencrypted PEM ECDSA or RSA key; empty publishes unsigned")
	_ = fs.Parse(args) // ExitOnError: a bad flag exits
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *signingKey != "" {
		var password []byte
		if p, ok := os.LookupEnv(publish.SigningKeyPasswordEnv); ok {
			password = []byte(p)
		}
		signer, err := publish.LoadSigner(*signingKey, password)
		if err != nil {
			return o, fmt.Errorf("-signing-key: %w", err)
		}
		o.Signer = signer
	}
	o.Arches = strings.Split(*arches, ",")
	o.Images.SourceDateEpoch = os.Getenv("SOURCE_DATE_EPOCH")
	return o, nil
}
