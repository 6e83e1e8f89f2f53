package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user database of the image: root, and the nonroot user the containers
// run as. Neither has a shell or a home; the image has neither.
var (
	passwd = fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/nonexistent:/sbin/nologin\n", NonrootID, NonrootID)
	group  = fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonrootID)
)

// BuildBinary builds a static, reproducible binary of pkg at out: no cgo (the
// image has no libc), no paths of this machine, no build id. -buildvcs=false
// keeps the binary the same whatever GOFLAGS says about stamping the commit
// and whether the tree is clean; the image labels name the commit instead.
func BuildBinary(ctx context.Context, goCmd, root, arch, pkg, out string) error {
	cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, strings.TrimSpace(stderr.String()))
	}
	return checkStatic(out)
}

// checkStatic fails on a binary that needs a dynamic loader, which an image
// from scratch does not have (GOFLAGS=-linkmode=external, say).
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("reading the binary: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked (it has a PT_INTERP header); the image has no loader", path)
		}
	}
	return nil
}

// readCABundle reads the host's CA bundle, which the image ships so the
// binaries can verify TLS servers.
func readCABundle(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("the CA bundle %s is missing: install the Debian package ca-certificates (apt-get install ca-certificates)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the CA bundle: %w", err)
	}
	if !bytes.Contains(b, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("the CA bundle %s holds no certificate: reinstall the Debian package ca-certificates (update-ca-certificates writes it)", path)
	}
	return b, nil
}

// layer is a gzip-compressed filesystem layer.
type layer struct {
	blob   []byte
	digest v1.Hash // of blob
	diffID v1.Hash // of the uncompressed tar, which the config lists
	// mediaType is the layer's; empty means gzip-compressed (types.OCILayer).
	mediaType types.MediaType
}

// entry is one file or directory of a layer.
type entry struct {
	name string // relative, directories end in "/"
	mode int64
	data []byte
}

// newLayer builds the image's only layer: the binary at /name, the CA bundle
// and the user database, owned by root and stamped with created.
func newLayer(name, binary string, ca []byte, created time.Time) (layer, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return layer{}, fmt.Errorf("reading the binary: %w", err)
	}
	entries := []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: strings.TrimPrefix(CABundle, "/"), mode: 0o644, data: ca},
		{name: name, mode: 0o755, data: bin},
	}

	var blob bytes.Buffer
	diffID := sha256.New()
	// gzip with a zero header (no name, no mtime) is byte-stable for one Go
	// toolchain.
	zw, err := gzip.NewWriterLevel(&blob, gzip.DefaultCompression)
	if err != nil {
		return layer{}, err
	}
	if err := writeTar(io.MultiWriter(zw, diffID), entries, created); err != nil {
		return layer{}, err
	}
	if err := zw.Close(); err != nil {
		return layer{}, err
	}
	return layer{
		blob:   blob.Bytes(),
		digest: sha256Hash(blob.Bytes()),
		diffID: v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", diffID.Sum(nil))},
	}, nil
}

// writeTar writes entries in name order with fixed metadata, so the stream
// depends on the contents alone.
func writeTar(w io.Writer, entries []entry, mtime time.Time) error {
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	tw := tar.NewWriter(w)
	for _, e := range entries {
		h := &tar.Header{
			Name:     e.name,
			Mode:     e.mode,
			Size:     int64(len(e.data)),
			ModTime:  mtime,
			Typeflag: tar.TypeReg,
			Uname:    "root",
			Gname:    "root",
			// ustar only: no PAX records with access or change times.
			Format: tar.FormatUSTAR,
		}
		if strings.HasSuffix(e.name, "/") {
			h.Typeflag = tar.TypeDir
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("tar header of %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return fmt.Errorf("tar entry %s: %w", e.name, err)
		}
	}
	return tw.Close()
}

func sha256Hash(b []byte) v1.Hash {
	return v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", sha256.Sum256(b))}
}
