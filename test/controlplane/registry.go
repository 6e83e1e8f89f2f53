package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/c5c3/glance-operator/hack/images/ociimage"
)

// Registry is an OCI registry on loopback (go-containerregistry's, in this
// process, blobs on disk): the real node's containerd pulls every image from
// it, by digest. Nothing is pulled from outside the machine.
type Registry struct {
	// Host is HOST:PORT, the registry part of the references it serves.
	Host string

	srv  *http.Server
	done chan error
}

// startRegistry serves a registry on a free loopback port with its blobs in
// dir.
func startRegistry(dir string) (*Registry, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Registry{
		Host: l.Addr().String(),
		srv: &http.Server{
			Handler: registry.New(
				registry.WithBlobHandler(registry.NewDiskBlobHandler(dir)),
				registry.WithReferrersSupport(true),
				registry.Logger(log.New(io.Discard, "", 0)),
			),
			ReadHeaderTimeout: 10 * time.Second,
		},
		done: make(chan error, 1),
	}
	go func() { r.done <- r.srv.Serve(l) }()
	return r, nil
}

// Push pushes the image of an OCI layout archive (`make images`, or
// ociimage.WriteBinaryArchive) as repo:tag and returns the reference by
// digest that pods use: HOST/REPO@sha256:….
func (r *Registry) Push(ctx context.Context, archive, repo, tag string) (string, error) {
	d := ociimage.Distribution{Base: "http://" + r.Host, Client: http.DefaultClient}
	digest, err := d.PushArchive(ctx, archive, repo, tag)
	if err != nil {
		return "", fmt.Errorf("push %s to the registry as %s:%s: %w", filepath.Base(archive), repo, tag, err)
	}
	return r.Host + "/" + repo + "@" + digest.String(), nil
}

// PushBinary pushes the image of one static binary (the binary at /name,
// as ociimage.WriteBinaryArchive lays it out) as repo:tag, its archive
// written into dir, and returns the reference by digest.
func (r *Registry) PushBinary(ctx context.Context, dir, name, binary, repo, tag string) (string, error) {
	archive := filepath.Join(dir, name+".oci.tar")
	if _, err := ociimage.WriteBinaryArchive(archive, name, binary, repo+":"+tag, runtime.GOARCH, time.Unix(0, 0).UTC()); err != nil {
		return "", err
	}
	return r.Push(ctx, archive, repo, tag)
}

// BuildAndPush builds the static binary of a Go package of this module and
// pushes its image (PushBinary).
func (r *Registry) BuildAndPush(ctx context.Context, dir, name, pkg, repo, tag string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	binary := filepath.Join(dir, name)
	if err := ociimage.BuildBinary(ctx, "go", root, runtime.GOARCH, pkg, binary); err != nil {
		return "", err
	}
	return r.PushBinary(ctx, dir, name, binary, repo, tag)
}

func (r *Registry) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := r.srv.Shutdown(ctx)
	if serveErr := <-r.done; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}
