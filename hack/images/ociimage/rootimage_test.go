package ociimage

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// TestTreeImage: a tree's layer keeps owners, modes, symbolic and hard
// links, leaves out a fifo, and the same tree gives the same digest.
func TestTreeImage(t *testing.T) {
	tree := t.TempDir()
	mustWrite := func(name string, mode os.FileMode) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(tree, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tree, name), []byte(name), mode); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite("usr/bin/tool", 0o755)
	mustWrite("etc/conf", 0o640)
	if err := os.Symlink("../usr/bin/tool", filepath.Join(tree, "etc/tool")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(tree, "usr/bin/tool"), filepath.Join(tree, "usr/bin/tool2")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(tree, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	owned := os.Geteuid() == 0
	if owned {
		if err := os.Chown(filepath.Join(tree, "etc/conf"), 42424, 42424); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite("etc/omitted.conf", 0o644)
	img := TreeImage{
		Trees:   []Tree{{Dir: tree, Omit: func(rel string) bool { return rel == "etc/omitted.conf" }}},
		Files:   map[string]TreeFile{"usr/local/bin/shim": {Data: []byte("#!/bin/sh\n"), Mode: 0o755}},
		Config:  v1.Config{User: "42424:42424"},
		Comment: "test",
	}
	created := time.Unix(1700000000, 0).UTC()
	dir := t.TempDir()
	first, err := WriteTreeArchive(filepath.Join(dir, "a.tar"), "test/tree:1", "amd64", img, created)
	if err != nil {
		t.Fatal(err)
	}
	second, err := WriteTreeArchive(filepath.Join(dir, "b.tar"), "test/tree:1", "amd64", img, created)
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Errorf("the same tree gave %s and %s", first, second)
	}

	files, err := readLayoutArchive(filepath.Join(dir, "a.tar"))
	if err != nil {
		t.Fatal(err)
	}
	var m v1.Manifest
	if err := json.Unmarshal(files["blobs/sha256/"+first.Hex], &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != 2 || m.Layers[0].MediaType != types.OCIUncompressedLayer || m.Layers[1].MediaType != types.OCIUncompressedLayer {
		t.Fatalf("layers %+v, want two uncompressed: the tree and the files", m.Layers)
	}
	files2 := tar.NewReader(bytes.NewReader(files["blobs/sha256/"+m.Layers[1].Digest.Hex]))
	var top []string
	for {
		h, err := files2.Next()
		if err != nil {
			break
		}
		top = append(top, h.Name)
		if h.Name == "usr/local/bin/shim" && h.Mode != 0o755 {
			t.Errorf("shim mode %o", h.Mode)
		}
	}
	if want := []string{"usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/shim"}; !slices.Equal(top, want) {
		t.Errorf("the files layer holds %q, want %q", top, want)
	}
	tr := tar.NewReader(bytes.NewReader(files["blobs/sha256/"+m.Layers[0].Digest.Hex]))
	got := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h
		if !h.ModTime.Equal(created) {
			t.Errorf("%s: mtime %s", h.Name, h.ModTime)
		}
	}
	if h := got["etc/tool"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "../usr/bin/tool" {
		t.Errorf("etc/tool: %+v, want a symlink to ../usr/bin/tool", h)
	}
	if h := got["usr/bin/tool2"]; h == nil || h.Typeflag != tar.TypeLink || h.Linkname != "usr/bin/tool" {
		t.Errorf("usr/bin/tool2: %+v, want a hard link to usr/bin/tool", h)
	}
	if h := got["usr/bin/tool"]; h == nil || h.Mode&0o777 != 0o755 {
		t.Errorf("usr/bin/tool: %+v, want mode 0755", h)
	}
	if h := got["etc/conf"]; h == nil || owned && (h.Uid != 42424 || h.Gid != 42424) {
		t.Errorf("etc/conf: %+v, want owned by 42424", h)
	}
	if _, ok := got["etc/omitted.conf"]; ok {
		t.Error("the omitted file is in the layer")
	}
	if _, ok := got["fifo"]; ok {
		t.Error("the fifo is in the layer")
	}
	if _, ok := got["usr/"]; !ok {
		t.Error("directory usr/ missing")
	}
}
