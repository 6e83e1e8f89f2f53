// Package ociimage builds the container images of glance-operator and
// glance-webhook without a container runtime: a static Go binary, a CA bundle
// and a passwd/group naming the nonroot user go into one layer on an empty
// base, and the image is written as an OCI image layout in a tar archive.
//
// Every byte is derived from the commit (tar headers, JSON, the created
// time), so building the same commit with the same Go toolchain and the same
// ca-certificates package gives the same digest.
//
// The config, manifest and index are go-containerregistry's pkg/v1 types,
// marshalled here rather than through its mutate and layout packages, so every
// byte that enters a digest is in this package.
package ociimage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The names the images are published under. charts/glance-operator/values.yaml
// refers to the same repositories.
const (
	OperatorRepository = "ghcr.io/c5c3/glance-operator"
	WebhookRepository  = "ghcr.io/c5c3/glance-webhook"

	// SourceURL is the org.opencontainers.image.source label.
	SourceURL = "https://github.com/c5c3/glance-operator"

	// ChartFile holds the appVersion that tags the images, relative to the
	// module root.
	ChartFile = "charts/glance-operator/Chart.yaml"

	// CABundle is where Debian's ca-certificates package puts the bundle, and
	// where the image has it: Go's crypto/x509 reads this path on Linux.
	CABundle = "/etc/ssl/certs/ca-certificates.crt"

	// NonrootID is the uid and gid the containers run as, as in distroless.
	NonrootID = 65532
)

// The OCI annotation keys set as image labels, manifest annotations and in
// the layout's index.
const (
	AnnotationSource   = "org.opencontainers.image.source"
	AnnotationVersion  = "org.opencontainers.image.version"
	AnnotationRevision = "org.opencontainers.image.revision"
	AnnotationRefName  = "org.opencontainers.image.ref.name"
	// annotationContainerdName names the image on `ctr images import` and
	// `docker load`, which do not take a full reference from ref.name alone.
	annotationContainerdName = "io.containerd.image.name"
)

// Image is one binary of the repository and the image it ships in.
type Image struct {
	// Name is the binary's name, its path in the image (/Name) and the
	// archive's name (Name.oci.tar).
	Name       string
	Repository string
	// Package is the Go package of the binary, relative to the module root.
	Package string
	// Component is the chart's values key whose image.repository and
	// image.digest name this image.
	Component string
}

// Images are the images `make images` builds.
var Images = []Image{
	{Name: "glance-operator", Repository: OperatorRepository, Package: "./cmd/manager", Component: "manager"},
	{Name: "glance-webhook", Repository: WebhookRepository, Package: "./cmd/webhook", Component: "webhook"},
}

// Options configures Build.
type Options struct {
	// OutDir receives NAME.oci.tar for each image; it is created if missing.
	OutDir string
	// ModuleRoot is the glance-operator checkout; empty finds it with
	// `go env GOMOD` from the working directory.
	ModuleRoot string
	// Go is the go command; empty means "go".
	Go string
	// Arch is the GOARCH of the binaries and the image; empty means the
	// architecture this program runs on.
	Arch string
	// SourceDateEpoch, when not empty, is the created time in Unix seconds
	// (the SOURCE_DATE_EPOCH convention); empty takes the commit time.
	SourceDateEpoch string
	// CABundle overrides the host path of the CA bundle; empty means CABundle.
	CABundle string
	// DpkgStatus overrides the host path of the dpkg status file BuildIndex
	// reads the ca-certificates version from; empty means DpkgStatus.
	DpkgStatus string
	// Warnings receives non-fatal notes, such as a dirty working tree; nil
	// discards them.
	Warnings io.Writer
}

// Result describes one written archive.
type Result struct {
	// Reference is REPOSITORY:TAG.
	Reference string
	// Digest is the image manifest's digest, the one a registry reports
	// after a push.
	Digest v1.Hash
	// Path is the archive, OutDir joined with NAME.oci.tar.
	Path string
}

// String is the line `make images` prints.
func (r Result) String() string {
	return fmt.Sprintf("%s %s  %s", r.Reference, r.Digest, r.Path)
}

// Build builds every image of Images for o.Arch and writes its archive to
// o.OutDir.
func Build(ctx context.Context, o Options) ([]Result, error) {
	b, err := newBuilder(ctx, &o)
	if err != nil {
		return nil, err
	}
	defer b.close()
	results := make([]Result, 0, len(Images))
	for _, img := range Images {
		l, _, err := b.image(ctx, img, o.Arch)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", img.Name, err)
		}
		path := filepath.Join(o.OutDir, img.Name+".oci.tar")
		if err := l.writeArchive(path, b.src.Created); err != nil {
			return nil, fmt.Errorf("%s: %w", img.Name, err)
		}
		results = append(results, Result{Reference: b.reference(img), Digest: l.digest, Path: path})
	}
	return results, nil
}

// builder holds what every image of one build shares: the checkout, the CA
// bundle and a scratch directory for the binaries.
type builder struct {
	o   *Options
	src source
	ca  []byte
	// caPackage is the package ca comes from; BuildIndex sets it for the
	// SBOMs, Build has none to write.
	caPackage debPackage
	work      string
}

// newBuilder fills in o's defaults, reads the checkout and the CA bundle and
// creates o.OutDir.
func newBuilder(ctx context.Context, o *Options) (*builder, error) {
	if o.OutDir == "" {
		return nil, errors.New("no output directory")
	}
	if o.Go == "" {
		o.Go = "go"
	}
	if o.Arch == "" {
		o.Arch = runtime.GOARCH
	}
	if o.CABundle == "" {
		o.CABundle = CABundle
	}
	if o.DpkgStatus == "" {
		o.DpkgStatus = DpkgStatus
	}
	if o.Warnings == nil {
		o.Warnings = io.Discard
	}
	if o.ModuleRoot == "" {
		root, err := ModuleRoot(ctx, o.Go)
		if err != nil {
			return nil, err
		}
		o.ModuleRoot = root
	}

	src, err := readSource(ctx, o.ModuleRoot, o.SourceDateEpoch)
	if err != nil {
		return nil, err
	}
	if src.Dirty {
		fmt.Fprintf(o.Warnings, "warning: the working tree has uncommitted changes; the images are labelled %s but are not reproducible from it\n", src.Revision)
	}
	// Read the CA bundle before the slow builds, so a missing package fails fast.
	ca, err := readCABundle(o.CABundle)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the output directory: %w", err)
	}
	work, err := os.MkdirTemp("", "glance-images-")
	if err != nil {
		return nil, err
	}
	return &builder{o: o, src: src, ca: ca, work: work}, nil
}

func (b *builder) close() { os.RemoveAll(b.work) }

// reference is the image's REPOSITORY:TAG.
func (b *builder) reference(img Image) string { return img.Repository + ":" + b.src.Tag }

// image builds img's binary for arch and assembles its image; it returns the
// image and the binary's path.
func (b *builder) image(ctx context.Context, img Image, arch string) (imageLayout, string, error) {
	binary := filepath.Join(b.work, img.Name+"-"+arch)
	if err := BuildBinary(ctx, b.o.Go, b.o.ModuleRoot, arch, img.Package, binary); err != nil {
		return imageLayout{}, "", err
	}
	layer, err := newLayer(img.Name, binary, b.ca, b.src.Created)
	if err != nil {
		return imageLayout{}, "", err
	}
	l, err := newLayout(img, b.reference(img), arch, b.src, layer)
	return l, binary, err
}

// ModuleRoot finds the directory of the main module's go.mod; an empty goCmd
// means "go".
func ModuleRoot(ctx context.Context, goCmd string) (string, error) {
	if goCmd == "" {
		goCmd = "go"
	}
	out, err := exec.CommandContext(ctx, goCmd, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", commandError(err))
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the glance-operator module: run from the repository")
	}
	return filepath.Dir(gomod), nil
}

// commandError adds a failed command's stderr to its error.
func commandError(err error) error {
	var exit *exec.ExitError
	if errors.As(err, &exit) && len(exit.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(exit.Stderr)))
	}
	return err
}

// WriteBinaryArchive writes the image of a static binary built elsewhere,
// laid out as Build lays out the product's: the binary at /name as the
// entrypoint, the CA bundle and the user database, running as nonroot. The
// test suites ship their own helpers (a pause container, cluster DNS, probe
// clients) in such images. It returns the manifest's digest.
func WriteBinaryArchive(path, name, binary, ref, arch string, created time.Time) (v1.Hash, error) {
	if err := checkStatic(binary); err != nil {
		return v1.Hash{}, err
	}
	ca, err := readCABundle(CABundle)
	if err != nil {
		return v1.Hash{}, err
	}
	layer, err := newLayer(name, binary, ca, created)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("%s: %w", name, err)
	}
	src := source{Tag: ref[strings.LastIndex(ref, ":")+1:], Revision: "prebuilt", Created: created}
	l, err := newLayout(Image{Name: name, Package: filepath.Base(binary)}, ref, arch, src, layer)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("%s: %w", name, err)
	}
	if err := l.writeArchive(path, created); err != nil {
		return v1.Hash{}, fmt.Errorf("%s: %w", name, err)
	}
	return l.digest, nil
}
